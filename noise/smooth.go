// Privacy-critical: needs DP review.

package noise

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
)

// This file holds the noise of the two data-dependent methods dpproxy uses
// for quantiles: smooth sensitivity and Propose-Test-Release. Noise is
// never calibrated to local sensitivity itself, which reveals the data
// (release/localsens_test.go shows two neighbouring databases told apart).

// SmoothLaplace releases f(x) + (2S/ε)·Z for a β-smooth upper bound S(x) on
// the local sensitivity of f (Nissim, Raskhodnikova and Smith 2007,
// "Smooth Sensitivity and Sampling in Private Data Analysis", STOC;
// Definition 2.1 and Lemma 2.9 with the Laplace distribution): with
// α = ε/2 and β = ε/(2 ln(2/δ)), adding Laplace noise of scale S(x)/α is
// (ε, δ)-DP. The caller computes S with β = Beta() (or a smaller β: a
// β'-smooth bound with β' ≤ β is β-smooth).
//
// # Secure noise on a fixed grid
//
// The noise is discrete Laplace (CKS 2020, Algorithm 2) on a power-of-two
// grid r fixed by public data only, the width of the value range:
// r = 2^(⌊log₂ range⌋ − 40). (A grid tied to the noise scale, as the other
// mechanisms use, would depend on S and so on the data: neighbouring
// databases could release on different lattices.) f is rounded to the
// grid, which moves it by at most r/2, so the rounded f has local
// sensitivity ≤ LS + r and S' = S·(1 + 2⁻²⁰) + r is a β-smooth upper bound
// for it (the factor covers rounding of S computed in SQL; adding a
// constant and scaling keep β-smoothness). The noise in grid units has
// scale t = 2S'/(ε·r). NRS's proof needs the sliding property (a shift by
// Δ ≤ S' changes the density by at most e^{α}: exact for the discrete
// Laplace and shifts on the grid) and the dilation property (scales t and
// t·e^{±β}); for the discrete Laplace the normaliser Z_t = coth(1/(2t))
// satisfies Z_t/t decreasing in t, so the density ratio at every point is
// bounded as for the continuous Laplace and the same tail bound applies.
//
// # Timing
//
// The sampler's running time depends on the bit length of t, hence on S:
// like the upstream query's own running time, this is covered only by
// response-time padding (DESIGN.md, "Errors and time").
//
// Safe for concurrent use.
type SmoothLaplace struct {
	epsilon, delta, beta float64
	eps                  *big.Rat
	g                    *grid
}

// SmoothParams configures SmoothLaplace.
type SmoothParams struct {
	Epsilon, Delta float64
	// Range is upper − lower of the released value (> 0): it fixes the
	// release grid.
	Range float64
	Rand  io.Reader // nil means crypto/rand; only tests set it
}

// smoothGridBits: the release grid is range/2⁴⁰ or finer, negligible next to
// any noise the smooth bound can give (S ≥ e^{−100}·range is not smaller
// than that in practice, and r is charged as sensitivity anyway).
const smoothGridBits = 40

// smoothSlack is the relative margin added to S for its computation in SQL
// (numeric exp and products, far more precise than 2⁻²⁰).
var smoothSlack = big.NewRat(1<<20+1, 1<<20)

// NewSmoothLaplace returns the smooth-sensitivity Laplace mechanism.
func NewSmoothLaplace(p SmoothParams) (*SmoothLaplace, error) {
	if !checkFinitePositive(p.Epsilon) {
		return nil, ErrEpsilon
	}
	if !checkFinitePositive(p.Delta) || p.Delta >= 1 {
		return nil, ErrDelta
	}
	if !checkFinitePositive(p.Range) {
		return nil, errors.New("noise: range must be a finite number > 0")
	}
	e := floorLog2(ratOf(p.Range)) - smoothGridBits
	g := &grid{gran: pow2Rat(e), granExp: e, rand: entropy(p.Rand)}
	return &SmoothLaplace{epsilon: p.Epsilon, delta: p.Delta, beta: SmoothBeta(p.Epsilon, p.Delta), eps: ratOf(p.Epsilon), g: g}, nil
}

// SmoothBeta is β = ε/(2 ln(2/δ)) (NRS 2007, Lemma 2.9, Laplace case).
func SmoothBeta(epsilon, delta float64) float64 {
	return epsilon / (2 * math.Log(2/delta))
}

// Beta returns the smoothness the bound S must have.
func (m *SmoothLaplace) Beta() float64    { return m.beta }
func (m *SmoothLaplace) Epsilon() float64 { return m.epsilon }
func (m *SmoothLaplace) Delta() float64   { return m.delta }

// Release returns f + noise for the β-smooth bound s ≥ 0 (see the type
// comment). f and s are read, not kept.
func (m *SmoothLaplace) Release(f, s *big.Rat) (*big.Rat, error) {
	if f == nil || s == nil || s.Sign() < 0 {
		return nil, errors.New("noise: smooth release needs a value and a bound ≥ 0")
	}
	sp := new(big.Rat).Mul(s, smoothSlack)
	sp.Add(sp, m.g.gran)
	// t = 2·S'/(ε·r) grid steps.
	t := new(big.Rat).Mul(sp, big.NewRat(2, 1))
	t.Quo(t, new(big.Rat).Mul(m.eps, m.g.gran))
	out, err := m.g.release(f, func(src *source) *big.Int { return src.discreteLaplace(t.Num(), t.Denom()) })
	if err != nil {
		return nil, fmt.Errorf("smooth sensitivity: %w", err)
	}
	return out, nil
}

// PTRThreshold returns the test threshold T of Propose-Test-Release (Dwork
// and Lei 2009, "Differential Privacy and Robust Statistics", STOC; Dwork
// and Roth 2014, §7.2): given a proposed bound b on the local sensitivity
// and D(x), a lower bound on the number of units to change before the
// local sensitivity can exceed b (D has sensitivity 1), the test releases
// D̃ = D + Z with Z discrete Laplace of scale 1/ε₁ (ε₁-DP) and answers only
// if D̃ > T. When D(x) = 0 (unstable), the answer is given with probability
// P(Z > T) ≤ P(Z ≥ ⌊T⌋+1) = e^{−ε₁(⌊T⌋+1)}/(1+e^{−ε₁}) ≤ e^{−ε₁T} = δ for
// T = ln(1/δ)/ε₁. When D(x) ≥ 1 every neighbour y has |f(x) − f(y)| ≤ b, so
// releasing f(x) + Lap(b/ε₂) is ε₂-DP; together (ε₁ + ε₂, δ)-DP.
func PTRThreshold(epsilon1, delta float64) (float64, error) {
	if !checkFinitePositive(epsilon1) {
		return 0, ErrEpsilon
	}
	if !checkFinitePositive(delta) || delta >= 1 {
		return 0, ErrDelta
	}
	return scaleResult(math.Log(1/delta) / epsilon1)
}
