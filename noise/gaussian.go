// Privacy-critical: needs DP review.

package noise

import (
	"math"
	"math/big"
)

// gaussian is the discrete Gaussian mechanism on the grid. Safe for
// concurrent use: its fields are read-only after construction.
type gaussian struct {
	*grid
	epsilon, delta float64
	// The noise in grid units is N_Z(0, σ²) with σ² = sn/sd exactly (σ is
	// a float64, so σ² is a dyadic rational).
	sigma  float64
	sn, sd *big.Int
	// lap is t = ⌊σ⌋ + 1, the discrete Laplace scale of CKS Algorithm 3.
	lap *big.Int
	// multiplier is σ over the charged L2 sensitivity, both in grid units.
	multiplier float64
}

// NewGaussian returns the (discrete) Gaussian mechanism: (ε, δ)-DP when the
// measurement's L2 sensitivity is at most p.Sensitivity.
//
// The noise is always the discrete Gaussian N_Z(0, σ²) on the release grid,
// sampled exactly (CKS 2020 Algorithm 3). σ (in grid units) is the
// smallest value, to relative precision 10⁻¹⁰, for which the guarantee
// below holds:
//
//   - One changed cell (Cells ≤ 1): the worst neighbouring shift is a whole
//     number of grid steps d (integer mode d = max(1, ⌊Δ₂⌋); real mode
//     d = ⌊Δ₂/r⌋ + 1, the rounding allowing one more step), and σ makes the
//     discrete Gaussian's own privacy curve (CKS 2020 Theorem 7), bounded
//     above by discreteGaussianDelta, at most δ at ε.
//   - Several cells (Cells = c > 1, one mechanism noising a vector): the
//     shift is an integer vector of L2 norm at most Δ_g = Δ₂ (integer mode)
//     or Δ₂/r + √c (real mode). Each coordinate's Rényi divergence is at
//     most αd_i²/(2σ²) (CKS 2020 §2) and Rényi divergences of independent
//     coordinates add, so the release is ρ-zCDP with ρ = Δ_g²/(2σ²); σ is
//     the smallest with ZCDPDelta(ρ, ε) ≤ δ.
//
// In real mode the grid is r = 2^⌊log₂ σ_c⌋−39 with σ_c the continuous
// analytic σ for (ε, δ, Δ₂) (AnalyticGaussianSigma): see granularityBits.
func NewGaussian(p Params) (Mechanism, error) {
	if err := p.checkCommon(); err != nil {
		return nil, err
	}
	if err := checkEpsDelta(p.Epsilon, p.Delta); err != nil {
		return nil, err
	}
	if err := checkIntegerSensitivity(p); err != nil {
		return nil, err
	}
	sigmaC, err := AnalyticGaussianSigma(p.Epsilon, p.Delta, p.Sensitivity)
	if err != nil {
		return nil, err
	}
	if err := checkRealScale(sigmaC); err != nil {
		return nil, err
	}
	g := newGrid(p, ratOf(sigmaC))
	cells := p.cells()
	var (
		charged float64 // L2 sensitivity in grid units
		shift   float64 // worst scalar shift in whole grid steps
		guess   float64 // starting σ in grid units
	)
	if p.Integer {
		charged = p.Sensitivity
		shift = math.Max(1, math.Floor(p.Sensitivity))
		guess = sigmaC
	} else {
		inv := math.Ldexp(1, -g.granExp) // 1/r, exact
		charged = p.Sensitivity*inv + math.Sqrt(float64(cells))
		shift = math.Floor(p.Sensitivity*inv) + 1
		guess = sigmaC * inv
	}
	var curve func(float64) float64
	if cells <= 1 {
		curve = func(s float64) float64 { return discreteGaussianDelta(s, p.Epsilon, shift) }
		charged = math.Max(charged, shift)
	} else {
		curve = func(s float64) float64 { return ZCDPDelta(charged*charged/(2*s*s), p.Epsilon) }
	}
	// Above MaxGridScale every σ is refused below, so the search need not
	// evaluate the curve there (where εσ²/d can overflow): δ = 0 stops the
	// doubling, and a σ it brackets above the ceiling fails checkGridScale.
	// Below the ceiling the curve, and so the σ found, are unchanged.
	deltaAt := func(s float64) float64 {
		if s > MaxGridScale {
			return 0
		}
		return curve(s)
	}
	sigma, err := smallestSigma(guess, p.Delta, deltaAt)
	if err != nil {
		return nil, err
	}
	if math.IsInf(sigma*sigma, 0) || sigma*sigma == 0 {
		return nil, ErrScale
	}
	if err := checkGridScale(sigma); err != nil {
		return nil, err
	}
	s := ratOf(sigma)
	s2 := new(big.Rat).Mul(s, s)
	sn, sd := new(big.Int).Set(s2.Num()), new(big.Int).Set(s2.Denom())
	lap := new(big.Int).Quo(sn, sd) // ⌊σ²⌋
	lap.Sqrt(lap)                   // ⌊√⌊σ²⌋⌋ = ⌊σ⌋
	lap.Add(lap, big.NewInt(1))
	return &gaussian{
		grid:       g,
		epsilon:    p.Epsilon,
		delta:      p.Delta,
		sigma:      sigma,
		sn:         sn,
		sd:         sd,
		lap:        lap,
		multiplier: sigma / charged,
	}, nil
}

