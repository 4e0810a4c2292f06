// Privacy-critical: needs DP review.

package pgemit

import (
	"sort"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
)

// The emitted SQL of joins: the joined relation, bounded after the join by
// bounds_sql.go. See dpplan/join.go for the sensitivity argument.

// joinFromSQL is the joined relation of a JoinPublic or JoinUnit plan, as a
// derived table whose columns are the plan's column names.
func joinFromSQL(j *dpplan.Join) string {
	var cols []string
	for _, c := range j.Columns {
		cols = append(cols, "dp_t"+strconv.Itoa(c.Table)+"."+QuoteIdent(c.Column)+" AS "+QuoteIdent(c.Name))
	}
	var from strings.Builder
	for k, t := range j.Tables {
		src := QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name) + " AS dp_t" + strconv.Itoa(k)
		if j.Shape == dpplan.JoinUnit && k < len(j.RowsPerUnit) && j.RowsPerUnit[k] > 0 {
			src = unitCutSQL(j, k) + " AS dp_t" + strconv.Itoa(k)
		}
		if k == 0 {
			from.WriteString(src)
			continue
		}
		if t.Left {
			from.WriteString(" LEFT JOIN ")
		} else {
			from.WriteString(" JOIN ")
		}
		from.WriteString(src + " ON " + joinOnSQL(j, k, nil))
	}
	return "(SELECT " + strings.Join(cols, ", ") + " FROM " + from.String() + ") AS dp_join"
}

// unitCutSQL is protected table k of a unit join cut to its first
// C_k = j.RowsPerUnit[k] rows per unit before the join
// (dpplan/join.go, "Work of a unit join"), as a derived table of the
// columns the join reads. The rows of a unit are taken in the order of a
// hash of their own values (ties, rows equal in every kept column, are
// interchangeable), so the cut is a function of the unit's own rows and the
// same in every run; rows without a unit join nothing and are dropped.
func unitCutSQL(j *dpplan.Join, k int) string {
	t := j.Tables[k]
	cols := neededColumns(j, k, t.Unit)
	unit := QuoteIdent(t.Unit)
	has := unit + " IS NOT NULL"
	if c := unitKeptSQL(unit, t.UnitPGType); c != "" {
		has = c + " AND " + has // a row with a long unit joins nothing
	}
	return "(SELECT " + cols + " FROM (SELECT " + cols + ", ROW_NUMBER() OVER (PARTITION BY " + unit +
		" ORDER BY hashtextextended(ROW(" + cols + ")::text, " + selectSalt + "), " + cols + ") AS dp_cut FROM " +
		QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name) + " WHERE " + has + ") AS dp_cut_rows WHERE dp_cut <= " +
		strconv.Itoa(j.RowsPerUnit[k]) + ")"
}

// neededColumns is the quoted, sorted, comma-separated list of the columns
// of table k that a join reads: those the plan uses, those of every join
// condition that names it, and extra.
func neededColumns(j *dpplan.Join, k int, extra ...string) string {
	need := map[string]bool{}
	for _, c := range extra {
		need[c] = true
	}
	for _, c := range j.Columns {
		if c.Table == k {
			need[c.Column] = true
		}
	}
	for i, tk := range j.Tables {
		for _, on := range tk.On {
			if on.Table == k {
				need[on.Column] = true
			}
			if i == k {
				need[on.Other] = true
			}
		}
	}
	names := make([]string, 0, len(need))
	for c := range need {
		names = append(names, c)
	}
	sort.Strings(names)
	for i, n := range names {
		names[i] = QuoteIdent(n)
	}
	return strings.Join(names, ", ")
}

// joinOnSQL is table k's join condition; alias names the tables (dp_t<i> when
// nil).
func joinOnSQL(j *dpplan.Join, k int, alias func(int) string) string {
	if alias == nil {
		alias = func(i int) string { return "dp_t" + strconv.Itoa(i) }
	}
	var conds []string
	for _, on := range j.Tables[k].On {
		conds = append(conds, alias(on.Table)+"."+QuoteIdent(on.Column)+" = "+alias(k)+"."+QuoteIdent(on.Other))
	}
	return strings.Join(conds, " AND ")
}
