// Privacy-critical: needs DP review.

package rewrite

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
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
			if err := checkRowLiteral(strings.Trim(s, "()"), v); err != nil {
				return rowExpr{}, b.errAt(e, "22003", "%s", err.Error()).
					WithHint("inside an aggregate use constants with at most %d significant digits between %g and %g in magnitude (or 0)", maxLiteralDigits, minLiteralMagnitude, maxLiteralMagnitude)
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
			r := rowExpr{sql: "(- " + a.sql + ")", iv: sensitivity.Neg(a.iv), divDepth: a.divDepth}
			return r, b.checkRowWork(x, r)
		}
	case *ast.BinaryOperationExpr:
		return b.rowBinary(x)
	case *ast.CaseExpr:
		return b.rowCase(x)
	case *ast.FuncCallExpr:
		r, err := b.rowFunc(x)
		if err != nil {
			return r, err
		}
		return r, b.checkRowWork(x, r)
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
	c := pgemit.QuoteIdent(ci.name)
	return rowExpr{
		sql: "(CASE WHEN " + c + " IS NULL THEN NULL ELSE " + pgemit.ClampSQL(b.table, ci.name) + " END)",
		iv:  sensitivity.Range(lo, hi, ci.col.Type == policy.TypeInt, true),
	}, nil
}

func (b *builder) rowBinary(x *ast.BinaryOperationExpr) (rowExpr, error) {
	r, err := b.rowBinaryOp(x)
	if err != nil {
		return r, err
	}
	return r, b.checkRowWork(x, r)
}

func (b *builder) rowBinaryOp(x *ast.BinaryOperationExpr) (rowExpr, error) {
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
	// The clamp below writes the quotient three times: count it as three
	// operations (maxRowOps).
	b.rowOps += 2
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

// Bounded work and no overflow inside expressions (issue 14, found by an
// attacker): the checks of a measure's final interval (maxMagnitude in
// build.go) do not stop an intermediate value from overflowing numeric —
// (age + 1) * 1e999 * … * 1e-999 * … is small at the end but raises 22003
// on the rows where age is not NULL, after the charge — or a chain of
// 200-digit constants from costing seconds per row, only on the rows a
// CASE selects (a timing oracle). So inside aggregates
//
//   - a constant has at most maxLiteralDigits significant digits and a
//     magnitude in [minLiteralMagnitude, maxLiteralMagnitude] (or is 0);
//   - every operation's interval stays within ±maxMagnitude, so no
//     intermediate value can approach numeric's range;
//   - a query has at most maxRowOps arithmetic operations inside its
//     aggregates, so the digits of any intermediate value (the scale of a
//     product is the sum of its factors' scales) and the work per row are
//     bounded by a small constant.
const (
	maxLiteralDigits    = 30
	maxLiteralMagnitude = 1e30
	minLiteralMagnitude = 1e-30
	maxRowOps           = 64
)

// checkRowLiteral checks a constant inside an aggregate against the
// bounds above; text is its decimal form as the normalizer wrote it.
func checkRowLiteral(text string, v *big.Rat) error {
	mant := strings.TrimLeft(strings.ToLower(text), "+-")
	if i := strings.IndexByte(mant, 'e'); i >= 0 {
		mant = mant[:i]
	}
	mant = strings.Trim(strings.Replace(mant, ".", "", 1), "0")
	if len(mant) > maxLiteralDigits {
		return fmt.Errorf("constant %s has more than %d significant digits", text, maxLiteralDigits)
	}
	if v.Sign() == 0 {
		return nil
	}
	a := new(big.Rat).Abs(v)
	if a.Cmp(maxLiteralRat) > 0 || a.Cmp(minLiteralRat) < 0 {
		return fmt.Errorf("constant %s is out of range inside an aggregate", text)
	}
	return nil
}

// The bounds above as exact rationals, made once.
var (
	maxLiteralRat   = exactRat(maxLiteralMagnitude)
	minLiteralRat   = exactRat(minLiteralMagnitude)
	maxMagnitudeRat = exactRat(maxMagnitude)
)

// exactRat is the decimal a float64 constant is written as (1e-30 exactly,
// not the nearest binary fraction).
func exactRat(f float64) *big.Rat {
	r, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	return r
}

// checkRowWork counts an operation against maxRowOps and checks that its
// interval stays within ±maxMagnitude (see above).
func (b *builder) checkRowWork(at ast.Node, r rowExpr) error {
	b.rowOps++
	if b.rowOps > maxRowOps {
		return b.errAt(at, "54001", "more than %d arithmetic operations inside the aggregates of one query", maxRowOps).
			WithHint("simplify the expressions, or split the query")
	}
	if r.iv.Empty() {
		return nil
	}
	limit := maxMagnitudeRat
	for _, x := range []*big.Rat{r.iv.Lo, r.iv.Hi} {
		if x != nil && new(big.Rat).Abs(x).Cmp(limit) > 0 {
			return b.errAt(at, "22003", "an intermediate value of this expression can exceed %g in magnitude", maxMagnitude).
				WithHint("rescale the expression so that every step stays below %g, e.g. (cost / 1000.0) * age", maxMagnitude)
		}
	}
	return nil
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
		var c dpplan.Pred
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
		// A condition's comparisons and LIKEs count towards maxRowOps
		// too: they are evaluated per row (on the rows an enclosing CASE
		// selects, for a nested CASE).
		b.rowOps += dpplan.PredWork(c)
		s.WriteString(" WHEN " + pgemit.PredSQL(c) + " THEN " + v.sql)
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
	r := rowExpr{sql: s.String(), iv: sensitivity.Union(ivs...), divDepth: depth}
	return r, b.checkRowWork(x, r)
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
	b.rowOps += len(x.Args) - 1 // each argument is evaluated per row (maxRowOps)
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
func ratConst(r *big.Rat) string { return pgemit.NumericConst(decimalText(r)) }

// decimalText writes a rational with a finite decimal expansion (its
// reduced denominator is 2^a·5^b) exactly, with max(a, b) digits after
// the point. It panics on other rationals: every interval endpoint is a
// decimal (policy bounds and literals are; + − × keep it so; Div rounds to
// decimals; a midpoint of decimals is one).
func decimalText(r *big.Rat) string {
	d := new(big.Int).Set(r.Denom())
	// The factors 2 by the trailing zero bits, the factors 5 by dividing
	// by 5^64 while it divides, then by 5: linear in the denominator's
	// size (one factor at a time was quadratic, and a chain of tiny
	// constants made planning take minutes).
	twos := int(d.TrailingZeroBits())
	d.Rsh(d, uint(twos))
	fives := 0
	rem := new(big.Int)
	for _, step := range []struct {
		p *big.Int
		n int
	}{{new(big.Int).Exp(big.NewInt(5), big.NewInt(64), nil), 64}, {big.NewInt(5), 1}} {
		for {
			q, m := new(big.Int).QuoRem(d, step.p, rem)
			if m.Sign() != 0 {
				break
			}
			d, fives = q, fives+step.n
		}
	}
	if d.Cmp(big.NewInt(1)) != 0 {
		panic("rewrite: decimalText of a non-decimal rational")
	}
	return r.FloatString(max(twos, fives))
}
