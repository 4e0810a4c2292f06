// Privacy-critical: needs DP review.

package noise

import (
	"errors"
	"math"
	"math/big"
	"testing"
)

func TestExpNegBounds(t *testing.T) {
	for _, k := range []int{1, 2, 5, 20, 88} {
		lo, hi := expNegBounds(k, 200)
		if lo.Cmp(hi) > 0 {
			t.Fatalf("k=%d: lo > hi", k)
		}
		if w := new(big.Int).Sub(hi, lo); w.BitLen() > 4 {
			t.Errorf("k=%d: bounds %d ulps apart, want a few", k, w)
		}
		got, _ := new(big.Float).SetPrec(200).Quo(new(big.Float).SetInt(lo), new(big.Float).SetMantExp(big.NewFloat(1), 200)).Float64()
		if want := math.Exp(-float64(k)); math.Abs(got-want) > 1e-15*want {
			t.Errorf("e^-%d: got %g want %g", k, got, want)
		}
	}
	// The table is nested: e^{-k} decreases.
	for k := 2; k <= expTableSize; k++ {
		if expTable[k-1].lo.less(expTable[k].hi) == 1 {
			t.Fatalf("table not decreasing at %d", k)
		}
	}
}

func TestGeometricE_Distribution(t *testing.T) {
	// P(V = k) = (1 − e^{-1}) e^{-k}.
	samples := drawInts(t, 200000, 1, func(s *source) *big.Int { return new(big.Int).SetUint64(s.geometricE()) })
	chiSquareTest(t, "geometricE", samples, func(z int64) float64 {
		if z < 0 {
			return 0
		}
		return (1 - math.Exp(-1)) * math.Exp(-float64(z))
	})
}

func TestBernoulliExpNeg(t *testing.T) {
	tests := []struct{ num, den int64 }{{0, 1}, {1, 3}, {1, 1}, {7, 2}, {5, 7}, {100, 1}}
	for _, tc := range tests {
		s := newSource(seeded(uint64(tc.num*31 + tc.den)))
		const n = 200000
		hits := 0
		for i := 0; i < n; i++ {
			if s.bernoulliExpNeg(big.NewInt(tc.num), big.NewInt(tc.den)) {
				hits++
			}
		}
		p := math.Exp(-float64(tc.num) / float64(tc.den))
		sd := math.Sqrt(p * (1 - p) / n)
		// Binomial z-test; falsely rejects with probability 1e-5.
		if got := float64(hits) / n; math.Abs(got-p) > zCrit*sd+1e-12 {
			t.Errorf("Bernoulli(exp(-%d/%d)) = %g, want %g ± %g", tc.num, tc.den, got, p, zCrit*sd)
		}
	}
}

func TestDiscreteLaplace_Distribution(t *testing.T) {
	tests := []struct {
		name   string
		tn, td int64
	}{
		{"scale 1", 1, 1},
		{"scale 2.5", 5, 2},
		{"scale 0.3", 3, 10},
		{"scale 17", 17, 1},
		{"scale 123.25", 493, 4},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			scale := float64(tc.tn) / float64(tc.td)
			samples := drawInts(t, 100000, uint64(100+i), func(s *source) *big.Int {
				return s.discreteLaplace(big.NewInt(tc.tn), big.NewInt(tc.td))
			})
			pmf := dlapPMF(scale)
			chiSquareTest(t, tc.name, samples, pmf)
			v, m4 := pmfMoments(pmf, int64(60*scale)+60)
			momentTest(t, tc.name, samples, v, m4)
		})
	}
}

