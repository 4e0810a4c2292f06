// Privacy-critical: needs DP review.

package rewrite

import (
	"errors"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

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
			e = 0 // not -0 (math.Round(-0.3)), which boundText writes "-0"
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
		if m.Filter != "" && m.Column != "" {
			keep[m.Column] = true
		}
	}
	for _, c := range summedColumns(t, p) { // bias.go
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
	t, where := p.Source()
	if !weightsOnly(p) || t == nil {
		return
	}
	cols := clipColumns(t, p)
	if len(cols) == 0 {
		return
	}
	table := t.Name
	keys := p.Keys
	replan := func(bounds []ClipBounds) (*Plan, error) {
		o := opts
		o.AutoClip = false
		np, err := plan(withBounds(ds, table, cols, bounds), stmt, o)
		if err == nil && !reflect.DeepEqual(np.Keys, keys) {
			// Release answers the declared plan's groups; a plan whose
			// keys moved with the bounds is not the same statement.
			return nil, errReplanKeys
		}
		return np, err
	}
	p.Clip = NewAutoClip(cols, clipSQL(t, p, where, cols), replan)
}

// withBounds returns a copy of ds whose table has the chosen bounds in
// place of the declared ones (ds itself is shared and never changed).
func withBounds(ds *policy.Dataset, table string, cols []ClipColumn, bounds []ClipBounds) *policy.Dataset {
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
		c.Lower, c.Upper = boundText(bounds[i].Lower), boundText(bounds[i].Upper)
		t.Columns[col.Column] = &c
	}
	d.Tables[table] = &t
	return &d
}

// boundText writes a bound as a plain decimal (no exponent), as policy
// writes declared bounds.
func boundText(x float64) string {
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// clipSQL is the histogram query (see the file comment): one scan of the
// rows the plan reads, each unit's largest and smallest clamped value per
// column, put in their bins and counted.
func clipSQL(t *policy.Table, p *Plan, where pred, cols []ClipColumn) string {
	unit := quoteIdent(t.UnitColumn)
	from := quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
	var values, buckets []string
	array := func(edges []float64) string {
		var out []string
		for _, e := range edges {
			out = append(out, boundText(e))
		}
		return "ARRAY[" + strings.Join(out, ", ") + "]::numeric[]"
	}
	for i, col := range cols {
		// GREATEST and LEAST ignore NULL: keep a NULL value NULL.
		values = append(values, "("+strconv.Itoa(i)+", CASE WHEN "+quoteIdent(col.Column)+" IS NULL THEN NULL ELSE "+clampSQL(t, col.Column)+" END)")
		n := strconv.Itoa(i)
		buckets = append(buckets,
			"WHEN dp_i = "+n+" AND dp_m.dp_s = 0 THEN width_bucket(dp_m.dp_x, "+array(col.UpperEdges)+")",
			"WHEN dp_i = "+n+" THEN width_bucket(dp_m.dp_x, "+array(col.LowerEdges)+")")
	}
	return "SELECT dp_i::text, dp_s::text, dp_b::text, COUNT(*)::text FROM (" +
		"SELECT dp_i, dp_m.dp_s, CASE " + strings.Join(buckets, " ") + " END AS dp_b FROM (" +
		"SELECT dp_unit, dp_i, MAX(dp_x) AS dp_hi, MIN(dp_x) AS dp_lo FROM (" +
		"SELECT " + unit + " AS dp_unit, dp_v.dp_i, dp_v.dp_x FROM " + from +
		" CROSS JOIN LATERAL (VALUES " + strings.Join(values, ", ") + ") AS dp_v(dp_i, dp_x)" +
		" WHERE " + strings.Join(sourceConds(p, where, unit), " AND ") +
		") AS dp_rows WHERE dp_x IS NOT NULL GROUP BY dp_unit, dp_i) AS dp_units" +
		" CROSS JOIN LATERAL (VALUES (0, dp_hi), (1, dp_lo)) AS dp_m(dp_s, dp_x)) AS dp_binned GROUP BY dp_i, dp_s, dp_b"
}
