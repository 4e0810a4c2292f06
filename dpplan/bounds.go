// Privacy-critical: needs DP review.

package dpplan

import (
	"github.com/dpproxy/dpproxy/policy"
)

// This file and pgemit/bounds_sql.go hold all clamping and contribution
// bounding of dpproxy: the per-measure sensitivity bounds of the plan
// (MeasureBounds, MaxGroupsPerUnit, here) and the SQL that enforces them
// (pgemit.SQL, pgemit/bounds_sql.go, whose file comment describes that
// SQL step by step). Nothing else in the project clamps values or limits
// contributions; the noise added downstream is calibrated to the numbers
// computed here, so the two must agree: the emitter reads them from the
// plan (package pgemit imports this package, never the planner).
//
// # Guarantee
//
// Neighbouring databases differ by all rows of one privacy unit (the rows
// sharing one value of the table's unit_column). The SQL built by pgemit.SQL
// guarantees, for every such unit u and whatever the data:
//
//  1. u contributes to at most Plan.MaxGroupsPerUnit released groups
//     (L0 bound) when groups are selected (GroupsSelect, GroupsAll), or,
//     weighted (GroupsScale), to any number of them with the same L1 and
//     L2 totals ("Two levels of bounding" below); and to no group outside
//     the public key domain (private
//     keys, rewrite/partition.go: to no group whose private key is NULL), and
//     when the plan has private keys, u adds exactly 1 to the distinct-unit
//     count (the last column) of each group it contributes to;
//  2. in each group, u changes a count measure by at most max_rows_per_unit,
//     a sum measure over column c by at most
//     max_rows_per_unit · max(|lower_c|, |upper_c|), a sum of squares by at
//     most max_rows_per_unit · max(lower_c², upper_c²), and a count of
//     distinct units by at most 1 (L∞ bound, Measure.LInf).
//
// Hence the L1 sensitivity of the vector of one measure over all groups is
// at most L0·L∞ and the L2 sensitivity at most √L0·L∞ (the standard bounds
// for user-level contribution bounding; see Wilson et al., "Differentially
// Private SQL with Bounded User Contribution", PoPETs 2020, §3).
//
//
// # Two levels of bounding
//
// Nothing is chosen at random: every bounded value is a function of the
// unit's own rows. A unit's mean value times min(n, R) is bounded like R
// clamped rows (|mean| ≤ max(|lower|, |upper|)). With public keys the
// unit's bounded rows over all groups, t = Σ_g min(n_g, R), are scaled to
// at most its allowance T = L0·R: each group's value is weighted by
// min(1, T/t). For a measure with L∞ = R·M (M the largest |value|, 1 for
// counts) the group values c_g then satisfy |c_g| ≤ min(n_g, R)·M·min(1,
// T/t), so
//
//	L∞: |c_g| ≤ R·M
//	L1: Σ_g |c_g| ≤ t·M·min(1, T/t) ≤ T·M = L0·L∞
//	L2: Σ_g c_g² ≤ max_g |c_g| · Σ_g |c_g| ≤ L∞ · L0·L∞, so L2 ≤ √L0·L∞
//
// the same sensitivities as keeping at most L0 groups, without dropping
// or weighting a unit that is in more than L0 groups but within its
// allowance. Distinct-unit counts (1 per group) count a unit whole in up
// to L_u = min(G, L0·R) groups and are weighted by min(1, L_u/g) for g
// groups beyond (UnitGroups, L1 ≤ L_u). Other units' values do not depend on
// whether u is present, so the bounds hold for u alone (PRIVACY.md, "Two
// levels of bounding").
// No random() also means PostgreSQL may run the scan and the first
// aggregation in parallel workers (random() is parallel-restricted).

// # Bounds per query
//
// The policy gives each unit an allowance per query: at most
// max_groups_per_unit groups and max_rows_per_unit rows in each, so at most
// L0·L∞ rows in all and an L1 sensitivity of L0·L∞ (per row bound) for one
// measure over all groups. An ungrouped query has one group, so the unit's
// whole allowance goes to it: L∞ = max_groups_per_unit · max_rows_per_unit
// rows, with L0 = 1, and the L1 sensitivity is the same L0·L∞ the policy
// already allows a grouped query (for the Gaussian mechanism the L2
// sensitivity L0·L∞ is larger than a grouped query's √L0·L∞: the policy's
// L0·L∞ rows of one unit may all lie in the one group). Keeping only
// max_rows_per_unit rows there would drop rows the policy allows, biasing
// counts and sums down. The session may tighten either bound (SET
// dp.max_rows_per_unit / dp.max_groups_per_unit, like BigQuery's per-query
// contribution bounds), never loosen it. queryBounds gives the builder a
// view of the table with the bounds of this query; release checks
// Plan.RowsPerUnit against the policy (release/join.go).

