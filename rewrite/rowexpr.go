// Privacy-critical: needs DP review.

package rewrite

import (
	"math/big"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// Expressions inside aggregates (SUM(cost * 1.1), AVG(CASE WHEN … END),
// COUNT(NULLIF(age, 0)) …) are planned here into the SQL of one per-row
// value and the interval of that value (sensitivity.Interval).
//
// Soundness rests on two facts:
//
//  1. every column is clamped to its policy bounds in the emitted SQL
//     before it enters the expression (CASE WHEN c IS NULL THEN NULL ELSE
//     LEAST(GREATEST(c::numeric, lower), upper) END), so each leaf lies in
//     the interval the analysis assumes, whatever the data;
//  2. each operation's interval contains every value the operation yields
//     on values of its operands' intervals (sensitivity/interval.go), and
//     + − × of numeric values are exact in PostgreSQL; the one rounding
//     operation, division, is emitted as LEAST(GREATEST(x / NULLIF(y, 0),
//     lo), hi) with the decimal interval sensitivity.Div returned, so a
//     rounded quotient cannot leave it either, and a zero divisor gives
//     NULL instead of an error (no data-dependent error can be raised).
//
// Conditions of CASE are WHERE conditions (pred.go): they read the raw
// columns, which is harmless since they only select which bounded branch
// a row takes. Expressions are numeric only; PostgreSQL's integer division
// (which truncates) is refused rather than emulated.

// rowExprHint lists what may appear inside an aggregate.
const rowExprHint = "inside an aggregate use bounded numeric columns, numeric constants, + - * /, CASE WHEN … THEN … ELSE … END, COALESCE, NULLIF, LEAST, GREATEST and ABS, e.g. SUM(CASE WHEN age >= 65 THEN cost ELSE 0 END)"

// rowExpr is a planned per-row value: SQL from our emitter and the
// interval of its non-NULL values.
type rowExpr struct {
	sql      string
	iv       sensitivity.Interval
	divDepth int // nesting depth of divisions (maxDivDepth)
}

// rowValue plans an expression inside an aggregate.
func (b *builder) rowValue(e ast.ExprNode) (rowExpr, error) {
	if l, ok := b.lit(e); ok {
		switch {
		case l.kind == litNull:
			return rowExpr{sql: "NULL", iv: sensitivity.Null()}, nil
		case l.kind == litNumber && (l.typ == "" || l.typ.Numeric()):
			s, err := b.numberLit(e, l)
			if err != nil {
				return rowExpr{}, err
			}
			v, ok := new(big.Rat).SetString(strings.Trim(s, "()"))
			if !ok {
				return rowExpr{}, b.errAt(e, "22P02", "invalid number %q", l.val).WithHint("%s", rowExprHint)
			}
			isInt := !strings.ContainsAny(l.val, ".eE") && l.typ != policy.TypeNumeric && l.typ != policy.TypeFloat
			return rowExpr{sql: s, iv: sensitivity.Point(v, isInt)}, nil
		}
		return rowExpr{}, b.errAt(e, pgerr.FeatureNotSupported, "only numeric constants can be used inside aggregates").WithHint("%s", rowExprHint)
	}
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return b.rowValue(x.Expr)
	case *ast.ColumnNameExpr:
		return b.rowColumn(x)
	case *ast.UnaryOperationExpr:
		switch x.Op {
		case opcode.Plus:
			return b.rowValue(x.V)
		case opcode.Minus:
			a, err := b.rowValue(x.V)
			if err != nil {
				return rowExpr{}, err
			}
			return rowExpr{sql: "(- " + a.sql + ")", iv: sensitivity.Neg(a.iv), divDepth: a.divDepth}, nil
		}
	case *ast.BinaryOperationExpr:
		return b.rowBinary(x)
	case *ast.CaseExpr:
		return b.rowCase(x)
	case *ast.FuncCallExpr:
		return b.rowFunc(x)
	case *ast.AggregateFuncExpr:
		return rowExpr{}, b.errAt(x, "42803", "aggregate function calls cannot be nested").WithHint("%s", aggregateHint)
	}
	return rowExpr{}, b.errAt(e, pgerr.FeatureNotSupported, "this expression is not supported inside an aggregate").WithHint("%s", rowExprHint)
}

