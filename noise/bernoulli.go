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
	g := new(big.Int).Lsh(num, 64)
	g.Quo(g, den)
	return fixedGamma{num: num, den: den, g: u128FromBig(g)}
}

// div returns ⌊x/k⌋ for a 128-bit x and k ≥ 1.
func (x u128) div(k uint64) u128 {
	qhi, r := x.hi/k, x.hi%k
	qlo, _ := bits.Div64(r, x.lo, k)
	return u128{hi: qhi, lo: qlo}
}

func (x u128) add(y uint64) u128 {
	lo, c := bits.Add64(x.lo, y, 0)
	return u128{hi: x.hi + c, lo: lo}
}

// bernoulliOverK returns true with probability γ/k, k ≥ 1, exactly. A
// uniform U ∈ [0, 1) is drawn 64 bits at a time: with w its first 64 bits,
// U·2⁶⁴ ∈ [w, w+1) and γ/k·2⁶⁴ ∈ [⌊g/k⌋, ⌈(g+1)/k⌉], so the answer is
// settled by two comparisons unless w falls in that window (probability
// ≤ 2⁻⁶²); then further bits of U are drawn and compared exactly with
// num·2^B/(den·k) until settled.
func (s *source) bernoulliOverK(fg *fixedGamma, k uint64) bool {
	w := u128{lo: s.uint64()}
	tLo := fg.g.div(k)
	tHi := fg.g.add(k).div(k) // ⌊(g+1 + k−1)/k⌋ = ⌈(g+1)/k⌉
	sure := w.less(tLo)
	surelyNot := 1 - w.less(tHi)
	if sure|surelyNot == 1 {
		return sure == 1
	}
	return s.bernoulliOverKSlow(fg, k, w.lo)
}

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
	var first uint64 // the first k with A_k = 0, or 0 while none
	k := uint64(1)
	for ; k <= bernoulliFixedRounds; k++ {
		a := s.bernoulliOverK(&fg, k)
		if !a && first == 0 {
			first = k
		}
	}
	for first == 0 {
		if s.err != nil {
			return false
		}
		if !s.bernoulliOverK(&fg, k) {
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
