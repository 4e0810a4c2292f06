// Privacy-critical: needs DP review.

package noise

import (
	"math/big"
	"math/bits"
)

// bernoulliFixedRounds is the number of Bernoulli(γ/k) trials that
// bernoulliExpNegFrac always draws. CKS 2020 Algorithm 1 stops at the first
// failure K and returns "K is odd"; its running time therefore depends on
// γ, which is part of the output of the discrete Laplace sampler. Drawing
// all 24 trials regardless makes the work constant; the loop must continue
// past 24 only if all 24 succeed, which has probability Π γ/k ≤ 1/24! <
// 2⁻⁷⁹, and then it continues exactly as Algorithm 1 (no truncation, so the
// distribution stays exact).
const bernoulliFixedRounds = 24

// fixedGamma is γ = num/den ∈ [0, 1] prepared for Bernoulli(γ/k) draws:
// g = ⌊γ·2⁶⁴⌋ as a 128-bit integer (γ = 1 gives 2⁶⁴).
type fixedGamma struct {
	num, den *big.Int
	g        u128
}

func newFixedGamma(num, den *big.Int) fixedGamma {
	// ⌊γ·2⁶⁴⌋ = ⌊(num+den)·2⁶⁴/den⌋ − 2⁶⁴: dividing num+den, whose length
	// is that of den whatever num is, keeps the cost of this division from
	// depending on the size of num (which is part of the output).
	g := new(big.Int).Add(num, den)
	g.Lsh(g, 64)
	g.Quo(g, den)
	g.Sub(g, new(big.Int).Lsh(big.NewInt(1), 64))
	return fixedGamma{num: num, den: den, g: u128FromBig(g)}
}

// mul64 returns the 128-bit product k·w (constant time).
func mul64(k, w uint64) u128 {
	hi, lo := bits.Mul64(k, w)
	return u128{hi: hi, lo: lo}
}

func (x u128) add(y uint64) u128 {
	lo, c := bits.Add64(x.lo, y, 0)
	return u128{hi: x.hi + c, lo: lo}
}

// bernoulliOverK returns true with probability γ/k, k ≥ 1, exactly: it
// decides U < γ/k, i.e. k·U < γ, for a uniform U ∈ [0, 1) drawn 64 bits at
// a time. With w the first 64 bits, k·U·2⁶⁴ ∈ [k·w, k·w + k) and
// γ·2⁶⁴ ∈ [g, g+1), so k·w + k ≤ g settles "yes" and k·w ≥ g + 1 settles
// "no"; only if k·w falls in the window (g − k, g + 1) (probability
// < 2⁻⁶⁰) are more bits of U drawn and compared exactly with
// num·2^B/(den·k). The fast path uses multiplications and comparisons
// only, whose time does not depend on the operands (unlike hardware
// division, whose latency does on many x86 processors).
func (s *source) bernoulliOverK(fg *fixedGamma, k uint64) uint64 {
	w := s.uint64()
	kw := mul64(k, w)
	sure := 1 - fg.g.less(kw.add(k))      // k·w + k ≤ g
	surelyNot := 1 - kw.less(fg.g.add(1)) // k·w ≥ g + 1
	if sure|surelyNot == 1 {              // all but < 2⁻⁶⁰ of the draws
		return sure
	}
	if s.bernoulliOverKSlow(fg, k, w) {
		return 1
	}
	return 0
}

// isZero returns 1 if x == 0 and 0 otherwise, without branches.
func isZero(x uint64) uint64 { return 1 - ((x | -x) >> 63) }

func (s *source) bernoulliOverKSlow(fg *fixedGamma, k uint64, w uint64) bool {
	u := new(big.Int).SetUint64(w)
	bitsSoFar := uint(64)
	dk := new(big.Int).Mul(fg.den, new(big.Int).SetUint64(k))
	for {
		target := new(big.Int).Lsh(fg.num, bitsSoFar) // γ/k·2^B·den·k
		hi := new(big.Int).Add(u, big.NewInt(1))
		hi.Mul(hi, dk)
		if hi.Cmp(target) <= 0 { // U < (u+1)/2^B ≤ γ/k
			return true
		}
		lo := new(big.Int).Mul(u, dk)
		if lo.Cmp(target) >= 0 { // U ≥ u/2^B ≥ γ/k
			return false
		}
		if s.err != nil {
			return false
		}
		u.Lsh(u, 64)
		u.Or(u, new(big.Int).SetUint64(s.uint64()))
		bitsSoFar += 64
	}
}

// bernoulliExpNegFrac returns true with probability e^{−γ} for γ = num/den
// ∈ [0, 1], following CKS 2020 Algorithm 1 ("Bernoulli(exp(−γ))", case
// γ ∈ [0, 1]): with A_k ~ Bernoulli(γ/k) independent, K = min{k : A_k = 0};
// P(K > k) = γᵏ/k!, so P(K odd) = Σ_j (γ^{2j}/(2j)! − γ^{2j+1}/(2j+1)!) =
// e^{−γ}.
func (s *source) bernoulliExpNegFrac(num, den *big.Int) bool {
	fg := newFixedGamma(num, den)
	// first is the first k with A_k = 0, or 0 while none; it is updated
	// with arithmetic rather than branches, so branch prediction does not
	// make the time depend on the pattern of the A_k.
	var first uint64
	k := uint64(1)
	for ; k <= bernoulliFixedRounds; k++ {
		a := s.bernoulliOverK(&fg, k)
		first |= k * ((1 - a) & isZero(first))
	}
	for first == 0 {
		if s.err != nil {
			return false
		}
		if s.bernoulliOverK(&fg, k) == 0 {
			first = k
		}
		k++
	}
	return first%2 == 1
}

// bernoulliExpNeg returns true with probability e^{−γ} for a rational
// γ = num/den ≥ 0 (CKS 2020 Algorithm 1, general case): with m = ⌊γ⌋ and
// f = γ − m, e^{−γ} = e^{−m}·e^{−f}, the product of two independent events.
// Both events are always drawn: the integer part by one comparison with the
// tabulated bounds of e^{−m} (expneg.go), the fractional part by
// bernoulliExpNegFrac.
func (s *source) bernoulliExpNeg(num, den *big.Int) bool {
	m, f := new(big.Int).QuoRem(num, den, new(big.Int))
	var intPart bool
	if m.IsUint64() && m.Uint64() <= expTableSize {
		intPart = s.bernoulliExpNegInt(m.Uint64())
	} else {
		// γ > 88: e^{−γ} = e^{−88}·e^{−(m−88)}·…, decided chunk by chunk,
		// stopping at the first failed chunk. This loop's length depends on
		// its outcome, but it only runs on for an event of probability
		// ≤ e^{−88} < 2⁻¹²⁶, so the work of an accepted sample is constant
		// except with that probability.
		intPart = true
		chunk := big.NewInt(expTableSize)
		for m.Cmp(chunk) > 0 {
			if s.err != nil || !s.bernoulliExpNegInt(expTableSize) {
				intPart = false
				break
			}
			m.Sub(m, chunk)
		}
		if intPart {
			intPart = s.bernoulliExpNegInt(m.Uint64())
		}
	}
	fracPart := s.bernoulliExpNegFrac(f, den)
	return intPart && fracPart
}