// MaxGroupsPerUnit is the L0 bound the SQL enforces: the policy's
// max_groups_per_unit, but never more than the number of groups that can
// be released (the product of the key domains), and 1 when ungrouped.
func MaxGroupsPerUnit(t *policy.Table, keys []Key) int {
	if len(keys) == 0 {
		return 1
	}
	groups := 1
	for _, k := range keys {
		if k.Private {
			// No public domain to cap the number of groups by.
			return t.MaxGroupsPerUnit
		}
	}
	for _, k := range keys {
		groups *= len(k.Domain)
		if groups >= t.MaxGroupsPerUnit {
			return t.MaxGroupsPerUnit
		}
	}
	return min(groups, t.MaxGroupsPerUnit)
}

// UnitGroups is the number of groups in which a unit's distinct-unit
// counts (MeasureUnits) count it whole, L_u, for a plan whose table keeps
// rows rows per unit: in a single-table plan that weights groups
// (GroupsScale), min(G, L0·rows), with G the groups of the key domains;
// else L0.
//
// The policy's allowance of a unit in one query is L0·R rows over all
// groups (the weighting above scales a unit's rows to it). A distinct
// count spends one per group, never more than the unit's rows there, so
// counting it whole in up to L0·R groups stays within that allowance,
// and the SQL keeps only keys in their domains, so a unit is in at most G
// groups. A unit in g groups counts min(1, L_u/g) in each: per group at
// most 1 (L∞ = 1) and over its groups min(g, L_u) ≤ L_u (L1 ≤ L_u·L∞,
// L2 ≤ √L_u·L∞ as above), a function of the unit's own rows. No unit is
// weighted unless it is in more than L0·R groups, and the noise grows with
// L_u, which release calibrates to (UnitGroups again, from the rows it
// re-derives). Joins and sample-and-aggregate keep L0.
func UnitGroups(p *Plan, rows int) int {
	l0 := max(p.MaxGroupsPerUnit, 1)
	if p.Join != nil || p.SampleAgg != nil || GroupBounding(p) != GroupsScale || rows < 1 {
		return l0
	}
	allowance := l0 * rows
	return max(l0, DomainProduct(p.Keys, allowance))
}

// UnitsWeighted reports whether a plan keeping rows rows per unit can
// weight a distinct count: some unit can be in more groups than
// UnitGroups counts it whole in (the key domains have more).
func UnitsWeighted(p *Plan, rows int) bool {
	lu := UnitGroups(p, rows)
	return lu < DomainProduct(p.Keys, lu+1)
}

// GroupBound is how the SQL enforces the L0 bound (see "Two levels of
// bounding" above).
type GroupBound int

const (
	// GroupsAll: no unit can reach more groups than the bound (ungrouped,
	// or public key domains with at most MaxGroupsPerUnit groups in all).
	GroupsAll GroupBound = iota
	// GroupsScale: public keys; a unit whose bounded rows over all groups
	// exceed L0·R has its values in each weighted down to that total.
	GroupsScale
	// GroupsSelect: private keys (partition selection) or quantiles; a
	// unit keeps its L0 groups of smallest hash.
	GroupsSelect
)

// GroupBounding is the L0 mode of a plan emitted by pgemit.SQL.
func GroupBounding(p *Plan) GroupBound {
	if len(p.Keys) == 0 {
		return GroupsAll
	}
	if p.PrivateGroups() {
		return GroupsSelect
	}
	groups := 1
	for _, k := range p.Keys {
		groups *= len(k.Domain)
		if groups > p.MaxGroupsPerUnit {
			break
		}
	}
	if groups <= p.MaxGroupsPerUnit {
		return GroupsAll
	}
	if p.HasQuantile() {
		return GroupsSelect
	}
	return GroupsScale
}

// CellsChanged is the number of released groups whose values one unit can
// change: every group of the key domains when groups are weighted
// (GroupsScale: a unit within its allowance keeps all its groups, each
// with a value that need not lie on the noise grid), else at most
// MaxGroupsPerUnit. Release charges the grid rounding of real-valued
// measures once per such group (noise.Params.Cells); a larger figure only
// adds noise. The count stops at MaxPublicGroups, which release refuses to
// go beyond, so it is exact for every plan that is answered.
func (p *Plan) CellsChanged() int {
	if GroupBounding(p) != GroupsScale {
		return max(p.MaxGroupsPerUnit, 1)
	}
	n := 1
	for _, k := range p.Keys {
		n *= max(len(k.Domain), 1)
		if n >= MaxPublicGroups {
			return MaxPublicGroups
		}
	}
	return max(n, p.MaxGroupsPerUnit, 1)
}

// MaxPublicGroups is the most groups of public key domains (their product)
// one query releases; release refuses a plan with more (0A000) before
// its charge.
const MaxPublicGroups = 1_000_000

// DomainProduct is the number of releasable groups of keys, capped at
// limit (1 when ungrouped).
func DomainProduct(keys []Key, limit int) int {
	n := 1
	for _, k := range keys {
		n = min(n*len(k.Domain), limit)
	}
	return n
}