// rowColumn is a bounded numeric column, clamped to its policy bounds.
func (b *builder) rowColumn(x *ast.ColumnNameExpr) (rowExpr, error) {
	ci, err := b.column(x)
	if err != nil {
		return rowExpr{}, err
	}
	switch {
	case ci.unit:
		return rowExpr{}, b.errAt(x, pgerr.FeatureNotSupported, "the unit column %s cannot be used in an expression inside an aggregate", ci.name).
			WithHint("%s", rowExprHint)
	case !ci.col.Type.Numeric():
		return rowExpr{}, b.errAt(x, pgerr.FeatureNotSupported, "column %s is %s; only numeric columns can be used as values inside aggregates", ci.name, ci.col.Type).
			WithHint("compare it in a CASE condition instead, e.g. SUM(CASE WHEN %s = … THEN 1 ELSE 0 END)", ci.name)
	case !ci.col.HasBounds:
		return rowExpr{}, b.errAt(x, pgerr.FeatureNotSupported, "column %s needs bounds: the policy declares no lower/upper for it", ci.name).
			WithHint("ask the data steward to declare lower and upper for %s", ci.name)
	}
	lo, ok1 := new(big.Rat).SetString(ci.col.Lower)
	hi, ok2 := new(big.Rat).SetString(ci.col.Upper)
	if !ok1 || !ok2 || lo.Cmp(hi) > 0 {
		return rowExpr{}, pgerr.New(pgerr.InternalError, "internal error: invalid policy bounds")
	}
	c := quoteIdent(ci.name)
	return rowExpr{
		sql: "(CASE WHEN " + c + " IS NULL THEN NULL ELSE " + clampSQL(b.table, ci.name) + " END)",
		iv:  sensitivity.Range(lo, hi, ci.col.Type == policy.TypeInt, true),
	}, nil
}

func (b *builder) rowBinary(x *ast.BinaryOperationExpr) (rowExpr, error) {
	op := map[opcode.Op]string{opcode.Plus: "+", opcode.Minus: "-", opcode.Mul: "*", opcode.Div: "/"}[x.Op]
	if op == "" {
		return rowExpr{}, b.errAt(x, pgerr.FeatureNotSupported, "operator %s is not supported inside an aggregate", x.Op).WithHint("%s", rowExprHint)
	}
	l, err := b.rowValue(x.L)
	if err != nil {
		return rowExpr{}, err
	}
	r, err := b.rowValue(x.R)
	if err != nil {
		return rowExpr{}, err
	}
	switch op {
	case "+":
		return rowExpr{sql: "(" + l.sql + " + " + r.sql + ")", iv: sensitivity.Add(l.iv, r.iv), divDepth: max(l.divDepth, r.divDepth)}, nil
	case "-":
		return rowExpr{sql: "(" + l.sql + " - " + r.sql + ")", iv: sensitivity.Sub(l.iv, r.iv), divDepth: max(l.divDepth, r.divDepth)}, nil
	case "*":
		return rowExpr{sql: "(" + l.sql + " * " + r.sql + ")", iv: sensitivity.Mul(l.iv, r.iv), divDepth: max(l.divDepth, r.divDepth)}, nil
	}
	if l.iv.Int && r.iv.Int {
		return rowExpr{}, b.errAt(x, pgerr.FeatureNotSupported, "integer division inside an aggregate is not supported").
			WithHint("PostgreSQL would truncate it; multiply by 1.0 for an exact quotient, e.g. SUM(age * 1.0 / 10)")
	}
	q, err := sensitivity.Div(l.iv, r.iv)
	if err != nil {
		return rowExpr{}, b.errAt(x, pgerr.FeatureNotSupported, "the divisor can be arbitrarily close to 0, so the quotient has no bound").
			WithHint("bound the divisor away from zero, e.g. x / GREATEST(col, 1), or divide by an integer column (x / NULLIF(n, 0))")
	}
	s := "(" + l.sql + " / NULLIF(" + r.sql + ", 0))"
	if q.Empty() {
		return rowExpr{sql: "(NULL::numeric)", iv: q}, nil
	}
	depth := max(l.divDepth, r.divDepth) + 1
	if depth > maxDivDepth {
		return rowExpr{}, b.errAt(x, pgerr.FeatureNotSupported, "more than %d nested divisions inside an aggregate are not supported", maxDivDepth).
			WithHint("simplify the expression, e.g. multiply the divisors: a / (b * c) instead of a / b / c")
	}
	// PostgreSQL rounds numeric quotients: clamp to the decimal interval
	// the analysis returned (a no-op up to rounding). GREATEST and LEAST
	// ignore NULLs (GREATEST(NULL, 0) is 0), so a NULL quotient is kept
	// NULL by the CASE.
	return rowExpr{
		sql:      "(CASE WHEN " + s + " IS NULL THEN NULL ELSE LEAST(GREATEST(" + s + ", " + ratConst(q.Lo) + "), " + ratConst(q.Hi) + ") END)",
		iv:       q,
		divDepth: depth,
	}, nil
}

// maxDivDepth bounds nested divisions: the NULL-preserving clamp of a
// quotient repeats its operands' SQL, so the text doubles per level.
const maxDivDepth = 3

