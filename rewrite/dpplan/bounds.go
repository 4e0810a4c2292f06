// Privacy-critical: needs DP review.

package dpplan

import (
	"math"
	"math/big"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// measureBounds fills the clamping bounds and the L∞ bound of a measure.
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

// maxGroupsPerUnit is the L0 bound the SQL enforces: the policy's
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

// groupBound is how the SQL enforces the L0 bound (see "Two levels of
// bounding" above).
type GroupBound int

const (
	// groupsAll: no unit can reach more groups than the bound (ungrouped,
	// or public key domains with at most MaxGroupsPerUnit groups in all).
	GroupsAll GroupBound = iota
	// groupsScale: public keys; a unit whose bounded rows over all groups
	// exceed L0·R has its values in each weighted down to that total.
	GroupsScale
	// groupsSelect: private keys (partition selection) or quantiles; a
	// unit keeps its L0 groups of smallest hash.
	GroupsSelect
)

// groupBounding is the L0 mode of a plan emitted by emitSQL.
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
	for _, m := range p.Measures {
		if m.Kind == MeasureQuantile {
			return GroupsSelect
		}
	}
	return GroupsScale
}

// CellsChanged is the number of released groups whose values one unit can
// change: every group of the key domains when groups are weighted
// (groupsScale: a unit within its allowance keeps all its groups, each
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

// scaledMeasures marks the measures whose per-unit values the SQL may
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

// exprBounds fills the bounds of a measure over an expression or a
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

// domainProduct is the number of releasable groups of keys, capped at
// limit (1 when ungrouped).
func DomainProduct(keys []Key, limit int) int {
	n := 1
	for _, k := range keys {
		n = min(n*len(k.Domain), limit)
	}
	return n
}
