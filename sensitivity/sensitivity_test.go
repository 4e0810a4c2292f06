package sensitivity

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestL1L2(t *testing.T) {
	tests := []struct {
		name   string
		b      Bounds
		l1, l2 float64
	}{
		{"one group", Bounds{L0: 1, LInf: 20}, 20, 20},
		{"four groups", Bounds{L0: 4, LInf: 20}, 80, 40},
		{"sum bound", Bounds{L0: 4, LInf: SumLInf(20, 0, 20000)}, 1.6e6, 8e5},
		// The bias estimate (dpplan.MeasureRemoved) clips each unit's
		// total over its groups, L1 = L∞ = 320 in up to 10 groups:
		// Δ₁ = 320 (not 3200), Δ₂ = √(320·320) = 320 (not √10·320).
		{"direct L1 bound", Bounds{L0: 10, LInf: 320, L1: 320}, 320, 320},
		// A direct bound above L0·L∞ changes nothing.
		{"loose L1 bound", Bounds{L0: 2, LInf: 5, L1: 100}, 10, math.Sqrt(2) * 5},
		// Between the two: Δ₂ = √(Λ·L∞) = √(20·5) = 10 < √8·5.
		{"partial L1 bound", Bounds{L0: 8, LInf: 5, L1: 20}, 20, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l1, err := L1(tt.b)
			if err != nil || l1 != tt.l1 {
				t.Fatalf("L1(%v) = %v, %v, want %v", tt.b, l1, err, tt.l1)
			}
			l2, err := L2(tt.b)
			if err != nil || math.Abs(l2-tt.l2) > 1e-9 {
				t.Fatalf("L2(%v) = %v, %v, want %v", tt.b, l2, err, tt.l2)
			}
		})
	}
	for _, b := range []Bounds{{L0: 0, LInf: 1}, {L0: 1, LInf: 0}, {L0: 1, LInf: math.NaN()}, {L0: 1, LInf: math.Inf(1)}, {L0: -1, LInf: 1},
		{L0: 1, LInf: 1, L1: math.NaN()}, {L0: 1, LInf: 1, L1: math.Inf(1)}, {L0: 1, LInf: 1, L1: -1}} {
		if _, err := L1(b); err == nil {
			t.Errorf("L1(%v) accepted invalid bounds", b)
		}
		if _, err := L2(b); err == nil {
			t.Errorf("L2(%v) accepted invalid bounds", b)
		}
	}
}

func TestSumLInf(t *testing.T) {
	// Negative lower bounds dominate when larger in magnitude.
	if got := SumLInf(3, -50, 10); got != 150 {
		t.Fatalf("SumLInf(3,-50,10) = %v, want 150", got)
	}
	if got := SumLInf(2, 5, 10); got != 20 {
		t.Fatalf("SumLInf(2,5,10) = %v, want 20", got)
	}
	// Monotone in the bounds: widening never lowers the sensitivity.
	prev := 0.0
	for u := 1.0; u < 1e6; u *= 3 {
		got := SumLInf(4, -1, u)
		if got < prev {
			t.Fatalf("SumLInf not monotone at upper=%v", u)
		}
		prev = got
	}
}

func TestSumSqLInf(t *testing.T) {
	// Squares of values in [−50, 10] lie in [0, 2500]: 3 rows change the
	// sum of squares by at most 7500.
	if got := SumSqLInf(3, -50, 10); got != 7500 {
		t.Fatalf("SumSqLInf(3,-50,10) = %v, want 7500", got)
	}
	if got := SumSqLInf(2, 5, 10); got != 200 {
		t.Fatalf("SumSqLInf(2,5,10) = %v, want 200", got)
	}
	// Brute force: for every choice of up to 4 values on a grid of
	// [−3, 7], the sum of squares lies within [0, SumSqLInf(4, −3, 7)].
	bound := SumSqLInf(4, -3, 7)
	worst := 0.0
	for a := -3.0; a <= 7; a++ {
		for b := -3.0; b <= 7; b++ {
			worst = math.Max(worst, 2*a*a+2*b*b)
		}
	}
	if worst > bound || worst != bound {
		t.Fatalf("max sum of squares %v, bound %v: want equal (tight)", worst, bound)
	}
	if UnitCountLInf() != 1 {
		t.Fatalf("UnitCountLInf() = %v, want 1", UnitCountLInf())
	}
}

