// Privacy-critical: needs DP review.

package noise

import (
	"errors"
	"math"
	"math/big"
	"testing"
)

// Known answers from ACCOUNTING.md row 4 (dp_accounting
// privacy_loss_mechanism_test.py, re-derived independently): the exact
// Gaussian curve δ(ε) of Balle and Wang 2018.
func TestGaussianDelta_KnownAnswers(t *testing.T) {
	tests := []struct{ sigma, l2, eps, want float64 }{
		{1, 1, 1, 0.12693674},
		{1, 3, 1, 0.78760074},
		{1, 1, 2, 0.02092364},
		{1, 1, 0, 0.38292492},
	}
	for _, tc := range tests {
		if got := GaussianDelta(tc.sigma, tc.eps, tc.l2); math.Abs(got-tc.want) > 5e-9 {
			t.Errorf("GaussianDelta(σ=%g, ε=%g, Δ=%g) = %.9f, want %.8f", tc.sigma, tc.eps, tc.l2, got, tc.want)
		}
	}
}

// Known answers from ACCOUNTING.md row 7 (OpenDP zCDP_to_approxDP tests):
// ρ = 1/32 gives ε(δ=1e-3) = 0.6880024554878086 and δ(ε=0) = 0.1508457845622862.
func TestZCDPDelta_KnownAnswers(t *testing.T) {
	if got := ZCDPDelta(1.0/32, 0.6880024554878086); math.Abs(got-1e-3) > 1e-9 {
		t.Errorf("ZCDPDelta(1/32, 0.688) = %.12g, want 1e-3", got)
	}
	if got := ZCDPDelta(1.0/32, 0); math.Abs(got-0.1508457845622862) > 1e-9 {
		t.Errorf("ZCDPDelta(1/32, 0) = %.12g, want 0.1508457845622862", got)
	}
}

func TestAnalyticGaussianSigma_RoundTrip(t *testing.T) {
	for _, tc := range []struct{ eps, delta, l2 float64 }{
		{1, 1e-6, 1}, {0.1, 1e-5, 3}, {5, 1e-9, 1}, {0.01, 1e-3, 20000}, {1, 0.12693674, 1},
	} {
		sigma, err := AnalyticGaussianSigma(tc.eps, tc.delta, tc.l2)
		if err != nil {
			t.Fatal(err)
		}
		got := GaussianDelta(sigma, tc.eps, tc.l2)
		if got > tc.delta || got < tc.delta*(1-1e-6) {
			t.Errorf("δ(σ(ε=%g, δ=%g, Δ=%g) = %g) = %g", tc.eps, tc.delta, tc.l2, sigma, got)
		}
		// σ → δ → σ.
		back, err := AnalyticGaussianSigma(tc.eps, got, tc.l2)
		if err != nil || math.Abs(back-sigma) > 1e-8*sigma {
			t.Errorf("round trip σ = %g → δ = %g → σ = %g (%v)", sigma, got, back, err)
		}
	}
	// Known answer row 4: σ = 1, Δ = 1, ε = 1 has δ = 0.12693674.
	if s, _ := AnalyticGaussianSigma(1, 0.12693674, 1); math.Abs(s-1) > 1e-6 {
		t.Errorf("AnalyticGaussianSigma(1, 0.12693674, 1) = %g, want 1", s)
	}
	if _, err := AnalyticGaussianSigma(1, 0, 1); !errors.Is(err, ErrDelta) {
		t.Errorf("δ = 0 accepted")
	}
}

func TestSigmaHelpers(t *testing.T) {
	if got, _ := SigmaFromRho(0.5, 2); math.Abs(got-2) > 1e-15 {
		t.Errorf("SigmaFromRho(0.5, 2) = %g, want 2", got)
	}
	// σ² = Δ²α/(2ε̄): Δ=3, α=8, ε̄=4 → σ² = 9.
	if got, _ := RDPGaussianSigma(8, 4, 3); math.Abs(got-3) > 1e-15 {
		t.Errorf("RDPGaussianSigma(8, 4, 3) = %g, want 3", got)
	}
	if _, err := RDPGaussianSigma(1, 4, 3); err == nil {
		t.Errorf("α = 1 accepted")
	}
	// ACCOUNTING.md row 2: noise multiplier 4.530877117 with δ = 1e-6
	// gives ε = 1 under the exact Gaussian curve 0.92739.
	if d := GaussianDelta(4.530877117, 0.92739, 1); math.Abs(d-1e-6) > 2e-10 {
		t.Errorf("GaussianDelta(4.530877117, 0.92739) = %g, want 1e-6", d)
	}
}

