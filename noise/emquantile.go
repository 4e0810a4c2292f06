// Privacy-critical: needs DP review.

package noise

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
)

// ExponentialQuantile selects, among data-independent candidate points
// c_0 < … < c_{B−1}, one whose rank is close to q·n, by the exponential
// mechanism (McSherry and Talwar, "Mechanism Design via Differential
// Privacy", FOCS 2007) with the utility
//
//	u_j = −|below_j − q·n|
//
// where below_j is the number of (bounded) values < c_j and n the number of
// values. If one privacy unit contributes at most r values, adding or
// removing it changes below_j by at most r and q·n by at most q·r, in the
// same direction, so |Δu_j| ≤ r·max(q, 1 − q) ≤ r = Sensitivity. Candidate
// j is selected with probability ∝ exp(ε·u_j/(2r)): ε-DP (McSherry–Talwar
// Theorem 6). Utility guarantee (ibid., Theorem 8): with probability at
// least 1 − β the selected candidate has u_j ≥ max_i u_i − (2r/ε)·ln(B/β).
//
// It is a minimal sampler for `dpproxy policy init`, written while the
// general exponential mechanism of issue 9 (quantiles) was still on its
// branch; it samples exactly, like the other mechanisms of this package:
// with γ_j = ε·(u_max − u_j)/(2r) ≥ 0 as an exact rational, repeat "draw j
// uniformly, accept with probability e^{−γ_j}" (the exact Bernoulli of
// Canonne, Kamath and Steinke 2020, bernoulli.go) until a draw is
// accepted; the accepted j has probability ∝ e^{−γ_j}, the exponential
// mechanism's distribution. The best candidate is accepted with
// probability 1, so the expected number of draws is at most B.
//
// Safe for concurrent use (each call draws from its own source over Rand).
type ExponentialQuantile struct {
	epsilon float64
	scale   *big.Rat // ε/(2r)
	rand    io.Reader
}

// maxQuantileCandidates bounds B (the expected number of draws is ≤ B).
const maxQuantileCandidates = 1 << 16

// NewExponentialQuantile returns the mechanism for ε = epsilon and
// per-unit rank sensitivity r = sensitivity (values per unit).
func NewExponentialQuantile(epsilon, sensitivity float64, rand io.Reader) (*ExponentialQuantile, error) {
	if !checkFinitePositive(epsilon) {
		return nil, ErrEpsilon
	}
	if !checkFinitePositive(sensitivity) {
		return nil, ErrSensitivity
	}
	scale := new(big.Rat).Quo(ratOf(epsilon), new(big.Rat).Mul(ratOf(sensitivity), big.NewRat(2, 1)))
	return &ExponentialQuantile{epsilon: epsilon, scale: scale, rand: entropy(rand)}, nil
}

// Epsilon is the ε of one selection.
func (e *ExponentialQuantile) Epsilon() float64 { return e.epsilon }

// Select returns the index of the selected candidate given below_j for
// each candidate, n and the quantile q ∈ [0, 1].
func (e *ExponentialQuantile) Select(below []int64, n int64, q float64) (int, error) {
	b := len(below)
	if b == 0 || b > maxQuantileCandidates {
		return 0, fmt.Errorf("noise: the exponential mechanism needs 1 to %d candidates", maxQuantileCandidates)
	}
	if math.IsNaN(q) || q < 0 || q > 1 || n < 0 {
		return 0, errors.New("noise: quantile must be in [0, 1] and n ≥ 0")
	}
	target := new(big.Rat).Mul(ratOf(q), new(big.Rat).SetInt64(n))
	dist := make([]*big.Rat, b) // −u_j = |below_j − q·n|
	best := 0
	for j, c := range below {
		d := new(big.Rat).Sub(new(big.Rat).SetInt64(c), target)
		dist[j] = d.Abs(d)
		if dist[j].Cmp(dist[best]) < 0 {
			best = j
		}
	}
	gammas := make([]*big.Rat, b)
	for j := range dist {
		g := new(big.Rat).Sub(dist[j], dist[best]) // u_max − u_j ≥ 0
		gammas[j] = g.Mul(g, e.scale)
	}
	s := newSource(e.rand)
	for {
		j := int(s.uniformUint64(uint64(b)))
		ok := s.bernoulliExpNeg(gammas[j].Num(), gammas[j].Denom())
		if s.err != nil {
			return 0, fmt.Errorf("exponential mechanism: %w", s.err)
		}
		if ok {
			return j, nil
		}
	}
}
