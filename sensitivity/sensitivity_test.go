package sensitivity

import (
	"math"
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
		// An elastic join (rewrite/join_l1.go): E = 320 changed rows in at
		// most min(E, 10) = 10 groups, L∞ = L1 = 320: Δ₁ = 320 (not 3200),
		// Δ₂ = √(320·320) = 320 (not √10·320).
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