// bruteDiscreteDelta is an independent evaluation of the hockey-stick
// divergence between N_Z(0, σ²) and N_Z(d, σ²): Σ_y max(0, p(y) − e^ε p(y−d)).
func bruteDiscreteDelta(sigma, eps float64, d int64) float64 {
	lim := int64(60*sigma) + d + 10
	var z, sum float64
	p := func(y int64) float64 { return math.Exp(-float64(y*y) / (2 * sigma * sigma)) }
	for y := -lim; y <= lim; y++ {
		z += p(y)
		sum += math.Max(0, p(y)-math.Exp(eps)*p(y-d))
	}
	return sum / z
}

func TestDiscreteGaussianDelta(t *testing.T) {
	for _, tc := range []struct {
		sigma, eps float64
		d          int64
	}{
		{0.5, 1, 1}, {1, 1, 1}, {1, 0.2, 1}, {3.7, 0.5, 2}, {20, 0.1, 3}, {100, 1, 7}, {0.3, 3, 1},
	} {
		got := discreteGaussianDelta(tc.sigma, tc.eps, float64(tc.d))
		want := bruteDiscreteDelta(tc.sigma, tc.eps, tc.d)
		if got < want*(1-1e-9) || got > want*(1+1e-6)+1e-300 {
			t.Errorf("discreteGaussianDelta(σ=%g, ε=%g, d=%d) = %.12g, brute force %.12g", tc.sigma, tc.eps, tc.d, got, want)
		}
	}
	// A shift far beyond σ (d ≫ σ, large ε) must stay cheap and exact.
	if got, want := discreteGaussianDelta(3, 5, 1e4), bruteDiscreteDelta(3, 5, 1e4); !(got >= want*(1-1e-12) && got <= want*(1+1e-12)+1e-299) {
		t.Errorf("d ≫ σ: got %g want %g", got, want)
	}
	// The Euler–Maclaurin bound (σ > 128) is an upper bound of the exact
	// sum and nearly tight.
	for _, tc := range []struct{ sigma, eps, d float64 }{{129, 0.05, 1}, {300, 0.1, 5}, {1000, 1, 20}, {500, 0.01, 1}} {
		bound := discreteGaussianDelta(tc.sigma, tc.eps, tc.d)
		exact := discreteGaussianDeltaSum(tc.sigma, tc.eps, tc.d)
		if bound < exact*(1-1e-9) || bound > exact*(1+1e-4) {
			t.Errorf("σ=%g ε=%g d=%g: EM bound %.10g vs sum %.10g", tc.sigma, tc.eps, tc.d, bound, exact)
		}
	}
}

// dgaussPMF is the discrete Gaussian pmf with variance parameter σ².
func dgaussPMF(sigma float64) func(int64) float64 {
	var z float64
	lim := int64(40*sigma) + 10
	for y := -lim; y <= lim; y++ {
		z += math.Exp(-float64(y*y) / (2 * sigma * sigma))
	}
	return func(y int64) float64 { return math.Exp(-float64(y*y)/(2*sigma*sigma)) / z }
}

func TestDiscreteGaussian_Distribution(t *testing.T) {
	for i, sigma := range []float64{0.6, 1, 2.5, 10.3, 57.25} {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			s := ratOf(sigma)
			s2 := new(big.Rat).Mul(s, s)
			lap := new(big.Int).Quo(s2.Num(), s2.Denom())
			lap.Sqrt(lap)
			lap.Add(lap, big.NewInt(1))
			samples := drawInts(t, 60000, uint64(500+i), func(src *source) *big.Int {
				return src.discreteGaussian(s2.Num(), s2.Denom(), lap)
			})
			pmf := dgaussPMF(sigma)
			chiSquareTest(t, "dgauss", samples, pmf)
			v, m4 := pmfMoments(pmf, int64(40*sigma)+10)
			momentTest(t, "dgauss", samples, v, m4)
		})
	}
}

