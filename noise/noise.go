// Privacy-critical: needs DP review.

package noise

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
)

// Mechanism adds calibrated noise to one measurement. Implementations are
// safe for concurrent use.
type Mechanism interface {
	// Name is "laplace" or "gaussian".
	Name() string
	// AddNoise releases x plus noise. In integer mode x must be an integer
	// and the result is an integer; in real mode x is rounded to the
	// Granularity grid (the rounding is charged as extra sensitivity) and
	// the result is a multiple of Granularity.
	AddNoise(x *big.Rat) (*big.Rat, error)
	// Granularity is the spacing of released values: 1 in integer mode, a
	// power of two in real mode.
	Granularity() *big.Rat
	// HalfWidth returns the smallest h such that P(|released − x| ≤ h) ≥
	// confidence, for x already on the grid (exact quantile of the noise).
	// In real mode it adds the rounding bound Granularity/2, so the
	// statement holds for every x, on the grid or not.
	HalfWidth(confidence float64) float64
	// Epsilon and Delta are the (ε, δ) guarantee of one release.
	Epsilon() float64
	Delta() float64
	// NoiseMultiplier is the noise scale over the sensitivity charged (b/Δ₁
	// for Laplace, σ/Δ₂ for Gaussian, where in real mode Δ includes the
	// rounding charge), for accountants: a Laplace release is ε₀-DP with
	// ε₀ = 1/NoiseMultiplier, a Gaussian one ρ-zCDP with
	// ρ = 1/(2·NoiseMultiplier²).
	NoiseMultiplier() float64
}

// Scaled is implemented by the Laplace and Gaussian mechanisms: the noise's
// distribution, for statements about the error of estimators built from
// several releases (release's confidence intervals of AVG, VAR, STDDEV),
// which no single HalfWidth gives.
type Scaled interface {
	// NoiseScale returns the noise in grid units — discrete Laplace with
	// P(Z = z) ∝ exp(−|z|/scale), or discrete Gaussian with
	// P(Z = z) ∝ exp(−z²/(2·scale²)) — and the grid step (1 in integer
	// mode); the released value is step·(round(x/step) + Z).
	NoiseScale() (scale, step float64)
}

// Params configures a mechanism.
type Params struct {
	Epsilon float64
	Delta   float64 // Gaussian only; must be 0 for Laplace
	// Sensitivity is the L1 sensitivity for Laplace and the L2 sensitivity
	// for Gaussian, of the measurement before any rounding.
	Sensitivity float64
	// Integer selects integer mode: the measurement and its sensitivity are
	// integers (counts, sums of integers with integer bounds).
	Integer bool
	// Cells is the number of released values (cells, groups) that one
	// privacy unit can change when the same mechanism noises several cells
	// of one query: the L0 bound (max groups per unit), or every group of
	// the key domain when a plan weights groups (rewrite.Plan.CellsChanged).
	// 0 means 1. In real
	// mode each changed cell can move by one extra grid step through
	// rounding, so the charged sensitivity is Δ₁ + Cells·r (Laplace) or
	// Δ₂ + √Cells·r (Gaussian). For the Gaussian, Cells > 1 also selects
	// the vector privacy analysis (zCDP), see NewGaussian.
	Cells int
	// Rand is the entropy source; nil means crypto/rand. Only tests set it.
	// Each mechanism serialises its own reads from Rand; a reader shared by
	// several mechanisms that run concurrently must itself be safe for
	// concurrent use.
	Rand io.Reader
}

// Errors returned by the constructors. They describe parameters only,
// never data.
var (
	ErrEpsilon      = errors.New("noise: epsilon must be a finite number > 0")
	ErrDelta        = errors.New("noise: delta must be a finite number in (0, 1) for the Gaussian mechanism")
	ErrLaplaceDelta = errors.New("noise: the Laplace mechanism is pure ε-DP; delta must be 0")
	ErrSensitivity  = errors.New("noise: sensitivity must be a finite number > 0")
	ErrCells        = errors.New("noise: cells must be ≥ 0")
)

// checkFinitePositive rejects NaN, ±Inf and values ≤ 0.
func checkFinitePositive(x float64) bool {
	return !math.IsNaN(x) && !math.IsInf(x, 0) && x > 0
}

