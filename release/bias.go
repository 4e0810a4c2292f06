// Privacy-critical: needs DP review.

package release

import (
	"math"
	"math/big"
	"strconv"
)

// # The bias estimate
//
// A plan that bounds contributions by weights carries one more measure,
// the rows bounding removed (rewrite/bias.go), with L1 = LInf = L0·R. It
// gets biasDenominator⁻¹ of the query's ε (rounded down); the other
// measures share the rest equally, so the query still composes to its ε
// by basic composition, and the accountant charges the estimate as one
// more event. Release states the noisy total over groups in the NOTICE,
// never as a column: it is post-processing of the noisy per-group values
// (their sum, floored at 0), so it costs nothing beyond its ε.
//
// Its 95% half-width is √G times that of one group's noise for G groups:
// exact for Gaussian noise (the sum of G draws has √G times the standard
// deviation) and conservative for Laplace noise (the sum's 95% quantile is
// below √G·b·ln 20 for every G ≥ 1, as b·ln 20 ≈ 3.0b exceeds the normal
// limit 1.96·√2·b ≈ 2.77b).

// biasDenominator: the bias estimate gets ε/10.
const biasDenominator = 10

// biasSplit splits ε between m other measures (9ε/10, equally) and the
// bias estimate (the rest, about ε/10), so that bias + m·each ≤ ε both in
// exact binary arithmetic (what the mechanisms are calibrated with) and
// in the shortest decimals the ledger stores (accountant/decimal.go:
// 0.1 becomes 0.09 + 0.01, not 0.09000000000000001 + 0.009999999999999995,
// whose decimal sum exceeds 0.1). A budget spent in equal queries is then
// spent to the last query, as without the estimate; the two conditions
// together may leave an ulp of ε unspent (0.1 = 0.09 + 0.01 exactly, but
// 0.25 = 0.225 + 0.024999999999999994, as the float 0.225 lies above
// 0.225).
func biasSplit(epsilon float64, m int) (bias, each float64) {
	bin := new(big.Rat)
	if m < 1 || bin.SetFloat64(epsilon) == nil || epsilon <= 0 {
		return 0, 0
	}
	decE := decimalOf(epsilon)
	tenth := new(big.Rat).Quo(decE, big.NewRat(biasDenominator, 1))
	target := new(big.Rat).Quo(new(big.Rat).Sub(decE, tenth), big.NewRat(int64(m), 1))
	each = floatAtMost(target)
	mEach := func(x *big.Rat) *big.Rat { return new(big.Rat).Mul(x, big.NewRat(int64(m), 1)) }
	restDec := new(big.Rat).Sub(decE, mEach(decimalOf(each)))
	restBin := new(big.Rat).Sub(bin, mEach(new(big.Rat).SetFloat64(each)))
	if restDec.Sign() <= 0 || restBin.Sign() <= 0 {
		return 0, each
	}
	bias = floatAtMost(restDec)
	for i := 0; i < 64 && bias > 0 && new(big.Rat).SetFloat64(bias).Cmp(restBin) > 0; i++ {
		bias = math.Nextafter(bias, 0)
	}
	if new(big.Rat).SetFloat64(bias).Cmp(restBin) > 0 {
		return 0, each
	}
	return bias, each
}

// decimalOf is x as the ledger stores it: its shortest decimal.
func decimalOf(x float64) *big.Rat {
	r, _ := new(big.Rat).SetString(strconv.FormatFloat(x, 'g', -1, 64))
	return r
}

// floatAtMost is the largest float64 whose shortest decimal is at most r
// (r > 0).
func floatAtMost(r *big.Rat) float64 {
	f, _ := r.Float64()
	for i := 0; i < 64 && f > 0 && decimalOf(f).Cmp(r) > 0; i++ {
		f = math.Nextafter(f, 0)
	}
	return f
}
