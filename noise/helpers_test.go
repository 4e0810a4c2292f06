// Privacy-critical: needs DP review.

package noise

import (
	"encoding/binary"
	"io"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// seeded returns a deterministic entropy reader for tests: a math/rand/v2
// ChaCha8 stream.
func seeded(seed uint64) io.Reader {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return rand.NewChaCha8(s)
}

// zCrit is the two-sided standard normal critical value at false-rejection
// probability 1e-5: P(|N(0,1)| > 4.4172) = 1e-5.
const zCrit = 4.4172

// pCrit is the false-rejection probability of every goodness-of-fit test in
// this package: a test fails only if its p-value is below 1e-5.
const pCrit = 1e-5

// gammaQ returns the regularised upper incomplete gamma function Q(a, x),
// by the power series of P for x < a+1 and a Lentz continued fraction
// otherwise (Abramowitz & Stegun 6.5.29 and 6.5.31).
func gammaQ(a, x float64) float64 {
	if x <= 0 {
		return 1
	}
	lg, _ := math.Lgamma(a)
	if x < a+1 {
		sum, term := 1/a, 1/a
		for n := 1; n < 10000; n++ {
			term *= x / (a + float64(n))
			sum += term
			if term < sum*1e-16 {
				break
			}
		}
		return 1 - sum*math.Exp(-x+a*math.Log(x)-lg)
	}
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	d := 1 / b
	h := d
	for i := 1; i < 10000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-16 {
			break
		}
	}
	return math.Exp(-x+a*math.Log(x)-lg) * h
}

// chiSquareP returns the p-value of a chi-square statistic with df degrees
// of freedom.
func chiSquareP(stat float64, df int) float64 { return gammaQ(float64(df)/2, stat/2) }

// chiSquareTest compares integer samples with a pmf on Z. Cells with
// expected count below 20 are pooled into the two tails, so the chi-square
// approximation holds. It fails the test if the p-value is below pCrit
// (false-rejection probability 1e-5).
func chiSquareTest(t *testing.T, name string, samples []int64, pmf func(int64) float64) {
	t.Helper()
	n := float64(len(samples))
	counts := map[int64]int{}
	for _, s := range samples {
		counts[s]++
	}
	// Central cells: the contiguous range around 0 whose expected counts
	// are ≥ 20.
	lo, hi := int64(0), int64(0)
	for n*pmf(lo-1) >= 20 {
		lo--
	}
	for n*pmf(hi+1) >= 20 {
		hi++
	}
	var stat, inside float64
	df := 0
	for z := lo; z <= hi; z++ {
		e := n * pmf(z)
		inside += pmf(z)
		o := float64(counts[z])
		stat += (o - e) * (o - e) / e
		df++
	}
	// Tails pooled into one cell.
	var oTail float64
	for z, c := range counts {
		if z < lo || z > hi {
			oTail += float64(c)
		}
	}
	eTail := n * (1 - inside)
	if eTail >= 5 {
		stat += (oTail - eTail) * (oTail - eTail) / eTail
		df++
	} else if oTail > 0 && eTail < 1e-9 {
		t.Errorf("%s: %v samples outside [%d, %d], where the pmf has mass %g", name, oTail, lo, hi, 1-inside)
	}
	df--
	if p := chiSquareP(stat, df); p < pCrit {
		t.Errorf("%s: chi-square %.1f with %d df, p = %.3g < %g", name, stat, df, p, pCrit)
	}
}

// momentTest z-tests the sample mean (want 0) and variance (want v) of
// integer samples whose fourth central moment is m4. Each |z| above zCrit
// falsely rejects with probability 1e-5 (normal approximation by the CLT).
func momentTest(t *testing.T, name string, samples []int64, v, m4 float64) {
	t.Helper()
	n := float64(len(samples))
	var s1, s2 float64
	for _, x := range samples {
		f := float64(x)
		s1 += f
		s2 += f * f
	}
	mean := s1 / n
	if z := mean / math.Sqrt(v/n); math.Abs(z) > zCrit {
		t.Errorf("%s: mean %g, z = %.2f (|z| > %.4f)", name, mean, z, zCrit)
	}
	variance := s2 / n // the true mean is 0
	if z := (variance - v) / math.Sqrt((m4-v*v)/n); math.Abs(z) > zCrit {
		t.Errorf("%s: variance %g want %g, z = %.2f (|z| > %.4f)", name, variance, v, z, zCrit)
	}
}

// pmfMoments returns the variance and fourth moment of a symmetric pmf on
// Z centred at 0, summing |z| ≤ limit.
func pmfMoments(pmf func(int64) float64, limit int64) (v, m4 float64) {
	for z := -limit; z <= limit; z++ {
		p := pmf(z)
		f := float64(z)
		v += p * f * f
		m4 += p * f * f * f * f
	}
	return v, m4
}

// dlapPMF is the discrete Laplace pmf of scale t.
func dlapPMF(t float64) func(int64) float64 {
	q := math.Exp(-1 / t)
	return func(z int64) float64 {
		return (1 - q) / (1 + q) * math.Pow(q, math.Abs(float64(z)))
	}
}

// drawInts samples n values of Z from a sampler in grid units.
func drawInts(t *testing.T, n int, seed uint64, sample func(*source) *big.Int) []int64 {
	t.Helper()
	s := newSource(seeded(seed))
	out := make([]int64, n)
	for i := range out {
		z := sample(s)
		if !z.IsInt64() {
			t.Fatalf("sample out of int64 range")
		}
		out[i] = z.Int64()
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	return out
}
