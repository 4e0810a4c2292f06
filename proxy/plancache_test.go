package proxy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

func TestPlanCache(t *testing.T) {
	calls := 0
	build := func(ds *policy.Dataset, text string, _ rewrite.Options) (*rewrite.Plan, error) {
		calls++
		if strings.Contains(text, "bad") {
			return nil, errors.New("refused")
		}
		return &rewrite.Plan{Dataset: ds.Name, SQL: text}, nil
	}
	pc := newPlanCache()
	none := rewrite.Options{}
	a, b := &policy.Dataset{Name: "a"}, &policy.Dataset{Name: "a"} // b: a reloaded policy
	p1, _ := pc.plan("alice", a, "q", none, build)
	p2, _ := pc.plan("alice", a, "q", none, build)
	if p1 != p2 || calls != 1 {
		t.Fatalf("same policy and text: %d builds, same plan %v; want 1, true", calls, p1 == p2)
	}
	if p3, _ := pc.plan("alice", b, "q", none, build); p3 == p1 || calls != 2 {
		t.Fatalf("another policy reused the plan (builds %d)", calls)
	}
	// Other session options: another plan; the same options (a Location
	// loaded again for the same TimeZone): the cached one.
	auto := rewrite.Options{AutoBounds: true, TimeZone: "Europe/Paris", Location: time.FixedZone("x", 3600)}
	pa, _ := pc.plan("alice", b, "q", auto, build)
	if pa == p1 || calls != 3 {
		t.Fatalf("other options reused the plan (builds %d)", calls)
	}
	auto.Location = time.FixedZone("x", 3600)
	if pb, _ := pc.plan("alice", b, "q", auto, build); pb != pa || calls != 3 {
		t.Fatalf("the same options planned again (builds %d)", calls)
	}
	for range 2 {
		if _, err := pc.plan("alice", a, "bad", none, build); err == nil {
			t.Fatal("error not returned")
		}
	}
	if calls != 5 {
		t.Fatalf("errors were cached: %d builds, want 5", calls)
	}
	long := strings.Repeat("x", maxCachedPlanText+1)
	pc.plan("alice", a, long, none, build)
	pc.plan("alice", a, long, none, build)
	if calls != 7 {
		t.Fatalf("an over-long text was cached: %d builds, want 7", calls)
	}
	for i := range 2 * maxCachedPlans {
		pc.plan("alice", a, fmt.Sprint(i), none, build)
	}
	if n := len(pc.plans["alice"].m); n > maxCachedPlans || pc.plans["alice"].bytes > maxCachedPlanBytes {
		t.Fatalf("%d plans cached, bound %d", n, maxCachedPlans)
	}
	// Per analyst: bob's plan of the same text is his own, and alice's
	// new statements do not clear it.
	before := calls
	pb, _ := pc.plan("bob", a, "q", none, build)
	if pa, _ := pc.plan("alice", a, "q", none, build); calls != before+2 || pa == pb {
		t.Fatalf("alice and bob share a plan: %d builds, want 2", calls-before)
	}
	for i := range 2 * maxCachedPlans {
		pc.plan("alice", a, "x"+fmt.Sprint(i), none, build)
	}
	if again, _ := pc.plan("bob", a, "q", none, build); again != pb {
		t.Fatal("alice's statements cleared bob's plans")
	}
}

// A statement with a relative date is planned at each statement's start:
// the plan cache never answers it with a plan folded earlier, and still
// keeps the plans of other statements.
func TestPlanCache_RelativeDatesNotReused(t *testing.T) {
	ds, err := policy.Load("../internal/testdata/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pc := newPlanCache()
	builds := 0
	build := func(ds *policy.Dataset, text string, o rewrite.Options) (*rewrite.Plan, error) {
		builds++
		return rewrite.RewriteWith(ds, text, o)
	}
	day1 := time.Date(2026, 11, 28, 23, 59, 0, 0, time.UTC)
	day2 := day1.Add(2 * time.Minute)
	rel := "SELECT COUNT(*) FROM visits WHERE visit_date >= current_date - 30"
	p1, err := pc.plan("alice", ds, rel, rewrite.Options{Now: day1}, build)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := pc.plan("alice", ds, rel, rewrite.Options{Now: day2}, build)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p1.SQL, `'2026-10-29'::date`) || !strings.Contains(p2.SQL, `'2026-10-30'::date`) || builds != 2 {
		t.Fatalf("after midnight the plan folded before it was reused (builds %d):\n%s\n%s", builds, p1.SQL, p2.SQL)
	}
	fixed := "SELECT COUNT(*) FROM visits WHERE visit_date >= '2024-01-01'"
	for _, now := range []time.Time{day1, day2} {
		if _, err := pc.plan("alice", ds, fixed, rewrite.Options{Now: now}, build); err != nil {
			t.Fatal(err)
		}
	}
	if builds != 3 {
		t.Errorf("a statement without relative dates was planned %d times, want once", builds-2)
	}
}