func TestNewGaussian_Validation(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		p    Params
		want error
	}{
		{"nan epsilon", Params{Epsilon: nan, Delta: 1e-6, Sensitivity: 1}, ErrEpsilon},
		{"zero epsilon", Params{Epsilon: 0, Delta: 1e-6, Sensitivity: 1}, ErrEpsilon},
		{"inf epsilon", Params{Epsilon: math.Inf(1), Delta: 1e-6, Sensitivity: 1}, ErrEpsilon},
		{"zero delta", Params{Epsilon: 1, Delta: 0, Sensitivity: 1}, ErrDelta},
		{"delta one", Params{Epsilon: 1, Delta: 1, Sensitivity: 1}, ErrDelta},
		{"nan delta", Params{Epsilon: 1, Delta: nan, Sensitivity: 1}, ErrDelta},
		{"negative delta", Params{Epsilon: 1, Delta: -1e-6, Sensitivity: 1}, ErrDelta},
		{"zero sensitivity", Params{Epsilon: 1, Delta: 1e-6}, ErrSensitivity},
		{"inf sensitivity", Params{Epsilon: 1, Delta: 1e-6, Sensitivity: math.Inf(1)}, ErrSensitivity},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewGaussian(tc.p); !errors.Is(err, tc.want) {
				t.Errorf("NewGaussian(%+v) = %v, want %v", tc.p, err, tc.want)
			}
		})
	}
}

