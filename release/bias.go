// Privacy-critical: needs DP review.

package release

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
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

// biasText is the NOTICE's statement of the bias estimate, or "" when the
// plan has none: the noisy rows removed, summed over the groups and
// floored at 0, with its 95% half-width; as a share of the rows read when
// the query has an unfiltered COUNT(*) to compare with.
//
// unit is the policy's privacy_unit ("" for "unit"). Under one row's
// weight per unit (Plan.OneWeight) the estimate counts units whose rows
// were weighed together (C = 1 clips each to 1), and says so in those
// words: "removed 37,065 rows" had read as data dropped (new-user run).
func biasText(plan *dpplan.Plan, ms []measurement, noisy [][]*big.Rat, groups [][]string, unit string) string {
	if !plan.HasBias() || len(noisy) == 0 {
		return ""
	}
	r := len(plan.Measures) - 1
	count := -1
	for i, m := range plan.Measures {
		if m.Kind == dpplan.MeasureCount && m.Column == "" && m.Expr == nil && m.Filter == nil && !plan.Measures[r].Units {
			count = i
			break
		}
		if m.Kind == dpplan.MeasureUnits && m.Filter == nil && plan.Measures[r].Units {
			count = i // the released distinct counts, to compare with
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
		if plan.Measures[r].Units {
			share = num(roundShare(100*x/(k+x))) + "% of the total, "
		}
	}
	if plan.Measures[r].Units {
		// Distinct counts under weights (rewrite/bias.go, Measure.Units).
		lu := dpplan.UnitGroups(plan, plan.RowsPerUnit)
		return fmt.Sprintf("each unit counts in at most %s (a unit in more groups, g, counts %d/g in each), so the distinct counts "+
			"leave out about %s units summed over the groups (%s±%s, %s)%s; the intervals cover these bounded counts, "+
			"not the numbers of distinct units", groupsWord(lu), lu,
			num(math.Round(x)), share, num(h), costText(ms[r].mech.Epsilon(), ms[r].mech.Delta()), unitsPerGroupText(noisy, r, groups, ms[r].mech.HalfWidth(0.95)))
	}
	cost := costText(ms[r].mech.Epsilon(), ms[r].mech.Delta())
	// An estimate within its own noise of 0 ("removed about 504 rows
	// (±599)") is said to be so: read alone, it looked like a loss.
	within := ""
	if x <= h {
		within = ", which the noise cannot tell from none"
	}
	if unit == "" {
		unit = "unit"
	}
	if plan.OneWeight {
		clamped := ""
		if plan.Measures[r].Outside {
			clamped = " or a value clamped to its column's bounds"
		}
		return fmt.Sprintf("each %s's rows weigh one row together: about %s %ss had several rows%s (±%s, %s)%s; the intervals cover this weighted answer",
			unit, num(math.Round(x)), unit, clamped, num(h), cost, within)
	}
	what := "contribution bounding removed at least about %s rows"
	if plan.Measures[r].Outside {
		// Rows removed plus rows with a value clamped to its bounds
		// (rewrite/bias.go).
		what = "contribution bounding removed, or clamping changed, about %s rows"
	}
	return fmt.Sprintf(what+" (%s±%s, %s)%s; the intervals cover the bounded answer",
		num(math.Round(x)), share, num(h), cost, within)
}

// roundShare rounds a percentage to one decimal.
func roundShare(p float64) float64 { return math.Round(p*10) / 10 }

// unitsPerGroupText lists the estimate of the units left out per group
// (column r of noisy, floored at 0: post-processing), each with one
// group's 95% half-width h; with more than maxGroupsListed groups, the
// group with the most. "" when the groups are not known.
func unitsPerGroupText(noisy [][]*big.Rat, r int, groups [][]string, h float64) string {
	if len(groups) != len(noisy) || len(noisy) < 2 {
		return ""
	}
	vals := make([]float64, len(noisy))
	top := 0
	for g, row := range noisy {
		vals[g], _ = row[r].Float64()
		vals[g] = math.Max(0, math.Round(vals[g]))
		if vals[g] > vals[top] {
			top = g
		}
	}
	if len(vals) > maxGroupsListed {
		return fmt.Sprintf(", most in %s (about %s ±%s)", groupLabel(groups[top]), num(vals[top]), num(h))
	}
	items := make([]string, len(vals))
	for g, v := range vals {
		items[g] = groupLabel(groups[g]) + " " + num(v)
	}
	return fmt.Sprintf("; per group about %s (each ±%s)", strings.Join(items, ", "), num(h))
}

// unitsBoundText is the NOTICE's warning for distinct-unit counts that
// weighting may have lowered when the plan carries no estimate of how much
// (SET dp.bias = off, or a plan whose estimate counts rows): "" when no
// distinct count is weighted.
func unitsBoundText(plan *dpplan.Plan) string {
	if dpplan.GroupBounding(plan) != dpplan.GroupsScale || (plan.HasBias() && plan.Measures[len(plan.Measures)-1].Units) {
		return ""
	}
	if !dpplan.UnitsWeighted(plan, plan.RowsPerUnit) {
		return "" // no unit can be in more groups than it counts whole in
	}
	lu := dpplan.UnitGroups(plan, plan.RowsPerUnit)
	for _, m := range plan.Measures {
		if m.Kind == dpplan.MeasureUnits {
			return fmt.Sprintf("distinct counts count each unit in at most %s (a unit in more groups, g, counts %d/g in each): "+
				"their intervals cover these bounded counts, which can be far below the numbers of distinct units", groupsWord(lu), lu)
		}
	}
	return ""
}

// groupsWord is "1 group" or "n groups".
func groupsWord(n int) string {
	if n == 1 {
		return "1 group"
	}
	return strconv.Itoa(n) + " groups"
}
