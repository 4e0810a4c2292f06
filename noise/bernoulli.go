// Privacy-critical: needs DP review.

package noise

import "math/big"

// bernoulliFixedRounds is the number of Bernoulli(γ/k) trials that
// bernoulliExpNegFrac always draws. CKS 2020 Algorithm 1 stops at the first
// failure K and returns "K is odd"; its running time therefore depends on
// γ, which is part of the output of the discrete Laplace sampler. Drawing
// all 24 trials regardless makes the work constant; the loop must continue
// past 24 only if all 24 succeed, which has probability Π γ/k ≤ 1/24! <
// 2⁻⁷⁹, and then it continues exactly as Algorithm 1 (no truncation, so the
// distribution stays exact).
const bernoulliFixedRounds = 24

// bernoulliRat returns true with probability num/den, 0 ≤ num ≤ den, den > 0:
// a uniform integer in [0, den) is below num.
func (s *source) bernoulliRat(num, den *big.Int) bool {
	return s.uniformBig(den).Cmp(num) < 0
}

// bernoulliExpNegFrac returns true with probability e^{−γ} for γ = num/den
// ∈ [0, 1], following CKS 2020 Algorithm 1 ("Bernoulli(exp(−γ))", case
// γ ∈ [0, 1]): with A_k ~ Bernoulli(γ/k) independent, K = min{k : A_k = 0};
// P(K > k) = γᵏ/k!, so P(K odd) = Σ_j (γ^{2j}/(2j)! − γ^{2j+1}/(2j+1)!) =
// e^{−γ}. Every trial is drawn as "uniform in [0, den·k) < num".
func (s *source) bernoulliExpNegFrac(num, den *big.Int) bool {
	if num.Sign() == 0 {
		return true
	}
	var first int // the first k with A_k = 0, or 0 while none
	scaled := new(big.Int)
	kBig := new(big.Int)
	k := 1
	for ; k <= bernoulliFixedRounds; k++ {
		kBig.SetInt64(int64(k))
		scaled.Mul(den, kBig)
		a := s.bernoulliRat(num, scaled)
		if !a && first == 0 {
			first = k
		}
	}
	for first == 0 {
		if s.err != nil {
			return false
		}
		kBig.SetInt64(int64(k))
		scaled.Mul(den, kBig)
		if !s.bernoulliRat(num, scaled) {
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
