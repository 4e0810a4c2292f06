package dpplan

import (
	"errors"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"
)

// Row values for the tests: cost is an int column in [0, 20000], age an
// int column in [0, 120], score a numeric column in [-1.5, 2.5].
func cost() *Value  { return &Value{Op: ValCol, Col: "cost", Lo: "0", Hi: "20000", Int: true} }
func age() *Value   { return &Value{Op: ValCol, Col: "age", Lo: "0", Hi: "120", Int: true} }
func score() *Value { return &Value{Op: ValCol, Col: "score", Lo: "-1.5", Hi: "2.5"} }
func num(s string) *Value {
	_, err := strconv.Atoi(s)
	return &Value{Op: ValConst, Num: s, Int: err == nil}
}
func op(o string, args ...*Value) *Value { return &Value{Op: o, Args: args} }

// TestValueInterval states the interval of each operation on known
// operands, by hand (interval arithmetic, Moore 1966).
func TestValueInterval(t *testing.T) {
	t.Parallel()
	older := PredCmp{Col: `"age"`, Op: ">=", Lit: "(65)"}
	for _, c := range []struct {
		name           string
		v              *Value
		lo, hi         string // "" for an empty interval (always NULL)
		isInt, mayNull bool
	}{
		{"column", cost(), "0", "20000", true, true},
		{"constant", num("1.1"), "1.1", "1.1", false, false},
		{"integer constant", num("7"), "7", "7", true, false},
		{"null", &Value{Op: ValNull}, "", "", true, true},
		{"negation", op(ValNeg, score()), "-2.5", "1.5", false, true},
		{"sum", op(ValAdd, cost(), age()), "0", "20120", true, true},
		{"difference", op(ValSub, age(), cost()), "-20000", "120", true, true},
		{"product with a negative range", op(ValMul, score(), cost()), "-30000", "50000", false, true},
		{"quotient by a constant", op(ValDiv, cost(), num("2.5")), "0", "8000", false, true},
		// An integer divisor whose range contains 0: |y| ≥ 1 when y ≠ 0,
		// and y = 0 gives NULL (NULLIF).
		{"quotient by an integer column", op(ValDiv, score(), op(ValSub, age(), num("60"))), "-2.5", "2.5", false, true},
		{"quotient always NULL", op(ValDiv, score(), op(ValMul, age(), num("0"))), "", "", false, true},
		{"case with else", &Value{Op: ValCase, When: []Pred{older}, Args: []*Value{cost(), num("0")}}, "0", "20000", true, true},
		{"case without else", &Value{Op: ValCase, When: []Pred{older}, Args: []*Value{num("1")}}, "1", "1", true, true},
		{"coalesce", op(ValCoalesce, cost(), num("0")), "0", "20000", true, false},
		{"least (ignores NULL)", op(ValLeast, cost(), num("500")), "0", "500", true, false},
		{"greatest", op(ValGreatest, score(), num("1")), "1", "2.5", false, false},
		{"abs", op(ValAbs, score()), "0", "2.5", false, true},
		{"nullif", op(ValNullIf, age(), num("0")), "0", "120", true, true},
	} {
		iv, err := ValueInterval(c.v)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if c.lo == "" {
			if !iv.Empty() {
				t.Errorf("%s: [%s, %s], want always NULL", c.name, iv.Lo, iv.Hi)
			}
			continue
		}
		lo, _ := new(big.Rat).SetString(c.lo)
		hi, _ := new(big.Rat).SetString(c.hi)
		if iv.Empty() || iv.Lo.Cmp(lo) != 0 || iv.Hi.Cmp(hi) != 0 || iv.Int != c.isInt || iv.MayBeNull != c.mayNull {
			t.Errorf("%s: %+v, want [%s, %s] int=%v null=%v", c.name, iv, c.lo, c.hi, c.isInt, c.mayNull)
		}
	}
}

