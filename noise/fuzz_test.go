// Privacy-critical: needs DP review.

package noise

import (
	"errors"
	"math"
	"math/big"
	"testing"
	"time"
)

// fuzzBound is how long one fuzzed call may take: every calibration,
// half-width and threshold returns in milliseconds, a hang fails at once.
const fuzzBound = time.Second

// extremes are the float64 arguments every fuzz target is seeded with.
var extremes = []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), -1, 5e-324, 2.2250738585072014e-308,
	1e-300, 1e-16, 1e-3, 0.5, 1, 1 << 48, 1e16, 1e17, 2.2e23, 1e300, math.MaxFloat64}

// checkNumber fails when a promised number is NaN or outside [lo, hi].
func checkNumber(t *testing.T, what string, x, lo, hi float64) {
	t.Helper()
	if math.IsNaN(x) || x < lo || x > hi {
		t.Fatalf("%s = %v, want a number in [%v, %v]", what, x, lo, hi)
	}
}

// FuzzMechanisms builds Laplace and Gaussian mechanisms from arbitrary
// parameters: each constructor returns an error or a mechanism whose
// half-widths, partition threshold and one noisy release come back within
// fuzzBound, with no NaN. Seeds: the measured hangs (ε = 10⁻¹⁶ on a count;
// SUM(age·10²⁰) at ε = 10⁻³) and the float64 extremes.
func FuzzMechanisms(f *testing.F) {
	f.Add(false, true, 1e-16, 0.0, 1.0, uint16(1), 0.95, 1e-6)
	f.Add(true, true, 1e-16, 1e-6, 1.0, uint16(1), 0.95, 1e-6)
	f.Add(false, true, 1e-3, 0.0, 2.2e23, uint16(4), 0.95, 1e-6)
	f.Add(true, true, 1e-3, 1e-6, 1.1e23, uint16(4), 0.95, 1e-6)
	f.Add(false, false, 1e-3, 0.0, 2.2e23, uint16(4), 0.975, 1e-300)
	f.Add(false, true, 1.0, 0.0, float64(MaxGridScale), uint16(1), math.Nextafter(1, 0), 5e-324)
	for i, x := range extremes {
		f.Add(i%2 == 0, i%3 == 0, x, 1e-6, 1.0, uint16(i), 0.95, 1e-9)
		f.Add(i%2 == 1, i%3 == 1, 0.1, x, 10.0, uint16(2), x, x)
		f.Add(i%2 == 0, i%3 == 2, 1.0, 1e-6, x, uint16(1), 0.99, 1e-6)
	}
	f.Fuzz(func(t *testing.T, gauss, integer bool, eps, delta, sens float64, cells uint16, conf, thrDelta float64) {
		p := Params{Epsilon: eps, Delta: delta, Sensitivity: sens, Integer: integer, Cells: int(cells), Rand: seeded(uint64(cells))}
		var m Mechanism
		var err error
		returnsWithin(t, fuzzBound, "constructor", func() {
			if gauss {
				m, err = NewGaussian(p)
			} else {
				p.Delta = 0
				m, err = NewLaplace(p)
			}
		})
		if err != nil {
			return
		}
		returnsWithin(t, fuzzBound, "half-widths", func() {
			checkNumber(t, "HalfWidth(0.95)", m.HalfWidth(0.95), 0, math.MaxFloat64)
			hi := math.MaxFloat64
			if !(conf < 1) {
				hi = math.Inf(1)
			}
			checkNumber(t, "HalfWidth(conf)", m.HalfWidth(conf), 0, hi)
			checkNumber(t, "NoiseMultiplier", m.NoiseMultiplier(), math.SmallestNonzeroFloat64, math.MaxFloat64)
		})
		returnsWithin(t, fuzzBound, "PartitionThreshold", func() {
			groups := max(1, int(cells))
			tau, err := PartitionThreshold(m, thrDelta, groups)
			if err != nil {
				return
			}
			if v, _ := tau.Float64(); math.IsInf(v, 0) || math.IsNaN(v) {
				t.Fatalf("PartitionThreshold = %v", v)
			}
		})
		returnsWithin(t, fuzzBound, "AddNoise", func() {
			x := big.NewRat(int64(cells), 1)
			if _, err := m.AddNoise(x); err != nil {
				t.Fatalf("AddNoise(%v): %v", x, err)
			}
		})
	})
}

