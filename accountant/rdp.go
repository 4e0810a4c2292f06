// Privacy-critical: needs DP review.

package accountant

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/policy"
)

// Rényi differential privacy (rdp).
//
// A mechanism is (α, r)-RDP if the Rényi divergence of order α between its
// output distributions on neighbouring databases is at most r (Mironov,
// "Rényi Differential Privacy", CSF 2017). RDP composes by addition at each
// order (Mironov 2017, Prop. 1), so the state is the vector r(α) over a fixed
// grid of orders, summed over all releases:
//
//   - Gaussian, μ = Δ₂/σ: r(α) = αμ²/2 (Mironov 2017, Prop. 7), exact.
//   - Laplace, ε₀ = Δ₁/b: randomized response's r(α) at ε₀ (rrRDP). The
//     sampler is a discrete Laplace (noise/), whose loss at one grid
//     step's sensitivity is randomized response's, above the continuous
//     Laplace's (Mironov 2017, Prop. 6; laplaceRDP) by up to a third near
//     α = 1 and ε₀ = 2. Builds before ledger schema 5 composed it as
//     continuous; the ledger's migration to schema 5 recomposed their rdp
//     states (RDPCatchUp, below).
//   - any other ε-DP release (δ = 0): r(α) = min(ε, αε²/2): ε-DP implies
//     (α, ε)-RDP for every α, and ε²/2-zCDP (Bun–Steinke 2016, Prop. 3.3).
//   - releases with δ > 0 and no noise multiplier are not RDP; they are
//     composed with the RDP part by basic composition (see Method).
//
// Conversion to (ε, δ), the improved bound of Balle et al. 2020 (Thm 21) and
// Canonne–Kamath–Steinke 2020 (Prop. 12):
//
//	ε(δ) = min over α of  r(α) + log(1 − 1/α) − (log δ + log α)/(α − 1),
//
// and its inverse at fixed ε,
//
//	δ(ε) = min over α of  e^{(α−1)(r(α)−ε)} · (1 − 1/α)^{α−1} / α.
//
// Guarantee: the composed releases are (ε(δ), δ)-DP under the add/remove-
// one-unit relation, for every δ in (0, 1). Minimising over a finite grid
// only loses tightness, never validity.

// rdpOrders is the order grid: dp_accounting's default grid
// [1 + x/10 for x = 1..99] + 11..63 + [128, 256, 512, 1024], plus orders
// 1.01..1.09 (large ε), 64..124 step 4 between 63 and 128, and 2048..16384,
// so that budgets spent over many queries (optimal α small) or very few
// (optimal α large) do not sit on the grid's edge. Never reorder or remove an
// order: stored states are vectors over this grid (a longer stored vector is
// an error, a shorter one is read as the prefix).
var rdpOrders = func() []float64 {
	var o []float64
	for x := 1; x <= 9; x++ {
		o = append(o, 1+float64(x)/100)
	}
	for x := 1; x <= 99; x++ {
		o = append(o, 1+float64(x)/10)
	}
	for a := 11; a <= 63; a++ {
		o = append(o, float64(a))
	}
	for a := 64; a < 128; a += 4 {
		o = append(o, float64(a))
	}
	for a := 128; a <= 16384; a *= 2 {
		o = append(o, float64(a))
	}
	return o
}()

// laplaceRDP is the Rényi divergence of order α > 1 between Lap(0, b) and
// Lap(Δ, b), ε₀ = Δ/b (Mironov 2017, Prop. 6). Near α = 1 (u = α−1 < 1/2)
// it is evaluated as log1p(u·B/(2α−1))/u with B = α·expm1(uε₀)/u +
// expm1(−αε₀), an algebraic rewriting of the same formula whose limit as
// α→1 is the KL divergence ε₀ + e^{−ε₀} − 1 with no cancellation; elsewhere
// in log-sum-exp form, which cannot overflow.
func laplaceRDP(alpha, eps0 float64) float64 {
	if eps0 == 0 {
		return 0
	}
	u := alpha - 1
	var r float64
	if u < 0.5 {
		x := u * eps0
		ratio := 1.0 // expm1(x)/x
		if x != 0 {
			ratio = math.Expm1(x) / x
		}
		b := alpha*eps0*ratio + math.Expm1(-alpha*eps0)
		r = math.Log1p(u*b/(2*alpha-1)) / u
	} else {
		// log(α/(2α−1)·e^{uε₀}·(1 + (u/α)·e^{−(2α−1)ε₀}))
		r = (math.Log(alpha/(2*alpha-1)) + u*eps0 + math.Log1p(u/alpha*math.Exp(-(2*alpha-1)*eps0))) / u
	}
	// Bounds that hold exactly: 0 ≤ r ≤ ε₀.
	return math.Min(math.Max(r, 0), eps0)
}

