package rewrite

import (
	"math/big"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// Expressions inside aggregates (SUM(cost * 1.1), AVG(CASE WHEN … END),
// COUNT(NULLIF(age, 0)) …) are translated here into a dpplan.Value, the
// typed row value that dpplan bounds (dpplan.ValueInterval, whose comment
// states the soundness argument) and pgemit writes as SQL
// (pgemit.ValueSQL). This file only translates: a mistake here changes
// which expression is answered, never whether the answer is bounded.

// rowExprHint lists what may appear inside an aggregate.
const rowExprHint = "inside an aggregate use bounded numeric columns, numeric constants, + - * /, CASE WHEN … THEN … ELSE … END, COALESCE, NULLIF, LEAST, GREATEST and ABS, e.g. SUM(CASE WHEN age >= 65 THEN cost ELSE 0 END)"

// maxRowOps caps the per-row work (dpplan.ValueOps: column reads, and
// operators weighed by their operands' digits) inside the aggregates of
// one query, so the digits of any intermediate value and the work per row
// are bounded by a small constant (issue 14, attack round 104).
const maxRowOps = 256

// rowExpr is a planned per-row value and the interval of its non-NULL
// values (dpplan.ValueInterval).
type rowExpr struct {
	val *dpplan.Value
	iv  sensitivity.Interval
}

// rowValue plans an expression inside an aggregate: translates it, bounds
// it and counts its operations against maxRowOps.
func (b *builder) rowValue(e ast.ExprNode) (rowExpr, error) {
	at := map[*dpplan.Value]ast.Node{}
	v, err := b.translateValue(e, at)
	if err != nil {
		return rowExpr{}, err
	}
	iv, err := dpplan.ValueInterval(v)
	if ve, ok := err.(*dpplan.ValueError); ok {
		n := at[ve.Node]
		if n == nil {
			n = e
		}
		return rowExpr{}, b.valueErr(n, ve)
	} else if err != nil {
		return rowExpr{}, err
	}
	b.rowOps += dpplan.ValueOps(v)
	if b.rowOps > maxRowOps {
		return rowExpr{}, b.errAt(e, "54001", "the expressions inside the aggregates of this query take %d units of work a row, more than %d", b.rowOps, maxRowOps).
			WithHint("simplify the expressions, or split the query: each column read counts 1, each operator 1 or more by the digits of its operands (long constants, products of decimals), and a division's operands twice")
	}
	return rowExpr{val: v, iv: iv}, nil
}

// valueErr is the error of a refused node, with its hint.
func (b *builder) valueErr(at ast.Node, ve *dpplan.ValueError) error {
	switch ve.Kind {
	case dpplan.ErrConstDigits, dpplan.ErrConstRange:
		return b.errAt(at, "22003", "%s", ve.Error()).
			WithHint("inside an aggregate use constants with at most %d significant digits between %g and %g in magnitude (or 0)", dpplan.MaxConstDigits, dpplan.MinConstMagnitude, dpplan.MaxConstMagnitude)
	case dpplan.ErrMagnitude:
		return b.errAt(at, "22003", "%s", ve.Error()).
			WithHint("rescale the expression so that every step stays below %g, e.g. (cost / 1000.0) * age", dpplan.MaxMagnitude)
	case dpplan.ErrIntDivision:
		return b.errAt(at, pgerr.FeatureNotSupported, "%s", ve.Error()).
			WithHint("PostgreSQL would truncate it; multiply by 1.0 for an exact quotient, e.g. SUM(age * 1.0 / 10)")
	case dpplan.ErrDivisorNearZero:
		return b.errAt(at, pgerr.FeatureNotSupported, "%s", ve.Error()).
			WithHint("bound the divisor away from zero, e.g. x / GREATEST(col, 1), or divide by an integer column (x / NULLIF(n, 0))")
	case dpplan.ErrDivDepth:
		return b.errAt(at, pgerr.FeatureNotSupported, "%s", ve.Error()).
			WithHint("simplify the expression, e.g. multiply the divisors: a / (b * c) instead of a / b / c")
	}
	return pgerr.New(pgerr.InternalError, "internal error: %s", ve.Error())
}

// translateValue translates an expression inside an aggregate into a row
// value; at records the syntax node of each value node, for errors.
func (b *builder) translateValue(e ast.ExprNode, at map[*dpplan.Value]ast.Node) (*dpplan.Value, error) {
	v, err := b.translateNode(e, at)
	if v != nil {
		at[v] = e
	}
	return v, err
}

func (b *builder) translateNode(e ast.ExprNode, at map[*dpplan.Value]ast.Node) (*dpplan.Value, error) {
	if l, ok := b.lit(e); ok {
		switch {
		case l.kind == litNull:
			return &dpplan.Value{Op: dpplan.ValNull}, nil
		case l.kind == litNumber && (l.typ == "" || l.typ.Numeric()):
			s, err := b.numberLit(e, l)
			if err != nil {
				return nil, err
			}
			num := strings.Trim(s, "()")
			if _, ok := new(big.Rat).SetString(num); !ok {
				return nil, b.errAt(e, "22P02", "invalid number %q", l.val).WithHint("%s", rowExprHint)
			}
			isInt := !strings.ContainsAny(l.val, ".eE") && l.typ != policy.TypeNumeric && l.typ != policy.TypeFloat
			return &dpplan.Value{Op: dpplan.ValConst, Num: num, Int: isInt}, nil
		}
		return nil, b.errAt(e, pgerr.FeatureNotSupported, "only numeric constants can be used inside aggregates").WithHint("%s", rowExprHint)
	}
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return b.translateValue(x.Expr, at)
	case *ast.ColumnNameExpr:
		return b.rowColumn(x)
	case *ast.UnaryOperationExpr:
		switch x.Op {
		case opcode.Plus:
			return b.translateValue(x.V, at)
		case opcode.Minus:
			return b.valueOf(at, dpplan.ValNeg, nil, x.V)
		}
	case *ast.BinaryOperationExpr:
		op := map[opcode.Op]string{opcode.Plus: dpplan.ValAdd, opcode.Minus: dpplan.ValSub, opcode.Mul: dpplan.ValMul, opcode.Div: dpplan.ValDiv}[x.Op]
		if op == "" {
			return nil, b.errAt(x, pgerr.FeatureNotSupported, "operator %s is not supported inside an aggregate", x.Op).WithHint("%s", rowExprHint)
		}
		return b.valueOf(at, op, nil, x.L, x.R)
	case *ast.CaseExpr:
		return b.rowCase(x, at)
	case *ast.FuncCallExpr:
		return b.rowFunc(x, at)
	case *ast.AggregateFuncExpr:
		return nil, b.errAt(x, "42803", "aggregate function calls cannot be nested").WithHint("%s", aggregateHint)
	}
	return nil, b.errAt(e, pgerr.FeatureNotSupported, "this expression is not supported inside an aggregate").WithHint("%s", rowExprHint)
}

