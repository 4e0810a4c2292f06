package rewrite

import (
	"math"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Quantiles of expressions: percentile_cont(q) WITHIN GROUP (ORDER BY
// expr), percentile_disc(q) WITHIN GROUP (ORDER BY expr), MIN(expr) and
// MAX(expr), where expr is a per-row expression of rowexpr.go (e.g.
// cost / NULLIF(age, 0), cost * 2 + 1).
//
// # Bounded values
//
// The row value is the expression's emitted SQL: every column in it is
// clamped to its policy bounds and every quotient to its decimal interval
// (rowexpr.go), so by the inclusion property of interval arithmetic
// (sensitivity/interval.go) each non-NULL value lies in the exact interval
// [lo, hi] the analysis returns, whatever the data. The measure's bounds
// are that interval rounded outwards to float64 (Lower ≤ lo, hi ≤ Upper),
// and the emitted SQL clamps the value to [Lower, Upper] once more (a
// no-op, kept so that a bucket index can never leave the grid even if an
// interval were wrong). Everything else is the column case of quantile.go
// unchanged: contribution bounding keeps at most R = max_rows_per_unit
// values per (unit, group), so one unit moves every rank-based quantity by
// at most R, and the grid is a function of [Lower, Upper], which come from
// the policy and the query's constants only.
//
// # The grid
//
// The exponential method's grid is the column case's (quantileGrid) over
// [Lower, Upper]: whole-number buckets when every value is an integer
// (PostgreSQL types the expression as an integer), else 256 equal buckets.
// An interval that the grid cannot resolve is refused (quantileExprGrid):
// empty or a single point (the expression is constant), not finite in
// float64, or so wide that adjacent bucket edges round to the same
// float64 or, for integers, beyond 2⁵³ where float64 no longer holds every
// integer.

// quantileExprHint says what a quantile of an expression may be.
const quantileExprHint = "write e.g. percentile_cont(0.5) WITHIN GROUP (ORDER BY cost / NULLIF(age, 0)) or MAX(cost * 2 + 1): " +
	"an expression of bounded numeric columns, numeric constants, + - * /, CASE, COALESCE, NULLIF, LEAST, GREATEST and ABS"

// maxExactInt is 2⁵³: every integer of magnitude up to it is a float64.
const maxExactInt = 1 << 53

// plainOrderBy reports whether the WITHIN GROUP ordering starting at
// toks[k] is a plain column: name [. name [. name]] [ASC|DESC] ")".
func plainOrderBy(toks []pgsql.Token, k int) bool {
	for {
		if k >= len(toks) || toks[k].Kind != pgsql.TokIdent {
			return false
		}
		k++
		if k >= len(toks) || !toks[k].IsPunct(".") {
			break
		}
		k++
	}
	if k < len(toks) && (toks[k].Is("asc") || toks[k].Is("desc")) {
		k++
	}
	return k < len(toks) && toks[k].IsPunct(")")
}

// orderedSetExpr checks fn ( q ) WITHIN GROUP ( ORDER BY expr [ASC] ) whose
// ordering toks[k…] is an expression, after orderedSetAgg has emitted
// "fn"(?, . The expression's tokens are left to the normalizer's main loop
// (it returns the index of BY, with open = true); the closing ")" of WITHIN
// GROUP closes the call, and a trailing ASC is dropped.
func (n *normalized) orderedSetExpr(toks []pgsql.Token, i, k int) (int, bool, error) {
	src := n.src
	fn := toks[i].Val
	depth, end := 0, -1
	for j := k; j < len(toks) && end < 0; j++ {
		switch {
		case toks[j].IsPunct("("):
			depth++
		case toks[j].IsPunct(")") && depth == 0:
			end = j
		case toks[j].IsPunct(")"):
			depth--
		case toks[j].IsPunct(",") && depth == 0:
			return 0, false, pgerr.New(pgerr.FeatureNotSupported, "WITHIN GROUP orders by one expression only").
				WithPosition(pgsql.CharPos(src, toks[j].Pos)).WithHint("%s", quantileExprHint)
		case toks[j].Is("using"):
			return 0, false, pgerr.New(pgerr.FeatureNotSupported, "ORDER BY … USING is not supported").
				WithPosition(pgsql.CharPos(src, toks[j].Pos)).WithHint("%s", quantileExprHint)
		}
	}
	if end < 0 {
		return 0, false, pgsql.SyntaxErr(src, len(src), "syntax error in WITHIN GROUP: expected )").WithHint("%s", quantileHint)
	}
	last := end - 1
	switch {
	case last < k:
		return 0, false, pgsql.SyntaxErr(src, toks[end].Pos, "syntax error in WITHIN GROUP: expected an expression after ORDER BY").WithHint("%s", quantileHint)
	case toks[last].Is("desc"):
		return 0, false, pgerr.New(pgerr.FeatureNotSupported, "WITHIN GROUP (ORDER BY … DESC) is not supported").
			WithPosition(pgsql.CharPos(src, toks[last].Pos)).WithHint("order ascending and use the complementary fraction, e.g. %s(0.9) instead of %s(0.1) … DESC", fn, fn)
	case toks[last].Is("asc"):
		if last == k {
			return 0, false, pgsql.SyntaxErr(src, toks[last].Pos, "syntax error in WITHIN GROUP: expected an expression after ORDER BY").WithHint("%s", quantileHint)
		}
		if n.skipTok == nil {
			n.skipTok = map[int]bool{}
		}
		n.skipTok[last] = true
	}
	if end+1 < len(toks) && (toks[end+1].Is("filter") || toks[end+1].Is("over")) {
		return 0, false, pgerr.New(pgerr.FeatureNotSupported, "%s after WITHIN GROUP is not supported", strings.ToUpper(toks[end+1].Val)).
			WithPosition(pgsql.CharPos(src, toks[end+1].Pos)).WithHint("move the condition to WHERE")
	}
	return i + 8, true, nil
}

// quantileOfExpr plans a quantile of an expression (see the file comment):
// a MeasureQuantile whose row value is the expression.
func (b *builder) quantileOfExpr(e ast.ExprNode, fn string, q float64, cont bool, filter dpplan.Pred) (aggSpec, Output, error) {
	shown := strings.ToUpper(fn)
	// Joins and private group keys as for columns (quantile.go, join.go).
	v, err := b.rowValue(e)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	if v.iv.Empty() {
		return aggSpec{}, Output{}, b.errAt(e, pgerr.FeatureNotSupported, "the expression of %s is always NULL", shown).
			WithHint("%s", quantileExprHint)
	}
	typ := policy.TypeNumeric
	switch {
	case v.iv.Int:
		typ = policy.TypeInt
	case floatExpr(b, e):
		typ = policy.TypeFloat
	}
	lower, upper := sensitivity.RatDown(v.iv.Lo), sensitivity.RatUp(v.iv.Hi)
	if msg := quantileExprGrid(typ, lower, upper); msg != "" {
		return aggSpec{}, Output{}, b.errAt(e, pgerr.FeatureNotSupported, "the expression of %s %s", shown, msg).
			WithHint("bound the expression more tightly (the policy bounds of its columns and its constants give its range), e.g. LEAST(GREATEST(expr, lo), hi); %s", quantileExprHint)
	}
	pgType := "float8" // percentile_cont returns double precision
	if !cont {
		pgType = quantilePGType(typ)
	}
	buckets, width := quantileGrid(typ, lower, upper)
	m := Measure{Kind: MeasureQuantile, Expr: v.val, Lower: lower, Upper: upper, Filter: filter, Quantile: &Quantile{
		Func: fn, Q: q, Cont: cont, Type: typ,
		Buckets: buckets, Width: width, Rows: b.table.MaxRowsPerUnit,
	}}
	m = dpplan.MeasureBounds(b.table, m, nil)
	idx := -1
	for i, have := range b.measures {
		if have.Kind == MeasureQuantile && have.Column == "" && sameValue(have.Expr, m.Expr) && samePred(have.Filter, m.Filter) && *have.Quantile == *m.Quantile {
			idx = i
		}
	}
	if idx < 0 {
		b.measures = append(b.measures, m)
		idx = len(b.measures) - 1
	}
	spec := aggSpec{fn: fn + "(" + strconv.FormatFloat(q, 'g', -1, 64) + ")", expr: v.val, filter: filter}
	return spec, Output{Name: fn, Kind: OutputQuantile, Measure: idx, PGType: pgType, Lower: lower, Upper: upper}, nil
}

// quantileExprGrid returns why the exponential method's grid cannot
// resolve [lower, upper] (see "The grid"), or "".
func quantileExprGrid(typ policy.Type, lower, upper float64) string {
	switch {
	case math.IsInf(lower, 0) || math.IsInf(upper, 0) || math.IsNaN(lower) || math.IsNaN(upper) || math.IsInf(upper-lower, 0):
		return "has a range too wide for a quantile (not finite in double precision)"
	case !(upper > lower):
		return "is constant: its range is a single value"
	case typ == policy.TypeInt && (math.Abs(lower) > maxExactInt || math.Abs(upper) > maxExactInt):
		return "has integer values beyond 2^53, too wide for a quantile's grid"
	}
	buckets, width := quantileGrid(typ, lower, upper)
	last := lower + float64(buckets-1)*width
	// The last bucket starts at last and holds upper (for integers, the
	// integers last … upper).
	if !(width > 0) || lower+width == lower || last+width == last || last > upper || last == upper && typ != policy.TypeInt {
		return "has a range too wide for the resolution of a quantile's grid"
	}
	return ""
}

// floatExpr reports whether PostgreSQL types the value expression e as
// double precision: a float column or a float8 constant among its values
// (float8 wins over numeric and integer in + − × /, CASE, COALESCE,
// LEAST and GREATEST; CASE conditions do not count).
func floatExpr(b *builder, e ast.ExprNode) bool {
	if l, ok := b.lit(e); ok {
		return l.typ == policy.TypeFloat
	}
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return floatExpr(b, x.Expr)
	case *ast.ColumnNameExpr:
		ci, err := b.column(x)
		return err == nil && ci.col != nil && ci.col.Type == policy.TypeFloat
	case *ast.UnaryOperationExpr:
		return floatExpr(b, x.V)
	case *ast.BinaryOperationExpr:
		return floatExpr(b, x.L) || floatExpr(b, x.R)
	case *ast.CaseExpr:
		for _, w := range x.WhenClauses {
			if floatExpr(b, w.Result) {
				return true
			}
		}
		return x.ElseClause != nil && floatExpr(b, x.ElseClause)
	case *ast.FuncCallExpr:
		args := x.Args
		if strings.EqualFold(x.FnName.O, "nullif") && len(args) > 0 {
			args = args[:1] // NULLIF has its first argument's type
		}
		for _, a := range args {
			if floatExpr(b, a) {
				return true
			}
		}
	}
	return false
}
