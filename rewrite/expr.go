package rewrite

import (
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// arithHint is the hint for unsupported expressions over aggregates.
const arithHint = "write + - * /, COALESCE and NULLIF over aggregates and numeric constants, e.g. SUM(cost) / NULLIF(COUNT(*), 0) or COALESCE(SUM(cost), 0)"

// arithInfo describes a planned expression: whether it holds an aggregate,
// and whether PostgreSQL might type it as an integer (then / would
// truncate, which we do not emulate).
type arithInfo struct {
	agg      bool
	maybeInt bool
	// float: PostgreSQL types it float8 (it holds a float8 statistic of
	// regrstats.go, and float8 wins over numeric and integers).
	float bool
}

// constErr is the refusal of a numeric constant beyond a plan's limits
// (dpplan.CheckConst; attack round 73: COUNT(*) * 1e999999 released a
// megabyte a cell after the charge, and width_bucket bounds beyond
// numeric's range failed upstream after it), nil for one within them.
func (b *builder) constErr(at ast.Node, num string) error {
	switch err := dpplan.CheckConst(num); err {
	case nil:
		return nil
	case dpplan.ErrConstDigits, dpplan.ErrConstRange:
		return b.errAt(at, "22003", "constant %s is out of range", pgerr.Truncate(num, 40)).
			WithHint("use numeric constants with at most %d significant digits between %g and %g in magnitude (or 0)", dpplan.MaxConstDigits, dpplan.MinConstMagnitude, dpplan.MaxConstMagnitude)
	default:
		return b.errAt(at, "22P02", "invalid number %s", pgerr.Truncate(num, 40)).WithHint("%s", arithHint)
	}
}

// arith plans arithmetic over aggregates and numeric literals. Each
// aggregate becomes a hidden value (its measures are shared with equal
// aggregates of the select list, so it costs nothing extra then).
func (b *builder) arith(e ast.ExprNode) (*Expr, arithInfo, error) {
	if l, ok := b.lit(e); ok {
		if l.kind != litNumber || l.typ != "" && !l.typ.Numeric() {
			return nil, arithInfo{}, b.errAt(e, pgerr.FeatureNotSupported, "only numeric constants can be combined with aggregates").WithHint("%s", arithHint)
		}
		if err := b.constErr(e, l.val); err != nil {
			return nil, arithInfo{}, err
		}
		isInt := !strings.ContainsAny(l.val, ".eE") && l.typ != "numeric" && l.typ != "float"
		return &Expr{Op: "lit", Lit: strings.Clone(l.val)}, arithInfo{maybeInt: isInt}, nil
	}
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return b.arith(x.Expr)
	case *ast.UnaryOperationExpr:
		if x.Op == opcode.Minus {
			a, info, err := b.arith(x.V)
			if err != nil {
				return nil, arithInfo{}, err
			}
			return &Expr{Op: "neg", Args: []*Expr{a}}, info, nil
		}
		if x.Op == opcode.Plus {
			return b.arith(x.V)
		}
	case *ast.BinaryOperationExpr:
		op := map[opcode.Op]string{opcode.Plus: "+", opcode.Minus: "-", opcode.Mul: "*", opcode.Div: "/"}[x.Op]
		if op == "" {
			break
		}
		l, li, err := b.arith(x.L)
		if err != nil {
			return nil, arithInfo{}, err
		}
		r, ri, err := b.arith(x.R)
		if err != nil {
			return nil, arithInfo{}, err
		}
		if op == "/" && li.maybeInt && ri.maybeInt {
			return nil, arithInfo{}, b.errAt(x, pgerr.FeatureNotSupported, "integer division of aggregates is not supported").
				WithHint("PostgreSQL would truncate it; multiply by 1.0 for an exact quotient, e.g. SUM(age) * 1.0 / COUNT(*)")
		}
		return &Expr{Op: op, Args: []*Expr{l, r}}, arithInfo{agg: li.agg || ri.agg, maybeInt: li.maybeInt && ri.maybeInt, float: li.float || ri.float}, nil
	case *ast.AggregateFuncExpr:
		spec, o, err := b.aggregate(x)
		if err != nil {
			return nil, arithInfo{}, err
		}
		ref := -1
		for i, s := range b.hiddenAggs {
			if s.same(spec) {
				ref = i
			}
		}
		if ref < 0 {
			b.hidden = append(b.hidden, o)
			b.hiddenAggs = append(b.hiddenAggs, spec)
			ref = len(b.hidden) - 1
		}
		// The index is into Outputs ++ Hidden; Outputs is not final yet,
		// so it is offset when the plan is built (hiddenRef).
		maybeInt := o.Kind == OutputCount || o.Kind == OutputSum && b.measures[o.Measure].Integer
		return &Expr{Op: "ref", Ref: hiddenRef(ref)}, arithInfo{agg: true, maybeInt: maybeInt}, nil
	case *ast.FuncCallExpr:
		if regrFuncs[strings.ToLower(x.FnName.O)] {
			// covar_pop(y, x) * 2, HAVING regr_slope(y, x) > 0: the
			// statistic's expression over sums (regrstats.go).
			e, err := b.regrCall(x)
			if err != nil {
				return nil, arithInfo{}, err
			}
			out, info, err := b.arith(e)
			info.float = !strings.EqualFold(x.FnName.O, "regr_count")
			return out, info, err
		}
		if isSampleAggFunc(x.FnName.O) {
			return nil, arithInfo{}, b.errAt(x, pgerr.FeatureNotSupported, "%s cannot be used inside an expression over aggregates", strings.ToLower(x.FnName.O)).
				WithHint("select it alone and compute the expression yourself; %s", sampleAggHint)
		}
		if !isArithFunc(x) {
			break
		}
		// COALESCE(SUM(x), 0), NULLIF(COUNT(*), 0) (Metabase, Looker):
		// post-processing of released values, like + - * /.
		name := strings.ToLower(x.FnName.O)
		if name == "nullif" && len(x.Args) != 2 || len(x.Args) == 0 {
			return nil, arithInfo{}, b.errAt(x, "42883", "function %s with %d arguments does not exist", name, len(x.Args)).WithHint("%s", arithHint)
		}
		out := &Expr{Op: name}
		info := arithInfo{maybeInt: true}
		for _, a := range x.Args {
			ae, ai, err := b.arith(a)
			if err != nil {
				return nil, arithInfo{}, err
			}
			out.Args = append(out.Args, ae)
			info.agg = info.agg || ai.agg
			info.float = info.float || ai.float
			info.maybeInt = info.maybeInt && ai.maybeInt
			if name == "nullif" {
				break // NULLIF(a, b) has a's type
			}
		}
		if name == "nullif" {
			b2, _, err := b.arith(x.Args[1])
			if err != nil {
				return nil, arithInfo{}, err
			}
			out.Args = append(out.Args, b2)
		}
		return out, info, nil
	case *ast.ColumnNameExpr:
		return nil, arithInfo{}, b.errAt(x, pgerr.FeatureNotSupported, "columns outside aggregates cannot be used in expressions over aggregates").
			WithHint("filter rows with WHERE; %s", arithHint)
	}
	return nil, arithInfo{}, b.errAt(e, pgerr.FeatureNotSupported, "this expression over aggregates is not supported").WithHint("%s", arithHint)
}

