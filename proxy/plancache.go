package proxy

import (
	"sync"
	"time"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// planCache keeps the plans of recent DP statements, keyed by the policy
// (its pointer: a reload makes a new one), the session options that shape
// a plan (rewrite.Options, its Location left out: TimeZone names it) and
// the statement text, so a
// dashboard's repeated query is not normalized, parsed and planned again
// (a cached answer then costs no rewrite and no ledger round trip). Plans
// are immutable and rewrite is a pure function of (policy, text), so a
// cached plan is the plan rewrite would return: rewrite is a pure function of
// (policy, options, text). Only successful plans are
// kept; the cache is bounded (cleared when full) and statements longer
// than maxCachedPlanText are not kept. A statement with a relative date
// (now(), current_date, …: rewrite.UsesClock) is planned at its own start
// (Options.Now, left out of the key) and its plan is never kept, so no
// statement is answered with constants folded at an earlier time. Safe
// for concurrent use.
type planCache struct {
	mu    sync.Mutex
	plans map[planKey]*rewrite.Plan
}

type planKey struct {
	ds   *policy.Dataset
	opts rewrite.Options
	text string
}

const (
	maxCachedPlans    = 1024
	maxCachedPlanText = 4096
)

func newPlanCache() *planCache { return &planCache{plans: map[planKey]*rewrite.Plan{}} }

// plan returns the plan of text under ds and opts, from the cache or from
// build.
func (pc *planCache) plan(ds *policy.Dataset, text string, opts rewrite.Options, build func(*policy.Dataset, string, rewrite.Options) (*rewrite.Plan, error)) (*rewrite.Plan, error) {
	if pc == nil || len(text) > maxCachedPlanText {
		return build(ds, text, opts)
	}
	ko := opts
	ko.Location, ko.Now = nil, time.Time{}
	k := planKey{ds: ds, opts: ko, text: text}
	pc.mu.Lock()
	p, ok := pc.plans[k]
	pc.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := build(ds, text, opts)
	if err != nil || p == nil || rewrite.UsesClock(text) {
		return p, err
	}
	pc.mu.Lock()
	if len(pc.plans) >= maxCachedPlans {
		clear(pc.plans)
	}
	pc.plans[k] = p
	pc.mu.Unlock()
	return p, nil
}
