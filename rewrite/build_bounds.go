package rewrite

import (
	"reflect"

	"math"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// The bounds the builder gives a query's measures and units: the
// magnitude limit of a measure and the contribution bounds per query. See
// dpplan/bounds.go for the bounding argument.

// maxMagnitude bounds the values, clamping bounds and L∞ of a measure:
// beyond it (e.g. SUM(cost * 1e300)) the noise would swamp any answer, and
// float64 bounds could overflow to infinity.
const maxMagnitude = 1e100

// addMeasure returns the index of the measure, adding it when new
// (measures are de-duplicated: SUM(cost) and COUNT(*) of two outputs share
// one). col is the measure's column (nil for COUNT(*), expressions and an
// undeclared unit column); iv, when not nil, is the interval of the
// per-row values of an expression or a centred sum, whose bounds are then
// computed from it (dpplan.ExprBounds).
func (b *builder) addMeasure(m Measure, col *policy.Column, iv *sensitivity.Interval) int {
	for i, have := range b.measures {
		if have.Kind == m.Kind && have.Column == m.Column && sameValue(have.Expr, m.Expr) && samePred(have.Filter, m.Filter) && have.Centre == m.Centre {
			return i
		}
	}
	if iv != nil && (m.Expr != nil || m.Centre != "") {
		m = dpplan.ExprBounds(b.table, m, *iv)
	} else {
		m = dpplan.MeasureBounds(b.table, m, col)
	}
	if !(math.Abs(m.Lower) <= maxMagnitude && math.Abs(m.Upper) <= maxMagnitude && m.LInf <= maxMagnitude) && b.rangeErr == nil {
		b.rangeErr = pgerr.New(pgerr.FeatureNotSupported, "the values of an aggregated expression can be too large to answer with useful noise").
			WithHint("rescale the expression so that its values stay below %g, e.g. SUM(cost / 1000.0)", maxMagnitude)
	}
	b.measures = append(b.measures, m)
	return len(b.measures) - 1
}

// queryBounds sets the contribution bounds of this query (see "Bounds per
// query" in dpplan/bounds.go): b.table becomes a copy of the policy table with
// this query's max_rows_per_unit and max_groups_per_unit. Joins keep the
// policy's.
func (b *builder) queryBounds(sel *ast.SelectStmt) error {
	t := b.table
	rows, groups := t.MaxRowsPerUnit, t.MaxGroupsPerUnit
	if r := b.opts.MaxRowsPerUnit; r > 0 {
		if r > t.Allowance() || len(b.keys) > 0 && r > rows {
			return b.errAt(sel, pgerr.InvalidParameterValue, "dp.max_rows_per_unit = %d is looser than the policy of %s allows (%d per group, %d in all)", r, t.Name, rows, rows*groups).
				WithHint("a session may only tighten contribution bounds: SET dp.max_rows_per_unit to at most %d, or RESET it", rows)
		}
	}
	if g := b.opts.MaxGroupsPerUnit; g > 0 {
		if g > groups {
			return b.errAt(sel, pgerr.InvalidParameterValue, "dp.max_groups_per_unit = %d is looser than the policy of %s allows (%d)", g, t.Name, groups).
				WithHint("a session may only tighten contribution bounds: SET dp.max_groups_per_unit to at most %d, or RESET it", groups)
		}
		groups = g
	}
	if b.join != nil {
		if b.opts.MaxRowsPerUnit > 0 || b.opts.MaxGroupsPerUnit > 0 {
			return b.errAt(sel, pgerr.FeatureNotSupported, "dp.max_rows_per_unit and dp.max_groups_per_unit do not apply to joins yet").
				WithHint("RESET dp.max_rows_per_unit; RESET dp.max_groups_per_unit")
		}
		return nil
	}
	if len(b.keys) == 0 {
		rows *= groups // the unit's whole allowance in the one group
	}
	if r := b.opts.MaxRowsPerUnit; r > 0 {
		rows = min(rows, r)
	}
	if rows == t.MaxRowsPerUnit && groups == t.MaxGroupsPerUnit {
		return nil
	}
	view := *t
	view.MaxRowsPerUnit, view.MaxGroupsPerUnit = rows, groups
	b.table = &view
	return nil
}

// sameValue reports whether two row values (nil for none) are the same
// tree, so that measures over them can be shared.
func sameValue(a, b *dpplan.Value) bool {
	return a == nil && b == nil || a != nil && b != nil && a.String() == b.String()
}

// samePred reports whether two conditions (nil for none) are the same.
func samePred(a, b dpplan.Pred) bool { return reflect.DeepEqual(a, b) }