// TestNewGaussian_Calibration checks that each mechanism's σ meets its
// stated guarantee and is minimal (σ·(1−10⁻⁸) fails it).
func TestNewGaussian_Calibration(t *testing.T) {
	tests := []struct {
		name string
		p    Params
	}{
		{"integer count", Params{Epsilon: 1, Delta: 1e-6, Sensitivity: 1, Integer: true}},
		{"integer large eps", Params{Epsilon: 8, Delta: 1e-6, Sensitivity: 1, Integer: true}},
		{"integer sum", Params{Epsilon: 0.5, Delta: 1e-8, Sensitivity: 400, Integer: true}},
		{"integer vector", Params{Epsilon: 1, Delta: 1e-6, Sensitivity: 2, Integer: true, Cells: 4}},
		{"real", Params{Epsilon: 1, Delta: 1e-6, Sensitivity: 2.5}},
		{"real vector", Params{Epsilon: 0.3, Delta: 1e-5, Sensitivity: 20000 * math.Sqrt(3), Cells: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewGaussian(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			g := m.(*gaussian)
			cells := tc.p.cells()
			inv := math.Ldexp(1, -g.granExp)
			var check func(s float64) float64
			if cells > 1 {
				charged := tc.p.Sensitivity
				if !tc.p.Integer {
					charged = tc.p.Sensitivity*inv + math.Sqrt(float64(cells))
				}
				check = func(s float64) float64 { return ZCDPDelta(charged*charged/(2*s*s), tc.p.Epsilon) }
				if got := 1 / (2 * g.multiplier * g.multiplier); math.Abs(got-charged*charged/(2*g.sigma*g.sigma)) > 1e-12*got {
					t.Errorf("NoiseMultiplier inconsistent with ρ")
				}
			} else {
				d := math.Max(1, math.Floor(tc.p.Sensitivity))
				if !tc.p.Integer {
					d = math.Floor(tc.p.Sensitivity*inv) + 1
				}
				check = func(s float64) float64 { return discreteGaussianDelta(s, tc.p.Epsilon, d) }
			}
			if got := check(g.sigma); got > tc.p.Delta {
				t.Errorf("δ(σ=%g) = %g > %g", g.sigma, got, tc.p.Delta)
			}
			if got := check(g.sigma * (1 - 1e-8)); got <= tc.p.Delta {
				t.Errorf("σ = %g not minimal: δ(σ(1−1e-8)) = %g", g.sigma, got)
			}
			// The discrete σ is close to the continuous analytic σ for
			// one cell (CKS 2020: essentially the same privacy).
			if cells <= 1 {
				sc, _ := AnalyticGaussianSigma(tc.p.Epsilon, tc.p.Delta, tc.p.Sensitivity)
				sg := g.sigma
				if !tc.p.Integer {
					sg /= inv
				}
				if sg < 0.9*sc || sg > 1.1*sc+1 {
					t.Errorf("discrete σ %g far from continuous %g", sg, sc)
				}
			}
		})
	}
}

func TestGaussian_ReleaseAndHalfWidth(t *testing.T) {
	for i, tc := range []struct {
		name string
		p    Params
		x    *big.Rat
	}{
		{"integer", Params{Epsilon: 1, Delta: 1e-6, Sensitivity: 1, Integer: true}, big.NewRat(40, 1)},
		{"real", Params{Epsilon: 0.5, Delta: 1e-6, Sensitivity: 10}, big.NewRat(123457, 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.Rand = seeded(uint64(900 + i))
			m, err := NewGaussian(p)
			if err != nil {
				t.Fatal(err)
			}
			g := m.(*gaussian)
			r := m.Granularity()
			for _, c := range []float64{0.5, 0.9, 0.95, 0.99} {
				k, err := discreteGaussianQuantile(g.sigma, c)
				if err != nil {
					t.Fatal(err)
				}
				if g.sigma < 1000 {
					pmf := dgaussPMF(g.sigma)
					// Exact check against the pmf summed independently.
					var in float64
					for y := -int64(k); y <= int64(k); y++ {
						in += pmf(y)
					}
					out := in - pmf(int64(k)) - pmf(-int64(k))
					if in < c || (k > 0 && out >= c) {
						t.Errorf("c=%g: k=%g has P(|Z|≤k)=%g, P(|Z|≤k−1)=%g", c, k, in, out)
					}
				}
				if got := m.HalfWidth(c); got != math.Ldexp(k, g.granExp)+g.roundingBound() {
					t.Errorf("HalfWidth(%g) = %g", c, got)
				}
			}
			h := m.HalfWidth(0.95)
			k95, err := discreteGaussianQuantile(g.sigma, 0.95)
			if err != nil {
				t.Fatal(err)
			}
			pCover := 1 - discreteGaussianTail(g.sigma, k95)
			const n = 20000
			in := 0
			for j := 0; j < n; j++ {
				y, err := m.AddNoise(tc.x)
				if err != nil {
					t.Fatal(err)
				}
				if !new(big.Rat).Quo(y, r).IsInt() {
					t.Fatalf("released value off the grid")
				}
				if tc.p.Integer && !y.IsInt() {
					t.Fatalf("integer mode released a non-integer")
				}
				d, _ := new(big.Rat).Sub(y, tc.x).Float64()
				if math.Abs(d) <= h {
					in++
				}
			}
			// Binomial z-test of coverage; falsely rejects with
			// probability 1e-5.
			sd := math.Sqrt(pCover * (1 - pCover) / n)
			if got := float64(in) / n; math.Abs(got-pCover) > zCrit*sd {
				t.Errorf("coverage %g, want %g ± %g", got, pCover, zCrit*sd)
			}
		})
	}
}

func TestDiscreteGaussianTail_Regimes(t *testing.T) {
	// At σ = 2¹⁰, where the evaluation switches, the direct sum and the
	// Euler–Maclaurin formula must agree (to 1e-8 relative for k ≤ 31σ).
	sigma := float64(quantileDirectLimit)
	for _, k := range []float64{0, 64, 1024, 2048, 6000, 32000} {
		direct := discreteGaussianTail(sigma, k)
		s2 := sigma * sigma
		f := func(y float64) float64 { return math.Exp(-y * y / (2 * s2)) }
		n := k + 1
		em := 2 * (sigma*math.Sqrt(math.Pi/2)*math.Erfc(n/(sigma*math.Sqrt2)) + f(n)/2 + n*f(n)/(12*s2)) / (math.Sqrt(2*math.Pi) * sigma)
		if math.Abs(direct-em) > 1e-8*direct {
			t.Errorf("k=%g: direct %.15g, Euler–Maclaurin %.15g", k, direct, em)
		}
	}
}
