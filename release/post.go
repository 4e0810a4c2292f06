// Privacy-critical: needs DP review.

package release

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Everything in this file is post-processing of released (noisy) values and
// of public data (the plan, the policy): it costs no privacy.

// value is one released cell.
type value struct {
	null bool
	key  *string  // a group key (public)
	num  *big.Rat // a noisy number
	// decimals is the number of decimal places to print num with; -1
	// prints it exactly.
	decimals int
}

func (v value) text() *string {
	switch {
	case v.null:
		return nil
	case v.key != nil:
		return v.key
	}
	var s string
	if v.num.IsInt() {
		s = v.num.Num().String()
	} else if v.decimals >= 0 {
		s = trimZeros(v.num.FloatString(v.decimals))
	} else {
		s = exactDecimal(v.num)
	}
	return &s
}

// exactDecimal prints a rational whose denominator is a power of two (every
// value on a power-of-two grid) exactly: 1/2^k needs k decimal places.
func exactDecimal(r *big.Rat) string {
	d := r.Denom()
	k := d.BitLen() - 1
	if d.Cmp(new(big.Int).Lsh(big.NewInt(1), uint(k))) != 0 {
		k = 20 // not dyadic (never produced by the mechanisms); bounded precision
	}
	return trimZeros(r.FloatString(k))
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

var ratOne = big.NewRat(1, 1)

// outputRow computes the analyst's columns of one group from its keys and
// noisy measurements.
func outputRow(plan *rewrite.Plan, keys []string, noisy []*big.Rat) []value {
	row := make([]value, len(plan.Outputs))
	for i, o := range plan.Outputs {
		switch o.Kind {
		case rewrite.OutputKey:
			k := keyText(o.PGType, keys[o.Key])
			row[i] = value{key: &k}
		case rewrite.OutputCount:
			// Counts are never negative: flooring at zero is
			// post-processing.
			c := new(big.Rat).Set(noisy[o.Measure])
			if c.Sign() < 0 {
				c.SetInt64(0)
			}
			row[i] = value{num: c, decimals: -1}
		case rewrite.OutputSum:
			row[i] = value{num: noisy[o.Measure], decimals: -1}
		case rewrite.OutputAvg:
			row[i] = value{num: average(noisy[o.Measure], noisy[o.CountMeasure], o.Lower, o.Upper), decimals: 6}
		}
	}
	return row
}

// keyText writes a key as PostgreSQL's text output does: booleans are t/f.
func keyText(pgType, k string) string {
	if pgType == "bool" {
		switch k {
		case "true":
			return "t"
		case "false":
			return "f"
		}
	}
	return k
}

// average is the noisy sum over the noisy count, with the count floored at
// one, clamped to the column bounds (a true average lies within them).
func average(sum, count *big.Rat, lower, upper float64) *big.Rat {
	c := count
	if c.Cmp(ratOne) < 0 {
		c = ratOne
	}
	a := new(big.Rat).Quo(sum, c)
	lo, hi := new(big.Rat), new(big.Rat)
	lo.SetFloat64(lower)
	hi.SetFloat64(upper)
	if a.Cmp(lo) < 0 {
		a = lo
	}
	if a.Cmp(hi) > 0 {
		a = hi
	}
	return a
}

// orderAndLimit applies ORDER BY, OFFSET and LIMIT to the released rows,
// with PostgreSQL's default NULL placement (last ascending, first
// descending).
func orderAndLimit(plan *rewrite.Plan, rows [][]value) [][]value {
	if len(plan.OrderBy) > 0 {
		sort.SliceStable(rows, func(a, b int) bool {
			for _, ob := range plan.OrderBy {
				c := compare(rows[a][ob.Output], rows[b][ob.Output])
				if ob.Desc {
					c = -c
				}
				if c != 0 {
					return c < 0
				}
			}
			return false
		})
	}
	if plan.Offset > 0 {
		if plan.Offset >= int64(len(rows)) {
			rows = rows[:0]
		} else {
			rows = rows[plan.Offset:]
		}
	}
	if plan.Limit >= 0 && plan.Limit < int64(len(rows)) {
		rows = rows[:plan.Limit]
	}
	return rows
}

// compare orders two cells of one column ascending, NULLs last.
func compare(a, b value) int {
	switch {
	case a.null && b.null:
		return 0
	case a.null:
		return 1
	case b.null:
		return -1
	case a.num != nil && b.num != nil:
		return a.num.Cmp(b.num)
	case a.key != nil && b.key != nil:
		// Integer keys compare numerically.
		x, okx := new(big.Int).SetString(*a.key, 10)
		y, oky := new(big.Int).SetString(*b.key, 10)
		if okx && oky {
			return x.Cmp(y)
		}
		return strings.Compare(*a.key, *b.key)
	}
	return 0
}

// notice is the NOTICE text of a released answer: the cost, the remaining
// budget and the 95% error half-widths (errs, from errorsText). Budget
// figures are not data.
func notice(cost accountant.Spent, st accountant.Status, cached bool, errs string) string {
	var b strings.Builder
	b.WriteString("dp: ")
	if cached {
		b.WriteString("cached answer, ")
	}
	fmt.Fprintf(&b, "epsilon %s", num(cost.Epsilon))
	if cost.Delta > 0 {
		fmt.Fprintf(&b, ", delta %s", num(cost.Delta))
	}
	fmt.Fprintf(&b, " spent (%s), %s of %s remaining", st.Accountant, num(st.Remaining().Epsilon), num(st.Limit.Epsilon))
	if errs != "" {
		b.WriteString("; 95% error ")
		b.WriteString(errs)
	}
	return b.String()
}

// errorsText lists a 95% error half-width per non-key output column.
// Half-widths are functions of the mechanisms (public) and, for averages,
// of released noisy counts (post-processing).
func errorsText(req Request, ms []measurement, noisy [][]*big.Rat) string {
	var parts []string
	for _, o := range req.Plan.Outputs {
		var h float64
		switch o.Kind {
		case rewrite.OutputKey:
			continue
		case rewrite.OutputCount, rewrite.OutputSum:
			h = ms[o.Measure].mech.HalfWidth(0.95)
		case rewrite.OutputAvg:
			h = avgHalfWidth(o, ms, noisy)
		}
		parts = append(parts, fmt.Sprintf("±%s (%s)", num(h), o.Name))
	}
	return strings.Join(parts, ", ")
}

// avgHalfWidth bounds the error of a released average, over all groups. With
// S̃ = S + e_s and C̃ = C + e_c, and |e_s| ≤ h_s, |e_c| ≤ h_c each with
// probability ≥ 97.5% (so both with ≥ 95% by the union bound), the average
// A = S/C of values in [lower, upper] satisfies
//
//	|S̃/C̃ − A| = |e_s − A·e_c| / C̃ ≤ (h_s + M·h_c) / C̃,   M = max(|lower|, |upper|),
//
// and clamping keeps the error below upper − lower. The bound uses the noisy
// count C̃ (released), so it is post-processing.
func avgHalfWidth(o rewrite.Output, ms []measurement, noisy [][]*big.Rat) float64 {
	hs := ms[o.Measure].mech.HalfWidth(0.975)
	hc := ms[o.CountMeasure].mech.HalfWidth(0.975)
	m := math.Max(math.Abs(o.Lower), math.Abs(o.Upper))
	width := o.Upper - o.Lower
	worst := 0.0
	for _, g := range noisy {
		c, _ := g[o.CountMeasure].Float64()
		h := width
		if c > 0 {
			h = math.Min(width, (hs+m*hc)/c)
		}
		worst = math.Max(worst, h)
	}
	return worst
}

// num formats a budget figure or half-width for humans: at most 4
// significant digits, no exponent for ordinary magnitudes.
func num(x float64) string {
	switch {
	case x == 0:
		return "0"
	case math.Abs(x) >= 1e-3 && math.Abs(x) < 1e4:
		return strconv.FormatFloat(roundSig(x, 4), 'f', -1, 64)
	case math.Abs(x) >= 1e4 && math.Abs(x) < 1e15:
		return strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

func roundSig(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits)-math.Ceil(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}
