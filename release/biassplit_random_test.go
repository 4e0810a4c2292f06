package release

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestBiasSplitRandom: for random ε (several magnitudes) and m,
// bias + m·each ≤ ε in binary and in the ledger's decimals, both > 0,
// and the auto split followed by the bias split (as splitBudget does)
// also composes to at most ε in both.
func TestBiasSplitRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(eps float64, parts []float64) {
		bin, dec := new(big.Rat), new(big.Rat)
		for _, p := range parts {
			if !(p > 0) {
				t.Fatalf("ε=%v: non-positive share in %v", eps, parts)
			}
			bin.Add(bin, new(big.Rat).SetFloat64(p))
			dec.Add(dec, decimalOf(p))
		}
		if bin.Cmp(new(big.Rat).SetFloat64(eps)) > 0 || dec.Cmp(decimalOf(eps)) > 0 {
			t.Errorf("ε=%v: shares %v exceed ε (binary %v, decimal %v)", eps, parts, bin.Cmp(new(big.Rat).SetFloat64(eps)), dec.Cmp(decimalOf(eps)))
		}
	}
	for range 20000 {
		eps := math.Pow(10, rng.Float64()*6-4)
		if rng.IntN(2) == 0 {
			eps = math.Round(eps*1000) / 1000
		}
		if eps <= 0 {
			continue
		}
		m := 1 + rng.IntN(12)
		bias, each := biasSplit(eps, m)
		parts := []float64{bias}
		for range m {
			parts = append(parts, each)
		}
		check(eps, parts)
		auto, rest := biasSplit(eps, 1)
		b2, e2 := biasSplit(rest, m)
		parts = []float64{auto, b2}
		for range m {
			parts = append(parts, e2)
		}
		check(eps, parts)
	}
}
