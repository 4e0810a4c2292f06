// Not in the privacy-critical set (docs/ARCHITECTURE.md): the figures of
// the planning command `dpproxy accountant`, which composes hypothetical
// events for a steward. No charge reaches this file: the ledger composes
// and checks every charge through Method.Compose and Evaluate
// (method.go), so a bug here misstates a plan, never admits a charge.

package accountant

import (
	"fmt"
	"math"
)

// ComposeSpent composes events from nothing with the named method and
// returns the guarantee at total δ delta (see Method.Spent).
func ComposeSpent(method string, events []Event, delta float64) (Spent, error) {
	m, err := MethodByName(method)
	if err != nil {
		return Spent{}, err
	}
	st, err := m.Compose(nil, events)
	if err != nil {
		return Spent{}, err
	}
	return m.Spent(st, delta)
}

// ComposeEpsilon returns the ε that the named method charges for the events
// at total δ delta (+Inf when the method cannot reach that δ, e.g. a
// Gaussian release with delta = 0). It is what the ledger would record after
// exactly these events; the CLI's "dpproxy accountant" uses it.
func ComposeEpsilon(method string, events []Event, delta float64) (float64, error) {
	if math.IsNaN(delta) || delta < 0 || delta >= 1 {
		return 0, fmt.Errorf("delta %v must be in [0, 1)", delta)
	}
	s, err := ComposeSpent(method, events, delta)
	if err != nil {
		return 0, err
	}
	if s.Delta > delta {
		return math.Inf(1), nil
	}
	return s.Epsilon, nil
}

// ComposeDelta returns the δ that the named method needs for the events to
// be (epsilon, δ)-DP: the smallest δ it can prove (1 when it can prove
// nothing below 1). The CLI's "dpproxy accountant" uses it.
func ComposeDelta(method string, events []Event, epsilon float64) (float64, error) {
	if math.IsNaN(epsilon) || math.IsInf(epsilon, 0) || epsilon < 0 {
		return 0, fmt.Errorf("epsilon %v must be finite and ≥ 0", epsilon)
	}
	m, err := MethodByName(method)
	if err != nil {
		return 0, err
	}
	c := m.(composer)
	st, err := c.Compose(nil, events)
	if err != nil {
		return 0, err
	}
	p, err := c.parse(st)
	if err != nil {
		return 0, err
	}
	best := 1.0
	if p.be.Cmp(dec(epsilon)) <= 0 {
		best = math.Min(best, ratFloatUp(p.bd))
	}
	if c.tight != nil {
		restEps, restDelta := ratFloatUp(p.re), ratFloatUp(p.rd)
		switch {
		case len(p.s.Tight) == 0:
			if restEps <= epsilon {
				best = math.Min(best, restDelta)
			}
		case epsilon >= restEps:
			d, err := c.tight.delta(p.s.Tight, epsilon-restEps)
			if err != nil {
				return 0, err
			}
			best = math.Min(best, roundUp(d+restDelta))
		}
	}
	return math.Min(1, best), nil
}

// GaussianEpsilon returns the exact ε at δ of one Gaussian release with
// noise multiplier σ/Δ₂ (Balle and Wang 2018, Thm 8: δ(ε) = Φ(μ/2 − ε/μ) −
// e^ε·Φ(−μ/2 − ε/μ) with μ = Δ₂/σ), found by bisection and rounded up; +Inf
// for δ ≤ 0. The planning CLI uses it to give a Gaussian release its (ε, δ)
// pair for the methods that compose by (ε, δ) (pure, advanced).
func GaussianEpsilon(noiseMultiplier, delta float64) float64 {
	if !(noiseMultiplier > 0) || math.IsInf(noiseMultiplier, 0) {
		return math.Inf(1)
	}
	return roundUp(gaussianEpsilon(1/noiseMultiplier, delta))
}

// GaussianDelta returns the exact δ at ε of one Gaussian release with noise
// multiplier σ/Δ₂ (the same curve as [GaussianEpsilon]); 1 for a
// non-positive multiplier.
func GaussianDelta(noiseMultiplier, epsilon float64) float64 {
	if !(noiseMultiplier > 0) || math.IsInf(noiseMultiplier, 0) {
		return 1
	}
	d := gaussianDelta(1/noiseMultiplier, epsilon)
	if d <= 0 {
		return 0
	}
	return math.Min(1, roundUp(d))
}
