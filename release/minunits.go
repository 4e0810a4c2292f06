// Privacy-critical: needs DP review.

package release

import (
	"math/big"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// # A minimum of units per cell (policy min_units_per_cell = k)
//
// Statistical offices release a table cell only when enough people
// contribute to it. Under DP the number of people is itself private, so
// the rule is applied to a DP estimate of it:
//
//  1. the emitted SQL returns, per group, n_g: its distinct units after
//     contribution bounding (pgemit.SQL, dpplan.Plan.UnitsCounted). Each
//     unit adds 1 to n_g in at most L0 = Plan.MaxGroupsPerUnit groups (a
//     unit is in at most L0 groups: GroupsAll, GroupsSelect); when groups
//     are weighted (GroupsScale) a unit in g > L0 groups adds min(1, L0/g)
//     to each, so it adds at most 1 to each group and min(g, L0) ≤ L0 in
//     all, and Σ_g min(1, L0/g)² = min(g, L0²/g) ≤ L0. So the vector
//     (n_g) has L∞ 1, L1 sensitivity L0 and L2 sensitivity √L0 in every
//     mode (sensitivity.UnitCountLInf with L0 groups);
//  2. release adds noise to n_g for every released group (every group of
//     the public key domains, those without rows too, whose n_g is 0; the
//     one group of an ungrouped query): the Laplace mechanism with L1 = L0
//     (or the Gaussian with L2 = √L0), integer noise unless the counts are
//     weighted; it is one more measurement of the query, with an equal
//     share of ε (and under Gaussian of δ), charged as one more ledger
//     event in the query's one charge (splitBudget);
//  3. a group whose noisy count ñ_g is below k keeps its keys (the table
//     keeps its shape: the set of released groups is public) and has every
//     measure cell released as NULL, its half-width too.
//
// Privacy: step 2 is (ε_c, δ_c)-DP by the sensitivities of step 1
// (Dwork, McSherry, Nissim, Smith 2006; Dwork and Roth 2014, Thm 3.6 and
// A.1), the measures are the query's other measurements, and by basic
// composition the pair is (ε_c + ε_meas, δ_c + δ_meas)-DP; step 3 is a
// function of the released ñ and the released noisy measures only, so it
// is post-processing and costs nothing more (Dwork and Roth 2014, Prop.
// 2.1). The suppression hides nothing the noise did not already hide: it
// is a disclosure-control rule applied to DP outputs, not a privacy
// mechanism of its own, and the query's guarantee is that of the composed
// mechanisms whether or not a cell is suppressed.
//
// With private keys the selection's noisy count is that estimate already
// (partition.go): a group is kept iff ñ_g ≥ max(τ, k), at no extra cost.
// Sample-and-aggregate plans use their noisy unit count likewise
// (sampleagg.go).
//
// Accuracy: with discrete Laplace noise of scale b = L0/ε_c (integer
// counts) a group with n_g ≥ k units is suppressed iff the noise is at
// most −(n_g − k + 1), with probability e^{−(n_g−k+1)/b}/(1 + e^{−1/b})
// (about ½·e^{−(n_g−k+1)/b}); one with n_g < k is released iff the noise
// is at least k − n_g, with probability e^{−(k−n_g)/b}/(1 + e^{−1/b}).
// "fewer than about k" in the NOTICE says that the rule is applied to an
// estimate.

// cellCount is the noisy distinct-unit count of a plan with a minimum of
// units per cell and no private key.
type cellCount struct {
	mech noise.Mechanism
	min  *big.Rat // k
	l0   int
}

// minUnitsOf is the plan's minimum as a rational, nil without one.
func minUnitsOf(plan *dpplan.Plan) *big.Rat {
	if plan.MinUnits <= 0 {
		return nil
	}
	return big.NewRat(int64(plan.MinUnits), 1)
}

// checkMinUnits refuses a plan whose minimum is not the policy's (a planner
// bug must not drop the steward's rule) or that cannot carry a unit count.
func checkMinUnits(ds *policy.Dataset, plan *dpplan.Plan) error {
	if plan.MinUnits != ds.MinUnitsPerCell {
		return pgerr.New(pgerr.InternalError, "internal error: the plan's minimum of units per cell does not verify")
	}
	if sa := plan.SampleAgg; sa != nil && plan.MinUnits > 0 && sa.CountMeasure < 0 {
		return pgerr.New(pgerr.InternalError, "internal error: the plan's minimum of units per cell does not verify")
	}
	return nil
}

// newCellCount builds the count's mechanism for a plan with a minimum and
// public keys (or none); nil otherwise. epsilon and delta are its shares
// (splitBudget).
func (r *Releaser) newCellCount(req Request, epsilon, delta float64) (*cellCount, error) {
	plan := req.Plan
	if plan.MinUnits <= 0 || plan.PrivateGroups() || plan.SampleAgg != nil {
		return nil, nil
	}
	l0 := plan.MaxGroupsPerUnit
	if l0 < 1 {
		return nil, pgerr.New(pgerr.InternalError, "internal error: unit count without an L0 bound")
	}
	bounds := sensitivity.Bounds{L0: l0, LInf: sensitivity.UnitCountLInf()}
	// Weighted counts (GroupsScale) are not integers: real-valued noise
	// on the grid of every group one unit can change.
	integer := dpplan.GroupBounding(plan) != dpplan.GroupsScale
	mech, err := r.newMechanism(req.Mechanism, bounds, epsilon, delta, integer, plan.CellsChanged(), "the unit count of min_units_per_cell")
	if err != nil {
		return nil, err
	}
	return &cellCount{mech: mech, min: minUnitsOf(plan), l0: l0}, nil
}

// event is the count's ledger event.
func (c *cellCount) event() accountant.Event { return eventOf(c.mech) }

// suppressed adds noise to a group's unit count (units ≥ 0) and reports
// whether the group's cells are withheld: noisy count < k.
func (c *cellCount) suppressed(units *big.Rat) (bool, error) {
	noisy, err := c.mech.AddNoise(units)
	if err != nil {
		return false, pgerr.New(pgerr.InternalError, "internal error while adding noise").Wrap(err)
	}
	return noisy.Cmp(c.min) < 0, nil
}

// parseUnits reads a group's distinct-unit count as the SQL returns it: a
// number ≥ 0 (weighted when groups are weighted; integer otherwise).
func parseUnits(s *string, integer bool) (*big.Rat, bool) {
	if s == nil {
		return new(big.Rat), true // a group without rows (SUM over none)
	}
	v, ok := new(big.Rat).SetString(*s)
	if !ok || v.Sign() < 0 || integer && !v.IsInt() {
		return nil, false
	}
	return v, true
}

// unitCounts removes the unit-count column (the last) from the upstream
// rows of a plan with a cellCount and returns each released group's count,
// 0 for a group without a row. Rows whose key is NULL or outside the
// domains are ignored, as collect ignores them.
func unitCounts(plan *dpplan.Plan, groups [][]string, rows [][]*string) ([][]*string, []*big.Rat, error) {
	index := groupIndex(groups)
	units := make([]*big.Rat, len(groups))
	for g := range units {
		units[g] = new(big.Rat)
	}
	integer := dpplan.GroupBounding(plan) != dpplan.GroupsScale
	nk, nm := len(plan.Keys), len(plan.Measures)
	out := make([][]*string, len(rows))
	for r, row := range rows {
		if len(row) != nk+nm+1 {
			return nil, nil, pgerr.New(pgerr.InternalError, "internal error: upstream returned an unexpected row shape")
		}
		out[r] = row[:nk+nm]
		g, ok := groupOf(plan, index, row)
		if !ok {
			continue
		}
		u, ok := parseUnits(row[nk+nm], integer)
		if !ok {
			return nil, nil, pgerr.New(pgerr.InternalError, "internal error: upstream returned an invalid unit count")
		}
		units[g] = u
	}
	return out, units, nil
}

// suppress withholds a group's cells: every value that is not a key
// becomes NULL (outputs and the hidden values HAVING reads).
func suppress(row []value) {
	for i := range row {
		if row[i].key == nil {
			row[i] = value{null: true}
		}
	}
}
