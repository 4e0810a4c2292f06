// Privacy-critical: needs DP review.

package pgemit

import (
	"slices"
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
		if isCut(j, k) {
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
// The cut hashes and sorts every value it keeps, so its text columns are
// read through joinText: a value longer than dpplan.MaxJoinTextBytes is
// NULL here, for the cut and for the rest of the plan
// (TestAttack107_LongTextJoinTime).
func unitCutSQL(j *dpplan.Join, k int) string {
	t := j.Tables[k]
	names := neededColumns(j, k, t.Unit)
	cols := quotedList(names)
	unit := QuoteIdent(t.Unit)
	has := unit + " IS NOT NULL"
	if c := unitKeptSQL(unit, t.UnitPGType); c != "" {
		has = c + " AND " + has // a row with a long unit joins nothing
	}
	src := QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name) + " WHERE " + has
	var read []string
	texts := false
	for _, n := range names {
		c := QuoteIdent(n)
		if slices.Contains(t.Texts, n) {
			c, texts = joinText(c)+" AS "+c, true
		}
		read = append(read, c)
	}
	if texts {
		src = "(SELECT " + strings.Join(read, ", ") + " FROM " + src + ") AS dp_cut_read"
	}
	return "(SELECT " + cols + " FROM (SELECT " + cols + ", ROW_NUMBER() OVER (PARTITION BY " + unit +
		" ORDER BY hashtextextended(ROW(" + cols + ")::text, " + selectSalt + "), " + cols + ") AS dp_cut FROM " +
		src + ") AS dp_cut_rows WHERE dp_cut <= " + strconv.Itoa(j.RowsPerUnit[k]) + ")"
}

// isCut reports whether table k is a unit join's cut table (unitCutSQL).
func isCut(j *dpplan.Join, k int) bool {
	return j.Shape == dpplan.JoinUnit && k < len(j.RowsPerUnit) && j.RowsPerUnit[k] > 0
}

// joinText is text column c (quoted, or qualified) of a protected table,
// or NULL when its value has more than dpplan.MaxJoinTextBytes bytes
// (octet_length reads the length from the value's header).
func joinText(c string) string {
	return "CASE WHEN octet_length(" + c + ") <= " + strconv.Itoa(dpplan.MaxJoinTextBytes) + " THEN " + c + " END"
}

// neededColumns is the sorted list of the columns of table k that a
// join reads: those the plan uses, those of every join condition that
// names it, and extra.
func neededColumns(j *dpplan.Join, k int, extra ...string) []string {
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
	return names
}

// quotedList is names quoted and comma-separated.
func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = QuoteIdent(n)
	}
	return strings.Join(q, ", ")
}

// joinOnSQL is table k's join condition; alias names the tables (dp_t<i> when
// nil).
func joinOnSQL(j *dpplan.Join, k int, alias func(int) string) string {
	if alias == nil {
		alias = func(i int) string { return "dp_t" + strconv.Itoa(i) }
	}
	// A protected table's text column is compared through joinText (a
	// hash join hashes it whole, a merge join compares it; a cut table's
	// columns are read through it already): a value longer than
	// dpplan.MaxJoinTextBytes joins nothing.
	operand := func(i int, c string) string {
		q := alias(i) + "." + QuoteIdent(c)
		if slices.Contains(j.Tables[i].Texts, c) && !isCut(j, i) {
			return joinText(q)
		}
		return q
	}
	var conds []string
	for _, on := range j.Tables[k].On {
		conds = append(conds, operand(on.Table, on.Column)+" = "+operand(k, on.Other))
	}
	return strings.Join(conds, " AND ")
}
