// Privacy-critical: needs DP review.

package noise

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
)

// Exponential is the exponential mechanism over a finite, data-independent
// list of candidates (McSherry and Talwar 2007, "Mechanism Design via
// Differential Privacy"): given utilities u_1 … u_B of the candidates on the
// data, it selects candidate j with probability
//
//	P(j) = exp(ε·u_j/(2Δu)) / Σ_i exp(ε·u_i/(2Δu))
//
// where Δu bounds |u_j(x) − u_j(y)| for every candidate j and neighbouring
// databases x, y. It is ε-DP (McSherry–Talwar Theorem 6): each numerator
// changes by a factor ≤ e^{ε/2} and the denominator by ≤ e^{ε/2}.
//
// # Exact sampling
//
// Floating-point weights exp(ε·u/(2Δu)) overflow and round, and a
// Gumbel-max sampler built on float logarithms has the holes of any float
// sampler (Mironov 2012). Select samples the distribution above exactly:
// with γ_j = ε·(u_max − u_j)/(2Δu) ≥ 0 (an exact rational, as ε, Δu and the
// utilities are), it repeats
//
//	draw j uniformly from {1, …, B}; accept with probability e^{−γ_j}
//
// until a draw is accepted. The accepted j has probability proportional to
// e^{−γ_j} ∝ exp(ε·u_j/(2Δu)): exactly the exponential mechanism (rejection
// sampling with a uniform proposal; subtracting u_max only rescales every
// weight by the same factor). The Bernoulli(e^{−γ}) trials are the exact
// ones of Canonne, Kamath and Steinke 2020, Algorithm 1 (bernoulli.go).
// The candidate with u_max is accepted with probability 1, so the expected
// number of trials is B/Σ_j e^{−γ_j} ≤ B.
//
// # Timing
//
// The number of trials depends on Σ_j e^{−γ_j}, hence on the data (how
// peaked the utilities are), not on which candidate is returned beyond
// that; like the upstream query's own running time, this is covered only
// by response-time padding (SECURITY.md G5).
//
// Safe for concurrent use.
type Exponential struct {
	epsilon float64
	// halfEps is ε/(2Δu) as an exact rational.
	halfEps *big.Rat
	rand    io.Reader
}

// ExponentialParams configures the exponential mechanism.
type ExponentialParams struct {
	Epsilon float64
	// Sensitivity is Δu, the largest change of any candidate's utility
	// between neighbouring databases.
	Sensitivity float64
	// Rand is the entropy source; nil means crypto/rand. Only tests set it.
	Rand io.Reader
}

// maxCandidates bounds B so that one selection cannot run for long (the
// expected number of trials is at most B).
const maxCandidates = 1 << 16

// ErrCandidates is returned for an empty or too long candidate list.
var ErrCandidates = fmt.Errorf("noise: the exponential mechanism needs 1 to %d candidates", maxCandidates)

// NewExponential returns the exponential mechanism: ε-DP when every
// utility has sensitivity ≤ p.Sensitivity.
func NewExponential(p ExponentialParams) (*Exponential, error) {
	if !checkFinitePositive(p.Epsilon) {
		return nil, ErrEpsilon
	}
	if !checkFinitePositive(p.Sensitivity) {
		return nil, ErrSensitivity
	}
	halfEps := new(big.Rat).Quo(ratOf(p.Epsilon), new(big.Rat).Mul(ratOf(p.Sensitivity), big.NewRat(2, 1)))
	return &Exponential{epsilon: p.Epsilon, halfEps: halfEps, rand: entropy(p.Rand)}, nil
}

// Epsilon is the privacy parameter of one selection.
func (e *Exponential) Epsilon() float64 { return e.epsilon }

// Select returns the index of the selected candidate, with the
// probabilities of the type comment. utilities must be finite rationals
// computed from the data with sensitivity ≤ Δu; they are read, not kept.
func (e *Exponential) Select(utilities []*big.Rat) (int, error) {
	b := len(utilities)
	if b == 0 || b > maxCandidates {
		return 0, ErrCandidates
	}
	umax := utilities[0]
	for _, u := range utilities {
		if u == nil {
			return 0, errors.New("noise: nil utility")
		}
		if u.IsInt() && umax.IsInt() && u.Num().IsInt64() && umax.Num().IsInt64() {
			// Integers (a quantile's utilities): compare without
			// scaling by the denominators.
			if u.Num().Int64() > umax.Num().Int64() {
				umax = u
			}
			continue
		}
		if u.Cmp(umax) > 0 {
			umax = u
		}
	}
	// γ_j = (u_max − u_j)·ε/(2Δu), kept as numerator and denominator.
	// Candidates with the same utility share one γ (read-only below): a
	// quantile's 2¹⁴ buckets have integer utilities with few distinct
	// values (empty buckets between two values share one), and computing
	// one exact product per candidate was most of a grouped quantile's
	// CPU (issue 27). The distribution and the draws are unchanged.
	gammas := make([][2]*big.Int, b)
	var byDiff map[int64][2]*big.Int
	if umax.IsInt() && umax.Num().IsInt64() {
		byDiff = map[int64][2]*big.Int{}
	}
	for j, u := range utilities {
		var key int64
		cached := false
		if byDiff != nil && u.IsInt() && u.Num().IsInt64() {
			if d, ok := subInt64(umax.Num().Int64(), u.Num().Int64()); ok {
				key = d
				if g, ok := byDiff[key]; ok {
					gammas[j] = g
					continue
				}
				cached = true
			}
		}
		g := new(big.Rat).Sub(umax, u)
		g.Mul(g, e.halfEps)
		gammas[j] = [2]*big.Int{new(big.Int).Set(g.Num()), new(big.Int).Set(g.Denom())}
		if cached {
			byDiff[key] = gammas[j]
		}
	}
	s := newSource(e.rand)
	for {
		j := int(s.uniformUint64(uint64(b)))
		ok := s.bernoulliExpNeg(gammas[j][0], gammas[j][1])
		if s.err != nil {
			return 0, fmt.Errorf("exponential mechanism: %w", s.err)
		}
		if ok {
			return j, nil
		}
	}
}

// subInt64 returns a − b and whether it did not overflow.
func subInt64(a, b int64) (int64, bool) {
	d := a - b
	return d, (b >= 0) == (d <= a)
}

// ExponentialUtilityBound returns t such that the selected candidate's
// utility is at least u_max − t with probability ≥ confidence, whatever
// the data: P(u_j ≤ u_max − (2Δu/ε)(ln B + s)) ≤ e^{−s} (McSherry–Talwar
// 2007 Theorem 8; Dwork and Roth 2014, Theorem 3.11), with
// s = ln(1/(1 − confidence)).
func ExponentialUtilityBound(epsilon, sensitivity float64, candidates int, confidence float64) float64 {
	if candidates < 1 || !(confidence > 0 && confidence < 1) {
		return math.Inf(1)
	}
	return 2 * sensitivity / epsilon * (math.Log(float64(candidates)) + math.Log(1/(1-confidence)))
}