func (m *gaussian) Name() string { return "gaussian" }

// NoiseScale implements Scaled: discrete Gaussian of σ grid steps.
func (m *gaussian) NoiseScale() (scale, step float64) { return m.sigma, math.Ldexp(1, m.granExp) }
func (m *gaussian) Epsilon() float64                  { return m.epsilon }
func (m *gaussian) Delta() float64                    { return m.delta }
func (m *gaussian) NoiseMultiplier() float64          { return m.multiplier }
func (m *gaussian) sample(s *source) *big.Int         { return s.discreteGaussian(m.sn, m.sd, m.lap) }

// AddNoise releases x + Z·r with Z ~ N_Z(0, σ²).
func (m *gaussian) AddNoise(x *big.Rat) (*big.Rat, error) {
	return m.release(x, m.sample)
}

// HalfWidth returns k·r (+ r/2 in real mode) for the smallest whole k with
// P(|Z| ≤ k) ≥ confidence, Z ~ N_Z(0, σ²). It is +Inf (no finite
// statement) for confidence ≥ 1 or NaN.
func (m *gaussian) HalfWidth(confidence float64) float64 {
	k, err := discreteGaussianQuantile(m.sigma, confidence)
	if err != nil || math.IsInf(k, 0) {
		return math.Inf(1)
	}
	return math.Ldexp(k, m.granExp) + m.roundingBound()
}

// quantileDirectLimit is the largest σ for which quantiles sum the pmf term
// by term (about 10σ terms per evaluation).
const quantileDirectLimit = 1 << 10

// discreteGaussianTail returns P(|Z| > k) for Z ~ N_Z(0, σ²), k ≥ 0 whole.
// For σ ≤ 2¹⁰ it sums the pmf, stopping at the first term that underflows
// to 0 (y > 38.6σ: e^{−y²/(2σ²)} < 2⁻¹⁰⁷⁴), so within 4·10⁴ terms whatever k
// is; the terms it drops are below 10⁻³²³ together, far below any 1 − c
// asked about (≥ 2⁻⁵³). Above 2¹⁰ it uses the Euler–Maclaurin formula
// Σ_{y≥n} f(y) = ∫_n^∞ f + f(n)/2 − f′(n)/12 + R, |R| ≤ 0.0097·∫|f‴|,
// a relative error of order (n/σ²)³, below 10⁻⁸ for n ≤ 31σ at σ ≥ 2¹⁰, and Z = √(2π)σ (Poisson summation;
// the correction 2e^{−2π²σ²} underflows).
func discreteGaussianTail(sigma, k float64) float64 {
	if !checkFinitePositive(sigma) || math.IsNaN(k) {
		return 1 // no tail bound for a degenerate σ (callers check σ first)
	}
	s2 := sigma * sigma
	f := func(y float64) float64 { return math.Exp(-y * y / (2 * s2)) }
	if sigma <= quantileDirectLimit {
		// Z and the tail are summed separately (not as Z − inside), so a
		// tail of 10⁻¹² keeps its relative precision.
		z, tail := 1.0, 0.0
		for y := 1.0; ; y++ {
			v := f(y)
			if v == 0 || math.IsNaN(v) {
				break // f decreases: every later term is 0 too
			}
			z += 2 * v
			if y > k {
				tail += 2 * v
				if v < 1e-20*tail {
					break
				}
			}
		}
		return tail / z
	}
	n := k + 1
	t := sigma*math.Sqrt(math.Pi/2)*math.Erfc(n/(sigma*math.Sqrt2)) + f(n)/2 + n*f(n)/(12*s2)
	return 2 * t / (math.Sqrt(2*math.Pi) * sigma)
}

// gaussianQuantileSteps caps the widening steps of gaussianTailQuantile's
// bracket search. The bracket starts at the continuous estimate with width
// max(1, ⌊σ/1000⌋) and doubles its width at each step, so 64 steps span
// more than every float64; the estimate is within a few widths in
// practice. Reaching the cap is an error.
const gaussianQuantileSteps = 64

