package proxy

import (
	"strings"
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
	plans map[string]*analystPlans
}

// analystPlans are one analyst's cached plans and their estimated size.
type analystPlans struct {
	m     map[planKey]*rewrite.Plan
	bytes int
}

type planKey struct {
	ds   *policy.Dataset
	opts rewrite.Options
	text string
}

// Each analyst's plans are at most maxCachedPlans and maxCachedPlanBytes
// (planBytes); a plan over maxCachedPlanBytes/16 is not kept. A plan of a
// short text can be large — derived keys carry their domains, automatic
// bounds a plan per candidate — and a statement refused after planning
// (too many cells, no budget) costs nothing: 256 plans of 120-byte texts
// kept about 700 MB (attack round 50).
const (
	maxCachedPlans     = 256
	maxCachedPlanText  = 4096
	maxCachedPlanBytes = 16 << 20
)

func newPlanCache() *planCache { return &planCache{plans: map[string]*analystPlans{}} }

// planBytes estimates what a plan holds in memory: its texts (SQL, the
// automatic bounds' and clipping's SQL, the candidate plans') and its keys'
// domains, plus a fixed share for the rest, which is proportional to the
// statement (at most maxCachedPlanText).
func planBytes(p *rewrite.Plan) int {
	const fixed, perString = 16 << 10, 16
	n := fixed + len(p.SQL)
	for _, k := range p.Keys {
		for _, v := range k.Domain {
			n += len(v) + perString
		}
	}
	if p.Auto != nil {
		n += len(p.Auto.CombinedSQL)
		for _, c := range p.Auto.Plans {
			n += planBytes(c)
		}
	}
	if p.Clip != nil {
		n += len(p.Clip.SQL)
	}
	return n
}

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
	var p *rewrite.Plan
	ok := false
	if own := pc.plans[analyst]; own != nil {
		p, ok = own.m[k]
	}
	pc.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := build(ds, text, opts)
	if err != nil || p == nil || rewrite.UsesClock(text) {
		return p, err
	}
	size := planBytes(p)
	if size > maxCachedPlanBytes/16 {
		return p, nil
	}
	pc.mu.Lock()
	own := pc.plans[analyst]
	if own == nil || len(own.m) >= maxCachedPlans || own.bytes+size > maxCachedPlanBytes {
		own = &analystPlans{m: map[planKey]*rewrite.Plan{}}
		pc.plans[analyst] = own
	}
	if _, dup := own.m[k]; !dup {
		k.text = strings.Clone(k.text) // not a piece of the client's message, kept whole (review 74)
		own.m[k] = p
		own.bytes += size
	}
	pc.mu.Unlock()
	return p, nil
}
