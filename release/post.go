package release

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/policy"
)

// Everything in this file is post-processing of released (noisy) values and
// of public data (the plan, the policy): it costs no privacy.

// value is one released cell.
type value struct {
	null bool
	key  *string  // a group key (public)
	num  *big.Rat // a noisy number
	// decimals is the number of decimal places to print num with; -1
	// prints it exactly. fixed keeps trailing zeros (a numeric of that
	// scale).
	decimals int
	fixed    bool
	// bits, when 64 or 32, prints num as PostgreSQL prints a float8 or
	// float4 of that value (the output's type: SUM(x::float8), AVG of a
	// real column).
	bits int
}

func (v value) text() *string {
	switch {
	case v.null:
		return nil
	case v.key != nil:
		return v.key
	}
	var s string
	if v.bits != 0 {
		s = floatText(v.num, v.bits)
	} else if v.fixed && v.decimals > 0 {
		s = v.num.FloatString(v.decimals)
	} else if v.num.IsInt() {
		s = v.num.Num().String()
	} else if v.decimals >= 0 {
		s = trimZeros(v.num.FloatString(v.decimals))
	} else {
		s = exactDecimal(v.num)
	}
	return &s
}

// floatText prints r rounded to a float of the given bits as PostgreSQL
// 12 and later print float4 and float8 (extra_float_digits = 1, the
// default): the shortest decimal that reads back as the same float, in
// exponent form when its decimal exponent is below -4 or at least 15
// (float8; 6 for float4).
func floatText(r *big.Rat, bits int) string {
	f, _ := r.Float64()
	if bits == 32 {
		f = float64(float32(f))
	}
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		// An expression over released values beyond float8's range (a
		// slope times 1e300 · 1e300): PostgreSQL would raise 22003, which
		// after the charge would lose the answer; its text for the
		// infinity instead.
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, bits)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	limit := 15
	if bits == 32 {
		limit = 6
	}
	if f != 0 && (exp < -4 || exp >= limit) {
		return e
	}
	return strconv.FormatFloat(f, 'f', -1, bits)
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

