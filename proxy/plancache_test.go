package proxy

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

func TestPlanCache(t *testing.T) {
	calls := 0
	build := func(ds *policy.Dataset, text string) (*rewrite.Plan, error) {
		calls++
		if strings.Contains(text, "bad") {
			return nil, errors.New("refused")
		}
		return &rewrite.Plan{Dataset: ds.Name, SQL: text}, nil
	}
	pc := newPlanCache()
	a, b := &policy.Dataset{Name: "a"}, &policy.Dataset{Name: "a"} // b: a reloaded policy
	p1, _ := pc.plan(a, "q", build)
	p2, _ := pc.plan(a, "q", build)
	if p1 != p2 || calls != 1 {
		t.Fatalf("same policy and text: %d builds, same plan %v; want 1, true", calls, p1 == p2)
	}
	if p3, _ := pc.plan(b, "q", build); p3 == p1 || calls != 2 {
		t.Fatalf("another policy reused the plan (builds %d)", calls)
	}
	for range 2 {
		if _, err := pc.plan(a, "bad", build); err == nil {
			t.Fatal("error not returned")
		}
	}
	if calls != 4 {
		t.Fatalf("errors were cached: %d builds, want 4", calls)
	}
	long := strings.Repeat("x", maxCachedPlanText+1)
	pc.plan(a, long, build)
	pc.plan(a, long, build)
	if calls != 6 {
		t.Fatalf("an over-long text was cached: %d builds, want 6", calls)
	}
	for i := range 2 * maxCachedPlans {
		pc.plan(a, fmt.Sprint(i), build)
	}
	if n := len(pc.plans); n > maxCachedPlans {
		t.Fatalf("%d plans cached, bound %d", n, maxCachedPlans)
	}
}
