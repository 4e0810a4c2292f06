// Privacy-critical: needs DP review.

package noise

import (
	"errors"
	"math"
	"math/big"
	"testing"
	"time"
)

// returnsWithin runs f and fails if it has not returned after d: the
// functions under test must terminate for every argument (bounded.go). A
// call that hangs is left running; the test fails at once.
func returnsWithin(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// The measured hang: the scale of ε = 10⁻¹⁶ on a count is 10¹⁶ grid steps,
// where k++ is a no-op; every scale outside (0, MaxGridScale] is refused at
// once, and every scale inside gets the exact quantile.
func TestLaplaceQuantile_Extremes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		t, c    float64
		wantErr error
	}{
		{"1e16", 1e16, 0.95, ErrScale},
		{"1e17", 1e17, 0.95, ErrScale},
		{"1e300", 1e300, 0.95, ErrScale},
		{"+Inf", math.Inf(1), 0.95, ErrScale},
		{"-Inf", math.Inf(-1), 0.95, ErrScale},
		{"NaN", math.NaN(), 0.95, ErrScale},
		{"zero", 0, 0.95, ErrScale},
		{"negative", -3, 0.95, ErrScale},
		{"just above the ceiling", math.Nextafter(MaxGridScale, math.Inf(1)), 0.95, ErrScale},
		{"NaN confidence", 10, math.NaN(), errConfidence},
		{"denormal scale", 5e-324, 0.95, nil},
		{"1e-300", 1e-300, 0.999, nil},
		{"small", 0.3, 0.95, nil},
		{"typical", 200, 0.95, nil},
		{"real-mode scale", 0x1.8p39, 0.975, nil},
		{"the ceiling", MaxGridScale, 0.95, nil},
		{"the ceiling, c = 0.99", MaxGridScale, 0.99, nil},
		{"the ceiling, c closest to 1", MaxGridScale, math.Nextafter(1, 0), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var k float64
			var err error
			returnsWithin(t, time.Second, "laplaceQuantile", func() { k, err = laplaceQuantile(tc.t, tc.c) })
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("laplaceQuantile(%g, %g) = %v, %v; want %v", tc.t, tc.c, k, err, tc.wantErr)
				}
				return
			}
			if err != nil || math.IsNaN(k) || math.IsInf(k, 0) || k < 0 || k != math.Floor(k) {
				t.Fatalf("laplaceQuantile(%g, %g) = %v, %v; want a whole number", tc.t, tc.c, k, err)
			}
			// The smallest whole k: the criterion holds at k, not one step
			// below (one float64 below, above 2⁵³).
			logAlpha := math.Log1p(-tc.c)
			if laplaceLogTail(tc.t, k) > logAlpha {
				t.Fatalf("k = %v: ln P(|Z| > k) = %g > %g", k, laplaceLogTail(tc.t, k), logAlpha)
			}
			if k > 0 && laplaceLogTail(tc.t, prevWhole(k)) <= logAlpha {
				t.Fatalf("k = %v is not the smallest: ln P(|Z| > %v) = %g", k, prevWhole(k), laplaceLogTail(tc.t, prevWhole(k)))
			}
			// And the same as the direct tail P(|Z| > k) = 2q^{k+1}/(1+q)
			// where that does not underflow.
			if tc.t >= 1 && tc.t < 1e6 && (laplaceTail(tc.t, k) > 1-tc.c || (k > 0 && laplaceTail(tc.t, k-1) <= 1-tc.c)) {
				t.Fatalf("k = %v disagrees with the direct tail", k)
			}
			// Close to the closed form t·ln(1/(1−c)) − 1 (large t: q → 1).
			if want := -tc.t*math.Log1p(-tc.c) - 1; tc.t >= 1e6 && math.Abs(k-want) > 2+want*1e-12 {
				t.Fatalf("k = %v, want about %v", k, want)
			}
		})
	}
	// c at or beyond the ends.
	if k, err := laplaceQuantile(5, 1); err != nil || !math.IsInf(k, 1) {
		t.Fatalf("laplaceQuantile(5, 1) = %v, %v; want +Inf", k, err)
	}
	if k, err := laplaceQuantile(5, math.Inf(-1)); err != nil || k != 0 {
		t.Fatalf("laplaceQuantile(5, -Inf) = %v, %v; want 0", k, err)
	}
}

