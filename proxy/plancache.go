package proxy

import (
	"sync"
	"time"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// planCache keeps the plans of recent DP statements, per analyst, keyed by
// the policy (its pointer: a reload makes a new one), the session options
// that shape a plan (rewrite.Options, its Location left out: TimeZone names
// it) and the statement text, so a dashboard's repeated query is not
// normalized, parsed and planned again (a cached answer then costs no
// rewrite and no ledger round trip). Plans are immutable and rewrite is a
// pure function of (policy, options, text), so a cached plan is the plan
// rewrite would return. Only successful plans are kept; each analyst's
// plans are bounded (cleared when full) and statements longer than
// maxCachedPlanText are not kept. A statement with a relative date (now(),
// current_date, …: rewrite.UsesClock) is planned at its own start
// (Options.Now, left out of the key) and its plan is never kept, so no
// statement is answered with constants folded at an earlier time.
//
// Per analyst, because planning runs before the answer's padding: a plan
// another analyst's statement left would make the same text answer
// sooner, telling an analyst what someone else asked, and one analyst's
// new statements would clear everyone's plans (attack round 35). Safe for
// concurrent use.
type planCache struct {
	mu    sync.Mutex
	plans map[string]map[planKey]*rewrite.Plan // by analyst
}

type planKey struct {
	ds   *policy.Dataset
	opts rewrite.Options
	text string
}

const (
	maxCachedPlans    = 256 // per analyst
	maxCachedPlanText = 4096
)

func newPlanCache() *planCache { return &planCache{plans: map[string]map[planKey]*rewrite.Plan{}} }

// plan returns the plan of text under ds and opts for analyst, from the
// cache or from build.
func (pc *planCache) plan(analyst string, ds *policy.Dataset, text string, opts rewrite.Options, build func(*policy.Dataset, string, rewrite.Options) (*rewrite.Plan, error)) (*rewrite.Plan, error) {
	if pc == nil || len(text) > maxCachedPlanText {
		return build(ds, text, opts)
	}
	ko := opts
	ko.Location, ko.Now = nil, time.Time{}
	k := planKey{ds: ds, opts: ko, text: text}
	pc.mu.Lock()
	p, ok := pc.plans[analyst][k]
	pc.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := build(ds, text, opts)
	if err != nil || p == nil || rewrite.UsesClock(text) {
		return p, err
	}
	pc.mu.Lock()
	own := pc.plans[analyst]
	if own == nil || len(own) >= maxCachedPlans {
		own = map[planKey]*rewrite.Plan{}
		pc.plans[analyst] = own
	}
	own[k] = p
	pc.mu.Unlock()
	return p, nil
}
