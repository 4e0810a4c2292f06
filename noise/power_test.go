// Privacy-critical: needs DP review.

package noise

// Tests with power (issue 19): every calibrated noise scale is checked
// against its formula re-derived here from the papers, never by calling the
// package's own calibration, and the samples of every mechanism and mode
// are checked against a pmf/CDF written here, by a test whose false
// rejection and whose power against half and double the scale are both
// stated and checked.
//
// The formulas (noise/doc.go, DESIGN.md "Noise", ACCOUNTING.md "Secure
// noise"):
//
//   - Laplace, integer mode: discrete Laplace of scale t = Δ₁/ε (Ghosh,
//     Roughgarden, Sundararajan 2009; CKS 2020 §2).
//   - Laplace, real mode (Google's "Secure Noise Generation"): with the
//     continuous scale s = Δ₁/ε the grid is r = 2^(⌊log₂ s⌋ − 39), and the
//     noise in grid units is discrete Laplace of scale t = (Δ₁ + c·r)/(r·ε),
//     c = Cells: the rounding to the grid moves each of the c changed cells
//     by at most one more step, charged as sensitivity.
//   - Gaussian: the discrete Gaussian N_Z(0, σ²) in grid units, σ the
//     smallest with δ(ε) ≤ δ where, for one changed cell, δ(ε) is the
//     hockey-stick divergence between N_Z(0, σ²) and N_Z(d, σ²) with d the
//     worst whole shift (integer mode max(1, ⌊Δ₂⌋), real mode ⌊Δ₂/r⌋ + 1)
//     (CKS 2020 Theorem 7), and for c > 1 cells ρ-zCDP with
//     ρ = Δ_g²/(2σ²), Δ_g = Δ₂ (integer) or Δ₂/r + √c (real), converted by
//     δ = inf_α e^{(α−1)(αρ−ε)}·(1 − 1/α)^{α−1}/α (CKS 2020 Proposition 12;
//     ACCOUNTING.md "RDP improved"). The real-mode grid is
//     r = 2^(⌊log₂ σ_c⌋ − 39), σ_c the analytic continuous Gaussian σ for
//     (ε, δ, Δ₂) (Balle and Wang 2018, Theorem 8).

import (
	"math"
	"math/big"
	"sort"
	"testing"
)

// refPow2 returns 2^e exactly.
func refPow2(e int) *big.Rat {
	if e >= 0 {
		return new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(e)))
	}
	return new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), uint(-e)))
}

// refFloorLog2 returns ⌊log₂ x⌋ of a rational x > 0: a float estimate,
// settled by exact comparisons with powers of two.
func refFloorLog2(x *big.Rat) int {
	f, _ := x.Float64()
	e := math.Ilogb(f)
	for x.Cmp(refPow2(e)) < 0 {
		e--
	}
	for x.Cmp(refPow2(e+1)) >= 0 {
		e++
	}
	return e
}

// refLaplace returns the discrete Laplace scale t (in grid units) and the
// grid r that the formulas above give for p.
func refLaplace(p Params) (t, r *big.Rat) {
	eps := new(big.Rat).SetFloat64(p.Epsilon)
	l1 := new(big.Rat).SetFloat64(p.Sensitivity)
	s := new(big.Rat).Quo(l1, eps)
	if p.Integer {
		return s, big.NewRat(1, 1)
	}
	r = refPow2(refFloorLog2(s) - 39)
	c := int64(max(p.Cells, 1))
	num := new(big.Rat).Add(l1, new(big.Rat).Mul(big.NewRat(c, 1), r))
	return num.Quo(num, new(big.Rat).Mul(r, eps)), r
}

// refNormalCDF is Φ.
func refNormalCDF(x float64) float64 { return math.Erfc(-x/math.Sqrt2) / 2 }

