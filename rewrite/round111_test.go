package rewrite

import (
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestRound111_ScalarFunctionOverAggregate: a new pandas user's
// `SELECT department, ROUND(AVG(cost), 2) FROM visits GROUP BY department`
// was refused with 0A000 "function round is not supported in DP queries"
// and a hint that did not say how to round, while the same ROUND over a
// window function was answered. A scalar function over an aggregate is
// post-processing of the released value: the statement is split into the
// DP aggregate (a leaf the ordinary planner plans) and an outer SELECT
// computing the function over the leaf's column.
func TestRound111_ScalarFunctionOverAggregate(t *testing.T) {
	ds := loadHospital(t)
	for _, tt := range []struct{ sql, outer string }{
		{`SELECT department, ROUND(AVG(cost), 2) AS a FROM visits GROUP BY department`, `ROUND( "AVG(cost)" , 2)`},
		{`SELECT ROUND(AVG(cost)) FROM visits`, `ROUND( "AVG(cost)" )`},
		{`SELECT sqrt(VAR_POP(age)) AS sd, COUNT(*) FROM visits WHERE age > 10`, `sqrt( "VAR_POP(age)" )`},
		{`SELECT department, floor(SUM(cost) / COUNT(*)) FROM visits GROUP BY 1 ORDER BY 2 DESC LIMIT 3`, `LIMIT 3`},
		{`SELECT department, AVG(cost)::int AS a FROM visits GROUP BY department`, `"AVG(cost)" ::int`},
		{`SELECT CAST(AVG(cost) AS integer) FROM visits`, `CAST( "AVG(cost)" AS integer)`},
		{`SELECT SUM(cost) FILTER (WHERE age > 65)::bigint FROM visits`, `::bigint`},
		{`SELECT p.sex, round(percentile_cont(0.5) WITHIN GROUP (ORDER BY v.cost)) FROM visits v JOIN patients p USING (patient_id) GROUP BY p.sex`, `round(`},
	} {
		if !HasPostSyntax(tt.sql) {
			t.Errorf("HasPostSyntax(%q) = false", tt.sql)
			continue
		}
		q, err := Post(ds, tt.sql)
		if err != nil {
			t.Errorf("Post(%q) = %v", tt.sql, err)
			continue
		}
		if len(q.Leaves) != 1 {
			t.Errorf("Post(%q): %d leaves %q, want 1", tt.sql, len(q.Leaves), q.Leaves)
			continue
		}
		if _, err := Rewrite(ds, q.Leaves[0]); err != nil {
			t.Errorf("leaf %q of %q: %v", q.Leaves[0], tt.sql, err)
		}
		if !strings.Contains(q.Outer(), tt.outer) {
			t.Errorf("outer %q of %q lacks %q", q.Outer(), tt.sql, tt.outer)
		}
	}
	// Functions the planner computes itself, and functions inside an
	// aggregate's arguments, stay with the ordinary planner.
	for _, sql := range []string{
		`SELECT COALESCE(AVG(cost), 0) FROM visits`,
		`SELECT SUM(GREATEST(cost, 0)) FROM visits`,
		`SELECT AVG(ABS(cost - 100)) FROM visits`,
		`SELECT date_trunc('month', visit_date), COUNT(*) FROM visits GROUP BY 1`,
		`SELECT CAST(AVG(cost) AS numeric(10,2)) FROM visits`,
		`SELECT AVG(cost)::numeric(10,2), COUNT(*)::float8 FROM visits`,
		`SELECT CAST(EXTRACT(YEAR FROM visit_date) AS integer), COUNT(*) FROM visits GROUP BY 1`,
	} {
		if HasPostSyntax(sql) {
			t.Errorf("HasPostSyntax(%q) = true, want the ordinary planner", sql)
		}
	}
}

// TestRound111_DateFunctionInWhereHint: `WHERE EXTRACT(YEAR FROM
// visit_date) = 2024`, a new analyst's year filter, was refused with the
// generic WHERE hint; the hint now writes the range of the column itself.
func TestRound111_DateFunctionInWhereHint(t *testing.T) {
	ds := loadHospital(t)
	for _, sql := range []string{
		`SELECT COUNT(*) FROM visits WHERE EXTRACT(YEAR FROM visit_date) = 2024`,
		`SELECT COUNT(*) FROM visits WHERE date_part('year', visit_date) = 2024`,
		`SELECT COUNT(*) FROM visits WHERE date_trunc('year', visit_date) = '2024-01-01'`,
	} {
		_, err := Rewrite(ds, sql)
		pe, ok := pgerr.As(err)
		if !ok || pe.Code != pgerr.FeatureNotSupported {
			t.Errorf("Rewrite(%q) = %v, want 0A000", sql, err)
			continue
		}
		if !strings.Contains(pe.Hint, "visit_date >= '2024-01-01' AND visit_date < '2025-01-01'") {
			t.Errorf("Rewrite(%q): hint %q does not write the date range", sql, pe.Hint)
		}
	}
}

// TestRound111_AnyArrayHint: psycopg2 adapts a Python list to ARRAY[…],
// and node-postgres users write = ANY($1); both were refused with "use
// IN (list of literals)", which does not say how a driver writes an IN
// list. The hint now does.
func TestRound111_AnyArrayHint(t *testing.T) {
	ds := loadHospital(t)
	for _, sql := range []string{
		`SELECT COUNT(*) FROM visits WHERE department = ANY(ARRAY['oncology','surgery'])`,
		`SELECT COUNT(*) FROM visits WHERE department = ANY('{oncology,surgery}')`,
	} {
		_, err := Rewrite(ds, sql)
		pe, ok := pgerr.As(err)
		if !ok || pe.Code != pgerr.FeatureNotSupported {
			t.Errorf("Rewrite(%q) = %v, want 0A000", sql, err)
			continue
		}
		if !strings.Contains(pe.Hint, "psycopg2 expands a tuple") || !strings.Contains(pe.Hint, "IN ($1, $2)") {
			t.Errorf("Rewrite(%q): hint %q does not say how drivers write an IN list", sql, pe.Hint)
		}
	}
}

// TestReview112_NestedScalarFuncsLinear: funcOverAggregate scanned the
// arguments of every round(…) (or another postScalarFuncs call) for an
// aggregate, and calls nest: 990 nested round( around 64 KiB of tokens
// were scanned 990 times, 95 ms a pass of HasPostSyntax (which every DP
// statement runs, before the planner) against 27 ms for as many nested
// parentheses. It is linear now: the nested calls cost about what the
// parentheses do.
func TestReview112_NestedScalarFuncsLinear(t *testing.T) {
	stmt := func(open string) string {
		const depth = 990
		head := "SELECT " + strings.Repeat(open, depth)
		tail := strings.Repeat(")", depth) + " FROM visits"
		s := head + strings.Repeat("1+", (MaxStatementBytes-len(head)-len(tail)-10)/2) + "1" + tail
		if err := CheckText(s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	best := func(s string) time.Duration {
		b := time.Duration(1 << 62)
		for range 5 {
			start := time.Now()
			HasPostSyntax(s)
			b = min(b, time.Since(start))
		}
		return b
	}
	parens, rounds := best(stmt("(")), best(stmt("round("))
	t.Logf("990 nested parentheses %v, 990 nested round( %v", parens, rounds)
	if rounds > 2*parens {
		t.Errorf("990 nested round( take %v to recognise, %.1f× as many parentheses (%v): quadratic in the nesting", rounds, float64(rounds)/float64(parens), parens)
	}
}
