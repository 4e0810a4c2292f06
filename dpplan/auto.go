// Privacy-critical: needs DP review.

package dpplan

import (
	"strconv"

	"github.com/dpproxy/dpproxy/policy"
)

// AutoBounds is what release needs to choose a plan's rows per unit.
type AutoBounds struct {
	// Candidates are the rows per unit to choose from, ascending; the
	// last is the plan's own RowsPerUnit.
	Candidates []int
	// Plans[i] is the statement planned with Candidates[i] rows per unit,
	// for every candidate but the last (the plan itself).
	Plans []*Plan
	// CombinedSQL is the plan's own SQL with the profile of the units as
	// len(Candidates) + 1 more columns after the measures (bounds.go,
	// pgemit.ProfileSQL): summed over the rows, the number of units N, then
	// for each candidate c the number of units within its bounds (at most
	// c rows in each group and at most L0·c in all, so that bounding at c
	// leaves them whole). One scan gives the profile and the answer at
	// the plan's own bound; another runs only when a smaller one is
	// chosen.
	CombinedSQL string
}

// AutoClip is what release needs to choose a plan's clamping bounds.
type AutoClip struct {
	// Columns are the summed columns whose bounds may be tightened, in
	// the order of the histogram's column index.
	Columns []ClipColumn
	// SQL returns one row per non-empty (column index, side, bin): the
	// column's index, the side (0: the units' largest values, binned at
	// UpperEdges; 1: their smallest, at LowerEdges), the bin (the number
	// of that side's edges at or below the value) and the number of
	// units, all as text.
	SQL string

	// stmt and opts are what the planner planned (the analyst's
	// statement and the session's options, without AutoClip): release
	// asks its planner (release.Config.Planner) to plan them again under
	// the chosen bounds (WithClipBounds). Not part of the canonical plan:
	// the SQL and the columns are.
	stmt string
	opts Options
}

// ClipColumn is a summed column of the plan with its declared bounds and
// the histogram's edges.
type ClipColumn struct {
	Column       string
	Lower, Upper float64
	// UpperEdges are the candidate upper bounds (L + W/2ʲ) and the bin
	// edges of the units' largest values; LowerEdges the candidate lower
	// bounds (U − W/2ʲ) and the bin edges of their smallest. Both
	// ascending, strictly inside (Lower, Upper).
	UpperEdges, LowerEdges []float64
	Integer                bool
}

// ClipBounds are bounds chosen for one column (same index as Columns).
type ClipBounds struct {
	Lower, Upper float64
}

// WithClipBounds returns a copy of ds whose table has the chosen bounds
// (one per column of cols, each inside the declared range) in place of the
// declared ones; ds itself is shared and never changed.
func WithClipBounds(ds *policy.Dataset, table string, cols []ClipColumn, bounds []ClipBounds) *policy.Dataset {
	d := *ds
	d.Tables = make(map[string]*policy.Table, len(ds.Tables))
	for name, t := range ds.Tables {
		d.Tables[name] = t
	}
	t := *ds.Tables[table]
	t.Columns = make(map[string]*policy.Column, len(t.Columns))
	for name, c := range ds.Tables[table].Columns {
		t.Columns[name] = c
	}
	for i, col := range cols {
		if i >= len(bounds) {
			break
		}
		c := *t.Columns[col.Column]
		c.LowerNum, c.UpperNum = bounds[i].Lower, bounds[i].Upper
		c.Lower, c.Upper = BoundText(bounds[i].Lower), BoundText(bounds[i].Upper)
		t.Columns[col.Column] = &c
	}
	d.Tables[table] = &t
	return &d
}

// BoundText writes a bound as a plain decimal (no exponent), as policy
// bounds are written.
func BoundText(x float64) string {
	return strconv.FormatFloat(x, 'f', -1, 64)
}
