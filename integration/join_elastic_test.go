package integration

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestPgx_ElasticJoinQuantile runs an elastic key join end to end through
// `dpproxy serve` with pgx: the demo policy with visits.department
// declaring max_rows_per_value 50, and the self-join of visits on
// department (two protected tables on a key other than the unit: E =
// 2·(5·50 + 5·50) = 1000).
//
//   - EXPLAIN shows the key join and calibrates the count to the direct L1
//     bound E = 1000 (not L0·E = 7000 with L0 = min(E, 7 departments)), and
//     gives the quantile's exponential mechanism the measure's whole ε in
//     each group (dpplan/join_l1.go, release/quantile.go);
//   - the query answers the 7 departments with a count within the Laplace
//     bound of the truncated join's 50·50 rows and MAX(age) in the bounds;
//   - GROUP BY a column without public values in this join is refused with
//     0A000 and a hint (rewrite/join_partition.go), and the session stays
//     usable.
func TestPgx_ElasticJoinQuantile(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The tests' fixed policy (4 groups × 5 rows per patient), not the
	// demo's, whose bounds are tuned for its README session: the formulas
	// below are written for these numbers.
	const from = "department:     {type: text, "
	cfgPath, addr := extraConfigPolicy(t, pinnedPolicy, [2]string{from, from + "max_rows_per_value: 50, "})
	withAnalyst(t, cfgPath, "elastic")
	p := startProxy(t, cfgPath, addr)
	c, notices := connectWithNotices(t, ctx, p.dsn("elastic"))
	if _, err := c.Exec(ctx, "SET dp.epsilon = 1"); err != nil {
		t.Fatal(err)
	}
	const q = "SELECT v1.department, COUNT(*), MAX(v2.age) FROM visits v1 JOIN visits v2 ON v1.department = v2.department GROUP BY v1.department ORDER BY 1"

	rows, err := c.Query(ctx, "EXPLAIN "+q)
	if err != nil {
		t.Fatal(err)
	}
	var explain []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		explain = append(explain, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(explain, "\n")
	// ε = 1 over two measures: 0.5 each; count: L1 = E = 1000, scale 2000.
	for _, want := range []string{"key join of visits, visits", "E = 1000", "count(*)  (linf=1000 sensitivity=1000 (L1) noise_scale=2000 ",
		"rank sensitivity=1000, epsilon per group=0.5,"} {
		if !strings.Contains(all, want) {
			t.Fatalf("EXPLAIN lacks %q:\n%s", want, all)
		}
	}

	rows, err = c.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	// Each department has far more than 50 visits of distinct patients on
	// both sides, so the truncated join has 50·50 rows per department;
	// Laplace noise of scale 2000 exceeds laplaceBound(2000, 1e-9) with
	// probability 1e-9 per department.
	k := laplaceBound(2000, 1e-9)
	for rows.Next() {
		var dept string
		var count, maxAge int64
		if err := rows.Scan(&dept, &count, &maxAge); err != nil {
			t.Fatal(err)
		}
		n++
		if math.Abs(float64(count-2500)) > k || maxAge < 0 || maxAge > 110 {
			t.Errorf("%s: count %d (want 2500 ± %.0f), MAX(age) %d (want within [0, 110])", dept, count, k, maxAge)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 7 {
		t.Fatalf("released %d departments, want the 7 public values", n)
	}
	if ns := notices(); len(ns) == 0 || !strings.Contains(ns[len(ns)-1], "exponential mechanism") {
		t.Fatalf("notices %q", ns)
	}

	_, err = c.Exec(ctx, "SELECT v1.diagnosis, COUNT(*) FROM visits v1 JOIN visits v2 ON v1.department = v2.department GROUP BY v1.diagnosis")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "0A000" || !strings.Contains(pe.Hint, "join the protected tables on the unit column") {
		t.Fatalf("private key in an elastic join: %v, want 0A000 with a hint to join on the unit", err)
	}
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("session after the refusal: %v", err)
	}
	t.Logf("elastic self-join: %d departments, count noise bound ±%s", n, strconv.FormatFloat(k, 'f', 0, 64))
}
