package rewrite

import (
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"
)

// TestAudit_ExpressionCorners complements TestAudit_Sensitivity for
// expressions inside aggregates, FILTER and normalized sums: on a small
// database D within every limit, one added unit whose rows sit at (or
// beyond, so that clamping brings them to) the corner of the columns'
// bounds that maximizes the measure must change it by exactly the
// declared L∞ — never more (soundness), and not less (the bound is the
// one the interval analysis is meant to compute, so a bug that shrank an
// interval, e.g. a wrong product or division bound, would show up as a
// change above L∞, and one that inflated it as a change below).
func TestAudit_ExpressionCorners(t *testing.T) {
	ctx, conn := freshConn(t, 2*time.Minute)
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	// D: 30 patients with 3 visits each in one department (max_rows 5, L0 4:
	// within limits, so f(D) does not depend on the random choices).
	var b strings.Builder
	b.WriteString("INSERT INTO visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay) VALUES ")
	for i := 0; i < 90; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%d, %d, '2021-03-04', 'oncology', 'J10', %d, %d.25, %d)", i, i/3, 20+i%70, 100*i, i%30)
	}
	if _, err := conn.Exec(ctx, b.String()); err != nil {
		t.Fatal(err)
	}
	ds := loadHospital(t)
	tests := []struct {
		query string
		// row is the added unit's visit (age, cost, length_of_stay), beyond
		// the bounds where clamping reaches the corner; the plan's rows per
		// unit (for these ungrouped queries the unit's whole allowance,
		// max_groups_per_unit · max_rows_per_unit = 20) and two more are
		// added, so bounding must drop two.
		age, cost, los string
		measure        int // the measure whose change must equal its L∞
	}{
		// length_of_stay − age ∈ [−110, 60]: corner (0, 110) gives −110.
		{"SELECT SUM(length_of_stay - age) FROM visits", "500", "1", "-7", 0},
		// A conditional count: 1 per row.
		{"SELECT SUM(CASE WHEN age >= 65 THEN 1 ELSE 0 END) FROM visits", "200", "1", "1", 0},
		// cost / NULLIF(los, 0) ∈ [0, 20000] (integer divisor ≥ 1 when not 0).
		{"SELECT SUM(cost / NULLIF(length_of_stay, 0)) FROM visits", "30", "99999999", "1", 0},
		// A product of two columns: corner (20000, 60).
		{"SELECT SUM(cost * length_of_stay) FROM visits", "30", "99999999.99", "99", 0},
		// −ABS(age − 50) ∈ [−60, 0]: corner age = 110.
		{"SELECT SUM(-ABS(age - 50)) FROM visits", "1000", "1", "1", 0},
		// LEAST(cost, 1000) − GREATEST(age, 18) ∈ [−110, 982]: corner (1000, 18).
		{"SELECT SUM(LEAST(cost, 1000) - GREATEST(age, 18)) FROM visits", "-3", "5000000", "1", 0},
		// AVG(cost): normalized sum of cost − 10000, corner cost = 0.
		{"SELECT AVG(cost) FROM visits", "30", "-50", "1", 0},
		// var_pop(age): Σ (age − 55)², corner age = 110; measure 2.
		{"SELECT var_pop(age) FROM visits", "1000", "1", "1", 2},
		// FILTER: counted only where age > 3, which the added rows pass.
		{"SELECT COUNT(*) FILTER (WHERE age > 3) FROM visits", "50", "1", "1", 0},
		// FILTER on an expression sum.
		{"SELECT SUM(cost * 2) FILTER (WHERE length_of_stay >= 1) FROM visits", "50", "25000", "3", 0},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			p, err := Rewrite(ds, tc.query)
			if err != nil {
				t.Fatal(err)
			}
			base, err := runAudit(ctx, conn, p)
			if err != nil {
				t.Fatalf("emitted SQL on D: %v\n%s", err, p.SQL)
			}
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if p.RowsPerUnit != 20 {
				t.Fatalf("ungrouped plan keeps %d rows per unit, want the whole allowance 4·5 = 20", p.RowsPerUnit)
			}
			for i := 0; i < p.RowsPerUnit+2; i++ {
				ins := fmt.Sprintf("INSERT INTO visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay) VALUES (%d, 777777, '2022-01-01', 'oncology', 'flu', %s, %s, %s)",
					1000+i, tc.age, tc.cost, tc.los)
				if _, err := tx.Exec(ctx, ins); err != nil {
					t.Fatal(err)
				}
			}
			d2, err := runAudit(ctx, tx, p)
			if err != nil {
				t.Fatalf("emitted SQL on D': %v\n%s", err, p.SQL)
			}
			if bad := auditDiff(p, base, d2, 1); len(bad) > 0 {
				t.Fatalf("declared sensitivity violated:\n  %s", strings.Join(bad, "\n  "))
			}
			if len(base) != 1 || len(d2) != 1 {
				t.Fatalf("ungrouped query returned %d and %d groups", len(base), len(d2))
			}
			var before, after []*big.Rat
			for _, v := range base {
				before = v
			}
			for _, v := range d2 {
				after = v
			}
			zero := new(big.Rat)
			get := func(r []*big.Rat) *big.Rat {
				if r[tc.measure] == nil {
					return zero
				}
				return r[tc.measure]
			}
			change := new(big.Rat).Sub(get(after), get(before))
			change.Abs(change)
			want := new(big.Rat).SetFloat64(p.Measures[tc.measure].LInf)
			if change.Cmp(want) != 0 {
				t.Fatalf("the corner unit changed measure %d by %s, want exactly its L∞ %s", tc.measure, change.FloatString(6), want.FloatString(6))
			}
		})
	}
}
