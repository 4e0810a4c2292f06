package sensitivity

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

func r(s string) *big.Rat {
	v, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return v
}

func iv(lo, hi string, isInt bool) Interval { return Range(r(lo), r(hi), isInt, false) }

func (a Interval) String() string {
	if a.Empty() {
		return fmt.Sprintf("empty(null=%v)", a.MayBeNull)
	}
	return fmt.Sprintf("[%s, %s] int=%v null=%v", a.Lo.RatString(), a.Hi.RatString(), a.Int, a.MayBeNull)
}

func TestInterval_Ops(t *testing.T) {
	cost, age := iv("0", "20000", false), iv("0", "110", true)
	tests := []struct {
		name   string
		got    Interval
		lo, hi string
		null   bool
	}{
		{"add", Add(cost, iv("5", "5", true)), "5", "20005", false},
		{"sub", Sub(age, cost), "-20000", "110", false},
		{"mul by negative", Mul(age, iv("-2", "3", true)), "-220", "330", false},
		{"mul mixed signs", Mul(iv("-3", "2", true), iv("-5", "4", true)), "-12", "15", false},
		{"neg", Neg(age), "-110", "0", false},
		{"abs straddling", Abs(iv("-7", "3", true)), "0", "7", false},
		{"abs negative", Abs(iv("-7", "-3", true)), "3", "7", false},
		{"div positive divisor", mustDiv(t, cost, iv("2", "4", true)), "0", "10000", false},
		// age/NULLIF(age,0)-style: integer divisor containing 0 means
		// |divisor| ≥ 1 when it is not zero; zero gives NULL.
		{"div integer divisor with zero", mustDiv(t, cost, age), "0", "20000", true},
		{"div integer divisor both signs", mustDiv(t, iv("1", "6", true), iv("-3", "2", true)), "-6", "6", true},
		{"div rounds outwards", mustDiv(t, iv("1", "2", true), iv("3", "3", true)), "333333333333/1000000000000", "666666666667/1000000000000", false},
		{"case", Union(iv("1", "1", true), iv("0", "0", true)), "0", "1", false},
		{"case without else", Union(cost, Null()), "0", "20000", true},
		{"coalesce", Coalesce(Range(r("-5"), r("3"), true, true), iv("0", "0", true)), "-5", "3", false},
		{"coalesce all nullable", Coalesce(Range(r("1"), r("3"), true, true), Null()), "1", "3", true},
		{"least", Least(cost, iv("100", "200", true)), "0", "200", false},
		{"least nullable", Least(Range(r("0"), r("20000"), false, true), Range(r("100"), r("200"), true, true)), "0", "20000", true},
		{"least mixed", Least(Range(r("0"), r("20000"), false, true), iv("100", "200", true)), "0", "200", false},
		{"greatest", Greatest(cost, iv("100", "200", true)), "100", "20000", false},
		{"greatest nullable", Greatest(Range(r("0"), r("20000"), false, true), Range(r("100"), r("200"), true, true)), "0", "20000", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got.Empty() || tt.got.Lo.Cmp(r(tt.lo)) != 0 || tt.got.Hi.Cmp(r(tt.hi)) != 0 || tt.got.MayBeNull != tt.null {
				t.Fatalf("got %v, want [%s, %s] null=%v", tt.got, tt.lo, tt.hi, tt.null)
			}
		})
	}
	if _, err := Div(cost, iv("-0.5", "2", false)); !errors.Is(err, ErrDivisorZero) {
		t.Fatalf("Div by a non-integer range containing 0 = %v, want ErrDivisorZero", err)
	}
	if got, err := Div(cost, iv("0", "0", true)); err != nil || !got.Empty() {
		t.Fatalf("Div by constant 0 = %v, %v; want always NULL", got, err)
	}
	if got := Add(cost, Null()); !got.Empty() || !got.MayBeNull {
		t.Fatalf("cost + NULL = %v, want always NULL", got)
	}
	if got := Add(age, age); !got.Int {
		t.Fatalf("int + int not Int")
	}
	if got, _ := Div(age, iv("1", "2", true)); got.Int {
		t.Fatalf("division result is Int")
	}
}