// refAnalyticDelta is the exact δ(ε) of the continuous Gaussian mechanism
// with noise σ and sensitivity d (Balle and Wang 2018, Theorem 8):
// Φ(d/(2σ) − εσ/d) − e^ε·Φ(−d/(2σ) − εσ/d).
func refAnalyticDelta(sigma, eps, d float64) float64 {
	second := 0.0
	if p := refNormalCDF(-d/(2*sigma) - eps*sigma/d); p > 0 {
		second = math.Exp(eps + math.Log(p))
	}
	return math.Max(0, refNormalCDF(d/(2*sigma)-eps*sigma/d)-second)
}

// refZCDPDelta is inf over α > 1 of e^{(α−1)(αρ−ε)}·(1−1/α)^{α−1}/α
// (CKS 2020 Proposition 12), by a scan of ln(α−1) and a local refinement.
func refZCDPDelta(rho, eps float64) float64 {
	logD := func(x float64) float64 {
		a := 1 + math.Exp(x)
		return (a-1)*(a*rho-eps) + (a-1)*math.Log(1-1/a) - math.Log(a)
	}
	best, bx := math.Inf(1), 0.0
	for x := -14.0; x <= 14; x += 0.01 {
		if v := logD(x); v < best {
			best, bx = v, x
		}
	}
	lo, hi := bx-0.01, bx+0.01
	for i := 0; i < 100; i++ {
		m1, m2 := lo+(hi-lo)/3, hi-(hi-lo)/3
		if logD(m1) < logD(m2) {
			hi = m2
		} else {
			lo = m1
		}
	}
	return math.Exp(math.Min(best, logD((lo+hi)/2)))
}

