// Privacy-critical: needs DP review.

package pgemit

import (
	"sort"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// The emitted SQL of joins: the joined relation (bounded after the join
// by bounds_sql.go) and the elastic SQL that bounds rows per unit and per
// join value before the join. See dpplan/join.go for the sensitivity argument.

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
	return "(SELECT " + cols + " FROM (SELECT " + cols + ", ROW_NUMBER() OVER (PARTITION BY " + unit +
		" ORDER BY hashtextextended(ROW(" + cols + ")::text, " + selectSalt + "), " + cols + ") AS dp_cut FROM " +
		QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name) + " WHERE " + unit + " IS NOT NULL) AS dp_cut_rows WHERE dp_cut <= " +
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

// elasticSQL is the emitted SQL of a JoinKey plan: each table truncated to
// C_T rows per unit, then to m_T rows per value of its join column, then
// joined; the measures are summed per group over the joined rows (no
// per-unit bounding after the join: see dpplan/join.go).
func elasticSQL(t *policy.Table, p *dpplan.Plan, where dpplan.Pred) string {
	j := p.Join
	var from strings.Builder
	for k, jt := range j.Tables {
		extra := []string{j.KeyColumn[k]}
		if !jt.Public {
			extra = append(extra, jt.Unit)
		}
		cols := neededColumns(j, k, extra...)
		// Each row's place in both orders is fixed per row, like the
		// random number of the coupling above: one copy of each distinct
		// row first, then second copies, … (dp_dup, so that a unit's or a
		// value's kept rows spread over its distinct rows), each round in
		// the order of a hash of the kept columns, ties broken by the
		// columns (rows equal in all of them are interchangeable).
		// Parallel-safe, unlike random().
		order := "dp_dup, hashtextextended(ROW(" + cols + ")::text, " + selectSalt + "), " + cols
		key := QuoteIdent(j.KeyColumn[k])
		// Protected tables: at most C_T rows per unit first. Public
		// tables are the same in neighbouring databases: only their
		// multiplicity is bounded.
		src := QuoteIdent(jt.Schema) + "." + QuoteIdent(jt.Name)
		if !jt.Public {
			unit := QuoteIdent(jt.Unit)
			src = "(SELECT " + cols + ", ROW_NUMBER() OVER (PARTITION BY dp_ju ORDER BY " + order + ") AS dp_unit_rank FROM (SELECT " + cols + ", " + unit +
				" AS dp_ju, ROW_NUMBER() OVER (PARTITION BY " + unit + ", " + cols + ") AS dp_dup FROM " + src + " WHERE " + unit +
				" IS NOT NULL) AS dp_unit_dups) AS dp_per_unit WHERE dp_unit_rank <= " + strconv.Itoa(j.RowsPerUnit[k])
		}
		src = "(SELECT " + cols + ", ROW_NUMBER() OVER (PARTITION BY " + key + ", " + cols + ") AS dp_dup FROM " + src + ") AS dp_value_dups"
		perValue := "SELECT " + cols + ", ROW_NUMBER() OVER (PARTITION BY " + key + " ORDER BY " + order + ") AS dp_value_rank FROM " + src
		side := "(SELECT " + cols + " FROM (" + perValue + ") AS dp_per_value WHERE dp_value_rank <= " + strconv.Itoa(j.RowsPerValue[k]) +
			") AS dp_t" + strconv.Itoa(k)
		switch {
		case k == 0:
			from.WriteString(side)
		case jt.Left:
			from.WriteString(" LEFT JOIN " + side + " ON " + joinOnSQL(j, k, nil))
		default:
			from.WriteString(" JOIN " + side + " ON " + joinOnSQL(j, k, nil))
		}
	}
	var cols []string
	for _, c := range j.Columns {
		cols = append(cols, "dp_t"+strconv.Itoa(c.Table)+"."+QuoteIdent(c.Column)+" AS "+QuoteIdent(c.Name))
	}
	joined := "(SELECT " + strings.Join(cols, ", ") + " FROM " + from.String() + ") AS dp_join"

	var rowCols, keyCols, final []string
	for i, k := range p.Keys {
		kc := "dp_k" + strconv.Itoa(i)
		keyCols = append(keyCols, kc)
		rowCols = append(rowCols, keySQL(k)+" AS "+kc)
		final = append(final, kc+"::text")
	}
	for i, m := range p.Measures {
		// The per-row value (clamped column or expression, centred, under
		// FILTER) is the one of bounds_sql.go.
		x := "dp_x" + strconv.Itoa(i)
		v := rowValueSQL(t, p, m)
		if v != "" {
			rowCols = append(rowCols, v+" AS "+x)
		}
		switch {
		case m.Kind == dpplan.MeasureQuantile:
			// The group's joined rows' values (dpplan/join.go, "Quantiles over joins").
			final = append(final, elasticQuantileSQL(t, m, x))
		case m.Kind == dpplan.MeasureSum || m.Kind == dpplan.MeasureSumSq:
			final = append(final, "SUM("+x+")::text")
		case v != "":
			final = append(final, "COUNT("+x+")::text")
		default:
			final = append(final, "COUNT(*)::text")
		}
	}
	if len(rowCols) == 0 {
		rowCols = []string{"1 AS dp_one"}
	}
	var conds []string
	if where != nil {
		conds = append(conds, PredSQL(where))
	}
	for _, k := range p.Keys {
		conds = append(conds, keySQL(k)+" IN ("+strings.Join(domainConsts(k), ", ")+")")
	}
	rows := "SELECT " + strings.Join(rowCols, ", ") + " FROM " + joined
	if len(conds) > 0 {
		rows += " WHERE " + strings.Join(conds, " AND ")
	}
	sql := "SELECT " + strings.Join(final, ", ") + " FROM (" + rows + ") AS dp_rows"
	if len(keyCols) > 0 {
		sql += " GROUP BY " + strings.Join(keyCols, ", ")
	}
	return sql
}

// elasticQuantileSQL is the final column of a quantile measure in an
// elastic join's SQL (elasticSQL): the summary of the group's values, the
// clamped per-row values x of its joined rows. quantileFinalSQL unnests
// array_agg(x), which for a scalar x is the list of the group's values.
func elasticQuantileSQL(t *policy.Table, m dpplan.Measure, x string) string {
	return quantileFinalSQL(t, m, x)
}
