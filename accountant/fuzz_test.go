package accountant

import (
	"math"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/dpref"
	"github.com/dpproxy/dpproxy/policy"
)

// fuzzExtremes are the float64 arguments the fuzz target is seeded with.
var fuzzExtremes = []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, -1, 5e-324, 2.2250738585072014e-308, 1e-300, 1e-16,
	1e-6, 1e-3, 0.1, 1, 3, 100, 1e16, 1e300, math.MaxFloat64}

// FuzzConversions composes arbitrary events with every method and converts
// the result both ways, and calls the conversions of each method directly
// with arbitrary arguments. Every call returns within a second, with an
// error or with a figure that is not NaN (ε ≥ 0, δ in [0, 1]).
func FuzzConversions(f *testing.F) {
	f.Add(uint8(0), 0.001, 0.0, 1000.0, 1e-6, 1.0, uint8(3))
	f.Add(uint8(1), 1e-16, 1e-7, 1e16, 1e-300, 1e-16, uint8(2))
	for i, x := range fuzzExtremes {
		f.Add(uint8(i), x, 1e-6, 1.0, 1e-6, 1.0, uint8(1))
		f.Add(uint8(i+1), 0.1, x, 10.0, x, 0.5, uint8(2))
		f.Add(uint8(i+2), 1.0, 0.0, x, 1e-9, x, uint8(3))
	}
	f.Fuzz(func(t *testing.T, kind uint8, eps, delta, multiplier, atDelta, atEps float64, n uint8) {
		mech := []string{policy.MechanismLaplace, policy.MechanismGaussian, "exponential"}[int(kind)%3]
		events := make([]Event, 1+int(n)%3)
		for i := range events {
			events[i] = Event{Mechanism: mech, Epsilon: eps, Delta: delta, NoiseMultiplier: multiplier}
			if i == 1 {
				events[i].Epsilon, events[i].NoiseMultiplier = eps*2, multiplier/2
			}
		}
		for _, name := range methodNames {
			dpref.ReturnsWithin(t, time.Second, name+" ComposeEpsilon", func() {
				if e, err := ComposeEpsilon(name, events, atDelta); err == nil && (math.IsNaN(e) || e < 0) {
					t.Fatalf("ComposeEpsilon(%s, %+v, %v) = %v", name, events, atDelta, e)
				}
			})
			dpref.ReturnsWithin(t, time.Second, name+" ComposeDelta", func() {
				if d, err := ComposeDelta(name, events, atEps); err == nil && (math.IsNaN(d) || d < 0 || d > 1) {
					t.Fatalf("ComposeDelta(%s, %+v, %v) = %v", name, events, atEps, d)
				}
			})
		}
		dpref.ReturnsWithin(t, time.Second, "conversions", func() {
			nonNegative := func(what string, x float64) {
				if math.IsNaN(x) || x < 0 {
					t.Fatalf("%s = %v (args %v, %v, %v)", what, x, eps, delta, multiplier)
				}
			}
			probability := func(what string, x float64) {
				if math.IsNaN(x) || x < 0 || x > 1 {
					t.Fatalf("%s = %v (args %v, %v, %v)", what, x, eps, delta, multiplier)
				}
			}
			nonNegative("zcdpEpsilon", zcdpEpsilon(eps, atDelta))
			probability("zcdpDelta", zcdpDelta(eps, atEps))
			nonNegative("gaussianEpsilon", gaussianEpsilon(multiplier, atDelta))
			probability("gaussianDelta", gaussianDelta(multiplier, atEps))
			curve := make([]float64, len(rdpOrders))
			for i, a := range rdpOrders {
				curve[i] = laplaceRDP(a, eps) + pureRDP(a, delta)
			}
			nonNegative("rdpEpsilon", rdpEpsilon(rdpOrders, curve, atDelta))
			probability("rdpDelta", rdpDelta(rdpOrders, curve, atEps))
			// A state as absorb builds it: from events with ε ≥ 0.
			e0 := math.Abs(eps)
			s := advancedState{K: int64(n) + 1, Sum: e0, SumSq: e0 * e0, SumKOV: e0 * math.Tanh(e0/2), Delta: delta, Homogeneous: n%2 == 0, Eps0: e0}
			nonNegative("advanced epsilonAt", s.epsilonAt(atDelta))
			if c := ceilSig(eps, pldKeyDigits); eps > 0 && !(c >= eps) {
				t.Fatalf("ceilSig(%v) = %v", eps, c)
			}
		})
	})
}

// The cases the fuzzer found or that the audit named, fixed: no NaN, no
// panic, each conservative (+Inf for ε, 1 for δ).
func TestConversions_Extremes(t *testing.T) {
	inf := math.Inf(1)
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"zcdpEpsilon(NaN ρ)", zcdpEpsilon(nan, 1e-6), inf},
		{"zcdpEpsilon(negative ρ)", zcdpEpsilon(-1, 1e-6), inf},
		{"zcdpEpsilon(NaN δ)", zcdpEpsilon(0.1, nan), inf},
		{"zcdpEpsilon(+Inf ρ)", zcdpEpsilon(inf, 1e-6), inf},
		{"zcdpDelta(NaN ε)", zcdpDelta(1, nan), 1},
		{"gaussianDelta(+Inf μ)", gaussianDelta(inf, 0), 1},
		{"gaussianDelta(NaN μ)", gaussianDelta(nan, 0), 1},
		{"gaussianEpsilon(NaN μ)", gaussianEpsilon(nan, 1e-6), inf},
		{"gaussianEpsilon(+Inf μ)", gaussianEpsilon(inf, 1e-6), inf},
		{"rdpEpsilon(NaN δ)", rdpEpsilon(rdpOrders, make([]float64, len(rdpOrders)), nan), inf},
		{"bisect NaN curve", bisectDecreasing(func(float64) float64 { return nan }, 0.5, 0, 1), inf},
		{"bisect NaN bracket", bisectDecreasing(func(float64) float64 { return 0 }, 0.5, 0, nan), inf},
		{"advanced at δ +Inf", advancedState{K: 1, Sum: 1, SumSq: 1, SumKOV: math.Tanh(0.5)}.epsilonAt(inf), inf},
		{"pmf.delta(NaN ε)", pointMass().delta(nan, 1e-3), 1},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	// A basic sum above the largest float64 made ratFloatUp call Cmp on the
	// nil that SetFloat64(+Inf) returns: a panic in ComposeDelta.
	// (δ > 0 without a multiplier: composed by the exact decimal "rest".)
	events := []Event{{Epsilon: 1e308, Delta: 1e-9}, {Epsilon: 1e308, Delta: 1e-9}}
	var err error
	dpref.ReturnsWithin(t, time.Second, "ComposeDelta", func() { _, err = ComposeDelta(policy.AccountantRDP, events, 1) })
	if err != nil {
		t.Fatal(err)
	}
	if got := ratFloatUp(dec(1e308).Add(dec(1e308), dec(1e308))); !math.IsInf(got, 1) {
		t.Fatalf("ratFloatUp(2e308) = %v, want +Inf", got)
	}
	// A pld state with a non-finite entry is refused, not discretised.
	if _, err := (pldState{Laplace: map[string]int64{"+Inf": 1}}).types(); err == nil {
		t.Fatal("pld state with ε₀ = +Inf accepted")
	}
	if _, err := (pldState{Generic: map[string]int64{"1,NaN": 1}}).types(); err == nil {
		t.Fatal("pld state with δ = NaN accepted")
	}
}
