package rewrite

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// regr_slope and regr_intercept from noisy sufficient statistics (issue 31).
//
// Sample-and-aggregate (sampleagg.go) clips each block's answer to a public
// output range; the slope and intercept have none that follows from the
// columns' bounds, so it needs SET dp.output_range. Without one, the two
// are answered from sums instead, as PostgreSQL computes them:
//
//	n = COUNT(x), Sx = SUM(x), Sy = SUM(y), Sxy = SUM(x*y), Sxx = SUM(x*x),
//	each FILTER (WHERE x IS NOT NULL AND y IS NOT NULL) (the rows both
//	aggregates read),
//	regr_slope     = (n·Sxy − Sx·Sy) / (n·Sxx − Sx²)
//	regr_intercept = (Sy·Sxx − Sx·Sxy) / (n·Sxx − Sx²)
//
// NULL when the denominator is 0, as in PostgreSQL. Each sum is an ordinary
// DP measure (its row value's interval bounds its sensitivity,
// dpplan.ValueInterval: x·y and x·x of bounded columns), and the ratio is
// post-processing of the released sums, so nothing new is argued; the
// five measures are shared by every regr_slope and regr_intercept of the
// same columns. The NOTICE states no half-width for the ratio (an
// expression over aggregates), and its noise is that of a ratio of noisy
// sums: large when n·Sxx − Sx² is small (x hardly varies).

// regrFromSums rewrites, in the select list, regr_slope(y, x) and
// regr_intercept(y, x) into those expressions when the session set no
// dp.output_range. It returns the fields rewritten (their outputs are
// float8, PostgreSQL's type).
func (b *builder) regrFromSums(sel *ast.SelectStmt) map[*ast.SelectField]bool {
	if b.opts.HasOutputRange || sel.Fields == nil {
		return nil
	}
	var done map[*ast.SelectField]bool
	for _, f := range sel.Fields.Fields {
		fc, ok := f.Expr.(*ast.FuncCallExpr)
		if !ok || len(fc.Args) != 2 {
			continue
		}
		name := strings.ToLower(fc.FnName.O)
		if name != "regr_slope" && name != "regr_intercept" {
			continue
		}
		y, x := fc.Args[0], fc.Args[1]
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
		n := agg(ast.AggFuncCount, x)
		sx, sy := agg(ast.AggFuncSum, x), agg(ast.AggFuncSum, y)
		sxy := agg(ast.AggFuncSum, bin(opcode.Mul, x, y))
		sxx := agg(ast.AggFuncSum, bin(opcode.Mul, x, x))
		zero := ast.NewValueExpr(0, "", "")
		if b.synthLits == nil {
			b.synthLits = map[ast.ExprNode]literal{}
		}
		b.synthLits[zero] = literal{kind: litNumber, val: "0"}
		den := &ast.FuncCallExpr{FnName: ast.NewCIStr("nullif"), Args: []ast.ExprNode{
			bin(opcode.Minus, bin(opcode.Mul, n, sxx), bin(opcode.Mul, sx, sx)), zero}}
		num := bin(opcode.Minus, bin(opcode.Mul, n, sxy), bin(opcode.Mul, sx, sy))
		if name == "regr_intercept" {
			num = bin(opcode.Minus, bin(opcode.Mul, sy, sxx), bin(opcode.Mul, sx, sxy))
		}
		// × 1.0: the quotient of two integer-valued sums is exact, not
		// PostgreSQL's integer division (arith refuses that).
		one := ast.NewValueExpr(1, "", "")
		b.synthLits[one] = literal{kind: litNumber, val: "1.0"}
		f.Expr = bin(opcode.Div, bin(opcode.Mul, num, one), den)
		if f.AsName.O == "" {
			f.AsName = ast.NewCIStr(name)
		}
		if done == nil {
			done = map[*ast.SelectField]bool{}
		}
		done[f] = true
	}
	return done
}
