// Privacy-critical: needs DP review.

//go:build stat

package noise

// Heavier statistical sweeps: go test -tags stat -run Stat ./noise
// Each individual test falsely rejects with probability 1e-5 (see pCrit,
// zCrit and ksCrit), so the whole sweep of about 200 tests falsely fails
// with probability about 2·10⁻³ for a random choice of seeds; the seeds are
// fixed, so `make test` (which runs this sweep) gives the same verdict on
// every run. Only TestStat_Timing draws from crypto/rand.

import (
	"math"
	"math/big"
	"sort"
	"testing"
)

func TestStat_DiscreteLaplaceSweep(t *testing.T) {
	scales := [][2]int64{{1, 1000}, {1, 10}, {1, 2}, {2, 3}, {1, 1}, {7, 3}, {10, 1}, {1000, 7}, {5000, 1}}
	for i, sc := range scales {
		for seed := uint64(0); seed < 10; seed++ {
			scale := float64(sc[0]) / float64(sc[1])
			samples := drawInts(t, 100000, uint64(i)*1000+seed, func(s *source) *big.Int {
				return s.discreteLaplace(big.NewInt(sc[0]), big.NewInt(sc[1]))
			})
			pmf := dlapPMF(scale)
			chiSquareTest(t, "dlap", samples, pmf)
			v, m4 := pmfMoments(pmf, int64(80*scale)+80)
			momentTest(t, "dlap", samples, v, m4)
		}
	}
}

func TestStat_DiscreteGaussianSweep(t *testing.T) {
	for i, sigma := range []float64{0.1, 0.5, 1, 1.7, 4, 12.5, 100, 1000} {
		for seed := uint64(0); seed < 8; seed++ {
			s := ratOf(sigma)
			s2 := new(big.Rat).Mul(s, s)
			lap := new(big.Int).Quo(s2.Num(), s2.Denom())
			lap.Sqrt(lap)
			lap.Add(lap, big.NewInt(1))
			samples := drawInts(t, 100000, uint64(i)*1000+seed+500000, func(src *source) *big.Int {
				return src.discreteGaussian(s2.Num(), s2.Denom(), lap)
			})
			pmf := dgaussPMF(sigma)
			chiSquareTest(t, "dgauss", samples, pmf)
			v, m4 := pmfMoments(pmf, int64(40*sigma)+10)
			momentTest(t, "dgauss", samples, v, m4)
		}
	}
}

// ksCrit returns the Kolmogorov–Smirnov critical value for n samples at
// false-rejection probability 1e-5: P(√n·D > x) ≤ 2e^{−2x²} (Dvoretzky–
// Kiefer–Wolfowitz with Massart's constant), so x = √(ln(2/1e-5)/2). For
// a discrete law the test is conservative.
func ksCrit(n int) float64 { return math.Sqrt(math.Log(2/1e-5)/2) / math.Sqrt(float64(n)) }

// ksTest compares noise samples in grid units with a CDF on Z.
func ksTest(t *testing.T, name string, z []float64, cdf func(float64) float64) {
	t.Helper()
	sort.Float64s(z)
	n := float64(len(z))
	var d float64
	for i := 0; i < len(z); {
		j := i
		for j < len(z) && z[j] == z[i] {
			j++
		}
		f := cdf(z[i])
		d = math.Max(d, math.Max(math.Abs(float64(j)/n-f), math.Abs(float64(i)/n-cdf(z[i]-1))))
		i = j
	}
	if d > ksCrit(len(z)) {
		t.Errorf("%s: KS distance %.5f > %.5f", name, d, ksCrit(len(z)))
	}
}

