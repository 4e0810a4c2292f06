// Privacy-critical: needs DP review.

package noise

import (
	"math"
	"math/big"
	"testing"
)

func TestLaplacePartitionThreshold(t *testing.T) {
	// L0 = 1, ε = 1, δ = 1e-5: τ = 1 + ln(1/(2·1e-5)) = 11.819778…
	got, err := LaplacePartitionThreshold(1, 1e-5, 1)
	if err != nil || math.Abs(got-(1+math.Log(5e4))) > 1e-12 {
		t.Errorf("LaplacePartitionThreshold(1, 1e-5, 1) = %v, %v; want %v", got, err, 1+math.Log(5e4))
	}
	// The defining property for L0 = 4: each partition leaks with
	// probability δ_p = 1 − (1−δ)^{1/4}, and 1 − (1−δ_p)⁴ = δ.
	const eps, delta, l0 = 0.5, 1e-6, 4
	tau, _ := LaplacePartitionThreshold(eps, delta, l0)
	b := l0 / eps
	p := 0.5 * math.Exp(-(tau-1)/b)
	if any := 1 - math.Pow(1-p, l0); math.Abs(any-delta) > 1e-12 {
		t.Errorf("P(any of 4 singleton partitions kept) = %g, want %g", any, delta)
	}
	for _, bad := range []struct {
		d float64
		g int
	}{{0, 1}, {1, 1}, {math.NaN(), 1}, {1e-6, 0}} {
		if _, err := LaplacePartitionThreshold(1, bad.d, bad.g); err == nil {
			t.Errorf("LaplacePartitionThreshold(δ=%v, L0=%d) accepted", bad.d, bad.g)
		}
	}
}

func TestGaussianPartitionThreshold(t *testing.T) {
	const eps, nd, td, l0 = 1.0, 1e-6, 1e-6, 3
	tau, err := GaussianPartitionThreshold(eps, nd, td, l0)
	if err != nil {
		t.Fatal(err)
	}
	sigma, _ := AnalyticGaussianSigma(eps, nd, math.Sqrt(l0))
	p := 1 - normalCDF((tau-1)/sigma)
	if any := 1 - math.Pow(1-p, l0); math.Abs(any-td) > 1e-9*td+1e-15 {
		t.Errorf("P(any singleton kept) = %g, want %g", any, td)
	}
}

// TestPartitionThreshold_Exact checks, for the discrete mechanisms, that
// the threshold meets δ_p exactly (by the pmf), is minimal, and that the
// empirical release rate of a singleton partition matches.
func TestPartitionThreshold_Exact(t *testing.T) {
	lap, err := NewLaplace(Params{Epsilon: 1, Sensitivity: 2, Integer: true, Rand: seeded(41)})
	if err != nil {
		t.Fatal(err)
	}
	gau, err := NewGaussian(Params{Epsilon: 1, Delta: 1e-6, Sensitivity: math.Sqrt2, Integer: true, Cells: 2, Rand: seeded(42)})
	if err != nil {
		t.Fatal(err)
	}
	realLap, err := NewLaplace(Params{Epsilon: 1, Sensitivity: 2, Rand: seeded(43)})
	if err != nil {
		t.Fatal(err)
	}
	const delta, l0 = 0.05, 2
	dp := perPartitionDelta(delta, l0)
	for _, tc := range []struct {
		name string
		m    Mechanism
		pmf  func(int64) float64
	}{
		{"laplace", lap, dlapPMF(2)},
		{"gaussian", gau, dgaussPMF(gau.(*gaussian).sigma)},
		{"real laplace", realLap, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tau, err := PartitionThreshold(tc.m, delta, l0)
			if err != nil {
				t.Fatal(err)
			}
			if !new(big.Rat).Quo(tau, tc.m.Granularity()).IsInt() {
				t.Fatalf("threshold %v off the grid", tau)
			}
			if tc.pmf != nil {
				k := new(big.Rat).Sub(tau, big.NewRat(1, 1))
				if !k.IsInt() {
					t.Fatalf("integer threshold expected")
				}
				kk := k.Num().Int64()
				var pk, pk1 float64 // P(Z ≥ k), P(Z ≥ k−1)
				for z := kk; z < kk+2000; z++ {
					pk += tc.pmf(z)
				}
				pk1 = pk + tc.pmf(kk-1)
				if pk > dp || pk1 <= dp*thresholdSafety {
					t.Errorf("τ = %v: P(kept) = %g, one step lower %g; δ_p = %g", tau, pk, pk1, dp)
				}
			}
			// Empirical release rate of a singleton partition: binomial
			// one-sided z-test against δ_p, false rejection 1e-5.
			const n = 20000
			kept := 0
			for i := 0; i < n; i++ {
				y, err := tc.m.AddNoise(big.NewRat(1, 1))
				if err != nil {
					t.Fatal(err)
				}
				if y.Cmp(tau) >= 0 {
					kept++
				}
			}
			if rate := float64(kept) / n; rate > dp+zCrit*math.Sqrt(dp*(1-dp)/n) {
				t.Errorf("singleton kept at rate %g > δ_p = %g", rate, dp)
			}
		})
	}
}