// TestValueInterval_Refused: each limit of value.go names the node that
// breaks it.
func TestValueInterval_Refused(t *testing.T) {
	t.Parallel()
	big30 := num("1e30")
	overflow := op(ValMul, op(ValMul, op(ValMul, big30, num("1e30")), num("1e30")), num("1e30")) // 1e120
	deep := op(ValDiv, op(ValDiv, op(ValDiv, op(ValDiv, score(), num("2")), num("2")), num("2")), num("2"))
	near0 := op(ValDiv, cost(), score())
	intDiv := op(ValDiv, cost(), op(ValAdd, age(), num("1")))
	digits := num("1.234567890123456789012345678901") // 31 significant digits
	for _, c := range []struct {
		name string
		v    *Value
		at   *Value
		kind ValueErrorKind
	}{
		{"too many digits", op(ValAdd, cost(), digits), digits, ErrConstDigits},
		{"too large", num("1e31"), nil, ErrConstRange},
		{"too small", num("1e-31"), nil, ErrConstRange},
		{"intermediate overflow", op(ValMul, overflow, num("1e-30")), overflow, ErrMagnitude},
		{"divisor near 0", near0, near0, ErrDivisorNearZero},
		{"integer division", intDiv, intDiv, ErrIntDivision},
		{"nested divisions", deep, deep, ErrDivDepth},
		{"wrong arity", op(ValAdd, cost()), nil, ErrBadValue},
		{"unknown operator", op("%", cost(), age()), nil, ErrBadValue},
		{"case without conditions", &Value{Op: ValCase, Args: []*Value{cost()}}, nil, ErrBadValue},
		{"bounds out of order", &Value{Op: ValCol, Col: "x", Lo: "2", Hi: "1"}, nil, ErrBadValue},
	} {
		_, err := ValueInterval(c.v)
		var ve *ValueError
		if !errors.As(err, &ve) || ve.Kind != c.kind {
			t.Errorf("%s: err = %v, want kind %d", c.name, err, c.kind)
			continue
		}
		if want := c.at; want == nil {
			want = c.v
			if ve.Node != want && c.kind != ErrConstRange && c.kind != ErrBadValue {
				t.Errorf("%s: refused at %s, want %s", c.name, ve.Node, want)
			}
		} else if ve.Node != want {
			t.Errorf("%s: refused at %s, want %s", c.name, ve.Node, want)
		}
	}
	for _, ok := range []string{"0", "0.000", "1e30", "1e-30", "123456789012345678901234567890"} {
		if _, err := ValueInterval(num(ok)); err != nil {
			t.Errorf("constant %s: %v", ok, err)
		}
	}
}

// TestValueOps counts the per-row operations the planner caps.
func TestValueOps(t *testing.T) {
	t.Parallel()
	in := PredIn{Col: `"d"`, Lits: make([]string, 2500)}
	for _, c := range []struct {
		v    *Value
		want int
	}{
		{cost(), 1}, // its read
		{op(ValAdd, cost(), num("1")), 1 + 1},
		// The quotient (2 units: 9 digits by 3) and its operand twice, the clamp's
		// two comparisons.
		{op(ValDiv, cost(), num("2.5")), 2*(1+2) + 2},
		{op(ValCoalesce, cost(), age(), num("0")), 2 + 3},
		{&Value{Op: ValCase, When: []Pred{in}, Args: []*Value{op(ValNeg, cost())}}, 1 + 3 + 1 + 1},
	} {
		if got := ValueOps(c.v); got != c.want {
			t.Errorf("ValueOps(%s) = %d, want %d", c.v, got, c.want)
		}
	}
}

// TestValueInterval_ContainsEveryValue checks the inclusion property
// directly: for random trees over the three columns, evaluated exactly
// (with SQL's NULL rules, NULLIF's zero divisor and CASE on a random
// condition) at random points of the columns' ranges, every non-NULL value
// lies in ValueInterval. Deterministic seed; it cannot fail by chance.
func TestValueInterval_ContainsEveryValue(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	cond := PredCmp{Col: `"age"`, Op: ">", Lit: "(1)"}
	var gen func(depth int) *Value
	gen = func(depth int) *Value {
		if depth == 0 || r.IntN(4) == 0 {
			switch r.IntN(5) {
			case 0:
				return cost()
			case 1:
				return age()
			case 2:
				return score()
			case 3:
				return &Value{Op: ValNull}
			}
			return num([]string{"0", "1", "-3", "2.5", "0.125", "17"}[r.IntN(6)])
		}
		switch k := r.IntN(9); k {
		case 0:
			return op(ValNeg, gen(depth-1))
		case 1, 2, 3, 4:
			return op([]string{ValAdd, ValSub, ValMul, ValDiv}[k-1], gen(depth-1), gen(depth-1))
		case 5:
			v := &Value{Op: ValCase, When: []Pred{cond}, Args: []*Value{gen(depth - 1)}}
			if r.IntN(2) == 0 {
				v.Args = append(v.Args, gen(depth-1))
			}
			return v
		case 6:
			return op([]string{ValCoalesce, ValLeast, ValGreatest}[r.IntN(3)], gen(depth-1), gen(depth-1))
		case 7:
			return op(ValAbs, gen(depth-1))
		}
		return op(ValNullIf, gen(depth-1), gen(depth-1))
	}
	checked := 0
	for range 3000 {
		v := gen(4)
		iv, err := ValueInterval(v)
		if err != nil {
			continue // refused trees are not answered
		}
		for range 20 {
			env := map[string]*big.Rat{
				"cost":  big.NewRat(r.Int64N(20001), 1),
				"age":   big.NewRat(r.Int64N(121), 1),
				"score": big.NewRat(r.Int64N(33)-12, 8), // -1.5 … 2.5 in steps of 1/8
			}
			if r.IntN(10) == 0 {
				env["cost"] = nil // a NULL column
			}
			x := evalValue(v, env, r.IntN(2) == 0)
			if x == nil {
				continue
			}
			checked++
			if iv.Empty() || x.Cmp(iv.Lo) < 0 || x.Cmp(iv.Hi) > 0 {
				t.Fatalf("%s = %s at %v, outside %v", v, x.RatString(), env, iv)
			}
			if iv.Int && !x.IsInt() {
				t.Fatalf("%s = %s, but its interval says integer", v, x.RatString())
			}
		}
	}
	if checked < 10000 {
		t.Errorf("only %d values checked", checked)
	}
}