func TestDiscreteGaussianQuantile_Extremes(t *testing.T) {
	t.Parallel()
	for _, sigma := range []float64{1e16, 1e17, 1e300, math.Inf(1), math.NaN(), 0, -2, math.Nextafter(MaxGridScale, math.Inf(1))} {
		var err error
		returnsWithin(t, time.Second, "discreteGaussianQuantile", func() { _, err = discreteGaussianQuantile(sigma, 0.95) })
		if !errors.Is(err, ErrScale) {
			t.Fatalf("discreteGaussianQuantile(%g, 0.95): err = %v, want ErrScale", sigma, err)
		}
	}
	for _, tc := range []struct{ sigma, c float64 }{
		{5e-324, 0.95}, {1e-300, 0.5}, {0.4, 0.95}, {0.4, 1 - 1e-15}, {3, 0.95}, {1500, 0.99}, {0x1.8p39, 0.975},
		{MaxGridScale, 0.95}, {MaxGridScale, 1 - 1e-15}, {MaxGridScale, math.Nextafter(1, 0)},
	} {
		var k float64
		var err error
		returnsWithin(t, time.Second, "discreteGaussianQuantile", func() { k, err = discreteGaussianQuantile(tc.sigma, tc.c) })
		if err != nil || math.IsNaN(k) || math.IsInf(k, 0) || k < 0 || k != math.Floor(k) {
			t.Fatalf("discreteGaussianQuantile(%g, %g) = %v, %v; want a whole number", tc.sigma, tc.c, k, err)
		}
		if discreteGaussianTail(tc.sigma, k) > 1-tc.c {
			t.Fatalf("σ=%g c=%g: k = %v fails the criterion", tc.sigma, tc.c, k)
		}
		if k > 0 && discreteGaussianTail(tc.sigma, prevWhole(k)) <= 1-tc.c {
			t.Fatalf("σ=%g c=%g: k = %v is not the smallest", tc.sigma, tc.c, k)
		}
	}
	if _, err := discreteGaussianQuantile(3, math.NaN()); !errors.Is(err, errConfidence) {
		t.Fatalf("NaN confidence: err = %v", err)
	}
}

func TestSettleWhole(t *testing.T) {
	t.Parallel()
	// Above 2⁵³ the steps are one float64 each.
	k0 := math.Ldexp(1, 60)
	target := math.Nextafter(math.Nextafter(k0, math.Inf(1)), math.Inf(1))
	got, err := settleWhole(k0, 0, func(k float64) bool { return k >= target })
	if err != nil || got != target {
		t.Fatalf("settleWhole above 2⁵³ = %v, %v; want %v", got, err, target)
	}
	// Down to the first float64 at or above a point between float64s
	// (ulp 256 below 2⁶⁰, so 4 steps).
	want := k0
	for math.Nextafter(want, 0) >= k0-1000 {
		want = math.Nextafter(want, 0)
	}
	got, err = settleWhole(k0, 0, func(k float64) bool { return k >= k0-1000 })
	if err != nil || got != want || want == k0 {
		t.Fatalf("settleWhole down to a point between float64s = %v, %v; want %v", got, err, want)
	}
	// An estimate far off, or a criterion that never holds, is an error
	// after settleSteps steps, not a hang.
	for name, ok := range map[string]func(float64) bool{
		"never":   func(float64) bool { return false },
		"far":     func(k float64) bool { return k >= 1e6 },
		"nan arg": func(k float64) bool { return !math.IsNaN(k) && false },
	} {
		if _, err := settleWhole(10, 0, ok); !errors.Is(err, errSettle) {
			t.Fatalf("%s: err = %v, want errSettle", name, err)
		}
	}
	for _, k := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := settleWhole(k, 0, func(float64) bool { return true }); !errors.Is(err, errSettle) {
			t.Fatalf("settleWhole(%v): err = %v, want errSettle", k, err)
		}
	}
	if got, err := settleWhole(-5, 1, func(float64) bool { return true }); err != nil || got != 1 {
		t.Fatalf("settleWhole below lo = %v, %v; want 1", got, err)
	}
}