func TestNewLaplace_Validation(t *testing.T) {
	nan := math.NaN()
	inf := math.Inf(1)
	tests := []struct {
		name string
		p    Params
		want error
	}{
		{"nan epsilon", Params{Epsilon: nan, Sensitivity: 1}, ErrEpsilon},
		{"inf epsilon", Params{Epsilon: inf, Sensitivity: 1}, ErrEpsilon},
		{"zero epsilon", Params{Epsilon: 0, Sensitivity: 1}, ErrEpsilon},
		{"negative epsilon", Params{Epsilon: -1, Sensitivity: 1}, ErrEpsilon},
		{"zero sensitivity", Params{Epsilon: 1, Sensitivity: 0}, ErrSensitivity},
		{"nan sensitivity", Params{Epsilon: 1, Sensitivity: nan}, ErrSensitivity},
		{"inf sensitivity", Params{Epsilon: 1, Sensitivity: -inf}, ErrSensitivity},
		{"delta", Params{Epsilon: 1, Sensitivity: 1, Delta: 1e-6}, ErrLaplaceDelta},
		{"negative cells", Params{Epsilon: 1, Sensitivity: 1, Cells: -1}, ErrCells},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewLaplace(tc.p)
			if !errors.Is(err, tc.want) {
				t.Errorf("NewLaplace(%+v) = %v, want %v", tc.p, err, tc.want)
			}
		})
	}
}

func TestLaplace_IntegerMode(t *testing.T) {
	m, err := NewLaplace(Params{Epsilon: 0.5, Sensitivity: 2, Integer: true, Rand: seeded(7)})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Granularity(); got.Cmp(big.NewRat(1, 1)) != 0 {
		t.Errorf("Granularity = %v, want 1", got)
	}
	if _, err := m.AddNoise(big.NewRat(1, 2)); err == nil {
		t.Errorf("AddNoise(1/2) in integer mode: want an error")
	}
	x := big.NewRat(1000, 1)
	samples := make([]int64, 50000)
	for i := range samples {
		y, err := m.AddNoise(x)
		if err != nil {
			t.Fatal(err)
		}
		if !y.IsInt() {
			t.Fatalf("integer mode released a non-integer")
		}
		samples[i] = new(big.Int).Sub(y.Num(), big.NewInt(1000)).Int64()
	}
	chiSquareTest(t, "integer laplace", samples, dlapPMF(4))
	if got := m.NoiseMultiplier(); got != 2 {
		t.Errorf("NoiseMultiplier = %g, want 1/ε = 2", got)
	}
}

func TestLaplace_RealModeGrid(t *testing.T) {
	tests := []struct {
		name     string
		eps, l1  float64
		x        *big.Rat
		wantGran *big.Rat
	}{
		// s = 1/1 = 1 → r = 2^{0−39}.
		{"scale 1", 1, 1, big.NewRat(1, 3), pow2Rat(-39)},
		// s = 20000/0.1 = 200000, ⌊log₂⌋ = 17 → r = 2^{−22}.
		{"scale 2e5", 0.1, 20000, big.NewRat(123456789, 1000), pow2Rat(17 - 39)},
		// s = 0.001 → ⌊log₂ 0.001⌋ = −10 → r = 2^{−49}.
		{"scale 1e-3", 1000, 1, big.NewRat(-7, 9), pow2Rat(-10 - 39)},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewLaplace(Params{Epsilon: tc.eps, Sensitivity: tc.l1, Rand: seeded(uint64(i))})
			if err != nil {
				t.Fatal(err)
			}
			r := m.Granularity()
			if r.Cmp(tc.wantGran) != 0 {
				t.Fatalf("Granularity = %v, want %v", r, tc.wantGran)
			}
			scale := tc.l1 / tc.eps
			rf, _ := r.Float64()
			if !(rf > scale/(1<<40) && rf <= scale/(1<<39)) {
				t.Errorf("r = %g outside (s/2^40, s/2^39] for s = %g", rf, scale)
			}
			var sum, sumSq float64
			const n = 2000
			for j := 0; j < n; j++ {
				y, err := m.AddNoise(tc.x)
				if err != nil {
					t.Fatal(err)
				}
				if q := new(big.Rat).Quo(y, r); !q.IsInt() {
					t.Fatalf("released value is not a multiple of the granularity")
				}
				d, _ := new(big.Rat).Sub(y, tc.x).Float64()
				sum += d
				sumSq += d * d
			}
			// Mean z-test of the noise in original units (variance 2s²
			// up to the 2^-39 rounding charge); falsely rejects with
			// probability 1e-5.
			mean := sum / n
			sd := math.Sqrt(2*scale*scale) * (1 + 1e-9)
			if math.Abs(mean) > zCrit*sd/math.Sqrt(n)+rf {
				t.Errorf("mean noise %g, sd %g", mean, sd)
			}
		})
	}
}

