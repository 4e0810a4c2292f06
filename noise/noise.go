// Privacy-critical: needs DP review.

package noise

import (
	"errors"
	"io"
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
	HalfWidth(confidence float64) float64
	// Epsilon and Delta are the (ε, δ) guarantee of one release.
	Epsilon() float64
	Delta() float64
	// NoiseMultiplier is the noise scale over the sensitivity (b/Δ₁ for
	// Laplace, σ/Δ₂ for Gaussian), for accountants.
	NoiseMultiplier() float64
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
	// Rand is the entropy source; nil means crypto/rand. Only tests set it.
	Rand io.Reader
}

var errUnimplemented = errors.New("noise: not implemented")

// NewLaplace returns the (discrete) Laplace mechanism: ε-DP when the
// measurement's L1 sensitivity is at most p.Sensitivity.
func NewLaplace(p Params) (Mechanism, error) { return nil, errUnimplemented }

// NewGaussian returns the (discrete) Gaussian mechanism: (ε, δ)-DP when the
// measurement's L2 sensitivity is at most p.Sensitivity.
func NewGaussian(p Params) (Mechanism, error) { return nil, errUnimplemented }
