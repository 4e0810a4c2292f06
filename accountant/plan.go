// Privacy-critical: needs DP review.

package accountant

import "math"

// GaussianEpsilon returns the exact ε at δ of one Gaussian release with
// noise multiplier σ/Δ₂ (Balle and Wang 2018, Thm 8: δ(ε) = Φ(μ/2 − ε/μ) −
// e^ε·Φ(−μ/2 − ε/μ) with μ = Δ₂/σ), found by bisection and rounded up; +Inf
// for δ ≤ 0. The planning CLI uses it to give a Gaussian release its (ε, δ)
// pair for the methods that compose by (ε, δ) (pure, advanced).
func GaussianEpsilon(noiseMultiplier, delta float64) float64 {
	if !(noiseMultiplier > 0) || math.IsInf(noiseMultiplier, 0) {
		return math.Inf(1)
	}
	return roundUp(gaussianEpsilon(1/noiseMultiplier, delta))
}

// GaussianDelta returns the exact δ at ε of one Gaussian release with noise
// multiplier σ/Δ₂ (the same curve as [GaussianEpsilon]); 1 for a
// non-positive multiplier.
func GaussianDelta(noiseMultiplier, epsilon float64) float64 {
	if !(noiseMultiplier > 0) || math.IsInf(noiseMultiplier, 0) {
		return 1
	}
	d := gaussianDelta(1/noiseMultiplier, epsilon)
	if d <= 0 {
		return 0
	}
	return math.Min(1, roundUp(d))
}
