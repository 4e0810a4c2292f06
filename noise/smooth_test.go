// Privacy-critical: needs DP review.

package noise

import (
	"math"
	"math/big"
	"testing"
)

// TestSmoothLaplace_Distribution checks that Release adds discrete Laplace
// noise of scale t = 2·(S·(1+2⁻²⁰) + r)/(ε·r) grid steps on the fixed grid
// r = 2^(⌊log₂ range⌋ − 40): every value lies on the grid, and the noise in
// grid units passes the chi-square and moment tests against that pmf
// (each falsely rejects with probability 1e-5).
func TestSmoothLaplace_Distribution(t *testing.T) {
	m, err := NewSmoothLaplace(SmoothParams{Epsilon: 0.5, Delta: 1e-6, Range: 1000, Rand: seeded(31)})
	if err != nil {
		t.Fatal(err)
	}
	r := m.g.gran // 2^(9−40)
	if want := pow2Rat(9 - 40); r.Cmp(want) != 0 {
		t.Fatalf("grid %v, want 2^-31", r)
	}
	s := new(big.Rat).Mul(r, big.NewRat(3, 1)) // S = 3r
	f := new(big.Rat).Mul(r, big.NewRat(12345, 1))
	rf, _ := r.Float64()
	scale := 2 * (3*(1+math.Ldexp(1, -20)) + 1) / 0.5
	const n = 60000
	samples := make([]int64, n)
	for i := range samples {
		v, err := m.Release(f, s)
		if err != nil {
			t.Fatal(err)
		}
		q := new(big.Rat).Quo(new(big.Rat).Sub(v, f), r)
		if !q.IsInt() {
			t.Fatalf("released %v is not on the grid %v", v, rf)
		}
		samples[i] = q.Num().Int64()
	}
	chiSquareTest(t, "smooth", samples, dlapPMF(scale))
	v, m4 := pmfMoments(dlapPMF(scale), int64(80*scale)+80)
	momentTest(t, "smooth", samples, v, m4)
	if b := SmoothBeta(0.5, 1e-6); math.Abs(m.Beta()-b) > 0 || math.Abs(b-0.5/(2*math.Log(2e6))) > 1e-15 {
		t.Errorf("β = %v", m.Beta())
	}
}

func TestSmoothLaplace_Params(t *testing.T) {
	for _, p := range []SmoothParams{{0, 1e-6, 1, nil}, {1, 0, 1, nil}, {1, 1, 1, nil}, {1, 1e-6, 0, nil}, {1, 1e-6, math.Inf(1), nil}, {math.NaN(), 1e-6, 1, nil}} {
		if _, err := NewSmoothLaplace(p); err == nil {
			t.Errorf("NewSmoothLaplace(%+v) succeeded", p)
		}
	}
	m, _ := NewSmoothLaplace(SmoothParams{Epsilon: 1, Delta: 1e-6, Range: 1})
	if _, err := m.Release(big.NewRat(1, 1), big.NewRat(-1, 1)); err == nil {
		t.Error("negative bound accepted")
	}
}

// TestPTRThreshold checks that a database with D = 0 passes the test
// (D + Z > T, Z discrete Laplace of scale 1/ε₁) with probability at most δ,
// by the exact tail of the discrete Laplace.
func TestPTRThreshold(t *testing.T) {
	for _, eps := range []float64{0.05, 0.5, 1, 3} {
		for _, delta := range []float64{1e-3, 1e-6, 1e-9} {
			th, err := PTRThreshold(eps, delta)
			if err != nil {
				t.Fatal(err)
			}
			// P(Z > T) = P(Z ≥ ⌊T⌋+1) = e^{−ε₁(⌊T⌋+1)}/(1+e^{−ε₁}).
			k := math.Floor(th) + 1
			if p := math.Exp(-eps*k) / (1 + math.Exp(-eps)); p > delta {
				t.Errorf("ε₁=%v δ=%v: T=%v passes D=0 with probability %v > δ", eps, delta, th, p)
			}
		}
	}
	if _, err := PTRThreshold(1, 0); err == nil {
		t.Error("δ = 0 accepted")
	}
}