func mustDiv(t *testing.T, x, y Interval) Interval {
	t.Helper()
	d, err := Div(x, y)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSumLInfInterval(t *testing.T) {
	// SUM(CASE WHEN … THEN 1 ELSE 0 END) is a conditional count: its L∞
	// is max_rows, as for COUNT.
	if got := SumLInfInterval(5, Union(iv("1", "1", true), iv("0", "0", true))); got != CountLInf(5) {
		t.Fatalf("conditional count L∞ = %v, want %v", got, CountLInf(5))
	}
	if got := SumLInfInterval(3, iv("-50", "10", true)); got != SumLInf(3, -50, 10) {
		t.Fatalf("SumLInfInterval = %v, want %v", got, SumLInf(3, -50, 10))
	}
	// Rounded up, never down: 3·0.1 is not a float.
	got := SumLInfInterval(3, iv("0", "0.1", false))
	if new(big.Rat).SetFloat64(got).Cmp(r("0.3")) < 0 {
		t.Fatalf("SumLInfInterval(3, [0, 0.1]) = %v is below 0.3", got)
	}
	if got := CentredSumLInf(5, 0, 20000, r("10000")); got != 50000 || SumLInf(5, 0, 20000) != 100000 {
		t.Fatalf("centred L∞ %v, plain %v: want half", got, SumLInf(5, 0, 20000))
	}
	if got := CentredSumSqLInf(2, -4, 6, r("1")); got != 50 {
		t.Fatalf("CentredSumSqLInf(2, -4, 6, 1) = %v, want 50", got)
	}
	if !math.IsInf(CentredSumLInf(1, 0, math.Inf(1), r("0")), 1) || !math.IsInf(CentredSumSqLInf(1, math.Inf(-1), 0, r("0")), 1) {
		t.Fatalf("infinite bounds must give an infinite L∞")
	}
	// Any other centre gives a larger bound (the midpoint is optimal), and
	// a centre of 0 gives the plain bounds.
	if got := CentredSumLInf(5, 0, 20000, r("2500")); got != 87500 {
		t.Fatalf("CentredSumLInf(…, 2500) = %v, want 87500", got)
	}
	if CentredSumLInf(3, -50, 10, r("0")) != SumLInf(3, -50, 10) || CentredSumSqLInf(3, -50, 10, r("0")) != SumSqLInf(3, -50, 10) {
		t.Fatalf("centre 0 differs from the plain bounds")
	}
}

func TestRoundOut(t *testing.T) {
	// Beyond float64's range: no float arithmetic is involved.
	tiny := new(big.Rat).Inv(r("3e400"))
	if lo, hi := RoundOut(tiny, 3, false), RoundOut(tiny, 3, true); lo.Cmp(tiny) > 0 || hi.Cmp(tiny) < 0 || hi.Cmp(r("3.34e-401")) > 0 || lo.Cmp(r("3.33e-401")) < 0 {
		t.Fatalf("RoundOut(1/3e400) = [%s, %s]", lo.FloatString(405), hi.FloatString(405))
	}
	for _, tt := range []struct {
		v      string
		digits int
		up     bool
		want   string
	}{
		{"2/3", 3, true, "0.667"}, {"2/3", 3, false, "0.666"},
		{"-2/3", 3, true, "-0.666"}, {"-2/3", 3, false, "-0.667"},
		{"123456", 3, true, "123500"}, {"123456", 3, false, "123400"},
		{"1e400", 3, true, "1e400"},
		{"1/7000", 2, false, "0.00014"}, {"42", 3, true, "42"}, {"0", 3, true, "0"},
	} {
		got := RoundOut(r(tt.v), tt.digits, tt.up)
		if got.Cmp(r(tt.want)) != 0 {
			t.Errorf("RoundOut(%s, %d, %v) = %s, want %s", tt.v, tt.digits, tt.up, got.RatString(), tt.want)
		}
	}
}

// expr is a random expression for the property test, evaluated with
// PostgreSQL's NULL rules.
type expr struct {
	op   string // leaf, null, add, sub, mul, div, neg, abs, case, coalesce, least, greatest
	leaf Interval
	args []*expr
}

func randExpr(rng *rand.Rand, depth int) *expr {
	if depth == 0 || rng.IntN(4) == 0 {
		if rng.IntN(12) == 0 {
			return &expr{op: "null", leaf: Null()}
		}
		isInt := rng.IntN(2) == 0
		a, b := randNum(rng, isInt), randNum(rng, isInt)
		if a.Cmp(b) > 0 {
			a, b = b, a
		}
		return &expr{op: "leaf", leaf: Range(a, b, isInt, rng.IntN(3) == 0)}
	}
	ops := []string{"add", "sub", "mul", "div", "neg", "abs", "case", "coalesce", "least", "greatest"}
	e := &expr{op: ops[rng.IntN(len(ops))]}
	n := 2
	switch e.op {
	case "neg", "abs":
		n = 1
	case "case", "coalesce", "least", "greatest":
		n = 1 + rng.IntN(3)
	}
	for i := 0; i < n; i++ {
		e.args = append(e.args, randExpr(rng, depth-1))
	}
	return e
}

func randNum(rng *rand.Rand, isInt bool) *big.Rat {
	if isInt {
		return big.NewRat(int64(rng.IntN(41)-20), 1)
	}
	return big.NewRat(int64(rng.IntN(4001)-2000), int64(1+rng.IntN(100)))
}

// interval computes the expression's interval; ok is false when a
// division is refused (ErrDivisorZero).
func (e *expr) interval() (Interval, bool) {
	var xs []Interval
	for _, a := range e.args {
		x, ok := a.interval()
		if !ok {
			return Interval{}, false
		}
		xs = append(xs, x)
	}
	switch e.op {
	case "leaf", "null":
		return e.leaf, true
	case "add":
		return Add(xs[0], xs[1]), true
	case "sub":
		return Sub(xs[0], xs[1]), true
	case "mul":
		return Mul(xs[0], xs[1]), true
	case "div":
		d, err := Div(xs[0], xs[1])
		return d, err == nil
	case "neg":
		return Neg(xs[0]), true
	case "abs":
		return Abs(xs[0]), true
	case "case":
		// CASE WHEN … THEN x0 WHEN … THEN x1 … (ELSE NULL): any branch or
		// NULL.
		return Union(append(xs, Null())...), true
	case "coalesce":
		return Coalesce(xs...), true
	case "least":
		return Least(xs...), true
	case "greatest":
		return Greatest(xs...), true
	}
	panic(e.op)
}

// eval evaluates the expression on one random row: each leaf takes a
// random value of its interval (often an endpoint) or NULL when allowed.
func (e *expr) eval(rng *rand.Rand) *big.Rat {
	switch e.op {
	case "null":
		return nil
	case "leaf":
		if e.leaf.MayBeNull && rng.IntN(4) == 0 {
			return nil
		}
		switch rng.IntN(3) {
		case 0:
			return new(big.Rat).Set(e.leaf.Lo)
		case 1:
			return new(big.Rat).Set(e.leaf.Hi)
		}
		w := new(big.Rat).Sub(e.leaf.Hi, e.leaf.Lo)
		if e.leaf.Int {
			n := w.Num().Int64()
			return new(big.Rat).Add(e.leaf.Lo, big.NewRat(rng.Int64N(n+1), 1))
		}
		return w.Mul(w, big.NewRat(rng.Int64N(1001), 1000)).Add(w, e.leaf.Lo)
	}
	vs := make([]*big.Rat, len(e.args))
	for i, a := range e.args {
		vs[i] = a.eval(rng)
	}
	strict := func() bool {
		for _, v := range vs {
			if v == nil {
				return false
			}
		}
		return true
	}
	switch e.op {
	case "add", "sub", "mul", "div", "neg", "abs":
		if !strict() {
			return nil
		}
	}
	switch e.op {
	case "add":
		return vs[0].Add(vs[0], vs[1])
	case "sub":
		return vs[0].Sub(vs[0], vs[1])
	case "mul":
		return vs[0].Mul(vs[0], vs[1])
	case "div":
		if vs[1].Sign() == 0 {
			return nil // NULLIF(divisor, 0)
		}
		return vs[0].Quo(vs[0], vs[1])
	case "neg":
		return vs[0].Neg(vs[0])
	case "abs":
		return vs[0].Abs(vs[0])
	case "case":
		k := rng.IntN(len(vs) + 1)
		if k == len(vs) {
			return nil
		}
		return vs[k]
	case "coalesce":
		for _, v := range vs {
			if v != nil {
				return v
			}
		}
		return nil
	case "least", "greatest":
		var m *big.Rat
		for _, v := range vs {
			if v != nil && (m == nil || (e.op == "least") == (v.Cmp(m) < 0)) {
				m = v
			}
		}
		return m
	}
	panic(e.op)
}

// TestInterval_Contains is the inclusion property: for random expressions
// over random leaf intervals, the computed interval contains the value on
// every random row (values inside and at the ends of the leaf intervals,
// NULLs where allowed), a NULL result only when MayBeNull, and an integer
// result whenever Int. It is deterministic (fixed seed) and cannot fail by
// chance: any counterexample is a bug.
func TestInterval_Contains(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	checked := 0
	for i := 0; i < 3000; i++ {
		e := randExpr(rng, 4)
		a, ok := e.interval()
		if !ok {
			continue
		}
		for j := 0; j < 40; j++ {
			v := e.eval(rng)
			if v == nil {
				if !a.MayBeNull {
					t.Fatalf("expression %d evaluated to NULL but interval %v says never NULL", i, a)
				}
				continue
			}
			checked++
			if a.Empty() || v.Cmp(a.Lo) < 0 || v.Cmp(a.Hi) > 0 {
				t.Fatalf("expression %d evaluated to %s outside %v", i, v.RatString(), a)
			}
			if a.Int && !v.IsInt() {
				t.Fatalf("expression %d evaluated to non-integer %s but interval %v says Int", i, v.RatString(), a)
			}
		}
	}
	if checked < 20000 {
		t.Fatalf("only %d non-NULL values checked", checked)
	}
}