// Every mechanism whose scale is beyond what float64 handles exactly is
// refused when it is built (before any charge), quickly.
func TestMechanisms_ScaleCeiling(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		gauss bool
		p     Params
		want  error // nil: accepted, with a finite half-width
	}{
		// SET dp.epsilon = 1e-16; COUNT(*): t = 10¹⁶ grid steps.
		{"count at ε 1e-16", false, Params{Epsilon: 1e-16, Sensitivity: 1, Integer: true}, ErrScale},
		{"real count at ε 1e-16", false, Params{Epsilon: 1e-16, Sensitivity: 1}, ErrScale},
		// The Gaussian's δ carries it: at ε → 0 the analytic σ is about
		// Δ/(δ√(2π)), 4·10⁵ here, far below the ceiling.
		{"gaussian count at ε 1e-16", true, Params{Epsilon: 1e-16, Delta: 1e-6, Sensitivity: 1, Integer: true}, nil},
		{"gaussian count at ε 1e-16, δ 1e-300", true, Params{Epsilon: 1e-16, Delta: 1e-300, Sensitivity: 1, Integer: true}, ErrScale},
		// SUM(age * 100000000000000000000) on visits: Δ₁ = 4·5·110·10²⁰.
		{"integer sum age·1e20", false, Params{Epsilon: 1e-3, Sensitivity: 2.2e23, Integer: true, Cells: 4}, ErrScale},
		{"gaussian integer sum age·1e20", true, Params{Epsilon: 1e-3, Delta: 1e-6, Sensitivity: 1.1e23, Integer: true, Cells: 4}, ErrScale},
		{"integer sensitivity above 2^53", false, Params{Epsilon: 1 << 20, Sensitivity: 1<<53 + 2, Integer: true}, ErrScale},
		{"real scale above 2^1000", false, Params{Epsilon: 1e-10, Sensitivity: 1e300}, ErrScale},
		{"gaussian real scale above 2^1000", true, Params{Epsilon: 1e-10, Delta: 1e-6, Sensitivity: 1e300}, ErrScale},
		{"integer at the ceiling", false, Params{Epsilon: 1, Sensitivity: MaxGridScale, Integer: true}, nil},
		{"integer just above the ceiling", false, Params{Epsilon: 1, Sensitivity: MaxGridScale + 1, Integer: true}, ErrScale},
		// The same sum in real mode: the grid follows the scale, so t is
		// about 2⁴⁰ grid steps and the half-width is exact.
		{"real sum age·1e20", false, Params{Epsilon: 1e-3, Sensitivity: 2.2e23, Cells: 4}, nil},
		{"gaussian real sum age·1e20", true, Params{Epsilon: 1e-3, Delta: 1e-6, Sensitivity: 1.1e23, Cells: 4}, nil},
		{"count at the floor", false, Params{Epsilon: 1e-3, Sensitivity: 1, Integer: true}, nil},
		{"gaussian count at the floor", true, Params{Epsilon: 1e-3, Delta: 1e-6, Sensitivity: 1, Integer: true}, nil},
		{"denormal ε", false, Params{Epsilon: 5e-324, Sensitivity: 1}, ErrScale},
		{"1e308 sensitivity", false, Params{Epsilon: 1, Sensitivity: 1e308}, ErrScale},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m Mechanism
			var err error
			returnsWithin(t, 2*time.Second, "constructor", func() {
				if tc.gauss {
					m, err = NewGaussian(tc.p)
				} else {
					m, err = NewLaplace(tc.p)
				}
			})
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var hw float64
			returnsWithin(t, time.Second, "HalfWidth", func() { hw = m.HalfWidth(0.95) })
			if math.IsNaN(hw) || math.IsInf(hw, 0) || hw <= 0 {
				t.Fatalf("HalfWidth(0.95) = %v", hw)
			}
			if !tc.gauss {
				// The continuous Laplace quantile b·ln 20, b = Δ₁/ε.
				want := tc.p.Sensitivity / tc.p.Epsilon * math.Log(20)
				if math.Abs(hw-want) > 1e-6*want+1 {
					t.Fatalf("HalfWidth(0.95) = %v, want about %v", hw, want)
				}
			}
		})
	}
}

