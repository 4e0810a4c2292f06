// Privacy-critical: needs DP review.

package noise

import (
	"math"
	"math/big"
)

// laplace is the discrete Laplace mechanism on the grid. Safe for
// concurrent use: its fields are read-only after construction.
type laplace struct {
	*grid
	epsilon float64
	// The noise in grid units is discrete Laplace with scale t = tn/td:
	// P(Z = z) ∝ exp(−|z|/t).
	tn, td *big.Int
	t      float64 // t as a float, for quantiles
}

// NewLaplace returns the (discrete) Laplace mechanism: ε-DP when the
// measurement's L1 sensitivity is at most p.Sensitivity.
//
// Integer mode: the measurement is an integer; noise is discrete Laplace
// with scale t = Δ₁/ε (exact rational of the two float64s), sampled exactly
// (CKS 2020 Algorithm 2). Integer shifts d ≤ Δ₁ give privacy loss
// |d|/t ≤ ε.
//
// Real mode: with s = Δ₁/ε, the grid is r = 2^⌊log₂ s⌋−39 (see
// granularityBits); x is rounded to the nearest multiple of r, and the
// noise in grid units is discrete Laplace with scale t = (Δ₁ + c·r)/(r·ε),
// c = Cells: rounding moves each of the at most c changed cells by at most
// one more grid step, so the rounded measurement has L1 sensitivity
// (Δ₁ + c·r)/r grid steps and the release is ε-DP (the approach of
// Google's secure noise, "Secure Noise Generation", Google DP library).
func NewLaplace(p Params) (Mechanism, error) {
	if err := p.checkCommon(); err != nil {
		return nil, err
	}
	if p.Delta != 0 {
		return nil, ErrLaplaceDelta
	}
	eps := ratOf(p.Epsilon)
	sens := ratOf(p.Sensitivity)
	scale := new(big.Rat).Quo(sens, eps)
	g := newGrid(p, scale)
	t := scale
	if !p.Integer {
		charged := new(big.Rat).Mul(g.gran, big.NewRat(int64(p.cells()), 1))
		charged.Add(charged, sens)
		t = new(big.Rat).Quo(charged, new(big.Rat).Mul(g.gran, eps))
	}
	tf, _ := t.Float64()
	if math.IsInf(tf, 0) || tf <= 0 {
		return nil, ErrScale
	}
	if err := checkLaplaceScale(p, scale, tf); err != nil {
		return nil, err
	}
	return &laplace{
		grid:    g,
		epsilon: p.Epsilon,
		tn:      new(big.Int).Set(t.Num()),
		td:      new(big.Int).Set(t.Denom()),
		t:       tf,
	}, nil
}

func (m *laplace) Name() string { return "laplace" }

// NoiseScale implements Scaled: discrete Laplace of scale t grid steps.
func (m *laplace) NoiseScale() (scale, step float64) { return m.t, math.Ldexp(1, m.granExp) }
func (m *laplace) Epsilon() float64                  { return m.epsilon }
func (m *laplace) Delta() float64                    { return 0 }

// NoiseMultiplier is b/Δ with both in grid units: t/(t·ε) = 1/ε.
func (m *laplace) NoiseMultiplier() float64 { return 1 / m.epsilon }

// AddNoise releases x + Z·r with Z discrete Laplace of scale t.
func (m *laplace) AddNoise(x *big.Rat) (*big.Rat, error) {
	return m.release(x, func(s *source) *big.Int { return s.discreteLaplace(m.tn, m.td) })
}

// HalfWidth returns k·r (+ r/2 in real mode) for the smallest whole k with
// P(|Z| ≤ k) ≥ confidence. For discrete Laplace with q = e^{−1/t},
// P(Z = z) = (1−q)/(1+q)·q^{|z|} and P(|Z| > k) = 2q^{k+1}/(1+q).
// It is +Inf (no finite statement) for confidence ≥ 1 or NaN.
func (m *laplace) HalfWidth(confidence float64) float64 {
	k, err := laplaceQuantile(m.t, confidence)
	if err != nil || math.IsInf(k, 0) {
		return math.Inf(1)
	}
	return math.Ldexp(k, m.granExp) + m.roundingBound()
}

