// Privacy-critical: needs DP review.

package noise

import (
	"fmt"
	"math"
	"math/big"
	"testing"
)

// TestExponential_SelectionProbabilities draws 40 000–60 000 selections per case and
// compares the frequencies with the exact probabilities
// exp(ε·u_j/(2Δu))/Σ exp(ε·u_i/(2Δu)) by a chi-square test, which falsely
// rejects with probability 1e-5 (pCrit). Utilities include a tie at the
// maximum, fractions and one candidate far below the rest (probability
// ≈ e^{−250}, never drawn).
func TestExponential_SelectionProbabilities(t *testing.T) {
	cases := []struct {
		name       string
		eps, sens  float64
		utilities  []float64
		selections int
	}{
		{"mixed", 1, 1, []float64{0, -1, -2, -0.5, -3, 0, -500}, 60000},
		{"flat", 0.1, 5, []float64{-1, -1, -1, -1}, 40000},
		{"peaked", 4, 1, []float64{-3, -2, -1, 0, -1, -2, -3, -4}, 60000},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewExponential(ExponentialParams{Epsilon: tc.eps, Sensitivity: tc.sens, Rand: seeded(uint64(ci) + 77)})
			if err != nil {
				t.Fatal(err)
			}
			us := make([]*big.Rat, len(tc.utilities))
			var z float64
			for i, u := range tc.utilities {
				us[i] = new(big.Rat).SetFloat64(u)
				z += math.Exp(tc.eps * u / (2 * tc.sens))
			}
			counts := make([]int, len(us))
			for k := 0; k < tc.selections; k++ {
				j, err := e.Select(us)
				if err != nil {
					t.Fatal(err)
				}
				counts[j]++
			}
			var stat float64
			df := -1
			for i, u := range tc.utilities {
				p := math.Exp(tc.eps*u/(2*tc.sens)) / z
				want := p * float64(tc.selections)
				if want < 1e-9 {
					if counts[i] != 0 {
						t.Errorf("candidate %d (p=%g) selected %d times", i, p, counts[i])
					}
					continue
				}
				d := float64(counts[i]) - want
				stat += d * d / want
				df++
			}
			if p := chiSquareP(stat, df); p < pCrit {
				t.Errorf("chi-square %.1f with %d df, p = %.3g < %g; counts %v", stat, df, p, pCrit, counts)
			}
		})
	}
}

// TestExponential_Params checks the parameter validation.
func TestExponential_Params(t *testing.T) {
	for _, p := range []ExponentialParams{
		{Epsilon: 0, Sensitivity: 1}, {Epsilon: math.NaN(), Sensitivity: 1}, {Epsilon: 1, Sensitivity: 0},
		{Epsilon: math.Inf(1), Sensitivity: 1}, {Epsilon: 1, Sensitivity: math.Inf(1)},
	} {
		if _, err := NewExponential(p); err == nil {
			t.Errorf("NewExponential(%+v) succeeded", p)
		}
	}
	e, err := NewExponential(ExponentialParams{Epsilon: 1, Sensitivity: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Select(nil); err == nil {
		t.Error("Select(nil) succeeded")
	}
	if _, err := e.Select([]*big.Rat{big.NewRat(1, 1), nil}); err == nil {
		t.Error("Select with a nil utility succeeded")
	}
}

// TestExponentialUtilityBound checks the accuracy bound against the exact
// probability of the bad set in the worst case for it: one candidate at
// utility 0 and B−1 candidates exactly at the bound.
func TestExponentialUtilityBound(t *testing.T) {
	for _, b := range []int{2, 16, 256} {
		tb := ExponentialUtilityBound(0.5, 3, b, 0.95)
		// P(bad) = (B−1)·w/(1 + (B−1)·w) with w = exp(−ε·tb/(2Δ)).
		w := math.Exp(-0.5 * tb / 6)
		if p := float64(b-1) * w / (1 + float64(b-1)*w); p > 0.05 {
			t.Errorf("B=%d: bound %g leaves probability %g > 0.05 below it", b, tb, p)
		}
	}
}

// BenchmarkExponential_QuantileBuckets is one group of a grouped quantile:
// 2¹⁴ buckets whose integer utilities −|rank − q·n| take few distinct
// values (most buckets are empty), at a small and a large ε.
func BenchmarkExponential_QuantileBuckets(b *testing.B) {
	us := make([]*big.Rat, 1<<14)
	for j := range us {
		d := int64(j/300 - 20) // runs of equal utility, as empty buckets make
		if d < 0 {
			d = -d
		}
		us[j] = big.NewRat(-d, 1)
	}
	for _, eps := range []float64{0.001, 1} {
		b.Run(fmt.Sprint("eps=", eps), func(b *testing.B) {
			e, err := NewExponential(ExponentialParams{Epsilon: eps, Sensitivity: 20})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := e.Select(us); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