// rowCase plans searched CASE (WHEN cond THEN value … ELSE value END) and
// simple CASE over a column (CASE col WHEN literal THEN value … END).
func (b *builder) rowCase(x *ast.CaseExpr) (rowExpr, error) {
	var s strings.Builder
	s.WriteString("(CASE")
	var ivs []sensitivity.Interval
	depth := 0
	for _, w := range x.WhenClauses {
		var c pred
		var err error
		if x.Value != nil {
			c, err = b.compare(w, x.Value, w.Expr, "=")
		} else {
			c, err = b.pred(w.Expr)
		}
		if err != nil {
			return rowExpr{}, err
		}
		v, err := b.rowValue(w.Result)
		if err != nil {
			return rowExpr{}, err
		}
		s.WriteString(" WHEN " + c.sql() + " THEN " + v.sql)
		ivs = append(ivs, v.iv)
		depth = max(depth, v.divDepth)
	}
	if x.ElseClause != nil {
		v, err := b.rowValue(x.ElseClause)
		if err != nil {
			return rowExpr{}, err
		}
		s.WriteString(" ELSE " + v.sql)
		ivs = append(ivs, v.iv)
		depth = max(depth, v.divDepth)
	} else {
		ivs = append(ivs, sensitivity.Null())
	}
	s.WriteString(" END)")
	return rowExpr{sql: s.String(), iv: sensitivity.Union(ivs...), divDepth: depth}, nil
}

func (b *builder) rowFunc(x *ast.FuncCallExpr) (rowExpr, error) {
	name := strings.ToLower(x.FnName.O)
	var args []rowExpr
	var ivs []sensitivity.Interval
	want := map[string][2]int{"coalesce": {1, 100}, "least": {1, 100}, "greatest": {1, 100}, "abs": {1, 1}, "nullif": {2, 2}}[name]
	if want[0] == 0 {
		return rowExpr{}, b.errAt(x, pgerr.FeatureNotSupported, "function %s is not supported inside an aggregate", x.FnName.O).WithHint("%s", rowExprHint)
	}
	if len(x.Args) < want[0] || len(x.Args) > want[1] {
		return rowExpr{}, b.errAt(x, "42883", "function %s with %d arguments does not exist", name, len(x.Args)).WithHint("%s", rowExprHint)
	}
	var sqls []string
	depth := 0
	for _, a := range x.Args {
		v, err := b.rowValue(a)
		if err != nil {
			return rowExpr{}, err
		}
		args = append(args, v)
		ivs = append(ivs, v.iv)
		sqls = append(sqls, v.sql)
		depth = max(depth, v.divDepth)
	}
	call := strings.ToUpper(name) + "(" + strings.Join(sqls, ", ") + ")"
	switch name {
	case "coalesce":
		return rowExpr{sql: call, iv: sensitivity.Coalesce(ivs...), divDepth: depth}, nil
	case "least":
		return rowExpr{sql: call, iv: sensitivity.Least(ivs...), divDepth: depth}, nil
	case "greatest":
		return rowExpr{sql: call, iv: sensitivity.Greatest(ivs...), divDepth: depth}, nil
	case "abs":
		return rowExpr{sql: call, iv: sensitivity.Abs(ivs[0]), divDepth: depth}, nil
	}
	// NULLIF(a, b): a, or NULL when a = b.
	iv := args[0].iv
	iv.MayBeNull = true
	return rowExpr{sql: call, iv: iv, divDepth: depth}, nil
}

// ratConst writes a decimal rational (finite decimal expansion, as
// sensitivity.RoundOut returns) as an exact numeric constant.
func ratConst(r *big.Rat) string { return numericConst(decimalText(r)) }

// decimalText writes a rational with a finite decimal expansion (its
// reduced denominator is 2^a·5^b) exactly, with max(a, b) digits after
// the point. It panics on other rationals: every interval endpoint is a
// decimal (policy bounds and literals are; + − × keep it so; Div rounds to
// decimals; a midpoint of decimals is one).
func decimalText(r *big.Rat) string {
	d := new(big.Int).Set(r.Denom())
	digits := 0
	two, five := big.NewInt(2), big.NewInt(5)
	for d.Cmp(big.NewInt(1)) != 0 {
		switch {
		case new(big.Int).Mod(d, two).Sign() == 0:
			d.Quo(d, two)
			if new(big.Int).Mod(d, five).Sign() == 0 {
				d.Quo(d, five)
			}
		case new(big.Int).Mod(d, five).Sign() == 0:
			d.Quo(d, five)
		default:
			panic("rewrite: decimalText of a non-decimal rational")
		}
		digits++
	}
	return r.FloatString(digits)
}