// valueOf translates the operands and builds the node op over them.
func (b *builder) valueOf(at map[*dpplan.Value]ast.Node, op string, when []dpplan.Pred, args ...ast.ExprNode) (*dpplan.Value, error) {
	v := &dpplan.Value{Op: op, When: when}
	for _, a := range args {
		x, err := b.translateValue(a, at)
		if err != nil {
			return nil, err
		}
		v.Args = append(v.Args, x)
	}
	return v, nil
}

// rowColumn is a bounded numeric column, clamped to its policy bounds.
func (b *builder) rowColumn(x *ast.ColumnNameExpr) (*dpplan.Value, error) {
	ci, err := b.column(x)
	if err != nil {
		return nil, err
	}
	switch {
	case ci.unit:
		return nil, b.errAt(x, pgerr.FeatureNotSupported, "the unit column %s cannot be used in an expression inside an aggregate", ci.name).
			WithHint("%s", rowExprHint)
	case !ci.col.Type.Numeric():
		return nil, b.errAt(x, pgerr.FeatureNotSupported, "column %s is %s; only numeric columns can be used as values inside aggregates", ci.name, ci.col.Type).
			WithHint("compare it in a CASE condition instead, e.g. SUM(CASE WHEN %s = … THEN 1 ELSE 0 END)", ci.name)
	case !ci.col.HasBounds:
		return nil, b.errAt(x, pgerr.FeatureNotSupported, "column %s needs bounds: the policy declares no lower/upper for it", ci.name).
			WithHint("ask the data steward to declare lower and upper for %s", ci.name)
	}
	v := &dpplan.Value{Op: dpplan.ValCol, Col: ci.name, Lo: ci.col.Lower, Hi: ci.col.Upper, Int: ci.col.Type == policy.TypeInt}
	if ci.col.PGType == "numeric" && !v.Int {
		v.Scale = ci.col.Scale // the catalog's numeric(p, s); 0 unconstrained
	}
	return v, nil
}

// rowCase translates searched CASE (WHEN cond THEN value … ELSE value END)
// and simple CASE over a column (CASE col WHEN literal THEN value … END).
func (b *builder) rowCase(x *ast.CaseExpr, at map[*dpplan.Value]ast.Node) (*dpplan.Value, error) {
	var when []dpplan.Pred
	var args []ast.ExprNode
	for _, w := range x.WhenClauses {
		var c dpplan.Pred
		var err error
		if x.Value != nil {
			c, err = b.compare(w, x.Value, w.Expr, "=")
		} else {
			c, err = b.pred(w.Expr)
		}
		if err != nil {
			return nil, err
		}
		when = append(when, c)
		args = append(args, w.Result)
	}
	if x.ElseClause != nil {
		args = append(args, x.ElseClause)
	}
	return b.valueOf(at, dpplan.ValCase, when, args...)
}

func (b *builder) rowFunc(x *ast.FuncCallExpr, at map[*dpplan.Value]ast.Node) (*dpplan.Value, error) {
	name := strings.ToLower(x.FnName.O)
	want := map[string][2]int{dpplan.ValCoalesce: {1, 100}, dpplan.ValLeast: {1, 100}, dpplan.ValGreatest: {1, 100}, dpplan.ValAbs: {1, 1}, dpplan.ValNullIf: {2, 2}}[name]
	switch {
	case name == intCastMarker:
		return nil, b.errAt(x, pgerr.FeatureNotSupported, "integer casts of columns are not supported inside an aggregate").
			WithHint("aggregate the column itself (SUM(cost), AVG(cost)); an integer cast of a column is supported in WHERE comparisons")
	case name == atZoneMarker:
		return nil, b.errAt(x, pgerr.FeatureNotSupported, "AT TIME ZONE is not supported inside an aggregate").WithHint("%s", atZoneHint)
	case want[0] == 0:
		return nil, b.errAt(x, pgerr.FeatureNotSupported, "function %s is not supported inside an aggregate", x.FnName.O).WithHint("%s", rowExprHint)
	}
	if len(x.Args) < want[0] || len(x.Args) > want[1] {
		return nil, b.errAt(x, "42883", "function %s with %d arguments does not exist", name, len(x.Args)).WithHint("%s", rowExprHint)
	}
	return b.valueOf(at, name, nil, x.Args...)
}
