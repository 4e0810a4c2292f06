// Privacy-critical: needs DP review.

package noise

import "errors"

var errUnimplemented = errors.New("noise: not implemented")

// NewGaussian returns the (discrete) Gaussian mechanism: (ε, δ)-DP when the
// measurement's L2 sensitivity is at most p.Sensitivity.
func NewGaussian(p Params) (Mechanism, error) { return nil, errUnimplemented }
