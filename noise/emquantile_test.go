// Privacy-critical: needs DP review.

package noise

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExponentialQuantile_Distribution compares selection frequencies with
// the exponential mechanism's probabilities ∝ exp(−ε·|below_j − q·n|/(2r)).
// Each of the 4 frequencies is within 5.5 binomial standard deviations
// (two-sided false rejection ≤ 4e-8 each, ≤ 2e-7 in all).
func TestExponentialQuantile_Distribution(t *testing.T) {
	const draws = 20000
	below := []int64{0, 3, 5, 9}
	const n, q, eps, r = 10, 0.5, 0.8, 1.0
	m, err := NewExponentialQuantile(eps, r, rand.NewChaCha8([32]byte{9}))
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, len(below))
	for i := 0; i < draws; i++ {
		j, err := m.Select(below, n, q)
		if err != nil {
			t.Fatal(err)
		}
		counts[j]++
	}
	w := make([]float64, len(below))
	total := 0.0
	for j, b := range below {
		w[j] = math.Exp(-eps * math.Abs(float64(b)-q*n) / (2 * r))
		total += w[j]
	}
	for j := range below {
		p := w[j] / total
		sd := math.Sqrt(draws * p * (1 - p))
		if d := math.Abs(float64(counts[j]) - draws*p); d > 5.5*sd {
			t.Errorf("candidate %d selected %d times, want %.0f ± %.0f", j, counts[j], draws*p, 5.5*sd)
		}
	}
}

func TestExponentialQuantile_Errors(t *testing.T) {
	if _, err := NewExponentialQuantile(0, 1, nil); err == nil {
		t.Error("ε = 0 accepted")
	}
	if _, err := NewExponentialQuantile(1, math.NaN(), nil); err == nil {
		t.Error("NaN sensitivity accepted")
	}
	m, _ := NewExponentialQuantile(1, 1, nil)
	if _, err := m.Select(nil, 1, 0.5); err == nil {
		t.Error("no candidates accepted")
	}
	if _, err := m.Select([]int64{1}, 1, 1.5); err == nil {
		t.Error("q = 1.5 accepted")
	}
}
