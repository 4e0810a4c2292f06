// Privacy-critical: needs DP review.

package noise

import (
	"math/big"
	"sync"
	"testing"
)

// TestLessExpNegSlow forces the rare path where the first 128 bits of U
// do not settle U < e^{−k}, and checks the answer against bounds at the
// precision the slow path reached.
func TestLessExpNegSlow(t *testing.T) {
	for _, k := range []int{1, 5, 40, 88} {
		for seed := uint64(0); seed < 20; seed++ {
			s := newSource(seeded(seed))
			u := uniformFraction{first: expTable[k].lo} // inside [lo, hi]
			got := u.lessExpNeg(s, k)
			if u.ext == nil {
				t.Fatalf("k=%d: the slow path was not taken", k)
			}
			lo, hi := expNegBounds(k, u.bits)
			next := new(big.Int).Add(u.ext, big.NewInt(1))
			switch {
			case next.Cmp(lo) <= 0 && !got:
				t.Errorf("k=%d: U < e^-k but got false", k)
			case u.ext.Cmp(hi) >= 0 && got:
				t.Errorf("k=%d: U ≥ e^-k but got true", k)
			case next.Cmp(lo) > 0 && u.ext.Cmp(hi) < 0:
				t.Errorf("k=%d: returned while undecided", k)
			}
			// Once extended, the same U must give consistent answers
			// for every k (the thresholds are nested).
			if got && k > 1 && !u.lessExpNeg(s, k-1) {
				t.Errorf("k=%d: U < e^-k but not < e^-(k-1)", k)
			}
		}
	}
}

// TestBernoulliOverKSlow forces the window where 64 bits of U do not
// settle k·U < γ and checks the slow path against exact rational
// arithmetic on the bits it drew.
func TestBernoulliOverKSlow(t *testing.T) {
	for _, tc := range []struct{ num, den, k int64 }{{1, 3, 1}, {1, 3, 2}, {2, 7, 5}, {29, 30, 24}, {1, 1, 3}} {
		fg := newFixedGamma(big.NewInt(tc.num), big.NewInt(tc.den))
		// w = ⌊g/k⌋ puts k·w within k of g: the undecided window.
		w := new(big.Int).SetUint64(fg.g.hi)
		w.Lsh(w, 64).Or(w, new(big.Int).SetUint64(fg.g.lo))
		w.Quo(w, big.NewInt(tc.k))
		for seed := uint64(0); seed < 10; seed++ {
			s := newSource(seeded(seed))
			shadow := newSource(seeded(seed))
			got := s.bernoulliOverKSlow(&fg, uint64(tc.k), w.Uint64())
			// Replay the bits the slow path drew: U = 0.w b1 b2 … (base
			// 2⁶⁴); it stops at the first prefix that decides.
			u := new(big.Rat).SetFrac(w, new(big.Int).Lsh(big.NewInt(1), 64))
			scale := new(big.Int).Lsh(big.NewInt(1), 64)
			want := new(big.Rat).SetFrac(big.NewInt(tc.num), big.NewInt(tc.den*tc.k))
			for i := 0; i < 4; i++ {
				scale.Lsh(scale, 64)
				u.Add(u, new(big.Rat).SetFrac(new(big.Int).SetUint64(shadow.uint64()), scale))
			}
			// U is now known to ±2^-320: compare.
			if exp := u.Cmp(want) < 0; exp != got {
				t.Errorf("γ=%d/%d k=%d seed=%d: got %v want %v", tc.num, tc.den, tc.k, seed, got, exp)
			}
		}
	}
}

// TestAddNoise_Concurrent uses one mechanism from many goroutines (run
// with -race) over crypto/rand and over a seeded reader.
func TestAddNoise_Concurrent(t *testing.T) {
	for _, r := range []bool{false, true} {
		p := Params{Epsilon: 1, Sensitivity: 1}
		if r {
			p.Rand = seeded(77)
		}
		lap, err := NewLaplace(p)
		if err != nil {
			t.Fatal(err)
		}
		p.Delta = 1e-6
		gau, err := NewGaussian(p)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					for _, m := range []Mechanism{lap, gau} {
						y, err := m.AddNoise(big.NewRat(int64(i), 3))
						if err != nil {
							t.Error(err)
							return
						}
						if !new(big.Rat).Quo(y, m.Granularity()).IsInt() {
							t.Error("off grid")
						}
					}
				}
			}()
		}
		wg.Wait()
	}
}

// failingReader fails every read.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errEntropy }

func TestAddNoise_EntropyFailure(t *testing.T) {
	lap, _ := NewLaplace(Params{Epsilon: 1, Sensitivity: 1, Integer: true, Rand: failingReader{}})
	gau, _ := NewGaussian(Params{Epsilon: 1, Delta: 1e-6, Sensitivity: 1, Integer: true, Rand: failingReader{}})
	for _, m := range []Mechanism{lap, gau} {
		if y, err := m.AddNoise(big.NewRat(3, 1)); err == nil {
			t.Errorf("%s: AddNoise with a failing entropy source = %v, want an error", m.Name(), y)
		}
	}
}

func TestMechanism_Accessors(t *testing.T) {
	lap, _ := NewLaplace(Params{Epsilon: 0.25, Sensitivity: 3, Integer: true})
	if lap.Name() != "laplace" || lap.Epsilon() != 0.25 || lap.Delta() != 0 || lap.NoiseMultiplier() != 4 {
		t.Errorf("laplace accessors: %s %g %g %g", lap.Name(), lap.Epsilon(), lap.Delta(), lap.NoiseMultiplier())
	}
	gau, _ := NewGaussian(Params{Epsilon: 0.25, Delta: 1e-7, Sensitivity: 3, Integer: true, Cells: 9})
	g := gau.(*gaussian)
	if gau.Name() != "gaussian" || gau.Epsilon() != 0.25 || gau.Delta() != 1e-7 || gau.NoiseMultiplier() != g.sigma/3 {
		t.Errorf("gaussian accessors: %s %g %g %g", gau.Name(), gau.Epsilon(), gau.Delta(), gau.NoiseMultiplier())
	}
	// The zCDP ρ implied by NoiseMultiplier converts back to at most δ.
	nm := gau.NoiseMultiplier()
	if d := ZCDPDelta(1/(2*nm*nm), 0.25); d > 1e-7 {
		t.Errorf("ZCDPDelta(ρ from NoiseMultiplier) = %g > δ", d)
	}
}
