// Privacy-critical: needs DP review.

package dpplan

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
	// replan plans the statement with other bounds (nil: the declared).
	replan func(bounds []ClipBounds) (*Plan, error)
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

// NewAutoClip returns the auto clipping of a plan: its columns, the
// histogram's SQL, and replan, which plans the statement with other bounds.
func NewAutoClip(cols []ClipColumn, sql string, replan func(bounds []ClipBounds) (*Plan, error)) *AutoClip {
	return &AutoClip{Columns: cols, SQL: sql, replan: replan}
}

// Replan returns the statement planned with bounds (one per column, each
// inside the declared range) in place of the declared ones.
func (a *AutoClip) Replan(bounds []ClipBounds) (*Plan, error) {
	return a.replan(bounds)
}
