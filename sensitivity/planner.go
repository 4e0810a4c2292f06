// Not in the privacy-critical set (docs/ARCHITECTURE.md): the planner's
// helpers (dpplan/planner.go, rewrite/build_select.go). Release derives
// every L∞ again from the measure's bounds (release.mechanisms: SumLInf,
// CentredSumLInf over bounds checked to contain the expression's
// interval), so a bug here makes a plan refused or over-noised, never
// under-noised.

package sensitivity

import "math/big"

// MaxAbs is max(|Lo|, |Hi|), the largest magnitude of a non-NULL value (0
// for an always-NULL expression).
func (a Interval) MaxAbs() *big.Rat {
	if a.Empty() {
		return new(big.Rat)
	}
	return maxRat(new(big.Rat).Abs(a.Lo), new(big.Rat).Abs(a.Hi))
}

// SumLInfInterval is the per-group L∞ bound of a sum of an expression whose
// non-NULL values lie in a, when a unit contributes at most maxRows rows:
// the unit's per-group sum lies in [maxRows·min(Lo, 0), maxRows·max(Hi, 0)]
// (NULLs add nothing), so removing it changes the sum by at most
// maxRows·max(|Lo|, |Hi|). Computed exactly and rounded up to a float64.
func SumLInfInterval(maxRows int, a Interval) float64 {
	return RatUp(new(big.Rat).Mul(big.NewRat(int64(maxRows), 1), a.MaxAbs()))
}

// Midpoint is (Lo + Hi)/2, the centre used by normalized sums (0 for an
// always-NULL expression). For decimal endpoints it is a decimal. It
// minimizes max(|Lo − c|, |Hi − c|) over c, hence [CentredSumLInf].
func (a Interval) Midpoint() *big.Rat {
	if a.Empty() {
		return new(big.Rat)
	}
	m := new(big.Rat).Add(a.Lo, a.Hi)
	return m.Quo(m, big.NewRat(2, 1))
}
