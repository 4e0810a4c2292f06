// Privacy-critical: needs DP review.

package accountant

import (
	"encoding/json"
	"fmt"
	"math"
)

// Zero-concentrated differential privacy (zcdp).
//
// A mechanism is ρ-zCDP if it is (α, ρα)-RDP for every α > 1 (Bun–Steinke,
// "Concentrated Differential Privacy", TCC 2016, Def. 1.1); ρ adds up under
// composition (their Lemma 2.3), so the state is one number:
//
//   - Gaussian, μ = Δ₂/σ: ρ = μ²/2 (Bun–Steinke Prop. 1.6), also for the
//     discrete Gaussian (Canonne–Kamath–Steinke 2020, Thm 4).
//   - Laplace or any other ε-DP release: ρ = ε²/2 (Bun–Steinke Prop. 1.4).
//   - releases with δ > 0 and no noise multiplier are not zCDP; they are
//     composed with the zCDP part by basic composition (see Method).
//
// Conversion to (ε, δ): the improved RDP conversion with r(α) = ρα and α
// searched continuously (Canonne–Kamath–Steinke 2020, Prop. 12; it is the
// tight conversion OpenDP's zCDP_to_approxDP uses):
//
//	ε(δ) = min over α > 1 of  ρα + log(1 − 1/α) − (log δ + log α)/(α − 1),
//
// never worse than the basic ρ + 2√(ρ log(1/δ)) (Bun–Steinke Prop. 1.3),
// which is also computed and the smaller taken. Guarantee: the composed
// releases are (ε(δ), δ)-DP under the add/remove-one-unit relation.

type zcdpState struct {
	Rho float64 `json:"rho"`
}

type zcdpAccountant struct{}

// zcdpOf returns ρ of one event, or ok = false when the event is not zCDP.
func zcdpOf(e Event) (float64, bool) {
	kind, p := classify(e)
	switch {
	case kind == kindGaussian:
		return p * p / 2, true
	case kind == kindLaplace:
		return p * p / 2, true
	case e.Delta == 0:
		return e.Epsilon * e.Epsilon / 2, true
	}
	return 0, false
}

// zcdpBasicEpsilon is Bun–Steinke Prop. 1.3: ρ + 2√(ρ log(1/δ)).
func zcdpBasicEpsilon(rho, delta float64) float64 {
	if delta <= 0 {
		return math.Inf(1)
	}
	return rho + 2*math.Sqrt(rho*math.Log(1/delta))
}

// zcdpObjective is the improved conversion at order α = 1 + eˣ.
func zcdpObjective(rho, logDelta, x float64) float64 {
	u := math.Exp(x) // α − 1
	a := 1 + u
	return rho*a + math.Log(u/a) - (logDelta+math.Log1p(u))/u
}

// minimizeLog minimises f over x = log(α−1) in [−12, 14] (α−1 from 6e-6 to
// 1.2e6): a scan at step 1/8, then golden-section search around the best
// point. The objective is smooth and unimodal in x for the curves used here;
// any point of the search is a valid bound, so a missed optimum only loses
// tightness.
func minimizeLog(f func(x float64) float64) float64 {
	const lo, hi, step = -12.0, 14.0, 0.125
	bestX, best := lo, math.Inf(1)
	for x := lo; x <= hi; x += step {
		if v := f(x); v < best {
			bestX, best = x, v
		}
	}
	a, b := bestX-step, bestX+step
	g := (math.Sqrt(5) - 1) / 2
	c, d := b-g*(b-a), a+g*(b-a)
	fc, fd := f(c), f(d)
	for i := 0; i < 80; i++ {
		if fc < fd {
			b, d, fd = d, c, fc
			c = b - g*(b-a)
			fc = f(c)
		} else {
			a, c, fc = c, d, fd
			d = a + g*(b-a)
			fd = f(d)
		}
	}
	return math.Min(best, math.Min(fc, fd))
}

// zcdpEpsilon is the tight conversion of ρ-zCDP to ε at δ.
//
// A NaN or negative ρ, or a NaN δ, gives +Inf (no bound), never NaN.
func zcdpEpsilon(rho, delta float64) float64 {
	if !(delta > 0) || !(rho >= 0) {
		return math.Inf(1)
	}
	if delta >= 1 || rho == 0 {
		return 0
	}
	ld := math.Log(delta)
	e := minimizeLog(func(x float64) float64 { return zcdpObjective(rho, ld, x) })
	e = math.Min(e, zcdpBasicEpsilon(rho, delta))
	if math.IsNaN(e) { // ρ = +Inf: ∞ − ∞ in the objective
		return math.Inf(1)
	}
	return math.Max(0, e)
}

// zcdpDelta is the inverse: δ(ε) = min over α of e^{(α−1)(ρα−ε)}·(1−1/α)^{α−1}/α.
// A NaN or negative ρ or a NaN ε gives 1 (no bound), never NaN.
func zcdpDelta(rho, eps float64) float64 {
	if !(rho >= 0) || math.IsNaN(eps) {
		return 1
	}
	if rho == 0 {
		return 0
	}
	ld := minimizeLog(func(x float64) float64 {
		u := math.Exp(x)
		a := 1 + u
		return u*(rho*a-eps) + u*math.Log(u/a) - math.Log(a)
	})
	if math.IsNaN(ld) {
		return 1
	}
	return math.Min(1, math.Exp(ld))
}

func (zcdpAccountant) absorb(raw json.RawMessage, events []Event) (json.RawMessage, []Event, error) {
	s, err := unmarshalTight[zcdpState](raw)
	if err != nil {
		return nil, nil, fmt.Errorf("decode zcdp state: %w", err)
	}
	absorbed := false
	var rest []Event
	for _, e := range events {
		rho, ok := zcdpOf(e)
		if !ok {
			rest = append(rest, e)
			continue
		}
		s.Rho += rho
		absorbed = true
	}
	if !absorbed {
		return raw, rest, nil
	}
	out, err := json.Marshal(s)
	return out, rest, err
}

func (zcdpAccountant) epsilon(raw json.RawMessage, delta float64) (float64, error) {
	s, err := unmarshalTight[zcdpState](raw)
	if err != nil {
		return 0, fmt.Errorf("decode zcdp state: %w", err)
	}
	return roundUp(zcdpEpsilon(roundUp(s.Rho), delta)), nil
}

func (zcdpAccountant) delta(raw json.RawMessage, eps float64) (float64, error) {
	s, err := unmarshalTight[zcdpState](raw)
	if err != nil {
		return 0, fmt.Errorf("decode zcdp state: %w", err)
	}
	return roundUp(zcdpDelta(roundUp(s.Rho), eps)), nil
}
