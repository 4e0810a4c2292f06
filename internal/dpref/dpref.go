// Package dpref holds reference formulas for tests: the published
// expressions that noise/, accountant/ and release/ must satisfy, written
// here again from the papers, independently of the code under test (which
// they check), and a guard that a call terminates. Only tests import it,
// and it imports nothing of the project. noise/'s tests keep their own
// copies: noise/ may import only the standard library, its tests included
// (noise/package_test.go).
package dpref

import (
	"math"
	"math/big"
	"testing"
	"time"
)

// NormalCDF is Φ.
func NormalCDF(x float64) float64 { return math.Erfc(-x/math.Sqrt2) / 2 }

// AnalyticGaussianDelta is the exact δ(ε) of the continuous Gaussian
// mechanism with noise σ and sensitivity d (Balle and Wang 2018, Theorem
// 8): Φ(d/(2σ) − εσ/d) − e^ε·Φ(−d/(2σ) − εσ/d).
func AnalyticGaussianDelta(sigma, eps, d float64) float64 {
	second := 0.0
	if p := NormalCDF(-d/(2*sigma) - eps*sigma/d); p > 0 {
		second = math.Exp(eps + math.Log(p))
	}
	return math.Max(0, NormalCDF(d/(2*sigma)-eps*sigma/d)-second)
}

// ZCDPDelta is inf over α > 1 of e^{(α−1)(αρ−ε)}·(1−1/α)^{α−1}/α
// (Canonne, Kamath, Steinke 2020, Proposition 12), by a scan of ln(α−1)
// and a local refinement.
func ZCDPDelta(rho, eps float64) float64 {
	logD := func(x float64) float64 {
		a := 1 + math.Exp(x)
		return (a-1)*(a*rho-eps) + (a-1)*math.Log(1-1/a) - math.Log(a)
	}
	best, bx := math.Inf(1), 0.0
	for x := -14.0; x <= 14; x += 0.01 {
		if v := logD(x); v < best {
			best, bx = v, x
		}
	}
	lo, hi := bx-0.01, bx+0.01
	for range 100 {
		m1, m2 := lo+(hi-lo)/3, hi-(hi-lo)/3
		if logD(m1) < logD(m2) {
			hi = m2
		} else {
			lo = m1
		}
	}
	return math.Exp(math.Min(best, logD((lo+hi)/2)))
}

// SmallestSigma returns the smallest σ with delta(σ) ≤ target, for a delta
// that decreases in σ: doubling from guess, then bisection to the relative
// precision relTol.
func SmallestSigma(guess, target, relTol float64, delta func(float64) float64) float64 {
	hi := guess
	for delta(hi) > target {
		hi *= 2
	}
	lo := hi / 2
	for delta(lo) <= target {
		hi, lo = lo, lo/2
	}
	for hi-lo > relTol*hi {
		mid := lo + (hi-lo)/2
		if delta(mid) <= target {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// Pow2 returns 2^e exactly.
func Pow2(e int) *big.Rat {
	if e >= 0 {
		return new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(e)))
	}
	return new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), uint(-e)))
}

// FloorLog2 returns ⌊log₂ x⌋ of a rational x > 0: a float estimate,
// settled by exact comparisons with powers of two.
func FloorLog2(x *big.Rat) int {
	f, _ := x.Float64()
	e := math.Ilogb(f)
	for x.Cmp(Pow2(e)) < 0 {
		e--
	}
	for x.Cmp(Pow2(e+1)) >= 0 {
		e++
	}
	return e
}

// ReturnsWithin runs f and fails the test if it has not returned after d:
// the code under test must terminate for every argument. A call that hangs
// is left running; the test fails at once.
func ReturnsWithin(t testing.TB, d time.Duration, what string, f func()) {
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
