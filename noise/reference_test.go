// Privacy-critical: needs DP review.

// The closed-form references the tests compare the exact calibration with
// (no release uses them).

package noise

import (
	"errors"
	"math"
)

// LaplaceScale returns the Laplace scale b = Δ₁/ε. Adding Laplace (or, for
// an integer-valued measurement, discrete Laplace) noise of scale b to a
// measurement whose L1 sensitivity under add/remove-one-unit neighbours is
// at most Δ₁ is ε-DP (Dwork, McSherry, Nissim, Smith 2006; discrete case:
// Ghosh, Roughgarden, Sundararajan 2009 and CKS 2020 §2): the privacy loss
// of an output y is |y−q(D)|/b − |y−q(D')|/b ≤ |q(D)−q(D')|/b ≤ ε.
func LaplaceScale(epsilon, l1 float64) (float64, error) {
	if !checkFinitePositive(epsilon) {
		return 0, ErrEpsilon
	}
	if !checkFinitePositive(l1) {
		return 0, ErrSensitivity
	}
	return scaleResult(l1 / epsilon)
}

// LaplaceDelta returns δ(ε) of one release of the continuous Laplace
// mechanism with scale b and L1 sensitivity Δ, ε₀ = Δ/b (ACCOUNTING.md,
// "exact Laplace curve"):
//
//	δ(ε) = max(0, 1 − e^{(ε−ε₀)/2}) for ε ≥ −ε₀.
//
// Derivation: for P = Lap(0, b), Q = Lap(Δ, b) the privacy loss
// ln(p(x)/q(x)) = (|x−Δ| − |x|)/b exceeds ε exactly for x < c = (Δ − εb)/2,
// so δ(ε) = P(X < c) − e^ε·Q(X < c) = (1 − ½e^{−c/b}) − e^ε·½e^{−(Δ−c)/b}
// = 1 − e^{(ε−ε₀)/2} for |ε| ≤ ε₀ (both exponentials equal e^{(ε−ε₀)/2}).
// The discrete Laplace of this package is ε₀-DP, i.e. δ(ε₀) = 0;
// accountants that compose Laplace releases tightly may use this curve.
// A NaN argument gives the trivial bound 1.
func LaplaceDelta(b, l1, epsilon float64) float64 {
	eps0 := l1 / b
	if math.IsNaN(eps0) || math.IsNaN(epsilon) {
		return 1
	}
	if epsilon >= eps0 {
		return 0
	}
	if epsilon < -eps0 { // every output has loss > ε: δ = 1 − e^ε
		return -math.Expm1(epsilon)
	}
	return math.Max(0, -math.Expm1((epsilon-eps0)/2))
}

// laplaceTail returns P(|Z| > k) = 2q^{k+1}/(1+q) for discrete Laplace of
// scale t.
func laplaceTail(t, k float64) float64 {
	return 2 * math.Exp(-(k+1)/t) / (1 + math.Exp(-1/t))
}

// SigmaFromRho returns σ = Δ/√(2ρ): Gaussian noise of this σ on a
// measurement with L2 sensitivity Δ is ρ-zCDP (Bun and Steinke 2016,
// Proposition 1.6; the discrete Gaussian has the same ρ, CKS 2020 §2).
func SigmaFromRho(rho, l2 float64) (float64, error) {
	if !checkFinitePositive(rho) {
		return 0, errors.New("noise: rho must be a finite number > 0")
	}
	if !checkFinitePositive(l2) {
		return 0, ErrSensitivity
	}
	return scaleResult(l2 / math.Sqrt(2*rho))
}

// RDPGaussianSigma returns σ with σ² = Δ²α/(2ε̄): the Gaussian mechanism's
// Rényi divergence of order α is αΔ²/(2σ²) (Mironov 2017, "Rényi
// Differential Privacy", Proposition 7), so this σ gives (α, ε̄)-RDP.
func RDPGaussianSigma(alpha, rdpEpsilon, l2 float64) (float64, error) {
	if !checkFinitePositive(alpha) || alpha <= 1 {
		return 0, errors.New("noise: the Rényi order alpha must be a finite number > 1")
	}
	if !checkFinitePositive(rdpEpsilon) {
		return 0, ErrEpsilon
	}
	if !checkFinitePositive(l2) {
		return 0, ErrSensitivity
	}
	return scaleResult(l2 * math.Sqrt(alpha/(2*rdpEpsilon)))
}