// TestL1L2_NeverBelowExact checks Δ₁ = L0·L∞ and Δ₂ = √L0·L∞ against exact
// rational arithmetic: the float64 results must be upper bounds (a product
// or square root rounded to nearest may fall half an ulp below, which
// would under-state the sensitivity), and exact where the float is.
func TestL1L2_NeverBelowExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	below := 0
	for i := 0; i < 20000; i++ {
		b := Bounds{L0: 1 + rng.IntN(1000), LInf: math.Ldexp(1+rng.Float64(), rng.IntN(40)-20)}
		l1, err := L1(b)
		if err != nil {
			t.Fatal(err)
		}
		exact := new(big.Rat).Mul(new(big.Rat).SetInt64(int64(b.L0)), new(big.Rat).SetFloat64(b.LInf))
		if new(big.Rat).SetFloat64(l1).Cmp(exact) < 0 {
			t.Fatalf("L1(%+v) = %v below the exact %s", b, l1, exact.FloatString(30))
		}
		if new(big.Rat).SetFloat64(float64(b.L0)*b.LInf).Cmp(exact) < 0 {
			below++ // plain rounding to nearest would have under-stated Δ₁
		}
		l2, err := L2(b)
		if err != nil {
			t.Fatal(err)
		}
		// Δ₂² ≥ L0·L∞² exactly.
		sq := new(big.Rat).SetFloat64(l2)
		sq.Mul(sq, sq)
		want := new(big.Rat).Mul(exact, new(big.Rat).SetFloat64(b.LInf))
		if sq.Cmp(want) < 0 {
			t.Fatalf("L2(%+v)² = %s below L0·L∞² = %s", b, sq.FloatString(30), want.FloatString(30))
		}
	}
	if below == 0 {
		t.Fatal("no case where the product rounded to nearest lies below the exact one: the test has no power")
	}
	// Integers stay integers (release uses integer noise when Δ₁ is one).
	if l1, _ := L1(Bounds{L0: 4, LInf: 5}); l1 != 20 {
		t.Errorf("L1(4, 5) = %v, want exactly 20", l1)
	}
	if l2, _ := L2(Bounds{L0: 4, LInf: 5}); l2 != 10 {
		t.Errorf("L2(4, 5) = %v, want exactly 10", l2)
	}
}

// TestOutward: a bound whose float64 is not its decimal (0.3) moves out
// one ulp, so the L∞ computed from it covers the decimal the SQL clamps
// to; exact ones (2.5, integers) do not move (the review of 6 Dec 2026).
func TestOutward(t *testing.T) {
	lo, hi := Outward(-0.3, 0.3)
	exact := new(big.Rat).SetFrac64(3, 10)
	if new(big.Rat).SetFloat64(hi).Cmp(exact) < 0 || new(big.Rat).SetFloat64(-lo).Cmp(exact) < 0 {
		t.Errorf("Outward(-0.3, 0.3) = %v, %v: inside the decimals", lo, hi)
	}
	if lo, hi := Outward(-1.5, 2.5); lo != -1.5 || hi != 2.5 {
		t.Errorf("Outward(-1.5, 2.5) = %v, %v: exact bounds moved", lo, hi)
	}
	if lo, hi := Outward(0, 20000); lo != 0 || hi != 20000 {
		t.Errorf("Outward(0, 20000) = %v, %v", lo, hi)
	}
	// 20 rows of at most 0.3: the bound must be at least 6 exactly.
	if got := SumLInf(20, 0, 0.3); new(big.Rat).SetFloat64(got).Cmp(big.NewRat(6, 1)) < 0 {
		t.Errorf("SumLInf(20, 0, 0.3) = %v, below 6", got)
	}
	if got := SumSqLInf(20, 0, 0.3); new(big.Rat).SetFloat64(got).Cmp(big.NewRat(18, 10)) < 0 {
		t.Errorf("SumSqLInf(20, 0, 0.3) = %v, below 1.8", got)
	}
	if got := SumLInf(20, -1.5, 2.5); got != 50 {
		t.Errorf("SumLInf(20, -1.5, 2.5) = %v, want 50", got)
	}
}