// refSmallestSigma returns the smallest σ with delta(σ) ≤ target, for a
// delta that decreases in σ, by doubling from guess and bisecting to a
// relative 10⁻¹².
func refSmallestSigma(guess, target float64, delta func(float64) float64) float64 {
	hi := guess
	for delta(hi) > target {
		hi *= 2
	}
	lo := hi / 2
	for delta(lo) <= target {
		hi, lo = lo, lo/2
	}
	for hi-lo > 1e-12*hi {
		mid := lo + (hi-lo)/2
		if delta(mid) <= target {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// refDirectSumLimit is the σ up to which refGaussian sums the discrete
// curve term by term (bruteDiscreteDelta, gaussian_test.go); above it the
// continuous curve with the same whole shift is used, which differs from
// the discrete one by far less than the 10⁻⁴ relative tolerance on σ the
// tests allow (Poisson summation: the discrete Gaussian's tails equal the
// continuous ones' up to terms of relative order 1/σ²).
const refDirectSumLimit = 200

// refGaussian returns σ (in grid units) and the grid r the formulas above
// give for p.
func refGaussian(p Params) (sigma float64, r *big.Rat) {
	sc := refSmallestSigma(p.Sensitivity/p.Epsilon, p.Delta, func(s float64) float64 { return refAnalyticDelta(s, p.Epsilon, p.Sensitivity) })
	cells := max(p.Cells, 1)
	var charged, shift float64
	if p.Integer {
		r = big.NewRat(1, 1)
		charged, shift = p.Sensitivity, math.Max(1, math.Floor(p.Sensitivity))
	} else {
		r = refPow2(refFloorLog2(new(big.Rat).SetFloat64(sc)) - 39)
		rf, _ := r.Float64()
		charged = p.Sensitivity/rf + math.Sqrt(float64(cells))
		shift = math.Floor(p.Sensitivity/rf) + 1
	}
	rf, _ := r.Float64()
	guess := sc / rf
	if cells > 1 {
		return refSmallestSigma(guess, p.Delta, func(s float64) float64 {
			return refZCDPDelta(charged*charged/(2*s*s), p.Epsilon)
		}), r
	}
	return refSmallestSigma(guess, p.Delta, func(s float64) float64 {
		if s <= refDirectSumLimit {
			return bruteDiscreteDelta(s, p.Epsilon, int64(shift))
		}
		return refAnalyticDelta(s, p.Epsilon, shift)
	}), r
}

var laplacePowerCases = []struct {
	name string
	p    Params
}{
	{"integer t=4", Params{Epsilon: 0.5, Sensitivity: 2, Integer: true}},
	{"integer t=0.5", Params{Epsilon: 2, Sensitivity: 1, Integer: true}},
	{"integer t=50/3", Params{Epsilon: 0.3, Sensitivity: 5, Integer: true, Cells: 4}},
	{"real s=1", Params{Epsilon: 1, Sensitivity: 1}},
	{"real s=2e5 cells=4", Params{Epsilon: 0.1, Sensitivity: 20000, Cells: 4}},
	{"real s=1/300", Params{Epsilon: 3, Sensitivity: 0.01}},
	{"real s=4.71 cells=2", Params{Epsilon: 0.7, Sensitivity: 3.3, Cells: 2}},
}

var gaussianPowerCases = []struct {
	name string
	p    Params
}{
	{"integer count", Params{Epsilon: 1, Delta: 1e-6, Sensitivity: 1, Integer: true}},
	{"integer Δ=3.7", Params{Epsilon: 0.5, Delta: 1e-7, Sensitivity: 3.7, Integer: true}},
	{"integer sum", Params{Epsilon: 0.5, Delta: 1e-8, Sensitivity: 400, Integer: true}},
	{"integer vector", Params{Epsilon: 1, Delta: 1e-6, Sensitivity: 2, Integer: true, Cells: 4}},
	{"real", Params{Epsilon: 1, Delta: 1e-6, Sensitivity: 2.5}},
	{"real vector", Params{Epsilon: 0.3, Delta: 1e-5, Sensitivity: 20000 * math.Sqrt(3), Cells: 3}},
}

// TestLaplace_ScaleFormula checks the discrete Laplace scale and the grid
// of every mode exactly against the formula re-derived in refLaplace. A
// scale off by any factor (½ and 2 included) in either mode fails it.
func TestLaplace_ScaleFormula(t *testing.T) {
	for _, tc := range laplacePowerCases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewLaplace(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			wantT, wantR := refLaplace(tc.p)
			if got := m.Granularity(); got.Cmp(wantR) != 0 {
				t.Errorf("grid r = %v, want %v", got.FloatString(30), wantR.FloatString(30))
			}
			lm := m.(*laplace)
			if got := new(big.Rat).SetFrac(lm.tn, lm.td); got.Cmp(wantT) != 0 {
				g, _ := got.Float64()
				w, _ := wantT.Float64()
				t.Errorf("scale t = %.17g grid steps, want %.17g", g, w)
			}
			if got := m.NoiseMultiplier(); got != 1/tc.p.Epsilon {
				t.Errorf("NoiseMultiplier = %g, want 1/ε = %g", got, 1/tc.p.Epsilon)
			}
		})
	}
}

// TestGaussian_SigmaFormula checks σ and the grid of every mode against the
// curves re-derived in refGaussian: σ within a relative 10⁻⁴ (the package
// bounds the discrete curve above with a slack below 10⁻⁴ of δ, worth a few
// 10⁻⁶ of σ), the grid exactly. Half or double σ fails it.
func TestGaussian_SigmaFormula(t *testing.T) {
	for _, tc := range gaussianPowerCases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewGaussian(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			wantSigma, wantR := refGaussian(tc.p)
			if got := m.Granularity(); got.Cmp(wantR) != 0 {
				t.Errorf("grid r = %v, want %v", got.FloatString(30), wantR.FloatString(30))
			}
			if got := m.(*gaussian).sigma; math.Abs(got/wantSigma-1) > 1e-4 {
				t.Errorf("σ = %.10g grid steps, want %.10g (ratio %.6f)", got, wantSigma, got/wantSigma)
			}
		})
	}
}