// TestStat_RealModeKS checks real-mode noise (in grid units, where the
// scale is about 2⁴⁰) against the discrete CDFs of the scale re-derived in
// power_test.go (refLaplace, refGaussian), for a measurement off the grid
// (rounded to the nearest grid point, ties up, as noise/doc.go says).
func TestStat_RealModeKS(t *testing.T) {
	for i, p := range []Params{
		{Epsilon: 1, Sensitivity: 1},
		{Epsilon: 0.1, Sensitivity: 20000, Cells: 4},
		{Epsilon: 3, Sensitivity: 0.01},
	} {
		x := big.NewRat(12345, 7)
		const n = 50000
		z := make([]float64, n)
		draw := func(m Mechanism, r *big.Rat) {
			// x in grid units, rounded half up: ⌊x/r + ½⌋.
			q := new(big.Rat).Add(new(big.Rat).Quo(x, r), big.NewRat(1, 2))
			xg := new(big.Int).Div(q.Num(), q.Denom())
			for j := range z {
				y, err := m.AddNoise(x)
				if err != nil {
					t.Fatal(err)
				}
				g := new(big.Rat).Quo(y, r)
				if !g.IsInt() {
					t.Fatalf("released value off the grid %v", r)
				}
				z[j], _ = new(big.Float).SetInt(new(big.Int).Sub(g.Num(), xg)).Float64()
			}
		}
		p.Rand = seeded(uint64(9000 + i))
		m, err := NewLaplace(p)
		if err != nil {
			t.Fatal(err)
		}
		tRat, r := refLaplace(p)
		scale, _ := tRat.Float64()
		draw(m, r)
		q := math.Exp(-1 / scale)
		ksTest(t, "real laplace", z, func(v float64) float64 { // P(Z ≤ v)
			if v >= 0 {
				return 1 - math.Exp(-(v+1)/scale)/(1+q)
			}
			return math.Exp(v/scale) / (1 + q)
		})

		p.Delta = 1e-6
		p.Rand = seeded(uint64(9100 + i))
		gm, err := NewGaussian(p)
		if err != nil {
			t.Fatal(err)
		}
		sigma, r := refGaussian(p)
		draw(gm, r)
		ksTest(t, "real gaussian", z, func(v float64) float64 { return refNormalCDF((v + 0.5) / sigma) })
	}
}

// TestStat_Timing reports the Spearman correlation between |noise| and
// AddNoise time over many calls (the figure in BENCHMARKS.md).
func TestStat_Timing(t *testing.T) {
	const n = 100000
	x := big.NewRat(0, 1)
	for _, tc := range []struct {
		name string
		p    Params
		gaus bool
	}{
		{"laplace integer b=30", Params{Epsilon: 1, Sensitivity: 30, Integer: true}, false},
		{"laplace real b=30", Params{Epsilon: 1, Sensitivity: 30}, false},
		{"gaussian integer Δ₂=5 ε=1 δ=1e-6", Params{Epsilon: 1, Delta: 1e-6, Sensitivity: 5, Integer: true}, true},
		{"gaussian real Δ₂=5 ε=1 δ=1e-6", Params{Epsilon: 1, Delta: 1e-6, Sensitivity: 5}, true},
	} {
		var m Mechanism
		var err error
		if tc.gaus {
			m, err = NewGaussian(tc.p)
		} else {
			m, err = NewLaplace(tc.p)
		}
		if err != nil {
			t.Fatal(err)
		}
		rho := timeVsMagnitude(n, func() *big.Int {
			y, err := m.AddNoise(x)
			if err != nil {
				t.Fatal(err)
			}
			q := new(big.Rat).Quo(y, m.Granularity())
			return new(big.Int).Set(q.Num())
		})
		t.Logf("%s (crypto/rand): Spearman ρ(|noise|, time) = %.4f over %d calls", tc.name, rho, n)
		if math.Abs(rho) > maxTimingCorrelation {
			t.Errorf("%s: |ρ| = %.4f", tc.name, rho)
		}
	}
	src := newSource(seeded(3))
	rho := timeVsMagnitude(n, func() *big.Int { return src.leakyDiscreteLaplace(big.NewInt(30)) })
	t.Logf("leaky baseline (CKS loop for V, t=30): Spearman ρ = %.4f over %d calls", rho, n)
	if rho <= maxTimingCorrelation {
		t.Errorf("leaky baseline not detected: ρ = %.4f ≤ %g", rho, maxTimingCorrelation)
	}
}
