package release

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// TestLinearSumHalfWidth_Quantile checks the closed-form half-width of a
// derived sum S̃_c + c·C̃ against 400,000 fresh draws of the same discrete
// noises (a new seed, not the one the simulation used): the share of
// draws within it must be 95% ± 0.25% (5 standard errors of
// √(0.05·0.95/400000) = 0.034%; false rejection below 10⁻⁶), for Laplace
// and Gaussian noise, with the count's term smaller, equal and larger.
func TestLinearSumHalfWidth_Quantile(t *testing.T) {
	const n = 400000
	r := rand.New(rand.NewPCG(29, 2026))
	for _, tc := range []struct {
		name     string
		gaussian bool
		s, c     noiseDraw
		centre   float64
	}{
		{"laplace, count term smaller", false, noiseDraw{scale: 200, step: 1000}, noiseDraw{scale: 50, step: 1}, 1000},
		{"laplace, equal terms", false, noiseDraw{scale: 500, step: 1000}, noiseDraw{scale: 50, step: 1}, 10000},
		{"laplace, count term larger", false, noiseDraw{scale: 100, step: 1000}, noiseDraw{scale: 50, step: 1}, 10000},
		{"gaussian", true, noiseDraw{gaussian: true, scale: 300, step: 1000}, noiseDraw{gaussian: true, scale: 60, step: 1}, 10000},
	} {
		h, ok := linearSumHalfWidth(tc.s, tc.c, tc.centre)
		if !ok {
			t.Fatalf("%s: no closed form", tc.name)
		}
		errs := make([]float64, n)
		in := 0
		for i := range errs {
			e := tc.s.draw(r) + tc.centre*tc.c.draw(r)
			errs[i] = math.Abs(e)
			if errs[i] <= h {
				in++
			}
		}
		sort.Float64s(errs)
		cov := float64(in) / n
		t.Logf("%s: half-width %.6g, empirical 95%% quantile %.6g, coverage %.4f", tc.name, h, errs[n*95/100], cov)
		if cov < 0.9475 || cov > 0.9525 {
			t.Errorf("%s: the half-width covers %.4f of the draws, want 0.95 ± 0.0025", tc.name, cov)
		}
	}
}
