package rewrite

import (
	"errors"
	"math"
	"reflect"
	"sort"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
)

// # Clamping bounds chosen per query (dp.clipping = auto)
//
// A column's [lower, upper] is declared once for every query, so a steward
// declares it wide: incomes up to 5,000,000 where the data stop at
// 420,500. A sum's noise grows with the width, so such a query pays for
// values nobody has. With auto clipping the plan carries a histogram
// query over the summed columns and a way to plan the statement again
// with tighter bounds (Replan); release noises the histogram, chooses
// for each column the tightest bounds beyond which the noisy histogram
// cannot tell any unit from none, and answers with the plan of those
// bounds (release/autoclip.go). Choosing bounds from a DP histogram is
// Google's approximate bounds (the differential-privacy library's
// ApproxBounds, whose bins are powers of two); here the bins halve the
// declared range from each end, so the candidates lie inside [lower,
// upper] and a bound can only tighten.
//
// The histogram counts units, not rows: of every unit, over the rows the
// plan reads (the analyst's WHERE, keys in their domain, rows with a unit)
// that have a value, the largest and the smallest value, clamped into
// [L, U]. Per column, the units' largest values fall in bins cut at the
// candidate upper bounds L + W/2ʲ (W = U − L, j = 1 … clipHalvings; whole
// numbers for int columns), which halve the range towards L, and their
// smallest values in bins cut at the candidate lower bounds U − W/2ʲ. The
// upper bound walks down the first histogram, the lower bound up the
// second; reaching L + W/2ʲ sums j bins (edges on both sides in one
// histogram made it 2j − 1 near the far end, and the noise of the sum
// grows with √j). A unit with many rows counts once, so the noise is
// that of unit counts (a row histogram weighted to C rows per unit had
// noise of C rows per bin, 20 on the demo, and could not tell 150 rows
// from none).
//
// Sensitivity: adding or removing one unit changes each of the 2·k
// histograms (k columns) in one bin by one, so the vector of bin counts
// moves by at most 2k in L1, and Laplace noise of scale 2k/ε_clip on
// every bin is ε_clip-DP; the choice is post-processing of the noisy
// bins, and the answer then uses a plan that is DP for each fixed choice
// (sequential composition: ε_clip plus the answer's ε).
//
// The plan of tighter bounds is the same statement planned with the
// chosen bounds in place of the declared ones: its measures have the same
// kinds, ε and δ, and sensitivities no larger (every bound of a measure
// is monotone in the column's bounds), so the charge reserved for the
// declared bounds covers it; release checks that and otherwise keeps the
// declared bounds.

// errReplanKeys: the statement planned with other bounds has other keys
// (release then keeps the declared bounds).
var errReplanKeys = errors.New("rewrite: the bounds changed the plan's keys")

// clipHalvings is the number of edges cut from each end of a range: the
// tightest candidate is 1/2⁸ of the declared width from the other end.
const clipHalvings = 8

// clipEdges returns the candidate bounds of [lower, upper] that halve it
// towards lower (upper bounds: lower + W/2ʲ) or, when fromUpper, towards
// upper (lower bounds: upper − W/2ʲ), j = 1 … clipHalvings: rounded to
// whole numbers for int columns, strictly inside the range, ascending and
// distinct.
func clipEdges(lower, upper float64, integer, fromUpper bool) []float64 {
	w := upper - lower
	seen := map[float64]bool{}
	var out []float64
	for j := 1; j <= clipHalvings; j++ {
		e := lower + w/math.Pow(2, float64(j))
		if fromUpper {
			e = upper - w/math.Pow(2, float64(j))
		}
		if integer {
			e = math.Round(e)
		}
		if e == 0 {
			e = 0 // not -0 (math.Round(-0.3)), which dpplan.BoundText writes "-0"
		}
		if e > lower && e < upper && !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	sort.Float64s(out)
	return out
}

// clipColumns lists the plan's summed plain columns with numeric bounds
// (sums, averages and variances of a column, not of an expression), in
// the order the measures first use them. A column that is also a key
// keeps its declared bounds: floor(col/W)*W takes its domain and its row
// condition from them (datekey.go), so tighter bounds would drop the rows
// beyond them and the groups they fall in rather than clamp them.
func clipColumns(t *policy.Table, p *Plan) []ClipColumn {
	var out []ClipColumn
	keep := map[string]bool{}
	for _, k := range p.Keys {
		keep[k.Column] = true
	}
	// A column summed under FILTER keeps its declared bounds: the
	// histogram sees every row the plan reads, and a filter such as
	// cost > 15000 keeps exactly the rows a bound chosen over all of them
	// would clamp.
	for _, m := range p.Measures {
		if m.Filter != nil && m.Column != "" {
			keep[m.Column] = true
		}
	}
	for _, c := range dpplan.SummedColumns(t, p) { // bias.go
		if keep[c.Name] || c.UpperNum <= c.LowerNum {
			continue
		}
		integer := c.Type == policy.TypeInt
		up, down := clipEdges(c.LowerNum, c.UpperNum, integer, false), clipEdges(c.LowerNum, c.UpperNum, integer, true)
		if len(up) == 0 || len(down) == 0 {
			continue
		}
		out = append(out, ClipColumn{Column: c.Name, Lower: c.LowerNum, Upper: c.UpperNum, UpperEdges: up, LowerEdges: down, Integer: integer})
	}
	return out
}

// addAutoClip attaches the histogram and the replanning to p when it has
// summed columns to clip and bounds by weights only (bias.go).
func addAutoClip(ds *policy.Dataset, stmt string, opts Options, p *Plan) {
	t, where := dpplan.SourceOf(p)
	if !dpplan.WeightsOnly(p) || t == nil {
		return
	}
	cols := clipColumns(t, p)
	if len(cols) == 0 {
		return
	}
	p.Clip = dpplan.NewAutoClip(cols, pgemit.ClipSQL(t, p, where, cols), stmt, opts)
}

// Replan plans p's statement again with clamping bounds chosen for the
// columns of p.Clip (one per column, each inside the declared range):
// release calls it through release.Config.Planner once the bounds are
// chosen. A plan whose keys moved with the bounds is refused: release
// answers the declared plan's groups.
func Replan(ds *policy.Dataset, p *Plan, bounds []ClipBounds) (*Plan, error) {
	if p.Clip == nil {
		return nil, errReplanKeys
	}
	stmt, opts := p.Clip.Statement()
	np, err := plan(dpplan.WithClipBounds(ds, p.Table, p.Clip.Columns, bounds), stmt, opts)
	if err == nil && !reflect.DeepEqual(np.Keys, p.Keys) {
		return nil, errReplanKeys
	}
	return np, err
}
