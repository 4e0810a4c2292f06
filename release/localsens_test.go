package release

import (
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/dpproxy/dpproxy/noise"
)

// Why noise is never calibrated to local sensitivity (DESIGN.md; Nissim,
// Raskhodnikova and Smith 2007, §1.2).
//
// f is the median (percentile_disc(0.5): the value at rank max(1, ⌈n/2⌉))
// of values in [0, 100]; neighbours differ by one value (one unit, R = 1).
//
//	x = {0, 0, 50, 50, 100, 100}   f(x) = 50, LS(x) = 0
//	y = {0, 0, 50, 100, 100}        f(y) = 50, LS(y) = 50 (remove the 50)
//
// x and y are neighbours (y is x without one 50). A mechanism adding
// discrete Laplace noise of scale LS/ε releases exactly 50 on x (scale 0),
// while on y it releases 50 only with probability
// p = (1 − e^{−ε/50})/(1 + e^{−ε/50}) ≈ ε/100. For the event E = {output
// = 50}, P_x(E) = 1 and P_y(E) = p, so (ε, δ)-DP would need
// 1 ≤ e^ε·p + δ, i.e. δ ≥ 1 − e^ε·p ≈ 0.973 at ε = 1; an observer who
// guesses "x" exactly when the output is 50 tells x from y with
// probability (1 + 1 − p)/2 ≈ 0.995.
func TestLocalSensitivity_Distinguishes(t *testing.T) {
	const eps = 1.0
	domain := []int{}
	for v := 0; v <= 100; v++ {
		domain = append(domain, v)
	}
	x := []int{0, 0, 50, 50, 100, 100}
	y := []int{0, 0, 50, 100, 100}
	median := func(v []int) int {
		s := append([]int(nil), v...)
		sort.Ints(s)
		m := max(1, int(math.Ceil(0.5*float64(len(s)))))
		return s[m-1]
	}
	// Local sensitivity by brute force over all add/remove neighbours.
	ls := func(v []int) int {
		f, best := median(v), 0
		for i := range v {
			z := append(append([]int(nil), v[:i]...), v[i+1:]...)
			if len(z) > 0 {
				best = max(best, abs(median(z)-f))
			}
		}
		for _, a := range domain {
			best = max(best, abs(median(append(append([]int(nil), v...), a))-f))
		}
		return best
	}
	if median(x) != 50 || median(y) != 50 || ls(x) != 0 || ls(y) != 50 {
		t.Fatalf("f(x)=%d LS(x)=%d f(y)=%d LS(y)=%d; want 50, 0, 50, 50", median(x), ls(x), median(y), ls(y))
	}
	// The local-sensitivity mechanism on y, with the real sampler.
	lap, err := noise.NewLaplace(noise.Params{Epsilon: eps, Sensitivity: float64(ls(y)), Integer: true, Rand: rand.NewChaCha8([32]byte{9})})
	if err != nil {
		t.Fatal(err)
	}
	q := math.Exp(-eps / 50)
	p := (1 - q) / (1 + q) // P(discrete Laplace of scale 50/ε = 0)
	const draws = 40000
	hits := 0
	for i := 0; i < draws; i++ {
		v, err := lap.AddNoise(big.NewRat(int64(median(y)), 1))
		if err != nil {
			t.Fatal(err)
		}
		if v.Cmp(big.NewRat(50, 1)) == 0 {
			hits++
		}
	}
	// The observed frequency of E on y agrees with p: a z-test that
	// falsely rejects with probability 1e-5 (|z| > 4.4172).
	if z := (float64(hits)/draws - p) / math.Sqrt(p*(1-p)/draws); math.Abs(z) > 4.4172 {
		t.Fatalf("P_y(output = 50) observed %v, computed %v (z = %.2f)", float64(hits)/draws, p, z)
	}
	// On x the scale is 0: the output is 50 with probability 1.
	deltaNeeded := 1 - math.Exp(eps)*p
	guess := (1 + (1 - p)) / 2
	t.Logf("ε = %v: P_x(E) = 1, P_y(E) = %.5f; needs δ ≥ %.4f; distinguishing probability %.4f", eps, p, deltaNeeded, guess)
	if deltaNeeded < 0.97 || guess < 0.99 {
		t.Fatalf("the example should be distinguishable: δ ≥ %v, guess %v", deltaNeeded, guess)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
