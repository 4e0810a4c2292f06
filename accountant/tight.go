// Privacy-critical: needs DP review.

package accountant

import (
	"encoding/json"
	"math"

	"github.com/dpproxy/dpproxy/policy"
)

// tightByName returns the float part of the named method, or nil.
func tightByName(name string) tightAccountant {
	switch name {
	case policy.AccountantAdvanced:
		return advancedAccountant{}
	case policy.AccountantRDP:
		return rdpAccountant{}
	case policy.AccountantZCDP:
		return zcdpAccountant{}
	case policy.AccountantPLD:
		return pldAccountant{}
	}
	return nil
}

// eventKind classifies an event for the tighter accountants.
type eventKind int

const (
	kindGeneric  eventKind = iota // known only by its (ε, δ)
	kindLaplace                   // Laplace noise: pure ε₀-DP with ε₀ = Δ₁/b
	kindGaussian                  // Gaussian noise: μ = Δ₂/σ
)

// classify returns how the tighter accountants see e and its parameter: ε₀
// for Laplace (the larger of the stated ε and 1/multiplier, so an
// inconsistent event is charged pessimistically), μ = 1/multiplier for
// Gaussian. A Gaussian event without a multiplier, or any event whose
// parameters say nothing more than (ε, δ), is generic.
func classify(e Event) (eventKind, float64) {
	switch {
	case e.Mechanism == policy.MechanismLaplace && e.Delta == 0:
		eps0 := e.Epsilon
		if e.NoiseMultiplier > 0 {
			eps0 = math.Max(eps0, 1/e.NoiseMultiplier)
		}
		return kindLaplace, eps0
	case e.Mechanism == policy.MechanismGaussian && e.NoiseMultiplier > 0:
		return kindGaussian, 1 / e.NoiseMultiplier
	}
	return kindGeneric, e.Epsilon
}

// unmarshalTight decodes a method's own state (nil or empty: zero value).
func unmarshalTight[T any](raw json.RawMessage) (T, error) {
	var v T
	if len(raw) == 0 {
		return v, nil
	}
	err := json.Unmarshal(raw, &v)
	return v, err
}

// phi is the standard normal CDF, accurate in both tails.
func phi(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// bisectDecreasing returns (an upper bound on) the smallest x in [lo, hi]
// with f(x) ≤ target, for f non-increasing; +Inf if f(hi) > target. A NaN
// f(x) counts as above the target, and a NaN or infinite bracket or a NaN
// target gives +Inf (no bound): the result is never NaN. At most 200
// rounds.
func bisectDecreasing(f func(float64) float64, target, lo, hi float64) float64 {
	if math.IsNaN(target) || math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return math.Inf(1)
	}
	if !(f(hi) <= target) {
		return math.Inf(1)
	}
	if f(lo) <= target {
		return lo
	}
	for i := 0; i < 200 && hi-lo > 1e-13*math.Max(1, hi); i++ {
		mid := lo + (hi-lo)/2
		if f(mid) <= target {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}