// evalValue evaluates v exactly on env (a nil value is NULL); cond is the
// value of every CASE condition. Columns are clamped as the emitted SQL
// clamps them; the quotient is exact (the SQL's rounded one is clamped to
// the interval by the emitter).
func evalValue(v *Value, env map[string]*big.Rat, cond bool) *big.Rat {
	var args []*big.Rat
	for _, a := range v.Args {
		args = append(args, evalValue(a, env, cond))
	}
	switch v.Op {
	case ValCol:
		x := env[v.Col]
		if x == nil {
			return nil
		}
		lo, _ := new(big.Rat).SetString(v.Lo)
		hi, _ := new(big.Rat).SetString(v.Hi)
		switch {
		case x.Cmp(lo) < 0:
			return lo
		case x.Cmp(hi) > 0:
			return hi
		}
		return new(big.Rat).Set(x)
	case ValConst:
		x, _ := new(big.Rat).SetString(v.Num)
		return x
	case ValNull:
		return nil
	case ValCase:
		if cond {
			return args[0]
		}
		if len(args) > 1 {
			return args[1]
		}
		return nil
	case ValCoalesce:
		for _, a := range args {
			if a != nil {
				return a
			}
		}
		return nil
	case ValLeast, ValGreatest:
		var best *big.Rat
		for _, a := range args {
			if a != nil && (best == nil || (a.Cmp(best) < 0) == (v.Op == ValLeast)) {
				best = a
			}
		}
		return best
	case ValNullIf:
		// NULLIF(a, NULL) is a: the comparison is not true.
		if args[0] != nil && args[1] != nil && args[0].Cmp(args[1]) == 0 {
			return nil
		}
		return args[0]
	}
	for _, a := range args {
		if a == nil {
			return nil
		}
	}
	switch v.Op {
	case ValNeg:
		return new(big.Rat).Neg(args[0])
	case ValAbs:
		return new(big.Rat).Abs(args[0])
	case ValAdd:
		return new(big.Rat).Add(args[0], args[1])
	case ValSub:
		return new(big.Rat).Sub(args[0], args[1])
	case ValMul:
		return new(big.Rat).Mul(args[0], args[1])
	case ValDiv:
		if args[1].Sign() == 0 {
			return nil
		}
		return new(big.Rat).Quo(args[0], args[1])
	}
	panic("unknown op " + v.Op)
}

// TestValueOps_DeclaredScale (review 107): a numeric(p, 2) column is read
// with 2 decimals (pgemit rounds it there, ReadDecimals), so a ratio of it
// counts its own digits, not the 30 decimals of an unconstrained column's;
// a declared scale of 30 or more, or none, reads 30.
func TestValueOps_DeclaredScale(t *testing.T) {
	t.Parallel()
	col := func(scale int) *Value {
		return &Value{Op: ValCol, Col: "cost", Lo: "0", Hi: "20000", Scale: scale}
	}
	ratio := func(c *Value) *Value { return op(ValDiv, c, op(ValAdd, age(), num("1"))) }
	two, none := ValueOps(ratio(col(2))), ValueOps(ratio(col(0)))
	if two >= none {
		t.Errorf("a ratio of a numeric(10, 2) column counts %d units, of an unconstrained one %d: want fewer", two, none)
	}
	for _, s := range []int{0, 30, 40} {
		if got := col(s).ReadDecimals(); got != MaxConstDigits {
			t.Errorf("ReadDecimals with a declared scale of %d = %d, want %d", s, got, MaxConstDigits)
		}
	}
	if got := col(2).ReadDecimals(); got != 2 {
		t.Errorf("ReadDecimals of numeric(10, 2) = %d, want 2", got)
	}
	t.Logf("AVG(cost / (age + 1)): %d units at numeric(10, 2), %d unconstrained", two, none)
}
