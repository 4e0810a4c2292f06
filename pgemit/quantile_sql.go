// Privacy-critical: needs DP review.

package pgemit

import (
	"math"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// The SQL of quantile measures: per group, the counts of the bounded
// values in the buckets of the exponential method's grid (see
// rewrite/quantile.go and release/quantile.go).

// quantileValueSQL is the clamped value of a quantile's column as numeric
// (dates as days since 1970-01-01), NULL when the column is NULL.
func quantileValueSQL(t *policy.Table, m dpplan.Measure) string {
	if m.Expr != nil {
		return quantileExprValueSQL(m) // rewrite/quantile_expr.go
	}
	c := QuoteIdent(m.Column)
	lo, hi := boundConst(t, m), boundConstUpper(t, m)
	v := columnNumeric(c, m.Quantile.Type == policy.TypeInt)
	if m.Quantile.Type == policy.TypeDate {
		// Clamp as a date before subtracting: 'infinity' - date raises
		// 22008, and the emitted SQL must not fail on any data.
		day := func(x float64) string {
			return "('1970-01-01'::date + " + strconv.FormatInt(int64(x), 10) + ")"
		}
		v = "(LEAST(GREATEST(" + c + ", " + day(math.Ceil(m.Lower)) + "), " + day(math.Floor(m.Upper)) + ") - '1970-01-01'::date)::numeric"
	}
	return readNumeric(c, m.Quantile.Type == policy.TypeInt || m.Quantile.Type == policy.TypeDate, "LEAST(GREATEST("+v+", "+lo+"), "+hi+")")
}

// boundConst and boundConstUpper write the policy bounds of the measure's
// column as numeric constants (dates as day numbers).
func boundConst(t *policy.Table, m dpplan.Measure) string {
	if m.Expr != nil {
		return formatConst(m.Lower) // the expression's interval, exactly
	}
	if m.Quantile.Type == policy.TypeDate {
		return "(" + strconv.FormatFloat(m.Lower, 'f', -1, 64) + ")::numeric"
	}
	return NumericConst(t.Columns[m.Column].Lower)
}

func boundConstUpper(t *policy.Table, m dpplan.Measure) string {
	if m.Expr != nil {
		return formatConst(m.Upper)
	}
	if m.Quantile.Type == policy.TypeDate {
		return "(" + strconv.FormatFloat(m.Upper, 'f', -1, 64) + ")::numeric"
	}
	return NumericConst(t.Columns[m.Column].Upper)
}

// quantileRankSQL are the dp_rows columns that choose a (unit, group)'s
// quantile values (x is the measure's per-row value): the rank of the row
// among the (unit, group)'s rows by value, and the number of its non-null
// values.
func quantileRankSQL(x string, partition []string, i int) []string {
	n := strconv.Itoa(i)
	over := " OVER (PARTITION BY " + strings.Join(partition, ", ")
	return []string{
		"ROW_NUMBER()" + over + " ORDER BY " + x + ") AS dp_r" + n,
		"COUNT(" + x + ")" + over + ") AS dp_c" + n,
	}
}

// quantileKeepSQL aggregates the values a (unit, group) keeps for quantile
// measure i into an array: all of its n non-null values when n ≤ R, else
// the R values of rank ⌈(j − ½)·n/R⌉, j = 1…R: the middle of each of R
// equal slices of the unit's order statistics (a systematic sample that
// keeps the unit's median when R = 1, where ranks ⌈j·n/R⌉ kept its
// largest value). Rank k is kept when the number of those ranks up to k,
// ⌊(2kR + n)/(2n)⌋, steps up at k; it reaches R at k = n, so at most R
// values are kept whatever the data, and the choice is a function of the
// unit's own values only. NULL when none.
func quantileKeepSQL(i, rows int) string {
	n, r := strconv.Itoa(i), strconv.Itoa(rows)
	x, rk, c := "dp_x"+n, "dp_r"+n, "NULLIF(dp_c"+n+", 0)"
	return "array_agg(" + x + ") FILTER (WHERE " + x + " IS NOT NULL AND (2 * " + rk + " * " + r + " + " + c + ") / (2 * " + c + ") > (2 * (" + rk + " - 1) * " + r + " + " + c + ") / (2 * " + c + "))"
}

// quantileUnitSQL pads the array a of the values a (unit, group) keeps
// (quantileKeepSQL: at most R, or NULL) with NULLs to exactly R entries. A
// fixed length lets the final step array_agg the arrays of all units into
// one rectangular array without a data-dependent error.
func quantileUnitSQL(a string, rows int) string {
	r := strconv.Itoa(rows)
	n := "COALESCE(cardinality(" + a + "), 0)"
	return "array_cat(COALESCE(" + a + ", '{}'::numeric[]), array_fill(NULL::numeric, ARRAY[GREATEST(" + r + " - " + n + ", 0)]))"
}

// quantileFinalSQL summarises the group's kept values (the unnested arrays
// m of its kept (unit, group) rows) as text for the exponential method:
// "j:c,j:c,…", the count c of values in bucket j, for the non-empty
// buckets in increasing j (NULL when none).
func quantileFinalSQL(t *policy.Table, m dpplan.Measure, arr string) string {
	q := m.Quantile
	lo, hi := boundConst(t, m), boundConstUpper(t, m)
	values := "unnest(array_agg(" + arr + ")) AS dp_v"
	var bucket string
	if q.Type == policy.TypeInt || q.Type == policy.TypeDate {
		bucket = "LEAST(div(dp_v - " + lo + ", " + strconv.FormatFloat(q.Width, 'f', -1, 64) + "), " + strconv.Itoa(q.Buckets-1) + ")"
	} else {
		bucket = "LEAST(div((dp_v - " + lo + ") * " + strconv.Itoa(q.Buckets) + ", " + hi + " - " + lo + "), " + strconv.Itoa(q.Buckets-1) + ")"
	}
	return "(SELECT string_agg(dp_b::text || ':' || dp_c::text, ',' ORDER BY dp_b) FROM (SELECT " + bucket +
		" AS dp_b, COUNT(*) AS dp_c FROM " + values + " WHERE dp_v IS NOT NULL GROUP BY 1) AS dp_h)"
}

// quantileExprValueSQL is the row value of a quantile of an expression:
// the expression's SQL clamped to [Lower, Upper] (a no-op by the interval
// analysis), NULL when it is NULL.
func quantileExprValueSQL(m dpplan.Measure) string {
	x := ValueSQL(m.Expr)
	return "CASE WHEN " + x + " IS NULL THEN NULL ELSE LEAST(GREATEST(" + x + ", " +
		formatConst(m.Lower) + "), " + formatConst(m.Upper) + ") END"
}