// rrRDP is the Rényi divergence of order α > 1 of randomized response with
// parameter ε₀ (outputs 1 and 0 with probabilities p = e^ε₀/(1+e^ε₀) and
// 1−p, against 1−p and p): r(α) = (1/(α−1))·log((e^{αε₀} + e^{(1−α)ε₀}) /
// (1 + e^ε₀)). Every ε₀-DP release is a post-processing of it (Kairouz,
// Oh, Viswanath 2015, Thm 2.1, δ = 0), so by the data-processing
// inequality this bounds the RDP of any ε₀-DP release; the discrete
// Laplace of one grid step's sensitivity has exactly this loss. Near α = 1
// (u = α−1, uε₀ < 1/2) it is log1p(x)/u with x = (e^{ε₀}·expm1(uε₀) +
// expm1(−uε₀))/(1+e^{ε₀}) written without cancellation as
// expm1(uε₀)·(−expm1(−αε₀))/(1+e^{−ε₀}) (both factors positive); its
// limit as α→1 is the KL divergence ε₀·tanh(ε₀/2). Elsewhere in
// log-sum-exp form.
func rrRDP(alpha, eps0 float64) float64 {
	if eps0 == 0 {
		return 0
	}
	u := alpha - 1
	var r float64
	if u*eps0 < 0.5 {
		x := math.Expm1(u*eps0) * -math.Expm1(-alpha*eps0) / (1 + math.Exp(-eps0))
		r = math.Log1p(x) / u
	} else {
		// log(e^{αε₀} + e^{−uε₀}) − log(1 + e^{ε₀}), both without overflow.
		num := alpha*eps0 + math.Log1p(math.Exp(-u*eps0-alpha*eps0))
		den := eps0 + math.Log1p(math.Exp(-eps0))
		r = (num - den) / u
	}
	return math.Min(math.Max(r, 0), eps0)
}

// pureRDP bounds the RDP of any ε-DP release: min(ε, αε²/2).
func pureRDP(alpha, eps float64) float64 { return math.Min(eps, alpha*eps*eps/2) }

// rdpEpsilon converts an RDP curve to ε at δ by the improved conversion,
// minimised over the orders; +Inf when δ ≤ 0 or NaN. An order whose figure
// is NaN gives no bound and is skipped (any order's bound is valid alone).
func rdpEpsilon(orders, r []float64, delta float64) float64 {
	if !(delta > 0) {
		return math.Inf(1)
	}
	if delta >= 1 {
		return 0
	}
	best := math.Inf(1)
	ld := math.Log(delta)
	for i, a := range orders {
		if e := r[i] + math.Log1p(-1/a) - (ld+math.Log(a))/(a-1); e < best {
			best = e
		}
	}
	return math.Max(best, 0)
}

// rdpDelta is the inverse conversion: the smallest δ over the orders such
// that the curve is (ε, δ)-DP.
func rdpDelta(orders, r []float64, eps float64) float64 {
	best := 1.0
	for i, a := range orders {
		ld := (a-1)*(r[i]-eps) + (a-1)*math.Log1p(-1/a) - math.Log(a)
		if d := math.Exp(ld); d < best { // a NaN order is skipped
			best = d
		}
	}
	return best
}

type rdpState struct {
	R []float64 `json:"r"` // Σ r(α) over rdpOrders
}

type rdpAccountant struct {
	// continuous composes Laplace releases as continuous Laplace, as builds
	// before ledger schema 5 did (RDPBeforeSchema5; the migration only).
	continuous bool
}

// rdpOf returns the RDP curve of one event over orders, or ok = false when
// the event is not RDP (δ > 0 without a noise multiplier).
func (ra rdpAccountant) rdpOf(e Event, orders []float64) ([]float64, bool) {
	kind, p := classify(e)
	r := make([]float64, len(orders))
	switch {
	case kind == kindGaussian:
		for i, a := range orders {
			r[i] = a * p * p / 2
		}
	case kind == kindLaplace && ra.continuous:
		for i, a := range orders {
			r[i] = laplaceRDP(a, p)
		}
	case kind == kindLaplace:
		for i, a := range orders {
			r[i] = rrRDP(a, p)
		}
	case e.Delta == 0:
		for i, a := range orders {
			r[i] = pureRDP(a, e.Epsilon)
		}
	default:
		return nil, false
	}
	return r, true
}

