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
	Candidates []string // ascending, canonical literal text
}

// BoundsProbeSQL emits the probe's SQL, returning one row:
//
//	n, below_0, …, below_{B−1}
//
// Each unit contributes one non-NULL value, the first of its values in hash
// order (ROW_NUMBER() over the unit ≤ 1; a function of the unit's own
// values, dpplan/bounds.go), so adding or removing a unit changes n
// and every below_j by at most 1; rows without a unit are excluded.
// Identifiers are quoted, candidates are written by this package from
// values the caller produced (numbers or dates), never from analyst text.
func BoundsProbeSQL(p BoundsProbe) string {
	v := QuoteIdent(p.Column) + "::float8"
	if p.Date {
		v = QuoteIdent(p.Column) + "::date"
	}
	cols := []string{"COUNT(*)::text"}
	for _, c := range p.Candidates {
		lit := "(" + c + ")::float8"
		if p.Date {
			lit = QuoteString(c) + "::date"
		}
		cols = append(cols, "(COUNT(*) FILTER (WHERE dp_v < "+lit+"))::text")
	}
	unit := QuoteIdent(p.Unit)
	return "SELECT " + strings.Join(cols, ", ") + " FROM (SELECT " + v + " AS dp_v, ROW_NUMBER() OVER (PARTITION BY " + unit +
		" ORDER BY hashtextextended(" + v + "::text, " + selectSalt + "), " + v + ") AS dp_r FROM " + QuoteIdent(p.Schema) + "." + QuoteIdent(p.Table) + " WHERE " + unit +
		" IS NOT NULL AND " + QuoteIdent(p.Column) + " IS NOT NULL) AS dp_one WHERE dp_r <= " + strconv.Itoa(1)
}
