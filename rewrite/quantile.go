package rewrite

import (
	"math"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// This file plans quantiles: percentile_cont(q) WITHIN GROUP (ORDER BY col),
// percentile_disc(q) WITHIN GROUP (ORDER BY col), MIN(col) (the 0-quantile,
// percentile_disc(0)) and MAX(col) (percentile_disc(1)) over a column with
// policy bounds, and emits the SQL parts that compute, in the database,
// what release needs to answer them. No row leaves the database: the SQL
// returns per group a histogram over a fixed grid of buckets (the
// exponential method, pgemit/quantile_sql.go and release/quantile.go).
//
// # Bounded values
//
// Each row's value is clamped to [lower, upper] (dates as days since
// 1970-01-01), and rows are bounded exactly as for every other measure
// (dpplan/bounds.go): at most max_rows_per_unit values per (unit, group), at most
// Plan.MaxGroupsPerUnit groups per unit (chosen by hash, never weighted).
// In dp_bounded each (unit, group) keeps at most max_rows_per_unit of its
// non-null clamped values, evenly spaced in rank (the middle of R equal
// slices: pgemit quantileKeepSQL, quantileUnitSQL), in an
// array padded with NULLs to exactly max_rows_per_unit entries (so the
// final array_agg builds a rectangular array and cannot fail on the data);
// the final step unnests the arrays of the group's kept (unit, group)
// rows. So one unit adds or removes
// at most R = max_rows_per_unit values in each of at most L0 groups.

// maxQuantileBuckets is the number of buckets of the exponential method's
// grid over [lower, upper]: fine enough (1/16384 of the range) that
// releasing a bucket's midpoint adds a negligible error (a 256-bucket grid
// was off by half a bucket, ~600 on PUMS incomes, without any noise),
// while the worst-case rank error grows only with ln(buckets) (ln 16384 ≈
// 9.7; release/quantile.go, "The grid"). Integer and date columns use
// whole-number bucket widths, so a narrow range (ages 0–110) gets one
// bucket per value.
const maxQuantileBuckets = 1 << 14

// quantileGrid returns the exponential method's bucket count and width for
// a column's bounds.
func quantileGrid(typ policy.Type, lower, upper float64) (int, float64) {
	return quantileGridAtMost(typ, lower, upper, maxQuantileBuckets)
}

// quantileGridAtMost is quantileGrid with at most maxBuckets buckets: a
// power of two of equal widths for numeric columns, whole-number widths
// for integer and date ones.
func quantileGridAtMost(typ policy.Type, lower, upper float64, maxBuckets int) (int, float64) {
	if typ == policy.TypeInt || typ == policy.TypeDate {
		values := upper - lower + 1
		w := math.Ceil(values / float64(maxBuckets))
		return int(math.Ceil(values / w)), w
	}
	b := 1
	for b*2 <= maxBuckets {
		b *= 2
	}
	return b, (upper - lower) / float64(b)
}

// minQuantileBuckets is the coarsest grid fitQuantileGrids makes: a 64th
// of the range (a query that would need fewer is refused before its
// charge, with a hint to group more coarsely).
const minQuantileBuckets = 64

// privateQuantileGroups is how many groups of a private key an answer with
// quantiles holds at least (dpplan.MaxSelectedGroups): their grids are
// coarsened to fit, 4,096 buckets for one quantile (a rank error of
// ln 4096 ≈ 8.3 against ln 16384 ≈ 9.7; release/quantile.go, "The grid").
const privateQuantileGroups = 128

// fitQuantileGrids lowers the bucket counts of a plan's quantiles over
// public keys until its answer fits dpplan.MaxAnswerCells: a quantile
// weighs its grid's worst exponential-mechanism work per group
// (dpplan.QuantileCellWeight; attack round 64: 600 medians over a grid of
// 2¹⁴ buckets took 8.5 s of proxy CPU after their charge). Groups of
// private keys come from the data: an answer holds at most
// dpplan.MaxSelectedGroups of them, and their grids are fitted so that it
// holds privateQuantileGroups, or as many as fit at the coarsest grid.
func fitQuantileGrids(p *Plan) {
	groups := privateQuantileGroups
	if !p.PrivateGroups() {
		groups = dpplan.AnswerGroups(p)
	}
	other, n := 0, 0
	for _, m := range p.Measures {
		if m.Kind == MeasureQuantile && m.Quantile != nil {
			n++
		} else {
			other++
		}
	}
	if p.MinUnits > 0 {
		other++
	}
	if n == 0 {
		return
	}
	per := (dpplan.MaxAnswerCells/groups - other) / n
	maxB := dpplan.QuantileBucketsFor(per)
	if per < 1 || maxB < minQuantileBuckets {
		if !p.PrivateGroups() || other+n*dpplan.QuantileCellWeight(minQuantileBuckets) > dpplan.MaxAnswerCells {
			return // refused before the charge (release checkAnswerCells)
		}
		// A private key: fewer than privateQuantileGroups fit, at the
		// coarsest grid (dpplan.MaxSelectedGroups holds as many as do).
		maxB = minQuantileBuckets
	}
	for i, m := range p.Measures {
		if q := m.Quantile; q != nil && q.Buckets > maxB {
			cp := *q
			cp.Buckets, cp.Width = quantileGridAtMost(q.Type, m.Lower, m.Upper, maxB)
			p.Measures[i].Quantile = &cp
		}
	}
}

// isOrderedSetCall reports whether the function call at normalized offset
// off was written percentile_cont|percentile_disc ( number ) WITHIN GROUP
// ( ORDER BY …: the normalizer rewrites exactly that form into a plain call
// (orderedSetAgg); a plain call written by the analyst is refused.
func (b *builder) isOrderedSetCall(off int) bool {
	pos := b.norm.srcPos(off)
	toks, err := pgsql.LexN(b.src[pos:], 6)
	if err != nil || len(toks) < 6 {
		return false
	}
	return toks[1].IsPunct("(") && toks[2].Kind == pgsql.TokNumber && toks[3].IsPunct(")") && toks[4].Is("within") && toks[5].Is("group")
}

const quantileHint = "write percentile_cont(0.5) WITHIN GROUP (ORDER BY col), percentile_disc(q) WITHIN GROUP (ORDER BY expr), MIN(col) or MAX(expr) over columns with bounds in the policy (expr: bounded columns with + - * /, CASE, COALESCE, NULLIF, LEAST, GREATEST, ABS)"

// orderedSetAgg normalizes fn ( q ) WITHIN GROUP ( ORDER BY col [ASC] )
// starting at toks[i] (the function name) into "fn"(?, col): the TiDB
// parser does not read WITHIN GROUP. The fraction must be a numeric literal
// and the ordering a plain column or an expression; anything else is refused with its
// position. It returns the index of the last token consumed.
//
// An expression instead of the column (quantile_expr.go) is left to the
// main loop, which normalizes it like any other expression: open is then
// true and the returned index is that of BY.
func (n *normalized) orderedSetAgg(toks []pgsql.Token, i int) (last int, open bool, err error) {
	src := n.src
	at := func(k int) pgsql.Token {
		if k < len(toks) {
			return toks[k]
		}
		return pgsql.Token{Kind: pgsql.TokPunct, Pos: len(src), End: len(src)}
	}
	fn := toks[i].Val
	if at(i+2).Kind == pgsql.TokNumber && at(i+3).IsPunct(",") {
		return 0, false, pgerr.New("42809", "WITHIN GROUP is required for ordered-set aggregate %s", fn).
			WithPosition(pgsql.CharPos(src, toks[i].Pos)).WithHint("%s", quantileHint)
	}
	if at(i+2).Kind != pgsql.TokNumber || !at(i+3).IsPunct(")") {
		return 0, false, pgerr.New(pgerr.FeatureNotSupported, "%s needs one numeric literal fraction", fn).
			WithPosition(pgsql.CharPos(src, at(i+2).Pos)).WithHint("%s", quantileHint)
	}
	if !at(i + 4).Is("within") {
		return 0, false, pgerr.New(pgerr.FeatureNotSupported, "%s needs WITHIN GROUP (ORDER BY col)", fn).
			WithPosition(pgsql.CharPos(src, at(i+4).Pos)).WithHint("%s", quantileHint)
	}
	if !at(i+5).Is("group") || !at(i+6).IsPunct("(") || !at(i+7).Is("order") || !at(i+8).Is("by") {
		return 0, false, pgsql.SyntaxErr(src, at(i+5).Pos, "syntax error in WITHIN GROUP: expected GROUP (ORDER BY col)").WithHint("%s", quantileHint)
	}
	n.pieces = append(n.pieces, piece{text: pgemit.QuoteIdent(fn), pos: toks[i].Pos, lit: -1, word: true})
	n.pieces = append(n.pieces, piece{text: "(", pos: at(i + 1).Pos, lit: -1})
	n.lits = append(n.lits, literal{kind: litNumber, val: at(i + 2).Val, pos: at(i + 2).Pos})
	n.pieces = append(n.pieces, piece{text: "?", pos: at(i + 2).Pos, lit: len(n.lits) - 1, word: true})
	n.pieces = append(n.pieces, piece{text: ",", pos: at(i + 3).Pos, lit: -1})
	k := i + 9
	if !plainOrderBy(toks, k) {
		return n.orderedSetExpr(toks, i, k) // quantile_expr.go
	}
	// col: name [. name [. name]]
	for {
		t := at(k)
		if t.Kind != pgsql.TokIdent {
			return 0, false, pgerr.New(pgerr.FeatureNotSupported, "WITHIN GROUP orders by a plain column only").
				WithPosition(pgsql.CharPos(src, t.Pos)).WithHint("%s", quantileHint)
		}
		n.pieces = append(n.pieces, piece{text: pgemit.QuoteIdent(t.Val), pos: t.Pos, lit: -1, word: true})
		k++
		if !at(k).IsPunct(".") {
			break
		}
		n.pieces = append(n.pieces, piece{text: ".", pos: at(k).Pos, lit: -1})
		k++
	}
	switch {
	case at(k).Is("asc"):
		k++
	case at(k).Is("desc"):
		return 0, false, pgerr.New(pgerr.FeatureNotSupported, "WITHIN GROUP (ORDER BY … DESC) is not supported").
			WithPosition(pgsql.CharPos(src, at(k).Pos)).WithHint("order ascending and use the complementary fraction, e.g. %s(0.9) instead of %s(0.1) … DESC", fn, fn)
	}
	if !at(k).IsPunct(")") {
		return 0, false, pgerr.New(pgerr.FeatureNotSupported, "WITHIN GROUP orders by one plain column only").
			WithPosition(pgsql.CharPos(src, at(k).Pos)).WithHint("%s", quantileHint)
	}
	n.pieces = append(n.pieces, piece{text: ")", pos: at(k).Pos, lit: -1})
	if at(k+1).Is("filter") || at(k+1).Is("over") {
		return 0, false, pgerr.New(pgerr.FeatureNotSupported, "%s after WITHIN GROUP is not supported", strings.ToUpper(at(k+1).Val)).
			WithPosition(pgsql.CharPos(src, at(k+1).Pos)).WithHint("move the condition to WHERE")
	}
	return k, false, nil
}

// orderedSet plans percentile_cont / percentile_disc (as normalized by
// orderedSetAgg).
func (b *builder) orderedSet(fc *ast.FuncCallExpr, fn string) (aggSpec, Output, error) {
	if !b.isOrderedSetCall(fc.OriginTextPosition()) || len(fc.Args) != 2 {
		return aggSpec{}, Output{}, b.errAt(fc, "42809", "WITHIN GROUP is required for ordered-set aggregate %s", fn).
			WithHint("%s", quantileHint)
	}
	l, ok := b.lit(fc.Args[0])
	if !ok || l.kind != litNumber {
		return aggSpec{}, Output{}, b.errAt(fc, pgerr.FeatureNotSupported, "%s needs a numeric literal fraction", fn).WithHint("%s", quantileHint)
	}
	q, err := strconv.ParseFloat(l.val, 64)
	if err != nil || math.IsNaN(q) || q < 0 || q > 1 {
		return aggSpec{}, Output{}, pgerr.New("22003", "percentile value %s is not between 0 and 1", l.val).
			WithPosition(pgsql.CharPos(b.src, l.pos)).WithHint("write a fraction such as 0.5")
	}
	arg := fc.Args[1]
	if p, ok := arg.(*ast.ParenthesesExpr); ok {
		arg = p.Expr
	}
	c, ok := arg.(*ast.ColumnNameExpr)
	if !ok {
		return b.quantileOfExpr(arg, fn, q, fn == "percentile_cont", nil) // quantile_expr.go
	}
	return b.quantileOf(c, fn, q, fn == "percentile_cont", nil)
}

// minMax plans MIN(col) and MAX(col) as the quantiles 0 and 1
// (percentile_disc(0) and percentile_disc(1) are the minimum and maximum).
func (b *builder) minMax(x *ast.AggregateFuncExpr, fn string) (aggSpec, Output, error) {
	arg, err := b.oneArg(x, fn)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	q := 0.0
	if fn == "max" {
		q = 1
	}
	// MIN(col) FILTER (WHERE cond): only the rows that satisfy cond take
	// part (the emitter's row value is NULL elsewhere, dpplan/bounds.go).
	filter, err := b.aggFilter(x)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	c, ok := arg.(*ast.ColumnNameExpr)
	if !ok {
		return b.quantileOfExpr(arg, fn, q, false, filter) // quantile_expr.go
	}
	return b.quantileOf(c, fn, q, false, filter)
}

// quantileOf checks the column and adds the quantile measure.
func (b *builder) quantileOf(c *ast.ColumnNameExpr, fn string, q float64, cont bool, filter dpplan.Pred) (aggSpec, Output, error) {
	shown := strings.ToUpper(fn)
	// Joins and private group keys: see join_quantile.go.
	ci, err := b.column(c)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	if ci.unit {
		return aggSpec{}, Output{}, b.errAt(c, pgerr.FeatureNotSupported, "%s of the unit column %s is not supported", shown, ci.name).
			WithHint("%s", quantileHint)
	}
	typ := ci.col.Type
	if !typ.Numeric() && typ != policy.TypeDate {
		return aggSpec{}, Output{}, b.errAt(c, pgerr.FeatureNotSupported, "%s(%s) needs a numeric or date column; %s is %s", shown, ci.name, ci.name, typ).
			WithHint("%s", quantileHint)
	}
	if cont && typ == policy.TypeDate {
		// PostgreSQL has no percentile_cont over dates either.
		return aggSpec{}, Output{}, b.errAt(c, "42883", "function percentile_cont(numeric, date) does not exist").
			WithHint("use percentile_disc(q) WITHIN GROUP (ORDER BY %s) for dates", ci.name)
	}
	if !ci.col.HasBounds || !(ci.col.UpperNum > ci.col.LowerNum) {
		return aggSpec{}, Output{}, b.errAt(c, pgerr.FeatureNotSupported, "%s(%s) needs bounds: the policy declares no lower < upper for %s", shown, ci.name, ci.name).
			WithHint("ask the data steward to declare lower and upper for %s", ci.name)
	}
	lower, upper := ci.col.LowerNum, ci.col.UpperNum
	buckets, width := quantileGrid(typ, lower, upper)
	m := Measure{Kind: MeasureQuantile, Column: ci.name, Lower: lower, Upper: upper, Filter: filter, Quantile: &Quantile{
		Func: fn, Q: q, Cont: cont, Type: typ,
		Buckets: buckets, Width: width, Rows: b.table.MaxRowsPerUnit,
	}}
	m = dpplan.MeasureBounds(b.table, m, ci.col)
	idx := -1
	for i, have := range b.measures {
		if have.Kind == MeasureQuantile && have.Column == m.Column && samePred(have.Filter, m.Filter) && *have.Quantile == *m.Quantile {
			idx = i
		}
	}
	if idx < 0 {
		b.measures = append(b.measures, m)
		idx = len(b.measures) - 1
	}
	pgType := "float8" // percentile_cont returns double precision
	if !cont {
		pgType = quantilePGType(typ)
		switch ci.col.PGType {
		case "int2", "int4", "int8", "numeric", "float4", "float8", "date":
			// percentile_disc, MIN and MAX have the column's own type
			// (an int4 column's MAX is int4, not int8).
			pgType = ci.col.PGType
		}
	}
	spec := aggSpec{fn: fn + "(" + strconv.FormatFloat(q, 'g', -1, 64) + ")", col: ci.name, filter: filter}
	return spec, Output{Name: fn, Kind: OutputQuantile, Measure: idx, PGType: pgType, Lower: lower, Upper: upper}, nil
}

// quantilePGType is the type of percentile_disc, MIN and MAX when the
// column's type in the database is not known: int columns are reported as
// int8, which holds every int type.
func quantilePGType(t policy.Type) string {
	switch t {
	case policy.TypeInt:
		return "int8"
	case policy.TypeFloat:
		return "float8"
	case policy.TypeDate:
		return "date"
	}
	return "numeric"
}

// isOrderedSetName reports whether name is an ordered-set aggregate that
// dpproxy answers.
func isOrderedSetName(name string) bool {
	name = strings.ToLower(name)
	return name == "percentile_cont" || name == "percentile_disc"
}
