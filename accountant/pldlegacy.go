// Not in the privacy-critical set (docs/ARCHITECTURE.md): only `dpproxy
// ledger verify` reaches this order (MatchesEarlierPLDOrder); no charge
// does, so a bug here misreports a budget row, never admits a charge.

package accountant

import (
	"math"

	"github.com/dpproxy/dpproxy/policy"
)

// The pld composition order of earlier builds, for Verify only.
//
// power (pld.go) composes count releases of one type as the product of the
// repeated squarings sq[b] over the set bits b of the count, from the
// highest bit down: the canonical order, used by Reserve, status and
// Verify alike, with or without the memo (TestPLDMemo_SameFigures). Builds
// before the memo (commit 79b936f) took the same factors from the LOWEST
// bit up (result ⊗= base; base ⊗= base). In exact arithmetic both are the
// same distribution; in floating point they are not, because every
// convolution rounds, moves its tails of mass ≤ 1e-15 (pld.go) and adds
// its FFT error bound to the ∞ atom at a different stage. Both results are
// valid upper bounds (every one of those steps is pessimistic), but they
// differ in ε by up to about 1e-10 relatively for a few releases of
// ε₀ ≥ 0.1 at δ = 1e-6, and by much more in the far tail: 1e-7 at δ = 1e-6
// and 7e-5 at δ = 1e-9 for 55 releases of ε₀ = 0.5 (measured over ε₀ ∈
// {0.05, 0.1, 0.5, 1}, counts 1 to 64). A budget row holds the figures of
// the build that made its last charge, so a row last charged by a build
// before the memo shows such differences against a recomputation in the
// canonical order.
//
// A relative tolerance wide enough for those (1e-4) would also accept
// real discrepancies, so Verify does not widen its tolerance: when a pld
// row differs from the canonical recomputation, it recomputes the row in
// the earlier order and accepts the row if it matches that exactly (to the
// same 1e-12 as every figure), counting it in VerifyReport.PLDEarlierOrder.
// The next charge of such a row rewrites it in the canonical order. Rows
// written before commit 700461b (which changed the FFT error bound) match
// neither and are reported.

// powerLowBitFirst is the count-fold self-composition of one release of
// type t in the order of builds before the memo.
func powerLowBitFirst(t pldType, h float64) (pmf, error) {
	k := t.count
	result := pointMass()
	base := t.pmf(h).truncate()
	var err error
	for k > 0 {
		if k&1 == 1 {
			if result, err = result.convolve(base); err != nil {
				return pmf{}, err
			}
		}
		k >>= 1
		if k > 0 {
			if base, err = base.convolve(base); err != nil {
				return pmf{}, err
			}
		}
	}
	return result, nil
}

// MatchesEarlierPLDOrder reports whether spent (a budget row's ε and δ
// texts) is what an earlier build computed for the pld state st at limit:
// one before the memo (the order of pldlegacy.go), one before the PLD was
// left to the RDP bound past pldMaxTypes release types, or any build
// before 7 Dec 2026, which composed Laplace and Gaussian releases as
// continuous noise (pldAccountant.continuous; SECURITY.md: such figures
// can be up to about 3% below what the discrete samplers spent, and the
// row's next charge recomputes it from its state).
func MatchesEarlierPLDOrder(st []byte, limit Spent, spent [2]string) bool {
	earlier := []pldAccountant{{continuous: true}, {lowBitFirst: true, uncapped: true, continuous: true}}
	if pldTypesOver(st, pldMaxTypes) {
		// Only there does the cap change the figure.
		earlier = append(earlier, pldAccountant{uncapped: true, continuous: true})
	}
	for _, a := range earlier {
		m := composer{name: policy.AccountantPLD, tight: a}
		sp, _, err := Evaluate(m, st, limit)
		if err == nil && SameDecimal(spent[0], DecimalText(sp.Epsilon)) && SameDecimal(spent[1], DecimalText(sp.Delta)) {
			return true
		}
	}
	return false
}

// pldTypesOver reports whether the pld state st holds more than n release
// types.
func pldTypesOver(st []byte, n int) bool {
	s, err := decodeState(st)
	if err != nil {
		return false
	}
	ps, err := unmarshalTight[pldState](s.Tight)
	if err != nil {
		return false
	}
	ts, err := ps.types()
	return err == nil && len(ts) > n
}

// laplacePMF discretises the continuous Laplace loss with ε₀, rounding
// up, as builds before 7 Dec 2026 did (pldType.continuous).
func laplacePMF(eps0, h float64) pmf {
	if eps0 == 0 {
		return pointMass()
	}
	cdf := func(x float64) float64 { // P[L ≤ x]
		switch {
		case x < -eps0:
			return 0
		case x >= eps0:
			return 1
		}
		return 0.5 * math.Exp((x-eps0)/2)
	}
	lo := int(math.Ceil(-eps0 / h))
	hi := int(math.Ceil(eps0 / h))
	p := make([]float64, hi-lo+1)
	for i := lo; i <= hi; i++ {
		p[i-lo] = math.Max(0, cdf(float64(i)*h)-cdf(float64(i-1)*h))
	}
	// Mass at exactly ih belongs to bin i: i·h may round below eps0 in float.
	if cdf(float64(hi)*h) < 1 {
		p[len(p)-1] += 1 - cdf(float64(hi)*h)
	}
	return pmf{off: lo, p: p}
}
