package proxy

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestAttack50_PlanCacheBytesUnbounded (attack round 50, severity medium:
// proxy memory that one analyst's free statements keep, outside every
// memory bound the proxy has).
//
// The plan cache (proxy/plancache.go) keeps up to maxCachedPlans = 256
// plans per analyst, of texts up to maxCachedPlanText = 4 KiB, but nothing
// bounds a plan's size, and a plan of a 120-byte statement is large: each
// derived key carries its whole public domain (10,000 strings for
// width_bucket(col, lo, hi, 9998)), each plan its emitted SQL (up to
// pgemit's 256 KiB), and under dp.contribution = auto (the policy default
// of the demo and of internal/testdata/hospital.yaml) one more plan per
// candidate bound with its own SQL and domains (rewrite/autobounds.go
// addAutoBounds) plus the profile SQL. So
//
//	SELECT width_bucket(age,0,N,9998), width_bucket(age,0,N+1,9998),
//	       width_bucket(age,0,N+2,9998), COUNT(*), SUM(cost)
//	FROM visits GROUP BY 1,2,3
//
// keeps about 2.8 MB in the cache. It is refused before the charge (10¹²
// groups: release's checkAnswerCells, 54000; EXPLAIN of it as well), but
// only after planning, and plans are cached before release sees them
// (plancache.go:63-74), so it costs nothing. 256 such texts (N = 1 … 256,
// about 40 ms of planning each) keep ~700 MB per analyst, for as long as
// the proxy runs (the cache is only cleared when that analyst adds a
// 257th plan). It is counted in none of the proxy's bounds:
// max_memory_per_analyst_mb (256 MiB by default, memory.go) covers
// sessions' prepared statements, portals and results, and the answer
// cache, which holds every analyst's released answers, is bounded at
// 32 MiB in all (release/cache.go). Every analyst of a deployment can do
// it, so the proxy's memory grows by ~0.7 GB per analyst.
//
// The test fills one analyst's plan cache through the proxy's own planner
// (planCache.plan over rewrite.RewriteWith with the session's default
// options) with 32 such statements, checks that each is refused before
// the charge (release.Explain, 54000), and wants the cache to keep at most
// 64 MiB (a quarter of the default max_memory_per_analyst_mb) — a full
// cache of 256 keeps about 8 times what 32 keep.
//
// Suggested fix: bound the plan cache by bytes per analyst (an estimate of
// the plan's size: its SQL, the auto plans' SQL, the keys' domains) as the
// answer cache is bounded, and do not cache plans above a share of it;
// or count the cache in the analyst's memory account.
func TestAttack50_PlanCacheBytesUnbounded(t *testing.T) {
	ds, err := policy.Load("../internal/testdata/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if ds.Defaults.Contribution != policy.ContributionAuto {
		t.Fatalf("the test policy's default contribution is %q; the test assumes auto", ds.Defaults.Contribution)
	}
	// The options a session of this policy plans with (rewriteOptions).
	opts := rewrite.Options{AutoBounds: true}
	pc := newPlanCache()
	build := func(ds *policy.Dataset, text string, o rewrite.Options) (*rewrite.Plan, error) {
		return rewrite.RewriteWith(ds, text, o)
	}
	const plans = 32
	before := heapAlloc()
	for i := 1; i <= plans; i++ {
		q := fmt.Sprintf("SELECT width_bucket(age,0,%d,9998), width_bucket(age,0,%d,9998), width_bucket(age,0,%d,9998), COUNT(*), SUM(cost) FROM visits GROUP BY 1,2,3", 3*i, 3*i+1, 3*i+2)
		if len(q) > maxCachedPlanText {
			t.Fatalf("statement of %d bytes is not cached", len(q))
		}
		p, err := pc.plan("mallory", ds, q, opts, build)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if _, _, err := release.Explain(ds, p, release.Params{Epsilon: 0.1, Mechanism: policy.MechanismLaplace}); err == nil {
			t.Fatalf("%s: explained; the test wants a statement refused before the charge", q)
		} else if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.ProgramLimitExceeded {
			t.Fatalf("%s: %v, want 54000 (too many cells) before the charge", q, err)
		}
	}
	kept := heapAlloc() - before
	runtime.KeepAlive(pc)
	t.Logf("%d cached plans of statements refused before the charge keep %d MiB (a full cache of %d: ~%d MiB)", plans, kept>>20, maxCachedPlans, kept*maxCachedPlans/plans>>20)
	if kept > 64<<20 {
		t.Errorf("one analyst's %d plans of statements refused before the charge keep %d MiB of proxy memory (a full plan cache: ~%d MiB per analyst), more than 64 MiB and counted in no memory bound: the plan cache bounds plans by count and text length, not by size",
			plans, kept>>20, kept*maxCachedPlans/plans>>20)
	}
}
