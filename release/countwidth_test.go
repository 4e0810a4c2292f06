package release

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/dpproxy/dpproxy/noise"
)

// TestCountHalfWidth_CoversRoundedCount releases a count of 1000 (a whole
// number, as an unweighted count is) 20,000 times at ε = 0.45 (scale
// 2.22, TestBICorpus's patient counts) on the real grid of a weighted
// count, rounds it as outputRow does, and checks that the stated
// half-width covers at least 95% of them, and that in integer mode it is
// the noise's own exact quantile (nothing added).
//
// False rejection: a correct statement covers with probability at least
// 95.4% here (|e| < 6.5 + 0.5 = 7.157 rounds within 7: 1 − e^{−7/2.22} ≥
// 0.957); the test fails below 0.95, 6.7 standard deviations (√(0.046·
// 0.954/20000) = 0.0015) under it: probability below 10⁻¹⁰. The statement
// without the 1/2 (6.657) covers 94.6% and fails with probability
// 1 − P(N(0.946, 0.0016) ≥ 0.95) ≈ 0.99.
func TestCountHalfWidth_CoversRoundedCount(t *testing.T) {
	const n = 20000
	src := rand.NewChaCha8([32]byte{29})
	real, err := noise.NewLaplace(noise.Params{Epsilon: 0.45, Sensitivity: 1, Cells: 1, Rand: src})
	if err != nil {
		t.Fatal(err)
	}
	h := countHalfWidth(real)
	if want := real.HalfWidth(0.95) + 0.5; h != want {
		t.Fatalf("real-mode count half-width %g, want the noise's %g plus 1/2", h, real.HalfWidth(0.95))
	}
	truth := big.NewRat(1000, 1)
	covered := 0
	for i := 0; i < n; i++ {
		x, err := real.AddNoise(truth)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := new(big.Rat).Sub(roundRat(x), truth).Float64()
		if math.Abs(d) <= h {
			covered++
		}
	}
	if cov := float64(covered) / n; cov < 0.95 {
		t.Errorf("the rounded count is within ±%g of its truth in %.4f of %d releases, want ≥ 0.95", h, cov, n)
	}
	integer, err := noise.NewLaplace(noise.Params{Epsilon: 0.45, Sensitivity: 1, Integer: true, Rand: src})
	if err != nil {
		t.Fatal(err)
	}
	if h, want := countHalfWidth(integer), integer.HalfWidth(0.95); h != want {
		t.Errorf("integer-mode count half-width %g, want the noise's exact quantile %g", h, want)
	}
}