// The distribution tests below are one-sample Kolmogorov–Smirnov tests of
// ksDraws samples (in grid units) against the CDF re-derived here.
//
// False rejection: by the Dvoretzky–Kiefer–Wolfowitz inequality with
// Massart's constant, P(sup|F_n − F| > c) ≤ 2e^{−2nc²} for every F
// (conservative for a discrete F), so c = √(ln(2/ksAlpha)/(2n)) falsely
// rejects with probability at most ksAlpha = 10⁻⁵.
//
// Power: if the samples follow F_alt with d = sup|F − F_alt|, the test
// accepts only if sup|F_n − F_alt| ≥ d − c, which has probability at most
// 2e^{−2n(d−c)²}. Each test computes d for half and double the scale (and
// zero noise) and fails as underpowered unless that bound is below
// ksBeta = 10⁻⁶: every 2× scale error in either direction is caught with
// probability above 1 − 10⁻⁶. For the (discrete) Laplace d ≈ 1/8, for the
// Gaussian d ≈ 0.16; with n = 3000, c = 0.045 and the bound is below 10⁻¹⁵.
const (
	ksDraws = 3000
	ksAlpha = 1e-5
	ksBeta  = 1e-6
)

// ksCritical is the KS critical value at false-rejection probability
// alpha for n samples (DKW–Massart).
func ksCritical(n int, alpha float64) float64 {
	return math.Sqrt(math.Log(2/alpha) / (2 * float64(n)))
}

// ksDistance returns sup_x |F_n(x) − F(x)| for integer samples and a CDF
// on Z (F(z) = P(Z ≤ z)).
func ksDistance(samples []int64, cdf func(int64) float64) float64 {
	z := append([]int64(nil), samples...)
	sort.Slice(z, func(i, j int) bool { return z[i] < z[j] })
	n := float64(len(z))
	var d float64
	for i := 0; i < len(z); {
		j := i
		for j < len(z) && z[j] == z[i] {
			j++
		}
		d = math.Max(d, math.Max(math.Abs(float64(j)/n-cdf(z[i])), math.Abs(float64(i)/n-cdf(z[i]-1))))
		i = j
	}
	return d
}

// cdfGap returns a lower bound on sup_z |F(z) − G(z)|: the largest gap at
// the integers near 0 and at 4001 points spread over ±40 scales.
func cdfGap(f, g func(int64) float64, scale float64) float64 {
	var d float64
	at := func(z int64) { d = math.Max(d, math.Abs(f(z)-g(z))) }
	for z := int64(-60); z <= 60; z++ {
		at(z)
	}
	for k := -2000; k <= 2000; k++ {
		at(int64(math.Round(float64(k) * scale / 50)))
	}
	return d
}

// ksWithPower runs the KS test of samples against family(scale) and checks
// the design's power against family(scale/2), family(2·scale) and zero
// noise (see above).
func ksWithPower(t *testing.T, name string, samples []int64, family func(float64) func(int64) float64, scale float64) {
	t.Helper()
	n := len(samples)
	c := ksCritical(n, ksAlpha)
	cdf := family(scale)
	zero := func(z int64) float64 {
		if z >= 0 {
			return 1
		}
		return 0
	}
	for _, alt := range []struct {
		what string
		cdf  func(int64) float64
	}{{"half the scale", family(scale / 2)}, {"double the scale", family(2 * scale)}, {"no noise", zero}} {
		d := cdfGap(cdf, alt.cdf, scale)
		if miss := 2 * math.Exp(-2*float64(n)*math.Pow(math.Max(0, d-c), 2)); d <= c || miss > ksBeta {
			t.Fatalf("%s: underpowered: against %s (CDF gap %.4f, critical value %.4f) the test misses with probability up to %.3g > %g", name, alt.what, d, c, miss, ksBeta)
		}
	}
	if d := ksDistance(samples, cdf); d > c {
		t.Errorf("%s: KS distance %.5f > %.5f to the CDF of scale %.6g (false rejection ≤ %g)", name, d, c, scale, ksAlpha)
	}
}

