// Privacy-critical: needs DP review.

package noise

import (
	"errors"
	"math"
)

// Bounded work (SECURITY.md G5): every loop of this
// package terminates for every float64 argument, NaN, ±Inf, zero, negative
// and denormal numbers included, and a scale that float64 arithmetic
// cannot handle exactly is refused when the mechanism is built, before any
// budget is charged, never discovered later by a loop that does not end.
//
// The loops over floats are of three kinds:
//
//   - searches for a whole number of grid steps (HalfWidth, partition
//     thresholds) start at a closed form and settle on the exact criterion
//     by at most settleSteps steps, each to the next whole float64
//     (nextWhole: k±1 below 2⁵³, the neighbouring float64 above, where
//     k+1 == k);
//   - bisections and doublings (smallestSigma, ZCDPDelta) have explicit
//     iteration caps and treat a NaN figure as "not private enough";
//   - sums of pmf terms stop when a term underflows to 0, which for a
//     finite σ > 0 happens within 39σ + 1 terms.
//
// The samplers' rejection loops are not float loops: each trial is
// accepted with a probability bounded below by a constant (CKS 2020), so
// they end with probability 1, and their work does not depend on the
// scale beyond the length of its big integers.

// MaxGridScale is the largest noise scale in grid units (the discrete
// Laplace scale t, or the discrete Gaussian σ, in steps of the release grid)
// that NewLaplace and NewGaussian accept: 2⁴⁸.
//
// Why: HalfWidth and PartitionThreshold compute whole numbers k of grid
// steps in float64. At confidence c the half-width is about t·ln(2/(1−c))
// steps, below 2⁵¹ for t ≤ 2⁴⁸ and every c ≤ 0.99, so k and k ± 1 are exact
// float64 integers; and settling on the exact criterion needs P(|Z| > k)
// and P(|Z| > k+1), which differ by the factor e^{−1/t} ≈ 1 − 2⁻⁴⁸, to be
// told apart: the float64 error of e^{−(k+1)/t} is about (x + 2)·2⁻⁵³
// relative for x = (k+1)/t ≈ 4, 32 times smaller than 2⁻⁴⁸. At t ≈ 2⁵³ (the
// measured hang: ε = 10⁻¹⁶ on a count) k+1 == k and neither holds.
//
// In real mode the grid follows the scale (granularityBits), so t is
// 2³⁹ to 2⁴⁰ plus Cells/ε, and only Cells/ε > 2⁴⁸ − 2⁴⁰ (ε below about
// 3.6·10⁻¹⁵·Cells) reaches the ceiling. In integer mode the grid is 1 and
// t = Δ₁/ε itself: Δ₁ ≤ 2.8·10¹¹ at ε = 10⁻³.
const MaxGridScale = 1 << 48

// maxExactInteger is 2⁵³: an integer-mode sensitivity must not exceed it.
// Above 2⁵³ not every integer is a float64, so the float64 sensitivity
// (a product of bounds, computed in float64) may be below the true one and
// "an integer shift d ≤ Δ₁" is no longer exact.
const maxExactInteger = 1 << 53

// maxRealScale is the largest noise scale in real units (Δ₁/ε for Laplace,
// the analytic σ for Gaussian) that the mechanisms accept: 2¹⁰⁰⁰. The
// half-width k·r has k < 2⁵⁸ grid steps even at the most extreme partition
// threshold and r ≤ scale/2³⁹, so every half-width and threshold stays
// below 2¹⁰¹⁹, a finite float64 (the largest is about 2¹⁰²⁴).
const maxRealScale = 0x1p1000

// settleSteps caps the steps that settle a closed-form estimate of a whole
// number of grid steps on the exact criterion. The closed forms are off by
// their float64 rounding, t·x·2⁻⁵¹ steps with x = −ln(1−c) ≤ 745: at most
// 4 steps of one below 2⁵³ and 2 steps of one float64 above it, for every
// t ≤ MaxGridScale. 64 is a wide margin; reaching it is an error.
const settleSteps = 64

// ErrScale is returned when the noise scale or the sensitivity is not a
// finite number that the mechanisms handle exactly (see MaxGridScale,
// maxExactInteger and maxRealScale). It describes parameters only (policy
// bounds, the plan and ε), never data.
var ErrScale = errors.New("noise: the noise scale of this measurement is beyond the range computed exactly")

// errConfidence is returned for a NaN confidence level.
var errConfidence = errors.New("noise: confidence must be a number")

// errSettle is returned when a closed-form estimate did not settle within
// settleSteps steps; it cannot happen for scales ≤ MaxGridScale.
var errSettle = errors.New("noise: quantile search did not settle")

// checkGridScale accepts a noise scale in grid units in (0, MaxGridScale].
func checkGridScale(t float64) error {
	if !checkFinitePositive(t) || t > MaxGridScale {
		return ErrScale
	}
	return nil
}

// checkRealScale accepts a noise scale in real units in (0, maxRealScale].
func checkRealScale(s float64) error {
	if !checkFinitePositive(s) || s > maxRealScale {
		return ErrScale
	}
	return nil
}

// checkIntegerSensitivity accepts an integer-mode sensitivity ≤ 2⁵³.
func checkIntegerSensitivity(p Params) error {
	if p.Integer && p.Sensitivity > maxExactInteger {
		return ErrScale
	}
	return nil
}

// nextWhole returns the smallest whole float64 above the whole k ≥ 0: k+1
// below 2⁵³, else the next float64 (every float64 ≥ 2⁵³ is whole).
func nextWhole(k float64) float64 {
	if k < maxExactInteger {
		return k + 1
	}
	return math.Nextafter(k, math.Inf(1))
}

// prevWhole returns the largest whole float64 below the whole k > 0.
func prevWhole(k float64) float64 {
	if k <= maxExactInteger {
		return k - 1
	}
	return math.Nextafter(k, math.Inf(-1))
}

// settleWhole returns the smallest whole k' ≥ lo next to the estimate k with
// ok(k'), for ok false below some point and true from it on (a tail bound
// decreasing in k): it steps down while ok holds one whole step lower, then
// up until ok holds, at most settleSteps steps each way. The result
// satisfies ok (checked, not assumed); errSettle when the steps run out.
func settleWhole(k, lo float64, ok func(float64) bool) (float64, error) {
	if math.IsNaN(k) || math.IsInf(k, 0) {
		return 0, errSettle
	}
	k = math.Max(k, lo)
	for i := 0; k > lo && ok(prevWhole(k)); i++ {
		if i == settleSteps {
			return 0, errSettle
		}
		k = prevWhole(k)
	}
	for i := 0; !ok(k); i++ {
		if i == settleSteps {
			return 0, errSettle
		}
		k = nextWhole(k)
	}
	return k, nil
}
