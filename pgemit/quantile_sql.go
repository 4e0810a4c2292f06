// Privacy-critical: needs DP review.

package pgemit

import (
	"math"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// The SQL of the smooth and ptr quantile methods (SET
// dp.quantile_method); see also release/quantile.go, release/calibrate.go
// (β and the proposed bound) and noise/smooth.go.
//
// # Order statistics and their stability
//
// Let x_1 ≤ … ≤ x_n be the group's clamped, bounded values, with the
// sentinels x_i = lower for i < 1 and x_i = upper for i > n. The released
// function f is PostgreSQL's quantile, x_a for percentile_disc/MIN/MAX
// (a = b = max(1, ⌈q·n⌉)) and x_a + (h − a)(x_b − x_a) for percentile_cont
// (h = 1 + q(n−1), a = ⌊h⌋, b = ⌈h⌉); so f(x) ∈ [x_a, x_b].
//
// After d added or removed values (A added, D removed), the order
// statistics of y satisfy y_i ∈ [x_{i−A}, x_{i+D}], and a, b move by at most
// A up and D down, so f(y) ∈ [x_{a−d}, x_{b+d}]. One unit adds or removes at
// most R = max_rows_per_unit values of a group, hence, with
//
//	U_k(x) = x_{b+R(k+1)} − x_{a−R(k+1)}    (k ≥ 0)
//
// the local sensitivity at distance k units (the largest local sensitivity
// of a database k units away) is at most U_k(x), and U_k(y) ≤ U_{k+1}(x) for
// neighbours y of x. U is computed in SQL from the sorted values.
//
// Smooth sensitivity (Nissim, Raskhodnikova, Smith 2007, Def. 2.1 and
// Prop. 2.2-style construction): S(x) = max_{k≥0} w_k·U_k(x), with
// w_k = max(e^{−βk}, e^{−100}). S ≥ U_0 ≥ LS, and S(y) ≤ max_k w_k U_{k+1}(x)
// ≤ e^β·S(x) because w_k ≤ e^β·w_{k+1}: S is a β-smooth upper bound. (The
// floor e^{−100} keeps the SQL's exp away from underflow and only makes S
// larger.) The maximum runs over k = 0 … ⌈n/R⌉, after which both ends are
// sentinels and U_k = upper − lower is constant.
//
// Propose-Test-Release (Dwork and Lei 2009): for the proposed bound b the
// SQL computes D(x) = min{k ≥ 0 : U_k(x) > b}. If U_k(x) ≤ b for k < D(x)
// then every database within D(x) − 1 units has local sensitivity ≤ b, and
// D(y) ≥ D(x) − 1 for neighbours (from U_k(y) ≤ U_{k+1}(x)): D has
// sensitivity 1. D(x) ≥ 1 implies LS(x) ≤ U_0(x) ≤ b. Since b < upper −
// lower, U_k > b once both ends are sentinels, so D ≤ ⌈n/R⌉.
//
// The SQL returns "f;S" (smooth) or "f;D" (ptr) per group, as text.

// quantileValueSQL is the clamped value of a quantile's column as numeric
// (dates as days since 1970-01-01), NULL when the column is NULL.
func quantileValueSQL(t *policy.Table, m dpplan.Measure) string {
	if m.Expr != nil {
		return quantileExprValueSQL(m) // rewrite/quantile_expr.go
	}
	c := QuoteIdent(m.Column)
	lo, hi := boundConst(t, m), boundConstUpper(t, m)
	v := c + "::numeric"
	if m.Quantile.Type == policy.TypeDate {
		// Clamp as a date before subtracting: 'infinity' - date raises
		// 22008, and the emitted SQL must not fail on any data.
		day := func(x float64) string {
			return "('1970-01-01'::date + " + strconv.FormatInt(int64(x), 10) + ")"
		}
		v = "(LEAST(GREATEST(" + c + ", " + day(math.Ceil(m.Lower)) + "), " + day(math.Floor(m.Upper)) + ") - '1970-01-01'::date)::numeric"
	}
	return "CASE WHEN " + c + " IS NULL THEN NULL ELSE LEAST(GREATEST(" + v + ", " + lo + "), " + hi + ") END"
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
// the R values of rank ⌈j·n/R⌉, j = 1…R (the ranks where ⌊rank·R/n⌋ steps
// up: evenly spaced in rank, a systematic sample of the unit's order
// statistics). The choice is a function of the unit's own values only,
// and keeps at most R values whatever the data. NULL when none.
func quantileKeepSQL(i, rows int) string {
	n, r := strconv.Itoa(i), strconv.Itoa(rows)
	x, rk, c := "dp_x"+n, "dp_r"+n, "NULLIF(dp_c"+n+", 0)"
	return "array_agg(" + x + ") FILTER (WHERE " + x + " IS NOT NULL AND " + rk + " * " + r + " / " + c + " > (" + rk + " - 1) * " + r + " / " + c + ")"
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
// m of its kept (unit, group) rows) as text, per method:
//
//	exponential  "j:c,j:c,…": the count c of values in bucket j, for the
//	             non-empty buckets in increasing j (NULL when none).
func quantileFinalSQL(t *policy.Table, m dpplan.Measure, arr string) string {
	q := m.Quantile
	lo, hi := boundConst(t, m), boundConstUpper(t, m)
	values := "unnest(array_agg(" + arr + ")) AS dp_v"
	if q.Method == dpplan.QuantileSmooth || q.Method == dpplan.QuantilePTR {
		return orderStatSQL(m, lo, hi, values)
	}
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

// smoothExpFloor is −100: the floor of the exponent of the weights w_k.
const smoothExpFloor = "-100"

// orderStatSQL summarises the group's sorted values for the smooth and ptr
// methods as "f;S" or "f;D" (see the file comment). values is the FROM
// item unnesting the group's kept values as dp_v.
func orderStatSQL(m dpplan.Measure, lo, hi, values string) string {
	q := m.Quantile
	qs := "(" + strconv.FormatFloat(q.Q, 'g', -1, 64) + ")::numeric"
	r := strconv.Itoa(q.Rows)
	// x(i) with the sentinels lower (i < 1) and upper (i > n). The sorted
	// values are a float8 array: its elements have a fixed length, so
	// dp_s[i] is found in constant time (in a numeric array each access
	// walks the array from its start: quadratic time). The conversion is a
	// fixed, monotone map of each value, so everything below is computed
	// on transformed data with the same bounds; PostgreSQL's
	// percentile_cont computes in float8 too. The map is
	// round(x, 30)::float8, for the sentinels as for the values: a numeric
	// nearer to 0 than 1e-308 (e.g. 1e-400 in a numeric column) would make
	// a plain ::float8 raise 22003, an error that depends on the data.
	lo, hi = "round("+lo+", 30)::float8", "round("+hi+", 30)::float8"
	x := func(i string) string {
		return "(CASE WHEN " + i + " < 1 THEN " + lo + " WHEN " + i + " > dp_n THEN " + hi + " ELSE dp_s[(" + i + ")::int] END)"
	}
	var ab, f string
	if q.Cont {
		ab = "FLOOR(1 + " + qs + " * (dp_n - 1)) AS dp_a, CEIL(1 + " + qs + " * (dp_n - 1)) AS dp_b, 1 + " + qs + " * (dp_n - 1) AS dp_h"
		f = x("dp_a") + " + (dp_h - dp_a) * (" + x("dp_b") + " - " + x("dp_a") + ")"
	} else {
		ab = "GREATEST(1, CEIL(" + qs + " * dp_n)) AS dp_a, GREATEST(1, CEIL(" + qs + " * dp_n)) AS dp_b, 0 AS dp_h"
		f = x("dp_a")
	}
	uk := "(" + x("dp_b + "+r+" * (dp_k + 1)") + " - " + x("dp_a - "+r+" * (dp_k + 1)") + ")::numeric"
	ks := "generate_series(0, CEIL(dp_n::numeric / " + r + ")::int) AS dp_k"
	var stat string
	if q.Method == dpplan.QuantileSmooth {
		beta := "(" + strconv.FormatFloat(q.Beta, 'g', -1, 64) + ")::numeric"
		stat = "(SELECT MAX(EXP(GREATEST(-" + beta + " * dp_k, " + smoothExpFloor + ")) * " + uk + ") FROM " + ks + ")"
	} else {
		bound := "(" + strconv.FormatFloat(q.Bound, 'g', -1, 64) + ")::numeric"
		stat = "(SELECT COALESCE(MIN(dp_k), CEIL(dp_n::numeric / " + r + ") + 1) FROM " + ks + " WHERE " + uk + " > " + bound + ")"
	}
	return "(SELECT (" + f + ")::text || ';' || " + stat + "::text FROM (SELECT dp_s, dp_n, " + ab +
		" FROM (SELECT array_agg(round(dp_v, 30)::float8 ORDER BY dp_v) FILTER (WHERE dp_v IS NOT NULL) AS dp_s, COUNT(dp_v) AS dp_n FROM " + values +
		") AS dp_sorted) AS dp_r)"
}
