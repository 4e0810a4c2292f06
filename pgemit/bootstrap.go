// Privacy-critical: needs DP review.

package pgemit

import (
	"strconv"
	"strings"
)

// BoundsProbe describes the SQL `dpproxy policy init` runs to propose one
// column's bounds from DP quantiles (release.ProposeQuantiles): for each
// data-independent candidate c_j, the number of values < c_j, and the
// number n of values, over at most one value per unit.
type BoundsProbe struct {
	Schema, Table, Unit, Column string
	// Date selects date comparison (candidates are YYYY-MM-DD); otherwise
	// the column is compared as float8 with numeric candidates.
	Date       bool
	Candidates []string // strictly ascending, canonical literal text
}

// BoundsProbeSQL emits the probe's SQL, a histogram of the values over the
// candidates:
//
//	one row (b, count) per non-empty bucket b = #{j : c_j ≤ v}, in 0 … B
//
// (PostgreSQL's width_bucket with an array of ascending thresholds). The
// number of values below c_j is then the sum of the counts of buckets
// 0 … j, and n the sum of all (release.ProposeQuantiles); one query with an
// array of thresholds, where one FILTER column per candidate would exceed
// PostgreSQL's 1,664 result columns for fine grids. Each unit contributes
// one non-NULL value, the first of its values in hash order (ROW_NUMBER()
// over the unit ≤ 1; a function of the unit's own values,
// dpplan/bounds.go), so adding or removing a unit changes one bucket by 1,
// hence n and every below_j by at most 1; rows without a unit are excluded.
// Identifiers are quoted, candidates are written by this package from
// values the caller produced (numbers or dates), never from analyst text.
func BoundsProbeSQL(p BoundsProbe) string {
	v := QuoteIdent(p.Column) + "::float8"
	arr := QuoteString("{"+strings.Join(p.Candidates, ",")+"}") + "::float8[]"
	if p.Date {
		v = QuoteIdent(p.Column) + "::date"
		arr = QuoteString("{"+strings.Join(p.Candidates, ",")+"}") + "::date[]"
	}
	unit := QuoteIdent(p.Unit)
	return "SELECT width_bucket(dp_v, " + arr + ")::text AS dp_b, COUNT(*)::text FROM (SELECT " + v + " AS dp_v, ROW_NUMBER() OVER (PARTITION BY " + unit +
		" ORDER BY hashtextextended(" + v + "::text, " + selectSalt + "), " + v + ") AS dp_r FROM " + QuoteIdent(p.Schema) + "." + QuoteIdent(p.Table) + " WHERE " + unit +
		" IS NOT NULL AND " + QuoteIdent(p.Column) + " IS NOT NULL) AS dp_one WHERE dp_r <= " + strconv.Itoa(1) + " GROUP BY 1 ORDER BY 1"
}