// laplaceCDF is the discrete Laplace CDF of scale t:
// P(Z = z) = (1−q)/(1+q)·q^{|z|}, q = e^{−1/t}, so P(Z ≤ −m) = q^m/(1+q)
// for m ≥ 1 and P(Z ≤ z) = 1 − q^{z+1}/(1+q) for z ≥ 0.
func laplaceCDF(t float64) func(int64) float64 {
	onePlusQ := 1 + math.Exp(-1/t)
	return func(z int64) float64 {
		if z >= 0 {
			return 1 - math.Exp(-float64(z+1)/t)/onePlusQ
		}
		return math.Exp(float64(z)/t) / onePlusQ
	}
}

// gaussianCDF is the discrete Gaussian CDF with parameter σ: summed term by
// term for σ ≤ 200, else Φ((z + ½)/σ) (Euler–Maclaurin: the error is of
// relative order 1/σ², far below what a KS test of 3000 samples sees).
func gaussianCDF(sigma float64) func(int64) float64 {
	if sigma > 200 {
		return func(z int64) float64 { return refNormalCDF((float64(z) + 0.5) / sigma) }
	}
	lim := int64(40*sigma) + 10
	cum := make([]float64, 2*lim+1)
	var s float64
	for y := -lim; y <= lim; y++ {
		s += math.Exp(-float64(y*y) / (2 * sigma * sigma))
		cum[y+lim] = s
	}
	return func(z int64) float64 {
		switch {
		case z < -lim:
			return 0
		case z >= lim:
			return 1
		}
		return cum[z+lim] / s
	}
}

// noiseInGridUnits draws n releases of x through m and returns
// (released − x)/r, which must be whole.
func noiseInGridUnits(t *testing.T, m Mechanism, x *big.Rat, r *big.Rat, n int) []int64 {
	t.Helper()
	out := make([]int64, n)
	for i := range out {
		y, err := m.AddNoise(x)
		if err != nil {
			t.Fatal(err)
		}
		z := new(big.Rat).Quo(new(big.Rat).Sub(y, x), r)
		if !z.IsInt() || !z.Num().IsInt64() {
			t.Fatalf("released − x = %v is not a whole number of grid steps %v", z, r)
		}
		out[i] = z.Num().Int64()
	}
	return out
}

// TestLaplace_SamplesMatchFormula draws ksDraws releases of every Laplace
// case through AddNoise and KS-tests the noise against the discrete Laplace
// CDF of the scale refLaplace derives (false rejection ≤ 10⁻⁵ per case;
// half or double the scale, or no noise, is caught with probability
// > 1 − 10⁻⁶, see ksWithPower).
func TestLaplace_SamplesMatchFormula(t *testing.T) {
	for i, tc := range laplacePowerCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			p.Rand = seeded(uint64(19000 + i))
			m, err := NewLaplace(p)
			if err != nil {
				t.Fatal(err)
			}
			wantT, r := refLaplace(p)
			scale, _ := wantT.Float64()
			// A measurement on the grid (r divides 1000 for r ≤ 1).
			x := big.NewRat(1000, 1)
			ksWithPower(t, tc.name, noiseInGridUnits(t, m, x, r, ksDraws), laplaceCDF, scale)
		})
	}
}

// TestGaussian_SamplesMatchFormula is the same for the Gaussian, against
// the discrete Gaussian CDF of the σ refGaussian derives.
func TestGaussian_SamplesMatchFormula(t *testing.T) {
	for i, tc := range gaussianPowerCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			p.Rand = seeded(uint64(19100 + i))
			m, err := NewGaussian(p)
			if err != nil {
				t.Fatal(err)
			}
			sigma, r := refGaussian(p)
			x := big.NewRat(1000, 1)
			ksWithPower(t, tc.name, noiseInGridUnits(t, m, x, r, ksDraws), gaussianCDF, sigma)
		})
	}
}