func (p Params) checkCommon() error {
	if !checkFinitePositive(p.Epsilon) {
		return ErrEpsilon
	}
	if !checkFinitePositive(p.Sensitivity) {
		return ErrSensitivity
	}
	if p.Cells < 0 {
		return ErrCells
	}
	return nil
}

func (p Params) cells() int {
	if p.Cells <= 0 {
		return 1
	}
	return p.Cells
}

// grid is the part shared by both mechanisms: the release grid and the
// entropy source.
type grid struct {
	integer bool
	// gran = 2^granExp is the spacing of released values (1 in integer
	// mode).
	gran    *big.Rat
	granExp int
	rand    io.Reader
}

// Granularity returns a copy of the grid spacing.
func (g *grid) Granularity() *big.Rat { return new(big.Rat).Set(g.gran) }

// toGrid returns x in grid units: x itself in integer mode (which must be
// an integer), else round(x/r) with ties rounded up. The rounding error is
// at most r/2, so two measurements at distance d map to grid points at
// distance at most d/r + 1: this is the extra grid step charged per cell.
func (g *grid) toGrid(x *big.Rat) (*big.Int, error) {
	if x == nil {
		return nil, errors.New("noise: nil measurement")
	}
	if g.integer {
		if !x.IsInt() {
			return nil, errors.New("noise: integer-mode mechanism given a non-integer measurement")
		}
		return new(big.Int).Set(x.Num()), nil
	}
	q := new(big.Rat).Quo(x, g.gran)
	q.Add(q, big.NewRat(1, 2))
	return floorRat(q), nil
}

// fromGrid returns v·r as an exact rational.
func (g *grid) fromGrid(v *big.Int) *big.Rat {
	out := new(big.Rat).SetInt(v)
	return out.Mul(out, g.gran)
}

// release adds noise (in grid units) to x and returns the released value.
func (g *grid) release(x *big.Rat, sample func(*source) *big.Int) (*big.Rat, error) {
	v, err := g.toGrid(x)
	if err != nil {
		return nil, err
	}
	s := newSource(g.rand)
	z := sample(s)
	if s.err != nil {
		return nil, fmt.Errorf("add noise: %w", s.err)
	}
	v.Add(v, z)
	return g.fromGrid(v), nil
}

// roundingBound is the largest distance between x and its grid point: 0 in
// integer mode, r/2 in real mode.
func (g *grid) roundingBound() float64 {
	if g.integer {
		return 0
	}
	return math.Ldexp(1, g.granExp-1)
}

// granularityBits fixes the real-mode grid relative to the noise scale s
// (the Laplace scale Δ₁/ε or the Gaussian σ): r is the largest power of two
// ≤ s/2³⁹, so s/2⁴⁰ < r ≤ s/2³⁹. Never finer than s/2⁴⁰ (Google's
// granularity parameter, which keeps the discrete noise in grid units
// below 2⁴¹·s and the integers small), and fine enough that rounding and
// its sensitivity charge are negligible: the charge r relative to Δ₁ is at
// most 1/(ε·2³⁹) for Laplace, and the half-grid rounding error is below
// 2⁻⁴⁰ of the noise scale.
const granularityBits = 39

// newGrid returns the grid for a noise scale (as an exact rational).
func newGrid(p Params, scale *big.Rat) *grid {
	g := &grid{integer: p.Integer, rand: entropy(p.Rand)}
	if p.Integer {
		g.gran = big.NewRat(1, 1)
		return g
	}
	g.granExp = floorLog2(scale) - granularityBits
	g.gran = pow2Rat(g.granExp)
	return g
}

// floorRat returns ⌊x⌋.
func floorRat(x *big.Rat) *big.Int {
	q, m := new(big.Int).DivMod(x.Num(), x.Denom(), new(big.Int))
	_ = m // Euclidean division with a positive denominator is the floor
	return q
}

// floorLog2 returns ⌊log₂ x⌋ for x > 0.
func floorLog2(x *big.Rat) int {
	e := x.Num().BitLen() - x.Denom().BitLen()
	if x.Cmp(pow2Rat(e)) < 0 {
		e--
	}
	return e
}

// pow2Rat returns 2^e exactly.
func pow2Rat(e int) *big.Rat {
	if e >= 0 {
		return new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(e)))
	}
	return new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), uint(-e)))
}

// ratOf converts a float64 to big.Rat exactly (every finite float64 is a
// dyadic rational).
func ratOf(x float64) *big.Rat { return new(big.Rat).SetFloat64(x) }
