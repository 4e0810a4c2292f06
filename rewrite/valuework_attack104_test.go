package rewrite

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// TestAttack104_ValueReadsCounted is attack round 104 (severity high:
// accepted answers ran 30–125 times their time slot, past
// statement_timeout after the charge, and how far past depended on the
// data). ValueOps counted one unit per operator of the analyst's text,
// but the SQL pgemit writes evaluates more: a division is written twice
// (its IS NULL test and its clamp), so a nested one's operands four
// times; VARIANCE writes its value four times (the sum, the count and the
// square's two factors), a quantile six times (its clamp, in its value,
// its rank's ORDER BY and its COUNT); and a column leaf, whose read
// is five function calls (size test, scale, rounding, clamp), was free.
// VARIANCE(((cost + … 40 times …) / 3) / 3) / 3) read cost 1,280 times a
// row against 48 units counted: 251 s on the demo's 200,000 visits (the
// emitted SQL run directly) against a 2 s slot.
//
// The test is deterministic: for value-only aggregates (no plain column
// measure, so every read of cost in the SQL is the value's), each
// accepted plan's RowOps must count at least one unit per read of cost a
// row, i.e. per pg_column_size("cost") in its SQL; a refusal (54001,
// before the charge) passes.
func TestAttack104_ValueReadsCounted(t *testing.T) {
	ds, err := policy.Load("../examples/policies/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sum := func(n int) string { return "(" + strings.TrimSuffix(strings.Repeat("cost + ", n), " + ") + ")" }
	for _, q := range []string{
		"SELECT SUM(" + sum(20) + ") FROM visits",
		"SELECT SUM(((" + sum(8) + " / 3) / 3) / 3) FROM visits",
		"SELECT AVG(" + sum(6) + " / 3) FROM visits",
		"SELECT VARIANCE(" + sum(10) + ") FROM visits",
		"SELECT VARIANCE((" + sum(4) + " / 3) / 3) FROM visits",
		"SELECT STDDEV(((" + sum(2) + " / 3) / 3) / 3) FROM visits",
		"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY (" + sum(6) + " / 3) / 3) FROM visits",
		"SELECT department, VARIANCE(cost / 3), AVG(cost / 7) FROM visits GROUP BY department",
		"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost + cost) FROM visits",
		"SELECT department, percentile_disc(0.9) WITHIN GROUP (ORDER BY cost / 3) FROM visits GROUP BY department",
	} {
		p, err := RewriteWith(ds, q, Options{})
		if err != nil {
			continue
		}
		reads := strings.Count(p.SQL, `pg_column_size("cost")`)
		if p.RowOps < reads {
			t.Errorf("%s: accepted with RowOps %d, but its SQL reads cost %d times a row (each read is five function calls; the slot counts %d rows)",
				q, p.RowOps, reads, p.Work.Rows)
		}
	}
}

// TestAttack104_LongDigitsCounted: a row value's digits are not bounded
// by its interval. PostgreSQL keeps a literal's trailing zeros (a
// 200-character 1.000…0 has 197 decimals), adds the scales of a product
// and gives a quotient up to 1,000 decimals, so six quotients
// (cost · 1.0…0⁵) / 3 multiplied together, 62 operators, cost 1.3 ms a
// row (6,000 digit products), where 10 µs were counted: through the
// proxy, SUM of it over the first quarter of 2020 (10,048 visits) was
// answered after 64 s against its 8 s slot, over January (3,452) at 8 s,
// and over all visits it failed after its charge (statement_timeout, an
// incident). The digits are now counted (dpplan digits.go): that value
// and the other long-digit shapes measured are refused before the charge
// (54001), and ordinary arithmetic is still accepted.
func TestAttack104_LongDigitsCounted(t *testing.T) {
	ds, err := policy.Load("../examples/policies/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c197 := "1." + strings.Repeat("0", 197)
	q := "((cost" + strings.Repeat(" * "+c197, 5) + ") / 3)"
	prod := func(leaf string, n int) string {
		var f func(n int) string
		f = func(n int) string {
			if n == 1 {
				return leaf
			}
			return "(" + f(n/2) + " * " + f(n-n/2) + ")"
		}
		return f(n)
	}
	for _, refused := range []string{
		"SELECT SUM((" + prod(q, 6) + " / 3) / 3) FROM visits",                                      // 1.3 ms a row, 10 µs counted
		"SELECT SUM(" + prod(q, 2) + ") FROM visits",                                                // two of those quotients
		"SELECT SUM(" + prod("(cost * 0.0000499999999999999999999999999999)", 32) + ") FROM visits", // 33 µs a row, 10 µs counted
	} {
		_, err := RewriteWith(ds, refused, Options{})
		if err == nil || !strings.Contains(err.Error(), "units of work a row") {
			t.Errorf("%.120s…: err = %v, want 54001 (more than %d units of work a row)", refused, err, maxRowOps)
		}
	}
	for _, ok := range []string{
		"SELECT SUM(cost * 1.1 + age * 2) FROM visits",
		"SELECT AVG(cost / (age + 1)) FROM visits",
		"SELECT VARIANCE(cost * 1.1) FROM visits",
		"SELECT SUM(cost * cost * cost) FROM visits",
		"SELECT SUM(CASE WHEN age >= 65 THEN cost ELSE 0 END) FROM visits",
		"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost / GREATEST(age, 1)) FROM visits",
	} {
		p, err := RewriteWith(ds, ok, Options{})
		if err != nil {
			t.Errorf("%s: %v", ok, err)
			continue
		}
		if p.RowOps == 0 {
			t.Errorf("%s: RowOps 0", ok)
		}
	}
}
