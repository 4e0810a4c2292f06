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
	p1, _ := pc.plan(a, "q", none, build)
	p2, _ := pc.plan(a, "q", none, build)
	if p1 != p2 || calls != 1 {
		t.Fatalf("same policy and text: %d builds, same plan %v; want 1, true", calls, p1 == p2)
	}
	if p3, _ := pc.plan(b, "q", none, build); p3 == p1 || calls != 2 {
		t.Fatalf("another policy reused the plan (builds %d)", calls)
	}
	// Other session options: another plan; the same options (a Location
	// loaded again for the same TimeZone): the cached one.
	auto := rewrite.Options{AutoBounds: true, TimeZone: "Europe/Paris", Location: time.FixedZone("x", 3600)}
	pa, _ := pc.plan(b, "q", auto, build)
	if pa == p1 || calls != 3 {
		t.Fatalf("other options reused the plan (builds %d)", calls)
	}
	auto.Location = time.FixedZone("x", 3600)
	if pb, _ := pc.plan(b, "q", auto, build); pb != pa || calls != 3 {
		t.Fatalf("the same options planned again (builds %d)", calls)
	}
	for range 2 {
		if _, err := pc.plan(a, "bad", none, build); err == nil {
			t.Fatal("error not returned")
		}
	}
	if calls != 5 {
		t.Fatalf("errors were cached: %d builds, want 5", calls)
	}
	long := strings.Repeat("x", maxCachedPlanText+1)
	pc.plan(a, long, none, build)
	pc.plan(a, long, none, build)
	if calls != 7 {
		t.Fatalf("an over-long text was cached: %d builds, want 7", calls)
	}
	for i := range 2 * maxCachedPlans {
		pc.plan(a, fmt.Sprint(i), none, build)
	}
	if n := len(pc.plans); n > maxCachedPlans {
		t.Fatalf("%d plans cached, bound %d", n, maxCachedPlans)
	}
}
