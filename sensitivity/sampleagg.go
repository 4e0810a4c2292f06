// Privacy-critical: needs DP review.

package sensitivity

import (
	"math"
	"math/big"
)

// SampleAggLInf returns the L∞ bound of one sample-and-aggregate statistic
// (rewrite/sampleagg.go): the sum S over k disjoint blocks of
// clip(f_b, lower, upper) − c, with c ∈ [lower, upper] and 0 for an empty
// block. One unit lies in exactly one block, so adding or removing it
// changes one term, from one value of [lower − c, upper − c] ∪ {0} to
// another: |ΔS| ≤ upper − lower. The average c + S/k then moves by at most
// (upper − lower)/k (Nissim, Raskhodnikova, Smith, STOC 2007, §4). The
// difference is rounded up, so the bound is never below the exact width.
//
// Grouped (one S_g per group g): the unit's block is the same in every
// group, and contribution bounding keeps it in at most L0 groups, so it
// changes at most L0 of the S_g, each by at most this bound: use it as the
// L∞ of Bounds{L0, LInf} (L1 ≤ L0·(upper − lower), L2 ≤ √L0·(upper −
// lower)), exactly like a grouped SUM.
func SampleAggLInf(lower, upper float64) float64 {
	exact := new(big.Rat).Sub(new(big.Rat).SetFloat64(upper), new(big.Rat).SetFloat64(lower))
	f, _ := exact.Float64()
	if new(big.Rat).SetFloat64(f).Cmp(exact) < 0 {
		f = math.Nextafter(f, math.Inf(1))
	}
	return f
}
