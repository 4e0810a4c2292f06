package rewrite

import (
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
)

// # The bias of contribution bounding
//
// Bounding (dpplan/bounds.go) removes rows: a unit's rows beyond R in a group,
// and with public keys the part of its rows beyond its allowance
// T = L0·R over all groups. The intervals release states are about the
// noise around the bounded answer; how far that answer is from the
// unbounded one is a property of the data, so it can only be stated as
// a DP estimate. addRemoved adds that estimate to a plan as one more
// measure, MeasureRemoved: per group, the rows of the query (rows that
// pass its WHERE, keys in their domain) that bounding removed.
//
// Per (unit, group) with n rows the SQL computes the removed rows
// r = n − b, where b is the bounded row count of dpplan/bounds.go: b = min(n, R),
// times min(1, T/t) with t = Σ_g min(n_g, R) when groups are scaled. Per
// unit, ρ = Σ_g r_g = m − min(t, T) (m = Σ_g n_g) exactly, or
// Σ_g (n_g − min(n_g, R)) without scaling. Each unit's removed rows are
// then clipped to C = L0·R over all its groups: the released value of the
// group is r_g·min(1, C/ρ), computed in exact numeric as
// div(a_g·min(ρ, C)·10ᵏ, d·ρ)·10⁻ᵏ, where r_g = a_g/d with integers
// a_g = n_g − min(n_g, R) and d = 1 (t ≤ T), or a_g = n_g·t − min(n_g, R)·T
// and d = t (t > T). Truncation towards zero keeps every value in
// [0, r_g·min(1, C/ρ)], so for one unit
//
//	Σ_g value_g ≤ min(ρ, C) ≤ C   (L1 ≤ C, hence L∞ ≤ C and L2 ≤ C)
//
// and the values are functions of the unit's own rows.
//
// Clamping changes rows too: a value outside its column's declared
// bounds is clamped to them. When the plan sums plain columns with
// numeric bounds, the measure also counts, per (unit, group), the rows o_g
// with such a value outside its bounds (Measure.Outside): the released
// value is (r_g + o_g)·min(1, C/ρ') with ρ' = Σ_g (r_g + o_g), computed as
// above with a_g + o_g·d in place of a_g; the same argument gives
// Σ_g value_g ≤ C. A row both removed and clamped counts twice, so the
// estimate then is of the rows bounding affected, not of distinct rows. Release calibrates
// the measure's noise to L1 = LInf = C (sensitivity.L1/L2 with Bounds.L1 =
// C give C for both), charges it like any measure, and gives it a fixed
// share of the query's ε (release/bias.go). Clipping at C makes the
// estimate a lower bound in expectation when a unit loses more than C
// rows; the NOTICE says "at least" for that reason.
//
// Distinct-unit counts lose no rows but may be weighted: with public keys
// a unit in g > L_u groups counts L_u/g in each (L_u = min(G, L0·R),
// dpplan.UnitGroups), so COUNT(DISTINCT unit) per group can fall below
// the number of distinct units when the key domains have more than L_u
// groups (with L_u = L0 = 1 the demo's cardiology was 8,700 against
// 22,798). A plan whose only bounded measures are such counts, weighted,
// gets the estimate with Measure.Units: per (unit, group) the share of
// the unit the weighting removed, 1 − L_u/g, clipped per unit like the
// rows: min(g − L_u, C)/g in each of its g groups, truncated towards
// zero, so Σ_g value_g ≤ min(g − L_u, C) ≤ C (L1 ≤ C, L∞ ≤ 1 ≤ C) and
// each value is a function of the unit's own groups. Here
// C = max(L0·R, G − L_u) with G the number of groups of
// the key domains (the SQL keeps only keys in their domains, so g ≤ G):
// no unit is clipped and the estimate is unbiased, whatever rows per unit
// dp.contribution = auto chooses. It is noised and charged like the rows'
// estimate (the same share of ε; release re-derives L0·R and accepts a
// plan's larger C). A plan that counts rows or sums as well
// keeps the rows' estimate; its distinct counts get a sentence instead
// (release/bias.go).
//
// Plans that choose rather than weight (private keys, quantiles), joins
// and sample-and-aggregate get no estimate (and so pay nothing for one).

// addRemoved appends the MeasureRemoved of a plan that bounds by weights;
// other plans are left as they are.
func addRemoved(t *policy.Table, p *Plan) {
	if !dpplan.WeightsOnly(p) {
		return
	}
	bounded := false
	for _, m := range p.Measures {
		switch m.Kind {
		case MeasureCount, MeasureSum, MeasureSumSq:
			bounded = true
		}
	}
	c := float64(p.MaxGroupsPerUnit * t.MaxRowsPerUnit)
	if !bounded {
		if weightedUnits(p, t.MaxRowsPerUnit) {
			// C at least G − L_u (G the groups of the key domains, L_u
			// the groups a unit counts whole in: dpplan.UnitGroups): a
			// unit is in at most G groups, so nothing is clipped and the
			// estimate is unbiased; at least L0·R, the bound release
			// re-derives for every MeasureRemoved.
			cu := max(c, float64(p.CellsChanged()-dpplan.UnitGroups(p, t.MaxRowsPerUnit)))
			p.Measures = append(p.Measures, Measure{Kind: MeasureRemoved, LInf: cu, L1: cu, Units: true})
		}
		return
	}
	p.Measures = append(p.Measures, Measure{Kind: MeasureRemoved, LInf: c, L1: c, Outside: pgemit.OutsideSQL(t, p) != ""})
}

// weightedUnits reports whether p counts distinct units under weights
// (public keys, GroupsScale) with rows rows per unit: then a unit in more
// than L_u groups (dpplan.UnitGroups) counts less than 1 in each, when the
// key domains have more than L_u groups.
func weightedUnits(p *Plan, rows int) bool {
	if dpplan.GroupBounding(p) != dpplan.GroupsScale {
		return false
	}
	if !dpplan.UnitsWeighted(p, rows) {
		return false
	}
	for _, m := range p.Measures {
		if m.Kind == MeasureUnits {
			return true
		}
	}
	return false
}
