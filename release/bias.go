// Privacy-critical: needs DP review.

package release

import (
	"fmt"
	"math"
	"math/big"

	"github.com/dpproxy/dpproxy/rewrite"
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

// biasSplit splits ε between the bias estimate (ε/10, rounded down) and m
// other measures (the rest, equally, rounded down), so that
// bias + m·each ≤ ε exactly.
func biasSplit(epsilon float64, m int) (bias, each float64) {
	bias = splitDown(epsilon, biasDenominator)
	limit := new(big.Rat)
	if limit.SetFloat64(epsilon) == nil {
		return 0, 0
	}
	limit.Sub(limit, new(big.Rat).SetFloat64(bias))
	total := new(big.Rat)
	each = shrinkToFit((epsilon-bias)/float64(m), func(e float64) bool {
		total.SetFloat64(e)
		total.Mul(total, big.NewRat(int64(m), 1))
		return total.Cmp(limit) <= 0
	})
	return bias, each
}

// biasText is the NOTICE's statement of the bias estimate, or "" when the
// plan has none: the noisy rows removed, summed over the groups and
// floored at 0, with its 95% half-width; as a share of the rows read when
// the query has an unfiltered COUNT(*) to compare with.
func biasText(plan *rewrite.Plan, ms []measurement, noisy [][]*big.Rat) string {
	if !plan.HasBias() || len(noisy) == 0 {
		return ""
	}
	r := len(plan.Measures) - 1
	count := -1
	for i, m := range plan.Measures {
		if m.Kind == rewrite.MeasureCount && m.Column == "" && m.Expr == "" && m.Filter == "" {
			count = i
			break
		}
	}
	removed, kept := new(big.Rat), new(big.Rat)
	for _, g := range noisy {
		removed.Add(removed, g[r])
		if count >= 0 {
			kept.Add(kept, g[count])
		}
	}
	x, _ := removed.Float64()
	x = math.Max(x, 0)
	h := math.Sqrt(float64(len(noisy))) * ms[r].mech.HalfWidth(0.95)
	share := ""
	if k, _ := kept.Float64(); count >= 0 && k > 0 {
		share = num(roundShare(100*x/(k+x))) + "% of the rows read, "
	}
	return fmt.Sprintf("contribution bounding removed at least about %s rows (%s±%s, %s); the intervals cover the bounded answer",
		num(math.Round(x)), share, num(h), costText(ms[r].mech.Epsilon(), ms[r].mech.Delta()))
}

// roundShare rounds a percentage to one decimal.
func roundShare(p float64) float64 { return math.Round(p*10) / 10 }