func TestLaplace_HalfWidth(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Params
	}{
		{"integer t=4", Params{Epsilon: 0.5, Sensitivity: 2, Integer: true}},
		{"integer t=0.5", Params{Epsilon: 2, Sensitivity: 1, Integer: true}},
		{"real t=10", Params{Epsilon: 0.1, Sensitivity: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.Rand = seeded(99)
			m, err := NewLaplace(p)
			if err != nil {
				t.Fatal(err)
			}
			lm := m.(*laplace)
			for _, c := range []float64{0.5, 0.9, 0.95, 0.99} {
				h := m.HalfWidth(c)
				// Exact: k is the smallest with P(|Z| ≤ k) ≥ c.
				k := math.Round((h - lm.roundingBound()) / math.Ldexp(1, lm.granExp))
				if got := 1 - laplaceTail(lm.t, k); got < c {
					t.Errorf("c=%g: P(|Z| ≤ %g) = %g < c", c, k, got)
				}
				if k > 0 {
					if got := 1 - laplaceTail(lm.t, k-1); got >= c {
						t.Errorf("c=%g: k=%g not the smallest (P(|Z| ≤ k−1) = %g)", c, k, got)
					}
				}
			}
			// Empirical coverage of the 95% half-width: binomial z-test,
			// falsely rejects with probability 1e-5.
			const n = 20000
			h := m.HalfWidth(0.95)
			x := big.NewRat(5, 1)
			in := 0
			for i := 0; i < n; i++ {
				y, err := m.AddNoise(x)
				if err != nil {
					t.Fatal(err)
				}
				d, _ := new(big.Rat).Sub(y, x).Float64()
				if math.Abs(d) <= h {
					in++
				}
			}
			k := math.Round((h - lm.roundingBound()) / math.Ldexp(1, lm.granExp))
			pCover := 1 - laplaceTail(lm.t, k)
			sd := math.Sqrt(pCover * (1 - pCover) / n)
			if got := float64(in) / n; math.Abs(got-pCover) > zCrit*sd {
				t.Errorf("coverage %g, want %g ± %g", got, pCover, zCrit*sd)
			}
		})
	}
}

func TestLaplaceScale(t *testing.T) {
	if got, err := LaplaceScale(0.5, 3); err != nil || got != 6 {
		t.Errorf("LaplaceScale(0.5, 3) = %v, %v; want 6", got, err)
	}
	if _, err := LaplaceScale(math.NaN(), 1); err == nil {
		t.Errorf("LaplaceScale(NaN) accepted")
	}
}

// Known answers from ACCOUNTING.md row 5 (dp_accounting
// privacy_loss_mechanism_test.py): the Laplace curve at (b, Δ, ε) =
// (2, 4, 0.5), (1, 1, 0), (1, 1, 1).
func TestLaplaceDelta_KnownAnswers(t *testing.T) {
	for _, tc := range []struct{ b, l1, eps, want float64 }{
		{2, 4, 0.5, 0.52763345}, {1, 1, 0, 0.39346934}, {1, 1, 1, 0},
	} {
		if got := LaplaceDelta(tc.b, tc.l1, tc.eps); math.Abs(got-tc.want) > 5e-9 {
			t.Errorf("LaplaceDelta(b=%g, Δ=%g, ε=%g) = %.9f, want %.8f", tc.b, tc.l1, tc.eps, got, tc.want)
		}
	}
}