// isArithFunc reports whether x is a function arith plans over
// aggregates: COALESCE and NULLIF.
func isArithFunc(x *ast.FuncCallExpr) bool {
	switch strings.ToLower(x.FnName.O) {
	case "coalesce", "nullif":
		return true
	}
	return false
}

// hiddenRef marks a reference to Hidden[i] until the number of outputs is
// known (negative values are never valid indices).
func hiddenRef(i int) int { return -1 - i }

// fixRefs turns hidden references into indices of Outputs ++ Hidden.
func fixRefs(e *Expr, nOut int) {
	if e == nil {
		return
	}
	if e.Op == "ref" && e.Ref < 0 {
		e.Ref = nOut + (-1 - e.Ref)
	}
	for _, a := range e.Args {
		fixRefs(a, nOut)
	}
}

func fixCondRefs(c *Cond, nOut int) {
	if c == nil {
		return
	}
	fixRefs(c.L, nOut)
	fixRefs(c.R, nOut)
	for _, a := range c.Args {
		fixCondRefs(a, nOut)
	}
}

// having plans a HAVING condition: AND/OR/NOT of comparisons between
// expressions over aggregates and constants, evaluated on noisy values.
func (b *builder) having(e ast.ExprNode) (*Cond, error) {
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return b.having(x.Expr)
	case *ast.UnaryOperationExpr:
		if x.Op == opcode.Not || x.Op == opcode.Not2 {
			a, err := b.having(x.V)
			if err != nil {
				return nil, err
			}
			return &Cond{Op: "not", Args: []*Cond{a}}, nil
		}
	case *ast.BinaryOperationExpr:
		switch x.Op {
		case opcode.LogicAnd, opcode.LogicOr:
			l, err := b.having(x.L)
			if err != nil {
				return nil, err
			}
			r, err := b.having(x.R)
			if err != nil {
				return nil, err
			}
			op := "and"
			if x.Op == opcode.LogicOr {
				op = "or"
			}
			return &Cond{Op: op, Args: []*Cond{l, r}}, nil
		}
		if op, ok := compareOps[x.Op]; ok {
			l, li, err := b.arith(x.L)
			if err != nil {
				return nil, err
			}
			r, ri, err := b.arith(x.R)
			if err != nil {
				return nil, err
			}
			if !li.agg && !ri.agg {
				return nil, b.errAt(x, pgerr.FeatureNotSupported, "a HAVING comparison must involve an aggregate").
					WithHint("filter rows with WHERE; compare aggregates in HAVING, e.g. HAVING COUNT(*) > 100")
			}
			return &Cond{Op: op, L: l, R: r}, nil
		}
	}
	return nil, b.errAt(e, pgerr.FeatureNotSupported, "this HAVING condition is not supported").
		WithHint("compare aggregates with =, <>, <, <=, >, >= combined by AND, OR, NOT, e.g. HAVING COUNT(*) > 100 AND AVG(cost) < 500")
}

var compareOps = map[opcode.Op]string{
	opcode.EQ: "=", opcode.NE: "<>", opcode.LT: "<", opcode.LE: "<=", opcode.GT: ">", opcode.GE: ">=",
}

// exprName is PostgreSQL's name for an unnamed expression column.
const exprName = "?column?"

// intExpr reports whether PostgreSQL certainly types e as an integer:
// only counts (bigint) and integer constants under + - *.
func intExpr(e *Expr, hidden []Output) bool {
	switch e.Op {
	case "ref":
		return e.Ref < 0 && hidden[-1-e.Ref].Kind == OutputCount
	case "lit":
		return !strings.ContainsAny(e.Lit, ".eE")
	case "/":
		return false
	}
	for _, a := range e.Args {
		if !intExpr(a, hidden) {
			return false
		}
	}
	return true
}
