// Privacy-critical: needs DP review.

package noise

import (
	"errors"
	"math"
)

// This file holds the Gaussian calibration maths. All of it runs in
// float64: the privacy statements below are about the exact curves; the
// bisections return the end of the bracket at which the computed δ is at
// most the target, and the discrete curves are upper bounds by
// construction (see each function).

// normalCDF is Φ(x) = erfc(−x/√2)/2.
func normalCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// GaussianDelta returns the exact δ(ε) of the continuous Gaussian mechanism
// with noise σ and L2 sensitivity Δ (Balle and Wang 2018, "Improving the
// Gaussian Mechanism for Differential Privacy", Theorem 8):
//
//	δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ).
//
// The mechanism is (ε, δ)-DP exactly for δ ≥ δ(ε). Known answers: ACCOUNTING.md
// row 4. A NaN argument gives the trivial bound 1.
func GaussianDelta(sigma, epsilon, l2 float64) float64 {
	if math.IsNaN(sigma) || math.IsNaN(epsilon) || math.IsNaN(l2) {
		return 1
	}
	a := l2/(2*sigma) - epsilon*sigma/l2
	b := -l2/(2*sigma) - epsilon*sigma/l2
	// e^ε·Φ(b) computed in logs so a large ε does not overflow.
	second := 0.0
	if pb := normalCDF(b); pb > 0 {
		second = math.Exp(epsilon + math.Log(pb))
	}
	d := normalCDF(a) - second
	switch {
	case math.IsNaN(d): // ∞ − ∞ for a degenerate σ or Δ
		return 1
	case d < 0:
		return 0
	}
	return d
}

// errCalibration is returned when no finite σ meets the target (it cannot
// happen for valid parameters; it guards against float overflow).
var errCalibration = errors.New("noise: cannot calibrate the Gaussian noise for these parameters")

func checkEpsDelta(epsilon, delta float64) error {
	if !checkFinitePositive(epsilon) {
		return ErrEpsilon
	}
	if math.IsNaN(delta) || !(delta > 0 && delta < 1) {
		return ErrDelta
	}
	return nil
}

