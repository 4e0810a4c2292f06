package rewrite

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestNeighbours: adversarial units added to a table, checked
// against the declared L∞, L1 and L2 of every measure (the removed rows
// included) of the plan and of each auto candidate plan, and the
// profile's counts (N +1, each whole_c +0/+1).
func TestNeighbours(t *testing.T) {
	ctx, conn := freshConn(t, 3*time.Minute)
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	ds := loadHospital(t)
	depts := ds.Tables["visits"].Columns["department"].PublicValues
	rng := rand.New(rand.NewPCG(3, 5))
	id := int64(1)
	var rows [][]any
	add := func(patient int64, dept, date string, cost any, los any) {
		rows = append(rows, []any{id, patient, date, dept, "flu", 40, cost, los})
		id++
	}
	flush := func(tx pgx.Tx) {
		var err error
		if tx != nil {
			_, err = tx.CopyFrom(ctx, pgx.Identifier{"visits"}, []string{"visit_id", "patient_id", "visit_date", "department", "diagnosis", "age", "cost", "length_of_stay"}, pgx.CopyFromRows(rows))
		} else {
			_, err = conn.CopyFrom(ctx, pgx.Identifier{"visits"}, []string{"visit_id", "patient_id", "visit_date", "department", "diagnosis", "age", "cost", "length_of_stay"}, pgx.CopyFromRows(rows))
		}
		if err != nil {
			t.Fatal(err)
		}
		rows = nil
	}
	// Base: 60 patients, 1..9 visits spread over departments, some heavy.
	for u := int64(1); u <= 60; u++ {
		for range 1 + rng.IntN(9) {
			add(u, depts[rng.IntN(len(depts))], fmt.Sprintf("202%d-0%d-1%d", rng.IntN(4), 1+rng.IntN(9), rng.IntN(9)), fmt.Sprintf("%d.%02d", rng.IntN(20000), rng.IntN(100)), rng.IntN(30))
		}
	}
	flush(nil)
	type adv struct {
		name string
		gen  func(u int64)
	}
	advs := []adv{
		{"1 row in every dept", func(u int64) {
			for _, d := range depts {
				add(u, d, "2022-03-03", "20000", 29)
			}
		}},
		{"6 rows in every dept (t just above T)", func(u int64) {
			for _, d := range depts {
				for range 6 {
					add(u, d, "2022-03-03", "19999.99", 0)
				}
			}
		}},
		{"3 rows in 7 depts (t=21 > T=20)", func(u int64) {
			for _, d := range depts {
				for range 3 {
					add(u, d, "2021-05-05", "0.01", nil)
				}
			}
		}},
		{"500 rows in one dept", func(u int64) {
			for range 500 {
				add(u, depts[0], "2023-01-01", "20000", 29)
			}
		}},
		{"mixed NULLs and 97 rows per dept", func(u int64) {
			for i, d := range depts {
				for j := range 97 {
					var c any = "7777.77"
					if (i+j)%3 == 0 {
						c = nil
					}
					add(u, d, "2020-12-31", c, j%30)
				}
			}
		}},
		{"values outside their bounds: 9 rows per dept", func(u int64) {
			// Costs and stays beyond [0, 20000] and [0, 60]: the bias
			// estimate counts them as well as the removed rows.
			for i, d := range depts {
				for j := range 9 {
					c, los := "1000000", 500
					if (i+j)%2 == 0 {
						c, los = "-50", -5
					}
					add(u, d, "2022-07-07", c, los)
				}
			}
		}},
	}
	queries := []string{
		"SELECT department, COUNT(*), SUM(cost), AVG(length_of_stay), COUNT(DISTINCT patient_id) FROM visits GROUP BY department",
		"SELECT department, COUNT(cost), SUM(cost) FILTER (WHERE length_of_stay > 3), COUNT(*) FILTER (WHERE cost > 100) FROM visits GROUP BY department",
		"SELECT department, EXTRACT(YEAR FROM visit_date), COUNT(*), SUM(length_of_stay) FROM visits GROUP BY 1, 2",
		"SELECT COUNT(*), SUM(cost), VAR_POP(length_of_stay) FROM visits",
		"SELECT department, COUNT(*) FROM visits WHERE department IN ('oncology', 'surgery') GROUP BY department",
	}
	checked := 0
	for _, q := range queries {
		p, err := RewriteWith(ds, q, Options{AutoBounds: true})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		plans := []*Plan{p}
		if p.Auto != nil {
			plans = append(plans, p.Auto.Plans...)
		}
		for _, a := range advs {
			for _, pl := range plans {
				base, err := runAudit(ctx, conn, pl)
				if err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				var prof0 []int
				if pl == p && p.Auto != nil {
					if prof0, err = combinedProfile(ctx, conn, p); err != nil {
						t.Fatal(err)
					}
				}
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				a.gen(1_000_000)
				flush(tx)
				d2, err := runAudit(ctx, tx, pl)
				if err != nil {
					t.Fatalf("%s on D': %v", q, err)
				}
				if bad := auditDiff(pl, base, d2, 1); len(bad) > 0 {
					t.Errorf("%s (rows %d), %s:\n  %s", q, pl.RowsPerUnit, a.name, strings.Join(bad, "\n  "))
				}
				if prof0 != nil {
					prof1, err := combinedProfile(ctx, tx, p)
					if err != nil {
						t.Fatal(err)
					}
					n0, n1 := prof0[0], prof1[0]
					if d := n1 - n0; d < 0 || d > 1 {
						t.Errorf("%s %s: N %d → %d", q, a.name, n0, n1)
					}
					for i := 1; i < len(prof1); i++ {
						c0, c1 := prof0[i], prof1[i]
						if d := c1 - c0; d < 0 || d > 1 || (n1-c1)-(n0-c0) < 0 || (n1-c1)-(n0-c0) > 1 {
							t.Errorf("%s %s: whole_%d moved by %d", q, a.name, p.Auto.Candidates[i-1], d)
						}
					}
				}
				_ = tx.Rollback(ctx)
				checked++
			}
		}
	}
	t.Logf("%d plan × neighbour checks", checked)
}