// laplaceLogTail returns ln P(|Z| > k) = ln 2 − (k+1)/t − ln(1+q), q =
// e^{−1/t}: in logs, so that it neither underflows nor loses its relative
// precision far in the tail, and non-increasing in k also in float64 (each
// operation is monotone), which settleWhole needs.
func laplaceLogTail(t, k float64) float64 {
	return math.Ln2 - (k+1)/t - math.Log1p(math.Exp(-1/t))
}

// laplaceQuantile returns the smallest whole k ≥ 0 with P(|Z| ≤ k) ≥ c for
// discrete Laplace of scale t: 0 for c ≤ 0, +Inf for c ≥ 1 (no finite k),
// and ErrScale for a t outside (0, MaxGridScale] or errConfidence for a
// NaN c. It returns after at most 2·settleSteps evaluations of the tail.
func laplaceQuantile(t, c float64) (float64, error) {
	if err := checkGridScale(t); err != nil {
		return 0, err
	}
	switch {
	case math.IsNaN(c):
		return 0, errConfidence
	case c <= 0:
		return 0, nil
	case c >= 1:
		return math.Inf(1), nil
	}
	// 2q^{k+1}/(1+q) ≤ 1−c ⟺ k+1 ≥ t·(ln 2 − ln(1+q) − ln(1−c)).
	q := math.Exp(-1 / t)
	k := math.Ceil(t*(math.Ln2-math.Log1p(q)-math.Log1p(-c))) - 1
	// Float rounding can put the estimate a few steps off: settle it on
	// the exact criterion.
	logAlpha := math.Log1p(-c) // ln(1−c), exact-ish also for c near 1
	return settleWhole(k, 0, func(k float64) bool { return laplaceLogTail(t, k) <= logAlpha })
}

// checkLaplaceScale refuses a mechanism whose scale float64 cannot handle
// exactly (bounded.go): the integer-mode sensitivity above 2⁵³, the scale in
// real units above maxRealScale, or the scale t in grid units above
// MaxGridScale.
func checkLaplaceScale(p Params, scale *big.Rat, t float64) error {
	if err := checkIntegerSensitivity(p); err != nil {
		return err
	}
	s, _ := scale.Float64()
	if err := checkRealScale(s); err != nil {
		return err
	}
	return checkGridScale(t)
}

// discreteLaplace returns Z with P(Z = z) ∝ exp(−|z|·td/tn), following CKS
// 2020 Algorithm 2 with (s, t) = (td, tn):
//
//	U uniform in {0, …, tn−1}; accept with probability e^{−U/tn};
//	V geometric with P(V ≥ k) = e^{−k}; X = U + tn·V is then geometric with
//	ratio e^{−1/tn}; Y = ⌊X/td⌋ is geometric with ratio e^{−td/tn};
//	B a fair coin; reject B = 1, Y = 0 (so zero is not counted twice);
//	return (1−2B)·Y.
//
// Timing: the rejection loop runs a number of times independent of the
// returned value (independent trials, acceptance decided by each trial
// alone); within the accepted trial, U is drawn by rejection with a count
// independent of its value, e^{−U/tn} by a fixed 24 trials
// (bernoulliExpNegFrac) and V by a fixed 88 comparisons (geometricE), so the
// work of a sample does not depend on its value except with probability
// < 2⁻⁷⁹.
func (s *source) discreteLaplace(tn, td *big.Int) *big.Int {
	// Big-integer arithmetic takes shortcuts for zero operands and its
	// cost follows the operands' lengths, so X = U + tn·V and ⌊X/td⌋ are
	// computed with operands that are never zero and have a fixed length:
	// X = tn·(V+1) + U − tn, and ⌊X/td⌋ = ⌊(X + td·2^L)/td⌋ − 2^L with 2^L
	// above every X that occurs in practice (V < 2⁶⁴).
	l := uint(64 * (len(tn.Bits()) + 3))
	offset := new(big.Int).Lsh(td, l)
	pow := new(big.Int).Lsh(big.NewInt(1), l)
	for {
		u := s.uniformBig(tn)
		d := s.bernoulliExpNegFrac(u, tn)
		v := s.geometricE()
		if s.err != nil {
			return new(big.Int)
		}
		if !d {
			continue
		}
		x := new(big.Int).SetUint64(v + 1)
		x.Mul(x, tn)
		x.Add(x, u)
		x.Sub(x, tn)
		x.Add(x, offset)
		y := x.Quo(x, td)
		y.Sub(y, pow)
		b := s.bit()
		if b && y.Sign() == 0 {
			continue
		}
		if b {
			y.Neg(y)
		}
		return y
	}
}
