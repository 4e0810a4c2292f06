// Privacy-critical: needs DP review.

package dpplan

import (
	"math"
	"math/big"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
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
//     (L0 bound), and to no group outside the public key domain (private
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
// allowance. Distinct-unit counts (1 per group, L1 ≤ L0) are weighted by
// min(1, L0/g) for g groups instead. Other units' values do not depend on
// whether u is present, so the bounds hold for u alone (PRIVACY.md, "Two
// levels of bounding").
// No random() also means PostgreSQL may run the scan and the first
// aggregation in parallel workers (random() is parallel-restricted).

// # Bounds per query
//
// The policy gives each unit an allowance per query: at most
// max_groups_per_unit groups and max_rows_per_unit rows in each, so at
// most L0·L∞ rows in all and an L1 sensitivity of L0·L∞ (per row bound)
// for one measure over all groups. An ungrouped query has one group, so
// the unit's whole allowance goes to it: L∞ = max_groups_per_unit ·
// max_rows_per_unit rows, with L0 = 1, and the L1 sensitivity is the
// same L0·L∞ the policy already allows a grouped query (for the Gaussian
// mechanism the L2 sensitivity L0·L∞ is larger than a grouped query's
// √L0·L∞: the policy's L0·L∞ rows of one unit may all lie in the one
// group). Keeping only max_rows_per_unit rows there would drop rows the
// policy allows, biasing counts and sums down (the demo's first query lost
// 24% of its rows). The session may tighten either bound (SET
// dp.max_rows_per_unit / dp.max_groups_per_unit, like BigQuery's
// per-query contribution bounds), never loosen it. queryBounds gives the
// builder a view of the table with the bounds of this query; release
// checks Plan.RowsPerUnit against the policy (release/join.go).

// MeasureBounds fills the clamping bounds and the L∞ bound of a measure.
// col is the measure's column (nil for COUNT(*) or an undeclared unit
// column).
func MeasureBounds(t *policy.Table, m Measure, col *policy.Column) Measure {
	rows := float64(t.MaxRowsPerUnit)
	switch m.Kind {
	case MeasureCount:
		// Each unit keeps at most max_rows_per_unit rows per group, each
		// counting 1.
		m.Integer = true
		m.LInf = rows
	case MeasureSum:
		// Each of at most max_rows_per_unit rows adds a value clamped to
		// [lower, upper], so |sum| ≤ rows·max(|lower|, |upper|).
		m.Lower, m.Upper = col.LowerNum, col.UpperNum
		m.Integer = col.Type == policy.TypeInt
		m.LInf = rows * math.Max(math.Abs(m.Lower), math.Abs(m.Upper))
	case MeasureUnits:
		// COUNT(DISTINCT unit_column): a unit is one value of the unit
		// column, so it adds at most 1 to each group however many rows
		// it has (rows with a NULL unit are excluded, see above).
		m.Integer = true
		m.LInf = 1
	case MeasureSumSq:
		// Each of at most max_rows_per_unit rows adds x² with x clamped to
		// [lower, upper], so 0 ≤ x² ≤ max(lower², upper²) and the unit's
		// per-group sum of squares lies in [0, rows·max(lower², upper²)].
		m.Lower, m.Upper = col.LowerNum, col.UpperNum
		m.Integer = col.Type == policy.TypeInt
		m.LInf = rows * math.Max(m.Lower*m.Lower, m.Upper*m.Upper)
	case MeasureQuantile:
		// Each unit adds or removes at most max_rows_per_unit clamped
		// values of the group, so every rank-based quantity of the group
		// (counts per bucket, the rank of any value, n) moves by at most
		// that much (quantile.go).
		m.LInf = rows
	}
	return m
}

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
	for _, k := range p.Keys {
		if k.Private {
			return GroupsSelect
		}
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
// adds noise.
func (p *Plan) CellsChanged() int {
	if GroupBounding(p) != GroupsScale {
		return max(p.MaxGroupsPerUnit, 1)
	}
	n := 1
	for _, k := range p.Keys {
		n *= max(len(k.Domain), 1)
		if n >= 1<<20 {
			return 1 << 20
		}
	}
	return max(n, p.MaxGroupsPerUnit, 1)
}

// ScaledMeasures marks the measures whose per-unit values the SQL may
// weight (bounds.go, "Two levels of bounding") as not integer: sums and
// sums of squares always (a unit with more than L∞ rows in a group adds
// its sum times L∞/n), counts and distinct units when the plan scales
// groups. The noise is then added on a fine grid instead of the integers
// (noise.Params.Integer).
func ScaledMeasures(p *Plan) {
	scale := GroupBounding(p) == GroupsScale
	for i := range p.Measures {
		m := &p.Measures[i]
		switch m.Kind {
		case MeasureSum, MeasureSumSq:
			m.Whole = m.Integer
			m.Integer = false
		case MeasureCount, MeasureUnits:
			if scale {
				m.Integer = false
			}
		}
	}
}

// ExprBounds fills the bounds of a measure over an expression or a
// normalized sum from the exact interval iv of its per-row values
// (sensitivity/interval.go): Lower, Upper are iv rounded outwards to
// float64, and LInf is at least both the exact bound and the float formula
// release re-checks it against.
func ExprBounds(t *policy.Table, m Measure, iv sensitivity.Interval) Measure {
	rows := t.MaxRowsPerUnit
	if m.Kind == MeasureCount {
		m.Integer = true
		m.LInf = sensitivity.CountLInf(rows)
		return m
	}
	if iv.Empty() {
		iv = sensitivity.Point(new(big.Rat), true)
	}
	m.Lower, m.Upper = sensitivity.RatDown(iv.Lo), sensitivity.RatUp(iv.Hi)
	centre := new(big.Rat)
	if m.Centre != "" {
		centre.SetString(m.Centre)
	}
	// Per-row values of the measure: x − centre, or (x − centre)².
	shifted := sensitivity.Sub(iv, sensitivity.Point(centre, centre.IsInt()))
	m.Integer = shifted.Int
	switch {
	case m.Kind == MeasureSum && m.Centre != "":
		m.LInf = math.Max(sensitivity.CentredSumLInf(rows, m.Lower, m.Upper, centre), sensitivity.SumLInfInterval(rows, shifted))
	case m.Kind == MeasureSum:
		m.LInf = math.Max(sensitivity.SumLInf(rows, m.Lower, m.Upper), sensitivity.SumLInfInterval(rows, shifted))
	case m.Kind == MeasureSumSq && m.Centre != "":
		sq := sensitivity.Mul(shifted, shifted)
		m.LInf = math.Max(sensitivity.CentredSumSqLInf(rows, m.Lower, m.Upper, centre), sensitivity.SumLInfInterval(rows, sq))
	case m.Kind == MeasureSumSq:
		sq := sensitivity.Mul(shifted, shifted)
		m.LInf = math.Max(sensitivity.SumSqLInf(rows, m.Lower, m.Upper), sensitivity.SumLInfInterval(rows, sq))
	}
	return m
}

// DomainProduct is the number of releasable groups of keys, capped at
// limit (1 when ungrouped).
func DomainProduct(keys []Key, limit int) int {
	n := 1
	for _, k := range keys {
		n = min(n*len(k.Domain), limit)
	}
	return n
}
