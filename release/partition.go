// Privacy-critical: needs DP review.

package release

import (
	"crypto/sha256"
	"math/big"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// DP partition selection for plans with private group keys
// (dpplan.Plan.PrivateGroups; see rewrite/partition.go for the planning
// side and noise/threshold.go for the thresholds).
//
// # Mechanism
//
// The emitted SQL returns, for every group present in the data after
// contribution bounding, its bounded measures and n, the number of distinct
// units left in it. Release
//
//  1. adds noise to n with the selection mechanism S: Laplace of L1
//     sensitivity L0 (or Gaussian of L2 sensitivity √L0), integer mode,
//     where L0 = Plan.MaxGroupsPerUnit: each unit adds exactly 1 to n in
//     at most L0 groups;
//  2. keeps the group iff the noisy n is ≥ τ = noise.PartitionThreshold(S,
//     δ_thr, L0): a group whose only unit is u (n = 1) is then kept with
//     probability at most δ_p = 1 − (1−δ_thr)^{1/L0};
//  3. adds noise to the measures of the kept groups only (with the
//     mechanisms of Releaser.mechanisms) and releases them, with the key
//     values, for the kept groups only.
//
// # Privacy (Wilson et al. 2020, §3; Desfontaines et al. 2022)
//
// Let D and D′ = D minus the unit u. The groups of D are those of D′ plus a
// set U of at most L0 groups that only u populates. Call M′ the same
// mechanism restricted to the groups of D′ (noisy counts and noisy measures
// of those groups, then the same selection and release). Between D and D′,
// M′ is a composition of the selection noise (ε_sel-DP, or a Gaussian) and
// the measure noise (ε_meas-DP in total, or Gaussians), each calibrated to
// the bounded sensitivities of bounds.go, and the rest is post-processing.
// M(D′) = M′(D′) exactly, and M(D) = M′(D) on the event E that no group of
// U is kept; E depends only on the noise drawn for U, independent of M′'s,
// and P(E) ≥ (1−δ_p)^{|U|} ≥ 1 − δ_thr. Hence for every output set O
//
//	P[M(D) ∈ O]  ≤ P[M′(D) ∈ O] + δ_thr,
//	P[M′(D) ∈ O] ≤ P[M(D) ∈ O] / (1 − δ_thr),
//
// and the whole query is (ε_sel + ε_meas, δ_noise + δ_thr)-DP, where
// δ_noise is the δ of the Gaussian releases (0 for Laplace); for the second
// direction min(1, y/(1−δ)) ≤ y + δ for y ≥ 0. The same argument composes
// over many queries: the threshold's δ_thr adds to the δ of whatever the
// accountant proves for the noise events, which is exactly how the ledger
// charges it (an event with ε = 0 and δ = δ_thr, composed by basic
// composition; accountant.Event).
//
// # Budget split (the query's ε and δ, for every plan)
//
// ε: every measure of the plan (each count, sum, sum of squares and each
// quantile) gets an equal share, rounded down (splitDown), so the shares
// compose to at most ε. The selection's noisy count is one more
// measurement: with m measures, ε is split between m + 1. δ is split
// equally between the threshold and every other δ user: under Laplace the
// measures and the count are pure ε-DP and the threshold takes the whole
// δ; under Gaussian the m measures (quantiles excepted, which are pure
// ε-DP) and the count's Gaussian noise take one share each. With no
// quantile that is m + 2 shares. Without private keys δ is split equally
// between the measures that use it (every measure but the quantiles under
// the Gaussian mechanism: deltaUsers, quantile.go).
//
// A plan with a minimum of units per cell (min_units_per_cell,
// minunits.go) and no private key has the same one more measurement, its
// distinct-unit count: ε is split between m + 1, and under Gaussian δ
// between the δ users and the count (no threshold). With private keys the
// selection's count serves both, at no extra cost.

// thresholdMechanism names the threshold's ledger event: a release that
// every accountant composes by its (ε = 0, δ = δ_thr) alone.
const thresholdMechanism = "partition_threshold"

// budget is the query's ε and δ split between its measurements.
type budget struct {
	epsilon        float64 // per measurement (each measure, and the selection's count)
	biasEpsilon    float64 // the bias estimate's measure, when the plan has one (bias.go)
	autoEpsilon    float64 // the choice of rows per unit, when the plan has one (autobounds.go)
	rest           float64 // ε after autoEpsilon: what the chosen plan's measurements share
	measureDelta   float64 // per measure (Gaussian only)
	countDelta     float64 // the selection count's Gaussian noise
	thresholdDelta float64 // the threshold (partition selection only)
}

// splitBudget splits the request's ε and δ (see "Budget split" above).
// Every share is rounded down (splitDown), so the shares never compose to
// more than the query's ε and δ under basic composition.
func splitBudget(req Request) budget {
	m := len(req.Plan.Measures)
	private := req.Plan.PrivateGroups()
	// counted: the plan measures its groups' unit counts, for partition
	// selection or a minimum of units per cell (minunits.go; with
	// private keys the selection's count serves both).
	counted := req.Plan.UnitsCounted()
	n := m
	if counted {
		n++
	}
	eps, auto := req.Epsilon, 0.0
	if req.Plan.Auto != nil {
		// A tenth for choosing the rows per unit, the rest for the
		// chosen plan (autobounds.go).
		auto, eps = biasSplit(eps, 1)
	}
	b := budget{epsilon: splitDown(eps, n), autoEpsilon: auto, rest: eps}
	if req.Plan.HasBias() && n > 1 {
		// Private keys never carry a bias estimate (rewrite/bias.go).
		b.biasEpsilon, b.epsilon = biasSplit(eps, n-1)
	}
	switch {
	case private:
		// δ shares: the threshold, the count's noise (Gaussian), and the
		// measures that use δ (every measure but the quantiles under the
		// Gaussian mechanism).
		users := deltaUsers(req.Mechanism, req.Plan.Measures)
		shares := users + 1
		if req.Mechanism == policy.MechanismGaussian {
			shares++
		}
		share := splitDown(req.Delta, shares)
		b.thresholdDelta = share
		if req.Mechanism == policy.MechanismGaussian {
			b.countDelta = share
		}
		if users > 0 {
			b.measureDelta = share
		}
	case counted && req.Mechanism == policy.MechanismGaussian:
		// The unit count of min_units_per_cell: one more Gaussian, one
		// more share of δ.
		share := splitDown(req.Delta, deltaUsers(req.Mechanism, req.Plan.Measures)+1)
		b.countDelta, b.measureDelta = share, share
	case req.Delta > 0:
		// δ goes equally to the measures that use it: every measure but
		// the quantiles under the Gaussian mechanism (quantile.go).
		if n := deltaUsers(req.Mechanism, req.Plan.Measures); n > 0 {
			b.measureDelta = splitDown(req.Delta, n)
		}
	}
	return b
}

// checkSelection refuses a plan with private keys when the query has no δ:
// no threshold can hide a group that one unit creates under pure ε-DP.
func checkSelection(req Request) error {
	if !req.Plan.PrivateGroups() {
		return nil
	}
	if req.Delta > 0 && req.Delta < 1 {
		return nil
	}
	return selectionRefusal(req)
}

// selection is the partition selection of one query.
type selection struct {
	mech      noise.Mechanism // noises each group's distinct-unit count
	threshold *big.Rat        // a group is kept iff its noisy count ≥ threshold
	delta     float64         // δ_thr
	l0        int
	min       int // min_units_per_cell, 0 without (the threshold is then τ)
}

// newSelection builds the selection mechanism and its threshold.
func (r *Releaser) newSelection(req Request, b budget) (*selection, error) {
	l0 := req.Plan.MaxGroupsPerUnit
	if l0 < 1 {
		return nil, pgerr.New(pgerr.InternalError, "internal error: partition selection without an L0 bound")
	}
	bounds := sensitivity.Bounds{L0: l0, LInf: sensitivity.UnitCountLInf()}
	mech, err := r.newMechanism(req.Mechanism, bounds, b.epsilon, b.countDelta, true, l0, "partition selection")
	if err != nil {
		return nil, err
	}
	tau, err := noise.PartitionThreshold(mech, b.thresholdDelta, l0)
	if err != nil {
		return nil, withScaleHint(pgerr.New(pgerr.InvalidParameterValue, "cannot calibrate partition selection for this query: %v", err).
			WithHint("use a larger dp.delta (e.g. SET dp.delta = 1e-7)"), err)
	}
	if k := minUnitsOf(req.Plan); k != nil && k.Cmp(tau) > 0 {
		// min_units_per_cell: a group is kept iff its noisy count is
		// ≥ max(τ, k) (minunits.go). A higher threshold only keeps fewer
		// groups: a group of one unit is kept with probability no higher.
		tau = k
	}
	return &selection{mech: mech, threshold: tau, delta: b.thresholdDelta, l0: l0, min: req.Plan.MinUnits}, nil
}

// events are the selection's ledger events: its noisy count and its
// threshold (ε = 0, δ = δ_thr, composed by basic composition).
func (s *selection) events() []accountant.Event {
	return []accountant.Event{
		eventOf(s.mech),
		{Mechanism: thresholdMechanism, Delta: s.delta},
	}
}

// selectGroups reads the upstream rows of a plan with private keys (keys,
// measures, then the distinct-unit count), adds selection noise to each
// count, and returns the kept groups' keys and measures, sorted by key so
// that the upstream's row order (which can depend on the data) is not
// released. Rows whose key is NULL or outside a public key's domain are
// ignored (the SQL already excludes them); NULL measures count as zero.
//
// Quantile measures are returned as their raw summaries (raw[g][i], nil when
// NULL; see collect) and count as zero in values: they are released per
// kept group by the quantile mechanism, exactly as for public keys (the
// privacy argument above covers any ε_meas-DP release per kept group).
func selectGroups(plan *dpplan.Plan, sel *selection, rows [][]*string) ([][]string, [][]*big.Rat, [][]*string, string, error) {
	gs := newGroupSelector(plan, sel)
	for _, row := range rows {
		if err := gs.add(row); err != nil {
			return nil, nil, nil, "", err
		}
	}
	groups, values, raws, err := gs.result()
	return groups, values, raws, gs.note(), err
}

// groupSelector is selectGroups one row at a time (add), so that rows
// streamed from upstream (RowStreamer) are kept only when selected: it
// holds the kept groups only. A group the SQL returns twice (its GROUP BY
// rules that out) is an internal error when both are kept (firstK.sorted);
// one of them kept is the release of one of two selected cells, whose
// noise and threshold each cover it. Nothing is held per candidate.
//
// It keeps at most dpplan.MaxSelectedGroups of the selected groups, the
// first by key (firstK).
type groupSelector struct {
	plan    *dpplan.Plan
	sel     *selection
	domains []map[string]bool
	first   *firstK[selectedGroup]
}

// selectedGroup is a kept group's measures (quantile summaries raw).
type selectedGroup struct {
	values []*big.Rat
	raws   []*string
}

func newGroupSelector(plan *dpplan.Plan, sel *selection) *groupSelector {
	gs := &groupSelector{plan: plan, sel: sel, domains: make([]map[string]bool, len(plan.Keys)),
		first: newFirstK[selectedGroup](plan)}
	for i, k := range plan.Keys {
		if k.Private {
			continue
		}
		gs.domains[i] = map[string]bool{}
		for _, v := range k.Domain {
			gs.domains[i][canonicalKey(k.Type, v)] = true
		}
	}
	return gs
}

// add takes one candidate row: its keys, measures and distinct units.
func (gs *groupSelector) add(row []*string) error {
	plan := gs.plan
	nk, nm := len(plan.Keys), len(plan.Measures)
	if len(row) != nk+nm+1 {
		return pgerr.New(pgerr.InternalError, "internal error: upstream returned an unexpected row shape")
	}
	key, ok := rowKey(plan, row)
	if !ok {
		return nil
	}
	for i, d := range gs.domains {
		if d != nil && !d[key[i]] {
			return nil
		}
	}
	units, ok := parseCount(row[nk+nm])
	if !ok {
		return pgerr.New(pgerr.InternalError, "internal error: upstream returned an invalid unit count")
	}
	noisy, err := gs.sel.mech.AddNoise(units)
	if err != nil {
		return pgerr.New(pgerr.InternalError, "internal error while adding noise").Wrap(err)
	}
	if noisy.Cmp(gs.sel.threshold) < 0 {
		return nil // dropped: its keys and measures are never used
	}
	return gs.first.offer(key, func() (selectedGroup, error) {
		ms, rs, err := parseMeasures(plan, row[nk:nk+nm])
		return selectedGroup{ms, rs}, err
	})
}

// note says, when more groups passed the selection than the answer holds,
// how many did and which are released ("" otherwise). The count of
// selected groups is itself a function of the selection's output.
func (gs *groupSelector) note() string {
	return firstKNote(gs.first.passed, len(gs.first.kept))
}

// groupDigest names a candidate group in sample-and-aggregate's check
// that a group's rows are contiguous (groupReader): 16 bytes of SHA-256 of its keys (a collision, about
// 2⁻¹²⁸ per pair, would only raise a false internal error).
func groupDigest(id string) [16]byte {
	sum := sha256.Sum256([]byte(id))
	return [16]byte(sum[:16])
}

// result returns the kept groups in key order, with their measures and
// quantile summaries.
func (gs *groupSelector) result() ([][]string, [][]*big.Rat, [][]*string, error) {
	kept, err := gs.first.sorted()
	if err != nil {
		return nil, nil, nil, err
	}
	sg, sv, sr := make([][]string, len(kept)), make([][]*big.Rat, len(kept)), make([][]*string, len(kept))
	for i, k := range kept {
		sg[i], sv[i], sr[i] = k.key, k.v.values, k.v.raws
	}
	return sg, sv, sr, nil
}

// parseCount reads a distinct-unit count: an integer ≥ 1 (a group the SQL
// returns has at least one unit).
func parseCount(s *string) (*big.Rat, bool) {
	if s == nil {
		return nil, false
	}
	v, ok := new(big.Rat).SetString(*s)
	if !ok || !v.IsInt() || v.Sign() <= 0 {
		return nil, false
	}
	return v, true
}

// lessKeys orders key tuples: numbers numerically, other types by their
// text (dates as YYYY-MM-DD sort chronologically).
func lessKeys(keys []dpplan.Key, a, b []string) bool {
	return lessParsed(a, b, parseKeys(keys, a), parseKeys(keys, b))
}