// smallestSigma returns the smallest σ (to relative precision 1e-10) with
// deltaAt(σ) ≤ target, for a deltaAt that decreases in σ, starting from a
// guess. It returns the upper end of the final bracket, at which
// deltaAt(σ) ≤ target was checked. A NaN δ counts as above the target.
// It calls deltaAt at most 2000 + 2000 + 200 times: doubling and halving
// stop after 2000 steps (2²⁰⁰⁰ spans every float64) and the bisection after
// 200 rounds.
func smallestSigma(guess, target float64, deltaAt func(float64) float64) (float64, error) {
	if !(guess > 0) || math.IsInf(guess, 0) {
		guess = 1
	}
	if math.IsNaN(target) {
		return 0, errCalibration
	}
	hi := guess
	for i := 0; !(deltaAt(hi) <= target); i++ {
		hi *= 2
		if i > 2000 || math.IsInf(hi, 0) {
			return 0, errCalibration
		}
	}
	lo := hi / 2
	for i := 0; deltaAt(lo) <= target; i++ {
		hi = lo
		lo /= 2
		if i > 2000 || lo == 0 {
			return hi, nil
		}
	}
	for i := 0; i < 200 && (hi-lo) > 1e-10*hi; i++ {
		mid := lo + (hi-lo)/2
		if deltaAt(mid) <= target {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

// AnalyticGaussianSigma returns the smallest σ for which the continuous
// Gaussian mechanism with L2 sensitivity Δ is (ε, δ)-DP, by bisection on
// the exact curve GaussianDelta (Balle and Wang 2018, Algorithm 1 solves
// the same equation). The returned σ satisfies GaussianDelta(σ, ε, Δ) ≤ δ.
func AnalyticGaussianSigma(epsilon, delta, l2 float64) (float64, error) {
	if err := checkEpsDelta(epsilon, delta); err != nil {
		return 0, err
	}
	if !checkFinitePositive(l2) {
		return 0, ErrSensitivity
	}
	// Classical bound σ = Δ√(2 ln(1.25/δ))/ε as the starting guess.
	guess := l2 * math.Sqrt(2*math.Log(1.25/delta)) / epsilon
	return smallestSigma(guess, delta, func(s float64) float64 { return GaussianDelta(s, epsilon, l2) })
}

// ZCDPDelta returns the δ at which ρ-zCDP implies (ε, δ)-DP, by the
// improved conversion (Canonne, Kamath and Steinke 2020, Proposition 12, and
// Balle et al. 2020, Theorem 21, applied to the Rényi curve αρ;
// ACCOUNTING.md "RDP improved"): for every
// α > 1,
//
//	δ ≤ exp((α−1)(αρ − ε)) · (1 − 1/α)^{α−1} / α.
//
// The right side is minimised over α numerically; any α gives a valid
// bound, so an imperfect minimisation is only conservative. ρ ≤ 0 or ε = +Inf
// give 0; a NaN argument, ρ = +Inf or ε = −Inf give the trivial bound 1.
func ZCDPDelta(rho, epsilon float64) float64 {
	switch {
	case math.IsNaN(rho) || math.IsNaN(epsilon) || math.IsInf(rho, 1) || math.IsInf(epsilon, -1):
		return 1
	case rho <= 0 || math.IsInf(epsilon, 1):
		return 0
	}
	logDelta := func(alpha float64) float64 {
		return (alpha-1)*(alpha*rho-epsilon) + (alpha-1)*math.Log1p(-1/alpha) - math.Log(alpha)
	}
	// Golden-section search on x = ln(α − 1) over a wide range; the
	// optimum is near α = (ε + ρ)/(2ρ).
	f := func(x float64) float64 { return logDelta(1 + math.Exp(x)) }
	// hi ≤ 700 keeps α − 1 = eˣ finite when ρ is tiny (a denormal ρ makes
	// (ε + ρ)/ρ overflow).
	lo, hi := math.Log(1e-9), math.Min(700, math.Log(math.Max(10, 10*(epsilon+rho)/rho)))
	const g = 0.6180339887498949
	c, d := hi-g*(hi-lo), lo+g*(hi-lo)
	fc, fd := f(c), f(d)
	for i := 0; i < 200 && hi-lo > 1e-12; i++ {
		if fc < fd {
			hi, d, fd = d, c, fc
			c = hi - g*(hi-lo)
			fc = f(c)
		} else {
			lo, c, fc = c, d, fd
			d = lo + g*(hi-lo)
			fd = f(d)
		}
	}
	best := math.Min(fc, fd)
	if !(best <= 0) { // above 0, or NaN from an overflow: the trivial bound
		return 1
	}
	return math.Exp(best)
}

// directSumLimit is the largest σ for which discreteGaussianDelta sums the
// discrete Gaussian's pmf term by term (about 20σ terms per call); above it
// the Euler–Maclaurin bound is used, whose slack there is below 10⁻⁴ of δ.
const directSumLimit = 128

// discreteGaussianDelta returns an upper bound on δ(ε) of the discrete
// Gaussian mechanism N_Z(0, σ²) for integer-valued measurements whose
// values on neighbouring datasets differ by at most d (a whole number).
//
// Exact curve (CKS 2020, Theorem 7): with f(y) = exp(−y²/(2σ²)),
// Z = Σ_{y∈Z} f(y) and a = εσ²/d − d/2, the privacy loss of output y for
// shift d exceeds ε exactly for y > a, so
//
//	δ(ε) = Σ_{y∈Z, y>a} (f(y) − e^ε·f(y+d)) / Z
//	     = P[Y > εσ²/d − d/2] − e^ε·P[Y > εσ²/d + d/2],  Y ~ N_Z(0, σ²).
//
// The curve grows with the shift: the discrete Gaussian is a log-concave
// location family with monotone likelihood ratio, so the optimal tests are
// thresholds and their power grows with the shift; the worst case is the
// largest integer shift d = ⌊Δ⌋.
//
// For σ ≤ 128 the sum is evaluated term by term, with the truncated tail
// bounded geometrically and Z bounded below by a truncated sum, so the
// result is an upper bound. For larger σ, with g(x) = f(x) − e^ε f(x+d)
// and m = ⌊a⌋ + 1, the Euler–Maclaurin formula with remainder of order 3
// (e.g. DLMF 2.10.1 with the bound |R| ≤ 2ζ(3)/(2π)³·∫|g‴|) gives
//
//	Σ_{y≥m} g(y) ≤ ∫_m^∞ g + g(m)/2 − g′(m)/12 + 0.0097·∫_m^∞ |g‴|,
//
// where ∫_m^∞ g = σ√(π/2)·(erfc(m/(σ√2)) − e^ε·erfc((m+d)/(σ√2))), the
// last term is bounded by thirdDerivativeMass, and Z ≥ √(2π)σ (Poisson
// summation: Z = √(2π)σ·Σ_k e^{−2π²σ²k²}).
//
// A σ that is not a finite number > 0, a NaN ε or a shift d that is not a
// finite number > 0 gives the trivial bound 1: the sums below terminate
// only for finite σ > 0 (their terms then underflow to 0 within 39σ + 1
// steps of 0, or the first term already has).
func discreteGaussianDelta(sigma, epsilon, d float64) float64 {
	if !checkFinitePositive(sigma) || sigma*sigma == 0 || math.IsNaN(epsilon) || !checkFinitePositive(d) {
		return 1 // σ² = 0: no noise at all (true δ is 1)
	}
	if sigma <= directSumLimit {
		return discreteGaussianDeltaSum(sigma, epsilon, d)
	}
	s2 := sigma * sigma
	a := epsilon*s2/d - d/2
	m := math.Floor(a) + 1
	ee := func(x float64) float64 { return math.Exp(-x * x / (2 * s2)) } // f
	eps := func(x float64) float64 { return math.Exp(epsilon - x*x/(2*s2)) }
	integral := sigma * math.Sqrt(math.Pi/2) *
		(math.Erfc(m/(sigma*math.Sqrt2)) - math.Exp(epsilon)*math.Erfc((m+d)/(sigma*math.Sqrt2)))
	if e1 := math.Exp(epsilon); math.IsInf(e1, 0) {
		integral = sigma * math.Sqrt(math.Pi/2) * math.Erfc(m/(sigma*math.Sqrt2))
	}
	g := ee(m) - eps(m+d)
	gPrime := -m*ee(m)/s2 + (m+d)*eps(m+d)/s2
	rem := 0.0097 * thirdDerivativeMass(sigma, epsilon, d, a, m)
	sum := integral + g/2 - gPrime/12 + rem
	switch {
	case math.IsNaN(sum): // an overflow (εσ²/d beyond float64): no bound
		return 1
	case sum < 0:
		sum = 0
	}
	return math.Min(1, sum/(math.Sqrt(2*math.Pi)*sigma))
}

// discreteGaussianDeltaSum evaluates the CKS Theorem 7 sum directly (an
// upper bound: truncated tails are bounded above, Z below).
func discreteGaussianDeltaSum(sigma, epsilon, d float64) float64 {
	s2 := sigma * sigma
	f := func(y float64) float64 { return math.Exp(-y * y / (2 * s2)) }
	// Z ≥ 1 + 2·Σ_{y=1}^{Y} f(y).
	z := 1.0
	for y := 1.0; ; y++ {
		v := f(y)
		z += 2 * v
		if v < 1e-300 || v < 1e-20*z {
			break
		}
	}
	a := epsilon*s2/d - d/2
	if math.IsNaN(a) {
		return 1
	}
	var sum float64
	y := math.Floor(a) + 1
	// Terms below −40σ − 1 are each below f(40σ) = e^{−800} and sum to
	// less than 10⁻³⁰⁰ (geometric decay); skipping them keeps the loop
	// short when d ≫ σ. Their bound is added.
	if start := -math.Ceil(40*sigma) - 1; y < start {
		y = start
		sum = 1e-300
	}
	for ; ; y++ {
		fy := f(y)
		term := fy - math.Exp(epsilon-(y+d)*(y+d)/(2*s2))
		if term > 0 {
			sum += term
		}
		if y > 0 && (fy == 0 || fy < 1e-20*sum) {
			break
		}
	}
	// Remaining terms y' > y: each below f(y'), and for y ≥ 0 the ratio
	// f(y'+1)/f(y') ≤ q = e^{−(2y+1)/(2σ²)}.
	q := math.Exp(-(2*y + 1) / (2 * s2))
	if q < 1 {
		sum += f(y+1) / (1 - q)
	}
	return math.Min(1, sum/z)
}

// thirdDerivativeMass returns an upper bound on ∫_m^∞ |g‴| for
// g(x) = f(x) − e^ε f(x+d), f(x) = exp(−x²/(2σ²)), m > a = εσ²/d − d/2.
//
// Write g = f·w with w(x) = 1 − e^{−λ(x−a)}, λ = d/σ² (because
// e^ε f(x+d) = f(x)·e^{−λ(x−a)}). Then g‴ = f‴w + 3f″w′ + 3f′w″ + f w‴
// with 0 ≤ w ≤ λ(x−a) and |w′|, |w″|, |w‴| ≤ λ, λ², λ³ for x ≥ a. For
// x ≥ √3·σ, |f‴| ≤ f·x³/σ⁶, |f″| ≤ f·x²/σ⁴, |f′| = f·x/σ², and
// f(x) ≤ f(m)·e^{−μ(x−m)} with μ = m/σ² (as x² − m² ≥ 2m(x−m)). With
// J_k = ∫_0^∞ e^{−μt}(m+t)^k dt = Σ_j C(k,j)·m^{k−j}·j!/μ^{j+1}:
//
//	∫_m^∞ |g‴| ≤ f(m)·(λ(J₄ − a·J₃)/σ⁶ + 3λJ₂/σ⁴ + 3λ²J₁/σ² + λ³J₀).
//
// If m < √3·σ (only for δ above 10⁻²) it falls back to
// ∫|f‴| + e^ε∫|f‴| ≤ (1 + e^ε)·10/σ².
func thirdDerivativeMass(sigma, epsilon, d, a, m float64) float64 {
	s2 := sigma * sigma
	if m < math.Sqrt(3)*sigma || a <= 0 {
		return (1 + math.Exp(epsilon)) * 10 / s2
	}
	mu := m / s2
	lambda := d / s2
	j := func(k int) float64 {
		var sum float64
		binom, fact := 1.0, 1.0
		for i := 0; i <= k; i++ {
			if i > 0 {
				binom = binom * float64(k-i+1) / float64(i)
				fact *= float64(i)
			}
			sum += binom * math.Pow(m, float64(k-i)) * fact / math.Pow(mu, float64(i+1))
		}
		return sum
	}
	fm := math.Exp(-m * m / (2 * s2))
	return fm * (lambda*(j(4)-a*j(3))/(s2*s2*s2) + 3*lambda*j(2)/(s2*s2) + 3*lambda*lambda*j(1)/s2 + lambda*lambda*lambda*j(0))
}
