package rewrite

import (
	"math/big"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// Expr is arithmetic over released values, evaluated after noise
// (post-processing): the leaves are output values (Plan.Outputs followed by
// Plan.Hidden) and numeric literals of the analyst's query.
type Expr struct {
	// Op is "ref" (a value), "lit" (a literal), "neg", "+", "-", "*" or "/".
	Op   string
	Ref  int    // for "ref": index into Plan.Outputs ++ Plan.Hidden
	Lit  string // for "lit": a decimal number (re-encoded by this package)
	Args []*Expr
}

// Cond is a HAVING condition over released values: "and", "or", "not"
// over Args, or a comparison ("=", "<>", "<", "<=", ">", ">=") of L and R.
type Cond struct {
	Op   string
	Args []*Cond
	L, R *Expr
}

// Eval computes the expression on the row's values (vals indexed like Ref).
// A NULL value or a division by zero gives NULL (nil); PostgreSQL raises
// 22012 on division by zero, which would reveal that a noisy value is 0.
func (e *Expr) Eval(vals []*big.Rat) *big.Rat {
	switch e.Op {
	case "ref":
		if v := vals[e.Ref]; v != nil {
			return new(big.Rat).Set(v)
		}
		return nil
	case "lit":
		r, ok := new(big.Rat).SetString(e.Lit)
		if !ok {
			return nil
		}
		return r
	case "neg":
		v := e.Args[0].Eval(vals)
		if v == nil {
			return nil
		}
		return v.Neg(v)
	}
	a, b := e.Args[0].Eval(vals), e.Args[1].Eval(vals)
	if a == nil || b == nil {
		return nil
	}
	switch e.Op {
	case "+":
		return a.Add(a, b)
	case "-":
		return a.Sub(a, b)
	case "*":
		return a.Mul(a, b)
	case "/":
		if b.Sign() == 0 {
			return nil
		}
		return a.Quo(a, b)
	}
	return nil
}

// Holds evaluates the condition with SQL's rule that a comparison with NULL
// is not true (a NOT of it is not true either).
func (c *Cond) Holds(vals []*big.Rat) bool {
	v, known := c.eval(vals)
	return known && v
}

func (c *Cond) eval(vals []*big.Rat) (value, known bool) {
	switch c.Op {
	case "and":
		a, ka := c.Args[0].eval(vals)
		b, kb := c.Args[1].eval(vals)
		if ka && !a || kb && !b {
			return false, true
		}
		return true, ka && kb
	case "or":
		a, ka := c.Args[0].eval(vals)
		b, kb := c.Args[1].eval(vals)
		if ka && a || kb && b {
			return true, true
		}
		return false, ka && kb
	case "not":
		a, ka := c.Args[0].eval(vals)
		return !a, ka
	}
	l, r := c.L.Eval(vals), c.R.Eval(vals)
	if l == nil || r == nil {
		return false, false
	}
	x := l.Cmp(r)
	switch c.Op {
	case "=":
		return x == 0, true
	case "<>":
		return x != 0, true
	case "<":
		return x < 0, true
	case "<=":
		return x <= 0, true
	case ">":
		return x > 0, true
	case ">=":
		return x >= 0, true
	}
	return false, false
}

// arithHint is the hint for unsupported expressions over aggregates.
const arithHint = "write + - * / over aggregates and numeric constants, e.g. SUM(cost) / COUNT(*) or COUNT(*) * 2"

// arithInfo describes a planned expression: whether it holds an aggregate,
// and whether PostgreSQL might type it as an integer (then / would
// truncate, which we do not emulate).
type arithInfo struct {
	agg      bool
	maybeInt bool
}

// arith plans arithmetic over aggregates and numeric literals. Each
// aggregate becomes a hidden value (its measures are shared with equal
// aggregates of the select list, so it costs nothing extra then).
func (b *builder) arith(e ast.ExprNode) (*Expr, arithInfo, error) {
	if l, ok := b.lit(e); ok {
		if l.kind != litNumber || l.typ != "" && !l.typ.Numeric() {
			return nil, arithInfo{}, b.errAt(e, pgerr.FeatureNotSupported, "only numeric constants can be combined with aggregates").WithHint("%s", arithHint)
		}
		if _, ok := new(big.Rat).SetString(l.val); !ok {
			return nil, arithInfo{}, b.errAt(e, "22P02", "invalid number %s", l.val).WithHint("%s", arithHint)
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
		return &Expr{Op: op, Args: []*Expr{l, r}}, arithInfo{agg: li.agg || ri.agg, maybeInt: li.maybeInt && ri.maybeInt}, nil
	case *ast.AggregateFuncExpr:
		spec, o, err := b.aggregate(x)
		if err != nil {
			return nil, arithInfo{}, err
		}
		ref := -1
		for i, s := range b.hiddenAggs {
			if s == spec {
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
	case *ast.ColumnNameExpr:
		return nil, arithInfo{}, b.errAt(x, pgerr.FeatureNotSupported, "columns outside aggregates cannot be used in expressions over aggregates").
			WithHint("filter rows with WHERE; %s", arithHint)
	}
	return nil, arithInfo{}, b.errAt(e, pgerr.FeatureNotSupported, "this expression over aggregates is not supported").WithHint("%s", arithHint)
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