// FuzzCalibrations calls every closed form and search of the package with
// arbitrary float64 arguments: each returns within fuzzBound, an error or a
// number (never NaN; δ curves in [0, 1]).
func FuzzCalibrations(f *testing.F) {
	f.Add(1e-16, 0.95, 1.0, uint16(1))
	f.Add(1e16, 0.95, 1e-6, uint16(1))
	f.Add(1e17, 0.95, 1e-6, uint16(1))
	f.Add(1e300, 0.95, 1e-6, uint16(1))
	f.Add(float64(MaxGridScale), 1e-300, 1e-6, uint16(3))
	for i, x := range extremes {
		for j, y := range []float64{x, 0.95, 1e-6} {
			f.Add(x, y, extremes[(i+j)%len(extremes)], uint16(i))
			f.Add(y, x, 1.0, uint16(j))
		}
	}
	f.Fuzz(func(t *testing.T, a, b, c float64, n uint16) {
		groups := int(n)
		returnsWithin(t, fuzzBound, "closed forms", func() {
			positive := func(what string, v float64, err error) {
				if err == nil {
					checkNumber(t, what, v, math.SmallestNonzeroFloat64, math.MaxFloat64)
				}
			}
			v, err := LaplaceScale(a, b)
			positive("LaplaceScale", v, err)
			v, err = SigmaFromRho(a, b)
			positive("SigmaFromRho", v, err)
			v, err = RDPGaussianSigma(a, b, c)
			positive("RDPGaussianSigma", v, err)
			if v, err := LaplacePartitionThreshold(a, b, groups); err == nil {
				checkNumber(t, "LaplacePartitionThreshold", v, 1, math.MaxFloat64)
			}
			checkNumber(t, "GaussianDelta", GaussianDelta(a, b, c), 0, 1)
			checkNumber(t, "LaplaceDelta", LaplaceDelta(a, b, c), 0, 1)
			checkNumber(t, "ZCDPDelta", ZCDPDelta(a, b), 0, 1)
			checkNumber(t, "discreteGaussianDelta", discreteGaussianDelta(a, b, c), 0, 1)
		})
		returnsWithin(t, fuzzBound, "Gaussian calibration", func() {
			v, err := AnalyticGaussianSigma(a, b, c)
			if err == nil {
				checkNumber(t, "AnalyticGaussianSigma", v, math.SmallestNonzeroFloat64, math.MaxFloat64)
			}
			if v, err := GaussianPartitionThreshold(a, b, c, groups); err == nil {
				checkNumber(t, "GaussianPartitionThreshold", v, -math.MaxFloat64, math.MaxFloat64)
			}
		})
		returnsWithin(t, fuzzBound, "quantiles", func() {
			for name, q := range map[string]func(float64, float64) (float64, error){
				"laplaceQuantile": laplaceQuantile, "discreteGaussianQuantile": discreteGaussianQuantile,
				"gaussianTailQuantile":  func(s, a float64) (float64, error) { return gaussianTailQuantile(s, 1-a) },
				"laplaceThresholdSteps": laplaceThresholdSteps,
			} {
				k, err := q(a, b)
				if err != nil {
					if !errors.Is(err, ErrScale) && !errors.Is(err, errConfidence) && !errors.Is(err, errPartitionDelta) {
						t.Fatalf("%s(%v, %v): unexpected error %v", name, a, b, err)
					}
					continue
				}
				if math.IsNaN(k) || k < 0 || k != math.Floor(k) {
					t.Fatalf("%s(%v, %v) = %v, want a whole number ≥ 0", name, a, b, k)
				}
			}
		})
	})
}