// Partition thresholds at the ceiling and the smallest δ: k is above 2⁵³,
// settled one float64 at a time.
func TestPartitionThreshold_Extremes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		gauss bool
		p     Params
		delta float64
	}{
		{"laplace at the ceiling, δ 1e-300", false, Params{Epsilon: 1, Sensitivity: MaxGridScale, Integer: true}, 1e-300},
		{"laplace at the ceiling, denormal δ", false, Params{Epsilon: 1, Sensitivity: MaxGridScale, Integer: true}, 5e-324},
		{"laplace tiny scale", false, Params{Epsilon: 1e300, Sensitivity: 1, Integer: true}, 1e-9},
		{"gaussian near the ceiling, δ 1e-300", true, Params{Epsilon: 1, Delta: 1e-6, Sensitivity: 1 << 44, Integer: true}, 1e-300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Mechanism
			var err error
			if tc.gauss {
				m, err = NewGaussian(tc.p)
			} else {
				m, err = NewLaplace(tc.p)
			}
			if err != nil {
				t.Fatal(err)
			}
			var tau *big.Rat
			returnsWithin(t, time.Second, "PartitionThreshold", func() { tau, err = PartitionThreshold(m, tc.delta, 1) })
			if err != nil {
				t.Fatal(err)
			}
			f, _ := tau.Float64()
			if math.IsInf(f, 0) || f < 1 {
				t.Fatalf("τ = %v", f)
			}
			if l, ok := m.(*laplace); ok {
				// P(Z ≥ τ − 1) ≤ δ_p: τ − 1 ≥ t·(ln(1/δ_p) − ln(1+q)).
				want := l.t * (-math.Log(perPartitionDelta(tc.delta, 1)*thresholdSafety) - math.Log1p(math.Exp(-1/l.t)))
				if f-1 < want*(1-1e-12) {
					t.Fatalf("τ − 1 = %v below %v", f-1, want)
				}
			}
		})
	}
}

// Closed forms whose result overflowed returned +Inf or NaN without an
// error; they now say ErrScale.
func TestClosedForms_NoSilentNaN(t *testing.T) {
	t.Parallel()
	// b = 1/ε = +Inf and δ_p ≥ ½: ∞·0 was NaN.
	if tau, err := LaplacePartitionThreshold(5e-324, 0.9, 1); !errors.Is(err, ErrScale) {
		t.Fatalf("LaplacePartitionThreshold(5e-324, 0.9, 1) = %v, %v; want ErrScale", tau, err)
	}
	if v, err := LaplaceScale(1e-300, 1e300); !errors.Is(err, ErrScale) {
		t.Fatalf("LaplaceScale(1e-300, 1e300) = %v, %v; want ErrScale", v, err)
	}
	if v, err := SigmaFromRho(5e-324, 1e308); !errors.Is(err, ErrScale) {
		t.Fatalf("SigmaFromRho = %v, %v; want ErrScale", v, err)
	}
	for _, tc := range []struct {
		rho, eps, want float64
	}{
		{math.NaN(), 1, 1}, {1, math.NaN(), 1}, {math.Inf(1), 1, 1}, {0, 1, 0}, {-1, 1, 0}, {1, math.Inf(1), 0}, {1, math.Inf(-1), 1},
	} {
		if got := ZCDPDelta(tc.rho, tc.eps); got != tc.want {
			t.Fatalf("ZCDPDelta(%v, %v) = %v, want %v", tc.rho, tc.eps, got, tc.want)
		}
	}
	// A denormal ρ made (ε+ρ)/ρ overflow and the search return NaN.
	if got := ZCDPDelta(5e-324, 1); math.IsNaN(got) || got < 0 || got > 1e-300 {
		t.Fatalf("ZCDPDelta(5e-324, 1) = %v, want about 0", got)
	}
	for _, args := range [][3]float64{{math.NaN(), 1, 1}, {1, math.NaN(), 1}, {1, 1, math.NaN()}, {math.Inf(1), 1, math.Inf(1)}} {
		if got := GaussianDelta(args[0], args[1], args[2]); math.IsNaN(got) || got < 0 || got > 1 {
			t.Fatalf("GaussianDelta%v = %v", args, got)
		}
		if got := LaplaceDelta(args[0], args[1], args[2]); math.IsNaN(got) || got < 0 || got > 1 {
			t.Fatalf("LaplaceDelta%v = %v", args, got)
		}
	}
}

// A δ curve that is NaN everywhere used to be taken as private enough at
// the first guess; it is an error now, after the capped doubling.
func TestSmallestSigma_NaNCurve(t *testing.T) {
	t.Parallel()
	var err error
	returnsWithin(t, time.Second, "smallestSigma", func() {
		_, err = smallestSigma(1, 1e-6, func(float64) float64 { return math.NaN() })
	})
	if !errors.Is(err, errCalibration) {
		t.Fatalf("err = %v, want errCalibration", err)
	}
	for _, sigma := range []float64{math.Inf(-1), math.Inf(1), math.NaN(), 0, -1, 5e-324} {
		for _, eps := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e308, 0} {
			var d float64
			returnsWithin(t, time.Second, "discreteGaussianDelta", func() { d = discreteGaussianDelta(sigma, eps, 1) })
			if math.IsNaN(d) || d < 0 || d > 1 {
				t.Fatalf("discreteGaussianDelta(%v, %v, 1) = %v", sigma, eps, d)
			}
		}
	}
}