func (ra rdpAccountant) absorb(raw json.RawMessage, events []Event) (json.RawMessage, []Event, error) {
	s, err := unmarshalTight[rdpState](raw)
	if err != nil {
		return nil, nil, fmt.Errorf("decode rdp state: %w", err)
	}
	if len(s.R) > len(rdpOrders) {
		return nil, nil, fmt.Errorf("rdp state has %d orders, this build knows %d", len(s.R), len(rdpOrders))
	}
	absorbed := false
	var rest []Event
	for _, e := range events {
		r, ok := ra.rdpOf(e, rdpOrders)
		if !ok {
			rest = append(rest, e)
			continue
		}
		if !absorbed {
			s.R = append(s.R, make([]float64, len(rdpOrders)-len(s.R))...)
			absorbed = true
		}
		for i := range r {
			s.R[i] += r[i]
		}
	}
	if !absorbed {
		return raw, rest, nil
	}
	out, err := json.Marshal(s)
	return out, rest, err
}

func (rdpAccountant) curve(raw json.RawMessage) ([]float64, []float64, error) {
	s, err := unmarshalTight[rdpState](raw)
	if err != nil {
		return nil, nil, fmt.Errorf("decode rdp state: %w", err)
	}
	if len(s.R) > len(rdpOrders) {
		return nil, nil, fmt.Errorf("rdp state has %d orders, this build knows %d", len(s.R), len(rdpOrders))
	}
	return rdpOrders[:len(s.R)], s.R, nil
}

func (a rdpAccountant) epsilon(raw json.RawMessage, delta float64) (float64, error) {
	o, r, err := a.curve(raw)
	if err != nil {
		return 0, err
	}
	return roundUp(rdpEpsilon(o, r, delta)), nil
}

func (a rdpAccountant) delta(raw json.RawMessage, eps float64) (float64, error) {
	o, r, err := a.curve(raw)
	if err != nil {
		return 0, err
	}
	return roundUp(rdpDelta(o, r, eps)), nil
}

// RDPBeforeSchema5 is the rdp method of builds before ledger schema 5,
// which composed Laplace releases as continuous Laplace. Only the ledger's
// migration to schema 5 uses it, to find what those builds recorded.
func RDPBeforeSchema5() Method {
	return composer{name: policy.AccountantRDP, tight: rdpAccountant{continuous: true}}
}

// RDPCatchUp returns a stored rdp state with the Laplace releases an
// earlier build composed as continuous recharged as randomized response.
// earlier and now are the same charges composed by RDPBeforeSchema5 and by
// the rdp method. When stored is earlier (the row is consistent with its
// charges) the result is now. Otherwise (a lifetime state, which holds a
// subset of the charges given, or a row Verify would report) it is stored
// plus now − earlier at each order, floored at 0: Rényi divergences of
// independent releases add (Mironov 2017, Prop. 1), so each release's
// term in now − earlier is what it adds beyond what earlier recorded, and
// every term is ≥ 0 (rrRDP ≥ laplaceRDP, TestRRRDP), so a superset's
// difference covers the subset's. Charges without a Laplace release
// composed by rdp, or a state another method wrote, leave stored
// unchanged.
func RDPCatchUp(stored, earlier, now []byte) ([]byte, error) {
	if CompareStates(earlier, now) == "" {
		return stored, nil // no Laplace release composed by rdp
	}
	if CompareStates(stored, earlier) == "" {
		return now, nil
	}
	var tight [3]rdpState
	for i, b := range [][]byte{stored, earlier, now} {
		s, err := decodeState(b)
		if err != nil {
			return nil, err
		}
		if s.Method != policy.AccountantRDP {
			return stored, nil
		}
		if tight[i], err = unmarshalTight[rdpState](s.Tight); err != nil {
			return nil, fmt.Errorf("decode rdp state: %w", err)
		}
	}
	s, _ := decodeState(stored)
	r := append([]float64(nil), tight[0].R...)
	if len(r) > len(rdpOrders) {
		return nil, fmt.Errorf("rdp state has %d orders, this build knows %d", len(r), len(rdpOrders))
	}
	r = append(r, make([]float64, len(rdpOrders)-len(r))...)
	at := func(v []float64, i int) float64 {
		if i < len(v) {
			return v[i]
		}
		return 0
	}
	for i := range r {
		r[i] += math.Max(0, at(tight[2].R, i)-at(tight[1].R, i))
	}
	raw, err := json.Marshal(rdpState{R: r})
	if err != nil {
		return nil, err
	}
	s.Tight = raw
	return json.Marshal(s)
}
