// Privacy-critical: needs DP review.

package pgemit

import (
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// ClipSQL is the histogram query (see the file comment): one scan of the
// rows the plan reads, each unit's largest and smallest clamped value per
// column, put in their bins and counted.
func ClipSQL(t *policy.Table, p *dpplan.Plan, where dpplan.Pred, cols []dpplan.ClipColumn) string {
	unit := unitSQL(t) // one text per unit (key_sql.go)
	from := QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name)
	var values, buckets []string
	array := func(edges []float64) string {
		var out []string
		for _, e := range edges {
			out = append(out, dpplan.BoundText(e))
		}
		return "ARRAY[" + strings.Join(out, ", ") + "]::numeric[]"
	}
	for i, col := range cols {
		// GREATEST and LEAST ignore NULL: keep a NULL value NULL. Unlike
		// a measure (readNumeric), the histogram reads each column once a
		// row, and only compares it (MAX, MIN, width_bucket), so a long
		// numeric costs one read here, which the analyst cannot multiply;
		// and Citus pushes down a VALUES list only with immutable
		// functions, which pg_column_size is not (stable).
		c := QuoteIdent(col.Column)
		values = append(values, "("+strconv.Itoa(i)+", CASE WHEN "+c+" IS NULL THEN NULL ELSE "+ClampSQL(t, col.Column)+" END)")
		n := strconv.Itoa(i)
		buckets = append(buckets,
			"WHEN dp_i = "+n+" AND dp_m.dp_s = 0 THEN width_bucket(dp_m.dp_x, "+array(col.UpperEdges)+")",
			"WHEN dp_i = "+n+" THEN width_bucket(dp_m.dp_x, "+array(col.LowerEdges)+")")
	}
	return "SELECT dp_i::text, dp_s::text, dp_b::text, COUNT(*)::text FROM (" +
		"SELECT dp_i, dp_m.dp_s, CASE " + strings.Join(buckets, " ") + " END AS dp_b FROM (" +
		"SELECT dp_unit, dp_i, MAX(dp_x) AS dp_hi, MIN(dp_x) AS dp_lo FROM (" +
		"SELECT " + unit + " AS dp_unit, dp_v.dp_i, dp_v.dp_x FROM " + from +
		" CROSS JOIN LATERAL (VALUES " + strings.Join(values, ", ") + ") AS dp_v(dp_i, dp_x)" +
		" WHERE " + strings.Join(sourceConds(t, p, where, unit), " AND ") +
		") AS dp_rows WHERE dp_x IS NOT NULL GROUP BY dp_unit, dp_i) AS dp_units" +
		" CROSS JOIN LATERAL (VALUES (0, dp_hi), (1, dp_lo)) AS dp_m(dp_s, dp_x)) AS dp_binned GROUP BY dp_i, dp_s, dp_b"
}
