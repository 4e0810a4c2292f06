// Privacy-critical: needs DP review.

package noise

import (
	"fmt"
	"math"
	"math/big"
	"testing"
)

// BenchmarkAddNoise measures one AddNoise call (ns per sample) of each
// mechanism at noise scales 1e-3 … 1e6, over crypto/rand (production) and
// over a seeded ChaCha8 reader.
func BenchmarkAddNoise(b *testing.B) {
	for _, mode := range []string{"integer", "real"} {
		for _, scale := range []float64{1e-3, 1, 1e3, 1e6} {
			for _, mech := range []string{"laplace", "gaussian"} {
				b.Run(fmt.Sprintf("%s/%s/scale=%g", mech, mode, scale), func(b *testing.B) {
					var m Mechanism
					var err error
					p := Params{Epsilon: 1 / scale, Sensitivity: 1, Integer: mode == "integer"}
					if mech == "laplace" {
						m, err = NewLaplace(p)
					} else {
						// Gaussian: ε so that σ ≈ s (Δ₂ = 1, δ = 1e-6):
						// the classical bound σ = √(2 ln(1.25/δ))/ε.
						p.Delta = 1e-6
						p.Epsilon = math.Sqrt(2*math.Log(1.25/p.Delta)) / scale
						m, err = NewGaussian(p)
					}
					if err != nil {
						b.Skip(err)
					}
					x := big.NewRat(1000, 1)
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if _, err := m.AddNoise(x); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					// Report the noise scale in original units (b or σ).
					switch mm := m.(type) {
					case *laplace:
						b.ReportMetric(mm.t*math.Ldexp(1, mm.granExp), "scale")
					case *gaussian:
						b.ReportMetric(mm.sigma*math.Ldexp(1, mm.granExp), "scale")
					}
				})
			}
		}
	}
}

func BenchmarkNewGaussian(b *testing.B) {
	for _, eps := range []float64{0.01, 1, 10} {
		for _, integer := range []bool{true, false} {
			b.Run(fmt.Sprintf("eps=%g/integer=%v", eps, integer), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := NewGaussian(Params{Epsilon: eps, Delta: 1e-6, Sensitivity: 1, Integer: integer}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
