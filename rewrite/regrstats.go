package rewrite

import (
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// covar_pop, covar_samp and the regr_* aggregates but regr_r2 from noisy
// sufficient statistics (issues 29 and 31).
//
// Each is a function of sums over the rows where both arguments are not
// NULL (the rows PostgreSQL's two-argument aggregates read):
//
//	n = COUNT(x), Sx = SUM(x), Sy = SUM(y), Sxy = SUM(x*y), Sxx = SUM(x*x),
//	Syy = SUM(y*y), each FILTER (WHERE x IS NOT NULL AND y IS NOT NULL).
//
// With C = n·Sxy − Sx·Sy, Dx = n·Sxx − Sx² and Dy = n·Syy − Sy² (n² times
// the covariance and the variances), PostgreSQL's definitions
// (src/backend/utils/adt/float.c, float8_covar_pop and its neighbours,
// which accumulate the centred sums C/n, Dx/n and Dy/n) are
//
//	covar_pop      = C / n²                 NULL when n = 0
//	covar_samp     = C / (n·(n − 1))        NULL when n < 2
//	regr_slope     = C / Dx                 NULL when Dx = 0
//	regr_intercept = (Sy·Sxx − Sx·Sxy) / Dx NULL when Dx = 0
//	regr_sxx       = Dx / n, regr_syy = Dy / n, regr_sxy = C / n
//	regr_avgx      = Sx / n, regr_avgy = Sy / n          NULL when n = 0
//	regr_count     = n (bigint; a DP count like COUNT(x) FILTER (…))
//
// Each sum is an ordinary DP measure (its row value's interval bounds its
// sensitivity, dpplan.ValueInterval: x·y and x·x of bounded columns) and
// each formula is post-processing of the released sums, so nothing new is
// argued. Equal sums are one measure, shared by every such aggregate of
// the same columns in the query. The released count n is a whole number,
// so covar_samp's n·(n − 1) is 0, and the answer NULL (a zero divisor,
// dpplan.Expr.Eval), exactly when n < 2. The NOTICE states no half-width
// for these (expressions over aggregates).
//
// corr and regr_r2 stay with sample-and-aggregate (sampleagg.go): their
// natural output ranges make its noise scale-free, and from sums they
// were 10× less accurate on the demo and 3× on PUMS (BENCHMARKS.md,
// "corr, covariances and regression from sums"). The covariances are the
// reverse: sample-and-aggregate clips each block to ±(range of x)·(range
// of y)/4, and from sums they were 6× more accurate on PUMS.

// regrFuncs are the two-argument statistics planned from sums.
var regrFuncs = map[string]bool{
	"covar_pop": true, "covar_samp": true, "regr_slope": true, "regr_intercept": true,
	"regr_sxx": true, "regr_syy": true, "regr_sxy": true, "regr_avgx": true, "regr_avgy": true,
	"regr_count": true,
}

// regrFromSums rewrites those statistics in the select list into
// expressions over sums. It returns the fields rewritten whose outputs are
// float8, PostgreSQL's type (regr_count is a count, int8).
func (b *builder) regrFromSums(sel *ast.SelectStmt) (map[*ast.SelectField]bool, error) {
	if sel.Fields == nil {
		return nil, nil
	}
	var done map[*ast.SelectField]bool
	for i, f := range sel.Fields.Fields {
		fc, ok := f.Expr.(*ast.FuncCallExpr)
		if !ok {
			continue
		}
		name := strings.ToLower(fc.FnName.O)
		if !regrFuncs[name] {
			continue
		}
		e, err := b.regrCall(fc)
		if err != nil {
			return nil, err
		}
		if b.regrOutputs == nil {
			b.regrOutputs = map[string]int{}
		}
		if _, dup := b.regrOutputs[regrKey(fc)]; !dup {
			b.regrOutputs[regrKey(fc)] = i // ORDER BY covar_pop(y, x) (build_order.go)
		}
		f.Expr = e
		if f.AsName.O == "" {
			f.AsName = ast.NewCIStr(name)
		}
		if name == "regr_count" {
			continue
		}
		if done == nil {
			done = map[*ast.SelectField]bool{}
		}
		done[f] = true
	}
	return done, nil
}

// regrKey names a statistic call whose arguments are columns (regrCall),
// so that ORDER BY can find it in the select list.
func regrKey(fc *ast.FuncCallExpr) string {
	k := strings.ToLower(fc.FnName.O)
	for _, a := range fc.Args {
		if c, ok := unparen(a).(*ast.ColumnNameExpr); ok {
			k += "|" + c.Name.Table.L + "." + c.Name.Name.L
		}
	}
	return k
}

// regrCall checks a call of one of regrFuncs and returns its expression
// over the sums (also for calls inside expressions over aggregates and
// HAVING: arith).
func (b *builder) regrCall(fc *ast.FuncCallExpr) (ast.ExprNode, error) {
	name := strings.ToLower(fc.FnName.O)
	if len(fc.Args) != 2 {
		return nil, b.errAt(fc, "42883", "function %s with %d arguments does not exist", name, len(fc.Args)).
			WithHint("%s takes two columns: %s(y, x)", name, name)
	}
	for _, a := range fc.Args {
		a = unparen(a)
		cn, ok := a.(*ast.ColumnNameExpr)
		if !ok {
			// The rows read are those where both are not NULL, a
			// condition on the columns themselves.
			return nil, b.errAt(a, pgerr.FeatureNotSupported, "expressions inside %s are not supported", name).
				WithHint("pass two bounded numeric columns, e.g. %s(cost, age)", name)
		}
		// PostgreSQL has the statistics of float8 arguments only (numbers
		// cast to it): a text or date column is 42883, also for
		// regr_count, which reads no value.
		if ci, err := b.column(cn); err == nil && ci.col != nil && !ci.col.Type.Numeric() {
			return nil, b.errAt(a, "42883", "function %s does not take a %s argument (%s)", name, ci.col.Type, ci.name).
				WithHint("pass two bounded numeric columns, e.g. %s(cost, age)", name)
		}
	}
	return b.regrExpr(name, fc.Args[0], fc.Args[1]), nil
}

// regrExpr is the expression of statistic name(y, x) over the sums.
func (b *builder) regrExpr(name string, y, x ast.ExprNode) ast.ExprNode {
	cond := &ast.BinaryOperationExpr{Op: opcode.LogicAnd,
		L: &ast.IsNullExpr{Expr: x, Not: true}, R: &ast.IsNullExpr{Expr: y, Not: true}}
	agg := func(fn string, arg ast.ExprNode) ast.ExprNode {
		a := &ast.AggregateFuncExpr{F: fn, Args: []ast.ExprNode{arg}}
		b.filters[a] = cond
		return a
	}
	bin := func(op opcode.Op, l, r ast.ExprNode) ast.ExprNode {
		return &ast.BinaryOperationExpr{Op: op, L: l, R: r}
	}
	lit := func(v string) ast.ExprNode {
		e := ast.NewValueExpr(v, "", "")
		if b.synthLits == nil {
			b.synthLits = map[ast.ExprNode]literal{}
		}
		b.synthLits[e] = literal{kind: litNumber, val: v}
		return e
	}
	// Each use gets its own node: a node is planned once per use.
	n := func() ast.ExprNode { return agg(ast.AggFuncCount, x) }
	sx := func() ast.ExprNode { return agg(ast.AggFuncSum, x) }
	sy := func() ast.ExprNode { return agg(ast.AggFuncSum, y) }
	sxy := func() ast.ExprNode { return agg(ast.AggFuncSum, bin(opcode.Mul, x, y)) }
	sxx := func() ast.ExprNode { return agg(ast.AggFuncSum, bin(opcode.Mul, x, x)) }
	syy := func() ast.ExprNode { return agg(ast.AggFuncSum, bin(opcode.Mul, y, y)) }
	// × 1.0: quotients of integer-valued sums are exact, not PostgreSQL's
	// integer division (arith refuses that).
	exact := func(e ast.ExprNode) ast.ExprNode { return bin(opcode.Mul, e, lit("1.0")) }
	c := func() ast.ExprNode {
		return bin(opcode.Minus, bin(opcode.Mul, n(), sxy()), bin(opcode.Mul, sx(), sy()))
	}
	dx := func() ast.ExprNode {
		return bin(opcode.Minus, bin(opcode.Mul, n(), sxx()), bin(opcode.Mul, sx(), sx()))
	}
	dy := func() ast.ExprNode {
		return bin(opcode.Minus, bin(opcode.Mul, n(), syy()), bin(opcode.Mul, sy(), sy()))
	}
	perRow := func(e ast.ExprNode) ast.ExprNode { return bin(opcode.Div, exact(e), n()) }
	switch name {
	case "regr_count":
		return n()
	case "regr_avgx":
		return perRow(sx())
	case "regr_avgy":
		return perRow(sy())
	case "regr_sxx":
		return perRow(dx())
	case "regr_syy":
		return perRow(dy())
	case "regr_sxy":
		return perRow(c())
	case "covar_pop":
		return bin(opcode.Div, exact(c()), bin(opcode.Mul, n(), n()))
	case "covar_samp":
		return bin(opcode.Div, exact(c()), bin(opcode.Mul, n(), bin(opcode.Minus, n(), lit("1"))))
	case "regr_slope":
		return bin(opcode.Div, exact(c()), dx())
	default: // regr_intercept
		num := bin(opcode.Minus, bin(opcode.Mul, sy(), sxx()), bin(opcode.Mul, sx(), sxy()))
		return bin(opcode.Div, exact(num), dx())
	}
}
