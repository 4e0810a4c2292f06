package integration

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestPgx_JoinOnUnit runs a join of two protected tables on the privacy
// unit through the proxy: visits JOIN patients ON patient_id, grouped by
// the patient's sex. The plan bounds contributions after the join (at most
// 5 visits per patient and group, max_rows_per_unit of visits); each
// patient has one sex, so the bounded count is computable upstream exactly
// and the only difference is noise.
func TestPgx_JoinOnUnit(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	up := connect(t, ctx, env.upstreamDSN)
	truth := countsByKey(t, ctx, up, `SELECT sex, SUM(LEAST(n, 5))::bigint FROM (
		SELECT p.sex, v.patient_id, count(*) AS n FROM visits v JOIN patients p ON v.patient_id = p.patient_id
		WHERE v.department = 'oncology' GROUP BY 1, 2) AS per_patient GROUP BY sex`)
	if len(truth) != 2 {
		t.Fatalf("truth = %v", truth)
	}

	c := connect(t, ctx, analystDSN("alice"))
	if _, err := c.Exec(ctx, "SET dp.epsilon = 0.3"); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	rows, err := c.Query(ctx, `SELECT p.sex, COUNT(*) AS n FROM visits v JOIN patients p ON v.patient_id = p.patient_id
		WHERE v.department = 'oncology' GROUP BY p.sex ORDER BY p.sex`)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		got[k] = n
		order = append(order, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || order[0] != "F" || order[1] != "M" {
		t.Fatalf("released groups %v, want [F M] (the public values of sex, ordered)", order)
	}
	// One measure, ε = 0.3, L0 = min(4, 2 groups) = 2, L∞ = 5: L1 = 10,
	// scale b = 10/0.3. Each count is within laplaceBound(b, 1e-9) ≈ 714
	// of the bounded truth except with probability 1e-9 (2e-9 for both).
	k := laplaceBound(10/0.3, 1e-9)
	for sex, n := range truth {
		if math.Abs(float64(got[sex]-n)) > k {
			t.Errorf("count(%s) = %d, bounded truth %d: further than %v", sex, got[sex], n, k)
		}
	}

	// A join of protected tables on another key than the unit is
	// refused with a hint to add the unit equality, and the session
	// stays usable.
	_, err = c.Exec(ctx, "SELECT COUNT(*) FROM visits v JOIN patients p ON v.age = p.birth_year")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "0A000" || !strings.Contains(pe.Hint, "a.patient_id = b.patient_id") {
		t.Fatalf("key join: err = %v, want 0A000 with a hint to add the unit equality", err)
	}
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("session after a refused join: %v", err)
	}
}