// outputRow computes the values of one group from its keys and noisy
// measurements: the analyst's columns (Plan.Outputs) followed by the hidden
// values (Plan.Hidden) that expressions and HAVING refer to. Expressions
// are evaluated last, on the other values (post-processing: a function of
// noisy values and public constants only).
func outputRow(plan *dpplan.Plan, keys []string, noisy []*big.Rat) []value {
	all := append(append([]dpplan.Output(nil), plan.Outputs...), plan.Hidden...)
	row := make([]value, len(all))
	for i, o := range all {
		switch o.Kind {
		case dpplan.OutputKey:
			k := keyText(o.PGType, keys[o.Key])
			row[i] = value{key: &k}
		case dpplan.OutputCount:
			// Counts are whole and never negative: rounding to the
			// nearest integer (a weighted count, dpplan/bounds.go, gets
			// noise on a fine grid) and flooring at zero are
			// post-processing.
			c := roundRat(noisy[o.Measure])
			if c.Sign() < 0 {
				c.SetInt64(0)
			}
			row[i] = value{num: c, decimals: -1}
		case dpplan.OutputSum:
			if c := centre(plan, o); c != nil {
				// Derived from the normalized sum and the count
				// (rewrite.shareSums): S̃ = S̃_c + c·C̃.
				v := new(big.Rat).Mul(c, noisy[o.CountMeasure])
				row[i] = sumValue(plan.Measures[o.Measure], v.Add(v, noisy[o.Measure]))
			} else {
				row[i] = sumValue(plan.Measures[o.Measure], noisy[o.Measure])
			}
			if o.Scale > 0 {
				// As PostgreSQL prints the SUM of a numeric(p, s) column.
				row[i] = value{num: roundTo(row[i].num, o.Scale), decimals: o.Scale, fixed: true}
			}
			if o.PGType == "int8" {
				// The SUM of an int2 or int4 column is a bigint: a sum
				// weighted by contribution bounding, or derived from a
				// normalized sum, is rounded (post-processing;
				// sumHalfWidth adds the 1/2).
				row[i] = value{num: roundRat(row[i].num), decimals: -1}
			}
		case dpplan.OutputAvg:
			if c := centre(plan, o); c != nil {
				row[i] = value{num: centredAverage(noisy[o.Measure], noisy[o.CountMeasure], c, o.Lower, o.Upper), decimals: 6}
				break
			}
			row[i] = value{num: average(noisy[o.Measure], noisy[o.CountMeasure], o.Lower, o.Upper), decimals: 6}
		case dpplan.OutputQuantile:
			row[i] = quantileValue(o, noisy[o.Measure])
		case dpplan.OutputVariance:
			v := variance(noisy[o.CountMeasure], noisy[o.Measure], noisy[o.SumSqMeasure], o.Lower, o.Upper, o.Sample)
			switch {
			case v == nil:
				row[i] = value{null: true}
			case o.Sqrt:
				row[i] = value{num: sqrtRat(v), decimals: 6}
			default:
				row[i] = value{num: v, decimals: 6}
			}
		}
	}
	for i, o := range all {
		if row[i].num != nil && (o.Kind == dpplan.OutputSum || o.Kind == dpplan.OutputAvg || o.Kind == dpplan.OutputVariance || o.Kind == dpplan.OutputCount) {
			switch o.PGType {
			case "float8":
				row[i].bits = 64
			case "float4":
				row[i].bits = 32
			}
		}
	}
	var nums []*big.Rat
	for i, o := range all {
		if o.Kind != dpplan.OutputExpr {
			continue
		}
		if nums == nil {
			nums = numbers(row)
		}
		v := o.Expr.Eval(nums)
		switch r, pass := passThrough(o.Expr); {
		case v == nil, o.PGType == "int8" && !fitsInt8(v):
			// NULL, or a bigint expression beyond bigint (PostgreSQL
			// raises 22003 there; an error after the charge would lose
			// the answer, and its binary form does not exist: round 73).
			row[i] = value{null: true}
		case pass && row[r].num != nil && v.Cmp(row[r].num) == 0:
			// COALESCE(x, …) or NULLIF(x, …) equal to x: printed as x is.
			row[i] = row[r]
		case o.PGType == "float8":
			// The covariances and regressions (rewrite/regrstats.go)
			// and expressions over them: printed as PostgreSQL prints a
			// float8, not to 6 places (a slope of 1.2e-4 lost its digits).
			row[i] = value{num: v, bits: 64}
		default:
			row[i] = value{num: v, decimals: 6}
		}
	}
	return row
}

// int8 range, for bigint expressions.
var (
	minInt8 = new(big.Rat).SetInt64(math.MinInt64)
	maxInt8 = new(big.Rat).SetInt64(math.MaxInt64)
)

// fitsInt8 reports whether v is within bigint's range.
func fitsInt8(v *big.Rat) bool { return v.Cmp(minInt8) >= 0 && v.Cmp(maxInt8) <= 0 }

// roundTo rounds r to d decimal places, half away from zero.
func roundTo(r *big.Rat, d int) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d)), nil)
	x := new(big.Rat).Mul(r, new(big.Rat).SetInt(p))
	return new(big.Rat).SetFrac(roundRat(x).Num(), p)
}

// numbers are the numeric values of a row (nil for keys and NULLs), the
// inputs of Expr.Eval and Cond.Holds.
func numbers(row []value) []*big.Rat {
	out := make([]*big.Rat, len(row))
	for i, v := range row {
		if !v.null && v.num != nil {
			out[i] = v.num
		}
	}
	return out
}

