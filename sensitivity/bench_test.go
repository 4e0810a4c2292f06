package sensitivity

import "testing"

var sink float64

// BenchmarkSensitivity measures the sensitivity step of one DP query as
// release.mechanisms runs it: for each of three measures (COUNT, SUM over
// [0, 20000], sum of squares over [0, 110]) the per-group L∞ bound, then Δ₁
// (Laplace) and Δ₂ (Gaussian) over L0 = 4 groups. Reported per query.
func BenchmarkSensitivity(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		lInfs := [3]float64{CountLInf(20), SumLInf(20, 0, 20000), SumSqLInf(20, 0, 110)}
		for _, lInf := range lInfs {
			bounds := Bounds{L0: 4, LInf: lInf}
			l1, err := L1(bounds)
			if err != nil {
				b.Fatal(err)
			}
			l2, err := L2(bounds)
			if err != nil {
				b.Fatal(err)
			}
			sink += l1 + l2
		}
	}
}

// BenchmarkSensitivity_Functions measures each function alone.
func BenchmarkSensitivity_Functions(b *testing.B) {
	bounds := Bounds{L0: 4, LInf: 5}
	for _, bm := range []struct {
		name string
		f    func() float64
	}{
		{"L1", func() float64 { v, _ := L1(bounds); return v }},
		{"L2", func() float64 { v, _ := L2(bounds); return v }},
		{"SumLInf", func() float64 { return SumLInf(20, -5, 20000) }},
		{"SumSqLInf", func() float64 { return SumSqLInf(20, -5, 110) }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				sink += bm.f()
			}
		})
	}
}
