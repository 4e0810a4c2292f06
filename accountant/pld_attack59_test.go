package accountant

import (
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/policy"
)

// discreteGaussianDeltaShift1 is the exact privacy curve of the discrete
// Gaussian N_Z(0, σ²) against N_Z(1, σ²) (an integer count of sensitivity
// 1): δ(ε) = Σ_x max(0, P(x) − e^ε·Q(x)), summed over |x| ≤ 40σ + 50 (the
// mass beyond is below 1e-300).
func discreteGaussianDeltaShift1(sigma, eps float64) float64 {
	r := int(40*sigma) + 50
	var z float64
	for x := -r; x <= r; x++ {
		z += math.Exp(-float64(x*x) / (2 * sigma * sigma))
	}
	var d float64
	for x := -r; x <= r; x++ {
		p := math.Exp(-float64(x*x)/(2*sigma*sigma)) / z
		q := math.Exp(-float64((x-1)*(x-1))/(2*sigma*sigma)) / z
		d += math.Max(0, p-math.Exp(eps)*q)
	}
	return d
}

// TestAttack59_PLDChargesDiscreteGaussianAsContinuous (attack round 59;
// severity low).
//
// The pld method composes every Gaussian event as the continuous Gaussian
// of μ = 1/multiplier ("A Gaussian-only workload is therefore accounted
// exactly"), but the noise the proxy adds is the discrete Gaussian
// (noise.NewGaussian), whose privacy curve at an integer shift is not
// dominated by the continuous one's: for a count (Δ = 1) calibrated to
// ε = 1, δ = 1e-5 (σ ≈ 3.740 in integer mode, calibrated on the discrete
// curve itself, CKS 2020 Thm 7), pld charges ε ≈ 0.99711 at δ = 1e-5,
// where the mechanism's exact δ is ≈ 1.040e-5 (4% above). So the figure
// the ledger records and compares with the budget is below the true
// guarantee, against the file's claim that "the computed ε is never below
// the true one". Measured with an exact lattice convolution of the
// discrete loss (outside this test): the gap is 0.3% of ε for one such
// release, 0.15% for two, and reverses from about three on (the
// composition of discrete Gaussians is then below the continuous curve);
// at ε = 2 (σ ≈ 2.01) one release is charged 1.980 for a true 2.0.
// zcdp and rdp are exact for the discrete Gaussian (CKS 2020 Thm 4), so
// they are not affected.
//
// Suggested fix: for an event whose noise is a discrete Gaussian of few
// grid steps per shift, let pld charge at least its own (ε, δ) curve:
// e.g. take the dominating pair (ε, δ) of the event itself when the state
// holds a single Gaussian release, or carry a flag/the grid σ in the event
// so the pld method can discretise the discrete Gaussian's own loss
// (a lattice of spacing 1/σ², exact) instead of the continuous one.
func TestAttack59_PLDChargesDiscreteGaussianAsContinuous(t *testing.T) {
	const eps, delta = 1.0, 1e-5
	m, err := noise.NewGaussian(noise.Params{Epsilon: eps, Delta: delta, Sensitivity: 1, Integer: true})
	if err != nil {
		t.Fatal(err)
	}
	// Integer mode, one cell: the grid step is 1 and the charged
	// sensitivity is 1, so σ is the multiplier.
	sc, step := m.(noise.Scaled).NoiseScale()
	if step != 1 || math.Abs(sc-m.NoiseMultiplier()) > 1e-12*sc {
		t.Fatalf("σ %v (step %v), multiplier %v: the premise changed", sc, step, m.NoiseMultiplier())
	}
	sigma := sc
	// The mechanism is calibrated on its own curve: δ(ε) ≤ δ.
	if d := discreteGaussianDeltaShift1(sigma, eps); d > delta*(1+1e-6) {
		t.Fatalf("control: discrete δ(%v) = %v above %v", eps, d, delta)
	}
	method, err := MethodByName(policy.AccountantPLD)
	if err != nil {
		t.Fatal(err)
	}
	ev := Event{Mechanism: m.Name(), Epsilon: m.Epsilon(), Delta: m.Delta(), NoiseMultiplier: m.NoiseMultiplier()}
	st, err := method.Compose(nil, []Event{ev})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := method.Spent(st, delta)
	if err != nil {
		t.Fatal(err)
	}
	// The recorded figure must be a true guarantee of the release: the
	// exact δ of the discrete Gaussian at the recorded ε is at most the
	// recorded δ.
	if got := discreteGaussianDeltaShift1(sigma, sp.Epsilon); got > sp.Delta*(1+1e-6) {
		t.Errorf("pld records one discrete-Gaussian count (σ = %.6f, event ε=%v δ=%v) as (ε=%.6f, δ=%g), "+
			"but the mechanism's exact δ at ε=%.6f is %.6g (%.2f× the recorded δ)",
			sigma, ev.Epsilon, ev.Delta, sp.Epsilon, sp.Delta, sp.Epsilon, got, got/sp.Delta)
	}
}