// having keeps the rows whose released values satisfy the plan's HAVING
// condition (post-processing on noisy values).
func having(plan *dpplan.Plan, rows [][]value) [][]value {
	if plan.Having == nil {
		return rows
	}
	kept := rows[:0]
	for _, r := range rows {
		if plan.Having.Holds(numbers(r)) {
			kept = append(kept, r)
		}
	}
	return kept
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

// centre is the centre c of the normalized sum an output reads, or nil
// when its sum measure is a plain sum.
func centre(plan *dpplan.Plan, o dpplan.Output) *big.Rat {
	c := plan.Measures[o.Measure].Centre
	if c == "" {
		return nil
	}
	r, ok := new(big.Rat).SetString(c)
	if !ok {
		return nil // unreachable: rewrite writes decimals
	}
	return r
}

// centredAverage is AVG from the noisy normalized sum S̃_c = Σ (x − c) + e_s
// and the noisy count C̃ (post-processing of both):
//
//	A = c + S̃_c / max(C̃, 1),  clamped to [lower, upper].
//
// With the true count C, c + S_c/C is the exact average; the noise term
// e_s/C̃ comes from a sum whose L∞ is max_rows·(upper − lower)/2 instead of
// max_rows·max(|lower|, |upper|), and the count's noise is multiplied by
// |A − c| ≤ (upper − lower)/2 instead of |A| (see interval.go). For an
// empty group the answer centres on c instead of on 0.
func centredAverage(sum, count, c *big.Rat, lower, upper float64) *big.Rat {
	n := count
	if n.Cmp(ratOne) < 0 {
		n = ratOne
	}
	a := new(big.Rat).Quo(sum, n)
	a.Add(a, c)
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

// variance computes VAR_POP (sample false) or VAR_SAMP (sample true) from
// the noisy count C̃, sum S̃ and sum of squares Q̃ of values clamped to
// [lower, upper], as post-processing of those three released measurements:
//
//	SS = Q̃ − S̃²/C̃            (noisy sum of squared deviations)
//	pop  = SS / C̃,  with C̃ floored at 1 (like AVG, never NULL)
//	samp = SS / (C̃ − 1),  NULL when C̃ < 2 (PostgreSQL: NULL below 2 rows)
//
// then clamped to what a true variance of values in [lower, upper] can be:
// at least 0 and at most r² (pop) or r²·C̃/(C̃ − 1) (samp), with
// r = (upper − lower)/2 (Popoviciu's inequality: a population variance of
// values in [a, b] is at most (b − a)²/4; the sample variance of n such
// values is n/(n − 1) times the population variance). Every input is a
// released value or public, so this costs no privacy.
func variance(count, sum, sumSq *big.Rat, lower, upper float64, sample bool) *big.Rat {
	c := new(big.Rat).Set(count)
	min := ratOne
	if sample {
		min = big.NewRat(2, 1)
		if c.Cmp(min) < 0 {
			return nil
		}
	} else if c.Cmp(min) < 0 {
		c.Set(min)
	}
	ss := new(big.Rat).Mul(sum, sum)
	ss.Quo(ss, c)
	ss.Sub(sumSq, ss)
	d := new(big.Rat).Set(c)
	if sample {
		d.Sub(d, ratOne)
	}
	v := ss.Quo(ss, d)
	r := new(big.Rat)
	r.SetFloat64((upper - lower) / 2)
	hi := new(big.Rat).Mul(r, r)
	if sample {
		hi.Mul(hi, new(big.Rat).Quo(c, d))
	}
	if v.Sign() < 0 {
		v.SetInt64(0)
	}
	if v.Cmp(hi) > 0 {
		v.Set(hi)
	}
	return v
}

// sqrtRat is the square root of a non-negative rational to 128 bits.
func sqrtRat(x *big.Rat) *big.Rat {
	f := new(big.Float).SetPrec(128).SetRat(x)
	f.Sqrt(f)
	r, _ := f.Rat(nil)
	return r
}

// orderAndLimit applies ORDER BY, OFFSET and LIMIT to the released rows,
// with PostgreSQL's default NULL placement (last ascending, first
// descending).
func orderAndLimit(plan *dpplan.Plan, rows [][]value) [][]value {
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
	return noticeText(cost, st, st.Remaining(), cached, errs)
}

// noticeText is notice with st.Remaining() computed by the caller (the
// status cache keeps it: it is exact decimal arithmetic).
func noticeText(cost accountant.Spent, st accountant.Status, remaining accountant.Spent, cached bool, errs string) string {
	var b strings.Builder
	b.WriteString("dp: ")
	if cached {
		b.WriteString("cached answer, ")
	}
	fmt.Fprintf(&b, "epsilon %s", num(cost.Epsilon))
	if cost.Delta > 0 {
		fmt.Fprintf(&b, ", delta %s", num(cost.Delta))
	}
	fmt.Fprintf(&b, " spent (%s), %s of %s remaining", st.Accountant, num(remaining.Epsilon), num(st.Limit.Epsilon))
	if errs != "" {
		b.WriteString(noticeErrors)
		b.WriteString(errs)
	}
	return b.String()
}

// noticeErrors introduces the error half-widths at the end of a NOTICE.
const noticeErrors = "; 95% error "

// errorsText lists, per non-key output column, its 95% error half-width and
// the ε (and δ) of the measurements it rests on (cost.go), then the cost of
// measurements used only by HAVING. Half-widths are functions of the
// mechanisms (public) and, for averages, of released noisy counts
// (post-processing).
// passThrough reports the value e is equal to wherever it is not NULL:
// the first argument of COALESCE and NULLIF, down to a reference.
func passThrough(e *dpplan.Expr) (int, bool) {
	switch e.Op {
	case "ref":
		return e.Ref, true
	case "coalesce", "nullif":
		return passThrough(e.Args[0])
	}
	return 0, false
}

// outputWidth is the 95% half-width of output o where it is the same for
// every group (counts, sums, COALESCE or NULLIF of one), and whether it
// has one. Quantiles have none: the exponential method's error is in
// ranks, not in the value's units.
func outputWidth(plan *dpplan.Plan, o dpplan.Output, ms []measurement) (float64, bool) {
	switch o.Kind {
	case dpplan.OutputExpr:
		// Expressions over aggregates get no bound (not yet derived;
		// EXPLAIN lists their aggregates), except COALESCE(count or sum,
		// …) and NULLIF(count or sum, …), which are that count or sum
		// wherever they are not NULL.
		if r, ok := passThrough(o.Expr); ok {
			all := append(append([]dpplan.Output(nil), plan.Outputs...), plan.Hidden...)
			if ro := all[r]; ro.Kind == dpplan.OutputCount || ro.Kind == dpplan.OutputSum {
				return outputWidth(plan, ro, ms)
			}
		}
	case dpplan.OutputCount:
		return countHalfWidth(ms[o.Measure].mech), true
	case dpplan.OutputSum:
		return sumHalfWidth(o, ms), true
	}
	return 0, false
}

// countHalfWidth is the 95% half-width of a released count. A count noised
// on a grid finer than the integers (a weighted count, dpplan/bounds.go) is
// rounded to the nearest integer after noise (outputRow), which moves it by
// up to 1/2 more: |round(x + e) − x| ≤ |e| + 1/2. Without the 1/2 the
// stated ±6.657 of a count with noise of scale 2.22 (ε 0.45) covered the
// released whole number only when |e| < 6.5, with probability 94.6%
// (TestBICorpus's patient counts). Flooring at zero only moves a count
// towards its truth (never negative). Counts noised on the integers are
// exact quantiles of their noise already.
func countHalfWidth(mech noise.Mechanism) float64 {
	h := mech.HalfWidth(0.95)
	if sc, ok := mech.(noise.Scaled); ok {
		if _, step := sc.NoiseScale(); step < 1 {
			h += 0.5
		}
	}
	return h
}

// cellWidths is the 95% half-width of every released cell: per output,
// per group (nil for an output without one: keys, expressions without a
// bound, the exponential quantile method). AVG and variances have their
// own per group (interval.go).
func cellWidths(plan *dpplan.Plan, ms []measurement, noisy [][]*big.Rat) [][]float64 {
	out := make([][]float64, len(plan.Outputs))
	var hw [][]float64
	for v, o := range plan.Outputs {
		if o.Kind == dpplan.OutputAvg || o.Kind == dpplan.OutputVariance {
			if hw == nil {
				hw, _ = groupHalfWidths(plan, ms, floatRows(noisy))
			}
			out[v] = hw[v]
			continue
		}
		if h, ok := outputWidth(plan, o, ms); ok {
			out[v] = make([]float64, len(noisy))
			for g := range out[v] {
				out[v][g] = h
			}
		}
	}
	return out
}

// releasedWidths is cellWidths over the released groups only (hidden
// marks those min_units_per_cell withheld), placed back at their groups'
// places; a withheld group's width is 0 and never shown (its cells are
// NULL). The AVG and variance widths share one simulation budget over
// the groups (interval.go): a withheld group must not decide how a
// released one's width is computed (review of 6 Dec).
func releasedWidths(hidden []bool, plan *dpplan.Plan, ms []measurement, noisy [][]*big.Rat) [][]float64 {
	if !slices.Contains(hidden, true) {
		return cellWidths(plan, ms, noisy)
	}
	sub := cellWidths(plan, ms, released(hidden, noisy)) // text.go
	out := make([][]float64, len(sub))
	for v, w := range sub {
		if w == nil {
			continue
		}
		out[v] = make([]float64, len(noisy))
		k := 0
		for g, h := range hidden {
			if !h {
				out[v][g] = w[k]
				k++
			}
		}
	}
	return out
}

// errorsText is the NOTICE's part on the answer's error: a 95% half-width
// per released column (widths: cellWidths), its cost, and the bias.
func errorsText(req Request, ms []measurement, noisy [][]*big.Rat, groups [][]string, widths [][]float64) string {
	var parts []string
	// Two outputs of one name (two unaliased AVGs) are told apart by
	// their column number (new-user run: "±20000 (avg, …), ±60 (avg, …)").
	names := map[string]int{}
	for _, o := range req.Plan.Outputs {
		names[o.Name]++
	}
	var swamped []string // after the widths, whose "per group: …)" lists parsers read
	size := 0            // the text's length so far: capErrors cuts it at maxErrorsBytes
	add := func(part string) {
		parts = append(parts, part)
		size += len(part) + 2
	}
	for v, o := range req.Plan.Outputs {
		if size > maxErrorsBytes {
			break // the rest would be cut (round 73: 60 MB built for a 64 KiB NOTICE)
		}
		if names[o.Name] > 1 {
			o.Name = fmt.Sprintf("%s, column %d", o.Name, v+1)
		}
		var h float64
		var perGroup []float64 // AVG and variances of a grouped query
		switch o.Kind {
		case dpplan.OutputKey:
			continue // keys are exact
		case dpplan.OutputExpr:
			var ok bool
			if h, ok = outputWidth(req.Plan, o, ms); !ok {
				h = math.NaN()
			}
		case dpplan.OutputCount, dpplan.OutputSum:
			h, _ = outputWidth(req.Plan, o, ms)
		case dpplan.OutputAvg, dpplan.OutputVariance:
			perGroup = widths[v]
			if len(perGroup) == 0 {
				// Partition selection kept no group: no cell, no width
				// (slices.Max of nothing panicked after the charge).
				add(fmt.Sprintf("no group released (%s, %s)", o.Name, costText(measuresCost(ms, outputMeasures(req.Plan, v)))))
				continue
			}
		case dpplan.OutputQuantile:
			add(quantileErrorText(o, ms[o.Measure].quant, costText(measuresCost(ms, outputMeasures(req.Plan, v)))))
			continue
		}
		if perGroup != nil {
			h = slices.Max(perGroup)
		}
		width := "±" + num(h)
		if math.IsNaN(h) {
			width = "no bound"
		}
		text := fmt.Sprintf("%s (%s, %s", width, o.Name, costText(measuresCost(ms, outputMeasures(req.Plan, v))))
		if len(perGroup) > 1 && len(groups) == len(perGroup) {
			text += "; " + perGroupText(perGroup, groups)
			if sw := swampedText(o, perGroup, groups); sw != "" {
				swamped = append(swamped, sw)
			}
		}
		add(text + ")")
	}
	if only := havingOnly(req.Plan); len(only) > 0 {
		add("HAVING " + costText(measuresCost(ms, only)))
	}
	text := strings.Join(parts, ", ")
	for _, sw := range swamped {
		text += "; " + sw
	}
	if b := biasText(req.Plan, ms, noisy, groups, req.Dataset.PrivacyUnit); b != "" { // bias.go
		text += "; " + b
	}
	if u := unitsBoundText(req.Plan); u != "" {
		text += "; " + u
	}
	return text
}

// spreadM is M of the a-priori AVG and VAR bounds (explain.go): a bound on |A − c| for
// the mean A of values in [lower, upper] and the centre c of the sums
// (c = 0 for plain sums): max(|lower|, |upper|), or (upper − lower)/2 for
// normalized sums centred at the midpoint. The variance is shift-invariant,
// so the same delta-method bound holds for the centred S and Q.
func spreadM(o dpplan.Output, ms []measurement) float64 {
	if ms[o.Measure].measure.Centre != "" {
		return (o.Upper - o.Lower) / 2
	}
	return math.Max(math.Abs(o.Lower), math.Abs(o.Upper))
}

// sumHalfWidth is the 95% half-width of a released SUM: the noise's, or
// for a sum derived from a normalized sum and a count (S̃_c + c·C̃) the
// union bound h_s + |c|·h_c with each at 97.5%.
func sumHalfWidth(o dpplan.Output, ms []measurement) float64 {
	h := sumNoiseHalfWidth(o, ms)
	if m := ms[o.Measure].measure; o.PGType == "int8" && (m.Centre != "" || !(m.Whole || m.Integer)) {
		h += 0.5 // rounded to a whole number (outputRow)
	}
	return h
}

// sumNoiseHalfWidth is the 95% half-width of a released sum's noise.
func sumNoiseHalfWidth(o dpplan.Output, ms []measurement) float64 {
	m := ms[o.Measure].measure
	if m.Centre == "" {
		return ms[o.Measure].mech.HalfWidth(0.95)
	}
	// S̃ = S̃_c + c·C̃: the error e_s + c·e_c is a sum of two independent
	// noises; its 95% quantile by simulation (interval.go), which is
	// the same for every group (no plug-in value enters).
	c, _ := strconv.ParseFloat(m.Centre, 64)
	draws := []noiseDraw{drawOf(ms[o.Measure].mech), drawOf(ms[o.CountMeasure].mech)}
	if h, ok := linearSumHalfWidth(draws[0], draws[1], c); ok {
		return h
	}
	est := func(v []float64) float64 { return v[0] + c*v[1] }
	return simHalfWidth(groupSeed(0, 0), []float64{0, 0}, draws, est, math.Inf(1))
}

// linearSumHalfWidth is the exact 95% half-width of e_s + c·e_c for two
// independent noises of the same family: for Gaussian noise the normal
// quantile of σ = √(σ_s² + c²·σ_c²), for Laplace noise the 97.5% quantile
// of a sum of two Laplace variables (laplaceComboQuantile, closed-form
// tail), plus half a grid step of each (the discrete noise's rounding, as
// noise.HalfWidth adds it). The simulation it replaces drew the same 4,000
// noises (one fixed seed) for every release, so its Monte Carlo error (about
// 2% of the width) was the same in every release: the issue 29 sweep saw
// derived sums cover 94.5% of 22,054 cells (3.3 standard errors under 95%).
// ok is false for mixed or noiseless inputs (the simulation then).
func linearSumHalfWidth(s, n noiseDraw, c float64) (float64, bool) {
	if s.scale == 0 || n.scale == 0 || s.gaussian != n.gaussian {
		return 0, false
	}
	b1, b2 := s.scale*s.step, math.Abs(c)*n.scale*n.step
	rounding := s.step/2 + math.Abs(c)*n.step/2
	if s.gaussian {
		return normalQ975*math.Sqrt(b1*b1+b2*b2) + rounding, true
	}
	if b2 == 0 {
		return b1*math.Log(20) + rounding, true
	}
	if b1 == b2 {
		b2 *= 1 - 1e-4 // distinct poles (comboScales: error of order 10⁻⁸)
	}
	sd := math.Sqrt(2 * (b1*b1 + b2*b2))
	return sd*laplaceComboQuantile([]float64{b1 / sd, b2 / sd}, 0.025) + rounding, true
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

// roundRat is x rounded to the nearest integer, halves away from zero.
func roundRat(x *big.Rat) *big.Rat {
	if x.IsInt() {
		return new(big.Rat).Set(x)
	}
	twice := new(big.Int).Mul(x.Num(), big.NewInt(2))
	twice.Add(twice, new(big.Int).Mul(x.Denom(), big.NewInt(int64(x.Sign()))))
	q := new(big.Int).Quo(twice, new(big.Int).Mul(x.Denom(), big.NewInt(2))) // truncates towards zero
	return new(big.Rat).SetInt(q)
}

// maxGroupsListed is how many groups' half-widths a NOTICE lists one by one.
const maxGroupsListed = 12

// perGroupText states the half-widths of a grouped AVG or variance group by
// group (their noise depends on each group's noisy count, so the widest
// alone overstates the others several times): "per group: k1 ±h1, k2
// ±h2, …", or over maxGroupsListed groups the range and the widest group.
func perGroupText(hs []float64, groups [][]string) string {
	label := func(g int) string { return groupLabel(groups[g]) }
	if len(hs) > maxGroupsListed {
		lo, hi := 0, 0
		for g, h := range hs {
			if h < hs[lo] {
				lo = g
			}
			if h > hs[hi] {
				hi = g
			}
		}
		return fmt.Sprintf("per group ±%s (%s) to ±%s (%s) over %d groups", num(hs[lo]), label(lo), num(hs[hi]), label(hi), len(hs))
	}
	items := make([]string, len(hs))
	for g, h := range hs {
		items[g] = label(g) + " ±" + num(h)
	}
	return "per group: " + strings.Join(items, ", ")
}

// swampedText names the groups of an AVG whose 95% half-width covers its
// whole range (widenAtBounds: an average whose noisy estimate fell outside
// the range, by noise or a true value near an edge, released at that
// edge): their value says only that the truth lies in the range. A bare
// "0 ±20000" read as a measured zero (new-user run); "the noise swamped"
// it misread a small group's true average near 0 as noise (new user's
// run 94). "" when there are none.
func swampedText(o dpplan.Output, hs []float64, groups [][]string) string {
	span := o.Upper - o.Lower
	if o.Kind != dpplan.OutputAvg || !(span > 0) {
		return ""
	}
	var names []string
	for g, h := range hs {
		if h >= span {
			names = append(names, groupLabel(groups[g]))
		}
	}
	switch {
	case len(names) == 0:
		return ""
	case len(names) > maxGroupsListed:
		names = append(names[:maxGroupsListed], fmt.Sprintf("%d more", len(names)-maxGroupsListed))
	}
	return fmt.Sprintf("%s: %s came out at an edge of the range (noise, or a true value near that edge), each saying only that the average lies in [%s, %s]",
		o.Name, strings.Join(names, ", "), num(o.Lower), num(o.Upper))
}

// groupLabel names a group by its keys, as the NOTICE's per-group figures
// do.
func groupLabel(keys []string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = pgerr.Truncate(k, maxLabelBytes)
		if k == "" {
			parts[i] = "''"
		}
	}
	return strings.Join(parts, "/")
}

// maxLabelBytes bounds a key's text in the NOTICE's labels (a CASE label
// or a private key can be kilobytes; the answer holds it whole).
const maxLabelBytes = 64

// sumValue prints a noisy sum: a whole number when every row's value is
// whole (the SUM of an int column, as PostgreSQL prints it; a unit's
// weighted sum and the fine noise grid would otherwise show dozens of
// meaningless digits), else exactly, as every noisy value (tests recover
// the noise from it). Rounding is post-processing, and a whole number is a
// multiple of every grid step 2⁻ᵏ.
func sumValue(m dpplan.Measure, v *big.Rat) value {
	if m.Whole || m.Integer {
		return value{num: roundRat(v), decimals: -1}
	}
	return value{num: v, decimals: -1}
}

// widthCells appends each group's half-widths (cellWidths) to its row, so
// that HAVING, ORDER BY and LIMIT carry them with the row; rowWidths reads
// them back from position base.
func widthCells(rows [][]value, widths [][]float64) {
	for g := range rows {
		for _, w := range widths {
			if w == nil {
				continue
			}
			if math.IsNaN(w[g]) || math.IsInf(w[g], 0) {
				rows[g] = append(rows[g], value{null: true})
				continue
			}
			rows[g] = append(rows[g], value{num: new(big.Rat).SetFloat64(w[g])})
		}
	}
}

// rowWidths is the half-width text of each output cell of a row whose
// widths widthCells appended at base (nil where the output has none or
// the cell is NULL).
func rowWidths(row []value, base int, widths [][]float64) []*string {
	out := make([]*string, len(widths))
	k := base
	for v, w := range widths {
		if w == nil {
			continue
		}
		if c := row[k]; !c.null && !row[v].null {
			f, _ := c.num.Float64()
			t := num(f)
			out[v] = &t
		}
		k++
	}
	return out
}

// widenAtBounds makes the half-width of an AVG, variance or standard
// deviation that was released at a bound of its range (clamped: the noise
// pushed the estimate out of what a true value can be) at least the whole
// range: such an estimate says only that the truth is somewhere in the
// range, and a narrow interval around the bound would claim more (issue
// 29). rows are the groups' output rows before HAVING and ORDER BY (the
// same order as noisy and widths[v]). Post-processing of released values.
func widenAtBounds(plan *dpplan.Plan, rows [][]value, noisy [][]*big.Rat, widths [][]float64) {
	for v, o := range plan.Outputs {
		if (o.Kind != dpplan.OutputAvg && o.Kind != dpplan.OutputVariance) || widths[v] == nil {
			continue
		}
		for g, row := range rows {
			x := row[v]
			if x.null || x.num == nil {
				continue
			}
			lo, hi := outputRange(o, noisy[g])
			if x.num.Cmp(lo) == 0 || x.num.Cmp(hi) == 0 {
				span, _ := new(big.Rat).Sub(hi, lo).Float64()
				widths[v][g] = math.Max(widths[v][g], span)
			}
		}
	}
}

// outputRange is the range an AVG, variance or standard deviation is
// clamped to (average, variance): [lower, upper] for an average, [0, r²]
// for a population variance and [0, r²·C̃/(C̃ − 1)] for a sample one
// (r = (upper − lower)/2), their square roots for a deviation.
func outputRange(o dpplan.Output, noisy []*big.Rat) (lo, hi *big.Rat) {
	lo, hi = new(big.Rat), new(big.Rat)
	if o.Kind == dpplan.OutputAvg {
		lo.SetFloat64(o.Lower)
		hi.SetFloat64(o.Upper)
		return lo, hi
	}
	r := new(big.Rat).SetFloat64((o.Upper - o.Lower) / 2)
	hi.Mul(r, r)
	if o.Sample {
		c := noisy[o.CountMeasure]
		if c.Cmp(big.NewRat(2, 1)) >= 0 {
			d := new(big.Rat).Sub(c, ratOne)
			hi.Mul(hi, new(big.Rat).Quo(c, d))
		}
	}
	if o.Sqrt {
		hi = sqrtRat(hi)
	}
	return lo, hi
}

// bucketValue is the released point of bucket j: its midpoint (for int and
// date columns, of its integers; rounded down unless percentile_cont).
// A function of public data (the grid) and j only.
func bucketValue(ms dpplan.Measure, j int) *big.Rat {
	q := ms.Quantile
	lower, upper := new(big.Rat).SetFloat64(ms.Lower), new(big.Rat).SetFloat64(ms.Upper)
	if q.Type == policy.TypeInt || q.Type == policy.TypeDate {
		w := new(big.Rat).SetFloat64(q.Width)
		lo := new(big.Rat).Mul(w, big.NewRat(int64(j), 1))
		lo.Add(lo, lower)
		hi := new(big.Rat).Add(lo, w)
		hi.Sub(hi, big.NewRat(1, 1))
		if hi.Cmp(upper) > 0 || j == q.Buckets-1 {
			hi.Set(upper)
		}
		mid := new(big.Rat).Add(lo, hi)
		mid.Quo(mid, big.NewRat(2, 1))
		if !q.Cont {
			mid.SetInt64(floorRatInt(mid))
		}
		return mid
	}
	// lower + (j + 1/2)·(upper − lower)/B
	mid := new(big.Rat).Sub(upper, lower)
	mid.Mul(mid, big.NewRat(2*int64(j)+1, 2*int64(q.Buckets)))
	return mid.Add(mid, lower)
}

// dayText writes a date column's value, days since 1970-01-01, as a date.
func dayText(days int64) string { return time.Unix(days*86400, 0).UTC().Format("2006-01-02") }

// quantileValue formats a released quantile as its output column's type.
func quantileValue(o dpplan.Output, v *big.Rat) value {
	if o.PGType == "date" {
		days := floorRatInt(v)
		s := dayText(days)
		return value{key: &s}
	}
	return value{num: v, decimals: 6}
}
