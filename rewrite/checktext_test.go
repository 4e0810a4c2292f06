package rewrite

import (
	"errors"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

// TestCheckText: what issue 33's attack sent is refused by its length or
// its nesting before any pass that recurses or grows with it (the
// relative-date folder overflowed the stack at 250,000 parentheses and the
// folder, the select list and the post-processing split cost CPU that grew
// quadratically), by every entry point: Rewrite, Post and PublicDistinct.
// Statements just inside the limits are planned as before.
func TestCheckText(t *testing.T) {
	ds, err := policy.Load(hospitalPolicy)
	if err != nil {
		t.Fatal(err)
	}
	nest := func(n int) string {
		return "SELECT COUNT(*) FROM visits WHERE " + strings.Repeat("(", n) + "age = 1" + strings.Repeat(")", n)
	}
	code := func(err error) string {
		var pe *pgerr.Error
		if errors.As(err, &pe) {
			return pe.Code
		}
		return ""
	}
	for _, tc := range []struct {
		name, q, want string
	}{
		{"250,000 nested parentheses (overflowed the stack)", nest(250000), "54000"},
		{"20,000 nested parentheses, 40 KB", nest(20000), "54001"},
		{"1,001 nested parentheses", nest(maxExprDepth + 1), "54001"},
		{"50,000 aggregates, 500 KB", "SELECT " + strings.Repeat("COUNT(*), ", 49999) + "COUNT(*) FROM visits", "54000"},
		{"4,000 nested derived tables", "SELECT * FROM " + strings.Repeat("(SELECT * FROM ", 4000) + "(SELECT COUNT(*) FROM visits) s" + strings.Repeat(") s", 4000), "54000"},
		{"1,001 nested derived tables", "SELECT * FROM " + strings.Repeat("(SELECT * FROM ", 1001) + "(SELECT COUNT(*) FROM visits) s" + strings.Repeat(") s", 1001), "54001"},
	} {
		_, err := Rewrite(ds, tc.q)
		if got := code(err); got != tc.want {
			t.Errorf("Rewrite, %s: %v, want SQLSTATE %s", tc.name, err, tc.want)
		}
		if HasPostSyntax(tc.q) {
			if _, err := Post(ds, tc.q); code(err) != tc.want {
				t.Errorf("Post, %s: %v, want SQLSTATE %s", tc.name, err, tc.want)
			}
		}
		if PublicDistinct(ds, tc.q) != nil {
			t.Errorf("PublicDistinct, %s: answered", tc.name)
		}
	}
	// More select-list entries than PostgreSQL allows, within 64 KiB.
	if _, err := Rewrite(ds, "SELECT "+strings.Repeat("COUNT(*), ", maxTargetList)+"COUNT(*) FROM visits"); code(err) != "54011" {
		t.Errorf("%d aggregates: %v, want SQLSTATE 54011", maxTargetList+1, err)
	}
	// Inside the limits: 1,000 levels, and a statement of almost 64 KiB.
	if _, err := Rewrite(ds, nest(maxExprDepth-10)); err != nil && code(err) == "54000" {
		t.Errorf("999 levels: %v", err)
	}
	long := "SELECT COUNT(*) FROM visits WHERE department IN ('" + strings.Repeat("x", MaxStatementBytes-100) + "')"
	if _, err := Rewrite(ds, long); code(err) == "54000" && strings.Contains(err.Error(), "too long") {
		t.Errorf("a %d-byte statement was refused as too long", len(long))
	}
}

// BenchmarkPlan_AtLimits plans the costliest shapes issue 33's attack found,
// as large as CheckText lets them be: BENCHMARKS.md, "Planning cost".
func BenchmarkPlan_AtLimits(b *testing.B) {
	ds, err := policy.Load(hospitalPolicy)
	if err != nil {
		b.Fatal(err)
	}
	fill := func(prefix, unit, suffix string) string {
		n := (MaxStatementBytes - len(prefix) - len(suffix)) / len(unit)
		return prefix + strings.Repeat(unit, n) + suffix
	}
	for _, c := range []struct{ name, q string }{
		{"parens_1000", "SELECT COUNT(*) FROM visits WHERE " + strings.Repeat("(", maxExprDepth) + "age = 1" + strings.Repeat(")", maxExprDepth)},
		{"count_1664", "SELECT " + strings.Repeat("COUNT(*), ", maxTargetList-1) + "COUNT(*) FROM visits"},
		{"in_list_64KiB", fill("SELECT COUNT(*) FROM visits WHERE age IN (", "1, ", "1)")},
		// Each variance-family call and each percentile reads its own name
		// and the words after it (pgsql.LexN), not the rest of the text
		// (attack round 42).
		{"stddev_1664", fill("SELECT "+strings.Repeat("STDDEV(cost), ", maxTargetList-1)+"STDDEV(cost) FROM visits WHERE age IN (", "1, ", "1)")},
		{"percentile_300", fill("SELECT "+strings.Repeat("percentile_cont(0.5) WITHIN GROUP (ORDER BY cost), ", 299)+"COUNT(*) FROM visits WHERE age IN (", "1, ", "1)")},
		// A derived key's domain is built once per expression node and
		// at most maxDerivedValues values per statement (attack round 50).
		{"group_by_1_64KiB", fill("SELECT width_bucket(age,0,1,9998) k, COUNT(*) FROM visits GROUP BY 1", ",1", "")},
		{"case_group_by_1_64KiB", fill("SELECT CASE "+strings.Repeat("WHEN age < 0 THEN 0 ", 400)+"END k, COUNT(*) FROM visits GROUP BY 1", ",1", "")},
		{"width_bucket_written_64KiB", fill("SELECT COUNT(*) FROM visits GROUP BY width_bucket(age,0,1,9998)", ",width_bucket(age,0,1,9998)", "")},
		{"derived_1000", "SELECT * FROM " + strings.Repeat("(SELECT * FROM ", 999) + "(SELECT COUNT(*) FROM visits) s" + strings.Repeat(") s", 999)},
		// Flattening's rounds each rewrite the whole text: at most 1 MiB
		// in all (attack round 77), here 63 projections over a 60 KiB
		// IN list, and a CTE read 16 times.
		{"flatten_rounds_1MiB", "SELECT SUM(a) FROM " + strings.Repeat("(SELECT a+1 AS a FROM ", 63) +
			"(SELECT age AS a FROM visits WHERE age IN (" + strings.Repeat("1,", 29<<10) + "1)) s" + strings.Repeat(") s", 63)},
		// FILTER clauses, each a measure with its own condition (attack
		// round 105 measured an EXPLAIN of 300 at 170–200 ms under load).
		{"filter_300", "SELECT " + strings.Repeat("COUNT(*) FILTER (WHERE age > 1 AND department = 'x'), ", 299) + "COUNT(*) FROM visits"},
		{"cte_read_16", "WITH c AS (SELECT age AS a FROM visits WHERE age IN (" + strings.Repeat("1,", 1800) + "1)) SELECT COUNT(*) FROM " + strings.Repeat("c JOIN ", 15) + "c"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if HasPostSyntax(c.q) {
					Post(ds, c.q)
				} else {
					Rewrite(ds, c.q)
				}
			}
		})
	}
}