// LaplacePartitionThreshold returns τ for continuous Laplace noise of scale
// b = L0/ε on distinct-unit counts (L0 = maxGroups): keeping partitions
// whose noisy count is ≥ τ is (ε, δ)-DP. Since
// P(1 + Lap(b) ≥ τ) = ½·e^{−(τ−1)/b} for τ ≥ 1, setting it to δ_p gives
//
//	τ = 1 + (L0/ε)·ln(1/(2δ_p)),  δ_p = 1 − (1−δ)^{1/L0}.
//
// The mechanisms of this package add discrete noise; use PartitionThreshold
// with the mechanism itself for the exact threshold of the noise actually
// added (it is at most one grid step away from this value).
func LaplacePartitionThreshold(epsilon, delta float64, maxGroups int) (float64, error) {
	if !checkFinitePositive(epsilon) {
		return 0, ErrEpsilon
	}
	if err := checkThresholdArgs(delta, maxGroups); err != nil {
		return 0, err
	}
	dp := perPartitionDelta(delta, maxGroups)
	b := float64(maxGroups) / epsilon
	if err := checkRealScale(b); err != nil {
		return 0, err // an infinite b would give ∞·0 = NaN for δ_p ≥ ½
	}
	// ln(1/(2δ_p)) as −ln(2δ_p): 1/(2δ_p) overflows for a denormal δ_p.
	return scaleResult(1 + b*math.Max(0, -math.Log(2*dp)))
}

// GaussianPartitionThreshold returns τ for continuous Gaussian noise
// calibrated to (ε, noiseDelta) with L2 sensitivity √L0 (L0 = maxGroups,
// σ = AnalyticGaussianSigma(ε, noiseDelta, √L0)): keeping partitions whose
// noisy count is ≥ τ is (ε, noiseDelta + thresholdDelta)-DP, with
//
//	τ = 1 + σ·Φ⁻¹(1 − δ_p),  δ_p = 1 − (1−thresholdDelta)^{1/L0},
//
// since P(1 + N(0, σ²) ≥ τ) = 1 − Φ((τ−1)/σ).
func GaussianPartitionThreshold(epsilon, noiseDelta, thresholdDelta float64, maxGroups int) (float64, error) {
	if err := checkThresholdArgs(thresholdDelta, maxGroups); err != nil {
		return 0, err
	}
	sigma, err := AnalyticGaussianSigma(epsilon, noiseDelta, math.Sqrt(float64(maxGroups)))
	if err != nil {
		return 0, err
	}
	dp := perPartitionDelta(thresholdDelta, maxGroups)
	tau := 1 + sigma*normalUpperQuantile(dp)
	if math.IsInf(tau, 0) || math.IsNaN(tau) {
		return 0, ErrScale
	}
	return tau, nil
}

// normalUpperQuantile returns x with P(N(0,1) > x) = p, 0 < p < 1:
// Φ⁻¹(1 − p) = √2·erfcinv(2p). math.Erfcinv computes erfinv(1 − 2p) and is
// +Inf once 1 − 2p rounds to 1 (p below about 10⁻¹⁷); there it returns
// √(−2 ln(2p)), which is larger than the quantile (P(N > x) ≤ ½e^{−x²/2}
// for x ≥ 0), so a threshold built on it errs on the safe side.
func normalUpperQuantile(p float64) float64 {
	x := math.Sqrt2 * math.Erfcinv(2*p)
	if math.IsInf(x, 1) {
		return math.Sqrt(-2 * math.Log(2*p))
	}
	return x
}

// scaleResult returns a computed noise scale or threshold x if it is a
// finite number > 0, else ErrScale (an overflow to +Inf, or an underflow to
// 0, of a formula whose arguments were each valid).
func scaleResult(x float64) (float64, error) {
	if !checkFinitePositive(x) {
		return 0, ErrScale
	}
	return x, nil
}