// discreteGaussianQuantile returns the smallest whole k ≥ 0 with
// P(|Z| ≤ k) ≥ c, Z ~ N_Z(0, σ²): 0 for c ≤ 0, +Inf for c ≥ 1, ErrScale for
// σ outside (0, MaxGridScale], errConfidence for a NaN c.
func discreteGaussianQuantile(sigma, c float64) (float64, error) {
	if math.IsNaN(c) {
		return 0, errConfidence
	}
	return gaussianTailQuantile(sigma, 1-c)
}

// gaussianTailQuantile returns the smallest whole k ≥ 0 with
// P(|Z| > k) ≤ alpha (discreteGaussianQuantile with c = 1 − alpha, taking
// alpha itself so that a tail mass below 2⁻⁵³ is not rounded to 0). Above
// 2⁵³ (only for alpha below about e^{−32}) "whole" means the smallest
// float64 satisfying the criterion, every float64 there being whole.
//
// Work: at most 2·gaussianQuantileSteps evaluations to bracket the answer
// and at most 128 bisection rounds (the bracket is below 2⁶⁴·σ wide, and the
// bisection stops when no whole float64 lies strictly inside it).
func gaussianTailQuantile(sigma, alpha float64) (float64, error) {
	if err := checkGridScale(sigma); err != nil {
		return 0, err
	}
	switch {
	case math.IsNaN(alpha):
		return 0, errConfidence
	case alpha >= 1:
		return 0, nil
	case alpha <= 0:
		return math.Inf(1), nil
	}
	ok := func(k float64) bool { return discreteGaussianTail(sigma, k) <= alpha }
	// Continuous estimate P(|N| > k+½) = alpha. math.Erfcinv computes
	// erfinv(1 − alpha) and is +Inf below alpha ≈ 10⁻¹⁷; there the Chernoff
	// bound P(|N| > x) ≤ e^{−x²/2}, x = √(−2 ln alpha), is the estimate (an
	// overestimate by about ln(x)/x standard deviations).
	z := math.Sqrt2 * math.Erfcinv(alpha)
	if math.IsInf(z, 0) || math.IsNaN(z) {
		z = math.Sqrt(-2 * math.Log(alpha))
	}
	k := math.Max(0, math.Ceil(sigma*z-0.5))
	width := math.Max(1, math.Floor(sigma*1e-3))
	// Bracket: ok(hi), and lo = 0 or not ok(lo); widths double.
	var lo, hi float64
	if ok(k) {
		hi, lo = k, math.Max(0, k-width)
		for i := 0; lo > 0 && ok(lo); i++ {
			if i == gaussianQuantileSteps {
				return 0, errSettle
			}
			width *= 2
			hi, lo = lo, math.Max(0, lo-width)
		}
		if lo == 0 && ok(0) {
			return 0, nil
		}
	} else {
		lo, hi = k, k+width
		for i := 0; !ok(hi); i++ {
			if i == gaussianQuantileSteps {
				return 0, errSettle
			}
			width *= 2
			lo, hi = hi, hi+width
		}
	}
	for i := 0; i < 128 && hi-lo > 1; i++ {
		mid := math.Floor(lo + (hi-lo)/2)
		if mid <= lo || mid >= hi {
			break
		}
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

// discreteGaussian returns Y ~ N_Z(0, σ²), σ² = sn/sd, following CKS 2020
// Algorithm 3 with t = ⌊σ⌋ + 1:
//
//	Y ← discrete Laplace of scale t;
//	accept with probability exp(−(|Y| − σ²/t)²/(2σ²)), else repeat.
//
// The acceptance exponent is the rational
// γ = (|Y|·t·sd − sn)² / (2·sn·sd·t²). Timing: trials are independent and
// acceptance depends only on the trial, so the number of trials is
// independent of the output; the accepted trial's discrete Laplace draw
// and its Bernoulli(e^{−γ}) (table comparison for ⌊γ⌋ ≤ 88 plus the fixed
// 24 rounds for the fraction) do work independent of Y, except with
// probability < 2⁻⁷⁹ and for γ > 88, which an accepted trial reaches with
// probability < e^{−88}.
func (s *source) discreteGaussian(sn, sd, t *big.Int) *big.Int {
	den := new(big.Int).Mul(sn, sd)
	den.Lsh(den, 1)
	den.Mul(den, t)
	den.Mul(den, t)
	tsd := new(big.Int).Mul(t, sd)
	for {
		y := s.discreteLaplace(t, big.NewInt(1))
		if s.err != nil {
			return new(big.Int)
		}
		// (|Y|+1)·t·sd − t·sd keeps the multiplication's operand non-zero
		// (big.Int shortcuts zero operands).
		num := new(big.Int).Abs(y)
		num.Add(num, big.NewInt(1))
		num.Mul(num, tsd)
		num.Sub(num, tsd)
		num.Sub(num, sn)
		num.Mul(num, num)
		if s.bernoulliExpNeg(num, den) {
			return y
		}
		if s.err != nil {
			return new(big.Int)
		}
	}
}
