// Privacy-critical: needs DP review.

package release

import (
	"math"
	"math/big"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
)

// # Rows per unit chosen per query
//
// A plan with Auto (rewrite/autobounds.go) is answered in two steps under
// one charge: the profile query gives N, the units of the query, and per
// candidate c the units that bounding at c leaves whole (at most c rows
// in each group, at most L0·c in all); the exponential mechanism (Δu = w,
// ε_sel) chooses candidate c by the utility
//
//	u_c = −w·(N − whole_c) − h_c
//
// where h_c = L0·c·ln(20)/ε_m is the 95% half-width, in rows, of a count
// bounded at c with the measurements' ε_m (data-independent), and w =
// autoRowsPerCut rows are what a cut unit is taken to cost the answer. It
// trades the bias of the units bounding cuts against the noise the bound
// costs, as Amin, Kulesza, Muñoz and Vassilvitskii (ICML 2019) trade bias
// against variance: with many units and a large ε the noise term is small
// and the bound stays high; for a few units or a small ε it comes down to
// where the units are. N − whole_c moves by 0 or 1 when one unit is added
// or removed and h_c is a constant, so Δu = w. The
// chosen candidate's plan is then released like any plan, with the rest
// of ε. ε_sel is a tenth of the query's ε (biasSplit with one measure), so
// the query composes to its ε.
//
// The charge is reserved before the profile reads any row, for every
// candidate at once: the events are the selection's and, per measure,
// the candidate mechanisms' common ε and δ with the smallest noise
// multiplier among them (the largest privacy loss an accountant that
// reads multipliers could see), so whichever candidate is chosen is
// charged at least what it costs.

// autoRowsPerCut is w: a cut unit loses at least one row, and on the demo
// data several (a larger w only costs noise, which the utility weighs).
const autoRowsPerCut = 4

// autoChoice chooses and answers with one candidate plan.
type autoChoice struct {
	sel   *noise.Exponential
	plans []*dpplan.Plan  // per candidate, ascending rows per unit
	mechs [][]measurement // per candidate
	cands []int           // rows per unit of each candidate
	// halfWidth[i]: h_c of candidate i, L0·c·ln(20)/ε_m rows.
	halfWidth []float64
}

func (r *Releaser) newAutoChoice(req Request) (*autoChoice, error) {
	a := req.Plan.Auto
	if len(a.Candidates) < 2 || len(a.Plans) != len(a.Candidates)-1 {
		return nil, pgerr.New(pgerr.InternalError, "internal error: malformed contribution candidates")
	}
	shares := splitBudget(req)
	sel, err := noise.NewExponential(noise.ExponentialParams{Epsilon: shares.autoEpsilon, Sensitivity: autoRowsPerCut, Rand: r.testOnlyRand})
	if err != nil {
		return nil, withScaleHint(pgerr.New(pgerr.InvalidParameterValue, "cannot choose contribution bounds for this query: %v", err).
			WithHint("use a larger dp.epsilon, or SET dp.contribution = fixed"), err)
	}
	own := *req.Plan
	own.Auto = nil
	ac := &autoChoice{sel: sel, plans: append(append([]*dpplan.Plan{}, a.Plans...), &own), cands: a.Candidates}
	for _, p := range ac.plans {
		sub := req
		sub.Plan, sub.Epsilon = p, shares.rest
		ms, err := r.mechanisms(sub)
		if err != nil {
			return nil, err
		}
		if len(ms) != len(req.Plan.Measures) {
			return nil, pgerr.New(pgerr.InternalError, "internal error: contribution candidates of another shape")
		}
		ac.mechs = append(ac.mechs, ms)
		ac.halfWidth = append(ac.halfWidth, float64(p.MaxGroupsPerUnit*p.RowsPerUnit)*math.Log(20)/shares.epsilon)
	}
	return ac, nil
}

// events are the ledger events of the query, for whichever candidate.
func (ac *autoChoice) events() []accountant.Event {
	last := ac.mechs[len(ac.mechs)-1]
	events := make([]accountant.Event, 0, len(last)+1)
	events = append(events, accountant.Event{Mechanism: "exponential", Epsilon: ac.sel.Epsilon()})
	for i, m := range last {
		e := eventOf(m.mech)
		for _, ms := range ac.mechs {
			mm := ms[i].mech
			e.Epsilon = math.Max(e.Epsilon, mm.Epsilon())
			e.Delta = math.Max(e.Delta, mm.Delta())
			if nm := mm.NoiseMultiplier(); nm > 0 && (e.NoiseMultiplier == 0 || nm < e.NoiseMultiplier) {
				e.NoiseMultiplier = nm
			}
		}
		events = append(events, e)
	}
	return events
}

// split separates the rows of Auto.CombinedSQL into the plan's own rows
// and the profile summed over them (N, then one count per candidate).
func (ac *autoChoice) split(rows [][]*string) ([][]*string, []*big.Rat, error) {
	k := len(ac.cands) + 1
	vals := make([]*big.Rat, k)
	for i := range vals {
		vals[i] = new(big.Rat)
	}
	own := make([][]*string, len(rows))
	for r, row := range rows {
		if len(row) < k {
			return nil, nil, pgerr.New(pgerr.InternalError, "internal error: unexpected contribution profile")
		}
		cut := len(row) - k
		for i, v := range row[cut:] {
			if v == nil {
				continue
			}
			x, ok := new(big.Rat).SetString(*v)
			if !ok || !x.IsInt() || x.Sign() < 0 {
				return nil, nil, pgerr.New(pgerr.InternalError, "internal error: unexpected contribution profile")
			}
			vals[i].Add(vals[i], x)
		}
		own[r] = row[:cut]
	}
	return own, vals, nil
}

// choose returns the index of the candidate chosen from the profile
// (split).
func (ac *autoChoice) choose(vals []*big.Rat) (int, error) {
	k := len(ac.cands)
	if len(vals) != k+1 {
		return 0, pgerr.New(pgerr.InternalError, "internal error: unexpected contribution profile")
	}
	utilities := make([]*big.Rat, k)
	for i := range k {
		u := new(big.Rat).Sub(vals[0], vals[i+1]) // units cut at c
		if u.Sign() < 0 {
			u.SetInt64(0)
		}
		u.Mul(u, big.NewRat(autoRowsPerCut, 1))
		h := new(big.Rat)
		if h.SetFloat64(ac.halfWidth[i]) == nil {
			return 0, pgerr.New(pgerr.InternalError, "internal error: contribution candidate without a finite noise")
		}
		utilities[i] = u.Neg(u.Add(u, h))
	}
	i, err := ac.sel.Select(utilities)
	if err != nil {
		return 0, pgerr.New(pgerr.InternalError, "internal error while choosing contribution bounds").Wrap(err)
	}
	return i, nil
}
