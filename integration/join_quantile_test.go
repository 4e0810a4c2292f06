package integration

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/noise"
)

// TestPgx_JoinQuantilesAndPrivateKeys runs issue 9's join shapes through a
// real `dpproxy serve` with pgx, on the demo data:
//
//  1. the median age per sex over visits JOIN patients on the unit (a
//     quantile over a join, bounded after the join), by the exponential
//     method: the released age's rank among the joined rows is within the
//     exponential mechanism's error bound of the median's (plus the rows
//     that contribution bounding may drop);
//  2. MAX(age) grouped by diagnosis (a quantile with a private key): only
//     real diagnoses are released, with values in the policy bounds, and
//     the ledger charges the partition threshold's δ;
//  3. COUNT(*) grouped by diagnosis over visits JOIN patients (partition
//     selection in a join): only real diagnoses, common ones always.
func TestPgx_JoinQuantilesAndPrivateKeys(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfig(t)
	withAnalyst(t, cfgPath, "joinq")
	p := startProxy(t, cfgPath, addr)
	c, notices := connectWithNotices(t, ctx, p.dsn("joinq"))
	up := connect(t, ctx, env.upstreamDSN)
	if _, err := c.Exec(ctx, "SET dp.epsilon = 0.5"); err != nil {
		t.Fatal(err)
	}

	// The demo budget is ε = 3, δ = 1e-6 per analyst: three queries of
	// ε = 0.5, two of them with δ = 1e-7.
	//
	// 1. Median age per sex over the join on the unit. One measure, ε = 0.5,
	// L0 = min(4, 2 groups) = 2: ε_g = 0.25; rank sensitivity R = 5 (the
	// visits' max_rows_per_unit after the join); 111 buckets of width 1.
	// The selected bucket's utility is ≥ −K except with probability 1e-9
	// per group (noise.ExponentialUtilityBound).
	const median = `SELECT p.sex, percentile_cont(0.5) WITHIN GROUP (ORDER BY v.age) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY p.sex ORDER BY p.sex`
	k := noise.ExponentialUtilityBound(0.25, 5, 111, 1-1e-9)
	got := func() map[string]float64 {
		rows, err := c.Query(ctx, median)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for rows.Next() {
			var sex string
			var v float64
			if err := rows.Scan(&sex, &v); err != nil {
				t.Fatal(err)
			}
			out[sex] = v
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(out) != 2 {
			t.Fatalf("released %v, want the groups F and M", out)
		}
		return out
	}()
	for sex, v := range got {
		// n: non-null ages of the sex's joined rows; dropped: rows that
		// bounding to 5 visits per patient may drop. The released bucket
		// holds ranks within K of the median's among the kept rows, so
		// among all rows: #(age < v) ≤ n/2 + 1 + K + dropped and
		// #(age ≤ v) ≥ (n − dropped)/2 − K.
		var below, atOrBelow, n, dropped float64
		// Two statements, not a subquery in the select list: the same
		// truth on a Citus coordinator (make test-citus).
		if err := up.QueryRow(ctx, `SELECT count(*) FILTER (WHERE v.age < $2), count(*) FILTER (WHERE v.age <= $2), count(v.age)
			FROM visits v JOIN patients p ON v.patient_id = p.patient_id WHERE p.sex = $1`, sex, v).Scan(&below, &atOrBelow, &n); err != nil {
			t.Fatal(err)
		}
		if err := up.QueryRow(ctx, `SELECT COALESCE(SUM(GREATEST(c - 5, 0)), 0) FROM (SELECT count(*) AS c FROM visits v2 JOIN patients p2 ON v2.patient_id = p2.patient_id
			 WHERE p2.sex = $1 GROUP BY v2.patient_id) AS per`, sex).Scan(&dropped); err != nil {
			t.Fatal(err)
		}
		if below > n/2+1+k+dropped || atOrBelow < (n-dropped)/2-k {
			t.Errorf("median age of %s = %v: %v rows below, %v at or below, of %v (K = %v, dropped ≤ %v)", sex, v, below, atOrBelow, n, k, dropped)
		}
	}
	if ns := notices(); len(ns) == 0 || !strings.Contains(ns[len(ns)-1], "exponential mechanism") {
		t.Fatalf("notices %q: want the exponential mechanism's accuracy", ns)
	}
	// Partition selection (2 and 3) needs δ.
	if _, err := c.Exec(ctx, "SET dp.delta = 1e-7"); err != nil {
		t.Fatal(err)
	}

	// The real diagnoses and their patients (for 2 and 3).
	real := map[string]float64{}
	rows, err := up.Query(ctx, "SELECT diagnosis, count(DISTINCT patient_id) FROM visits WHERE diagnosis IS NOT NULL GROUP BY 1")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var d string
		var n float64
		if err := rows.Scan(&d, &n); err != nil {
			t.Fatal(err)
		}
		real[d] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	// 2. A quantile grouped by a column without public values.
	rows, err = c.Query(ctx, "SELECT diagnosis, MAX(age) FROM visits GROUP BY diagnosis")
	if err != nil {
		t.Fatal(err)
	}
	n2 := 0
	for rows.Next() {
		var d string
		var v int64
		if err := rows.Scan(&d, &v); err != nil {
			t.Fatal(err)
		}
		n2++
		if _, ok := real[d]; !ok || v < 0 || v > 110 {
			t.Errorf("released diagnosis %q with MAX(age) %d: not a real diagnosis or outside [0, 110]", d, v)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if ns := notices(); !strings.Contains(ns[len(ns)-1], "partition selection") || !strings.Contains(ns[len(ns)-1], "exponential mechanism") {
		t.Fatalf("notice %q: want partition selection and the exponential mechanism", ns[len(ns)-1])
	}

	// 3. Partition selection in a join on the unit. ε = 0.5 over the
	// count and the selection (0.25 each); the selection's Laplace scale
	// is L0/0.25 = 16 with L0 = 4 (the larger max_groups_per_unit), the
	// threshold's δ is 1e-7. A group with ≥ τ + k patients is kept except
	// with probability 1e-6, where k is the noise's 1e-6 tail (as in
	// TestPartitionSelection_EndToEnd); over the demo's 31 diagnoses the
	// test falsely fails with probability < 3.1e-5.
	sel, err := noise.NewLaplace(noise.Params{Epsilon: 0.25, Sensitivity: 4, Integer: true, Cells: 4})
	if err != nil {
		t.Fatal(err)
	}
	tauRat, err := noise.PartitionThreshold(sel, 1e-7, 4)
	if err != nil {
		t.Fatal(err)
	}
	tau, _ := tauRat.Float64()
	decay := math.Exp(-1.0 / 16)
	tail := 1.0
	for math.Pow(decay, tail)/(1+decay) > 1e-6 {
		tail++
	}
	rows, err = c.Query(ctx, "SELECT v.diagnosis, COUNT(*) FROM visits v JOIN patients p USING (patient_id) GROUP BY v.diagnosis")
	if err != nil {
		t.Fatal(err)
	}
	got3 := map[string]bool{}
	for rows.Next() {
		var d string
		var n int64
		if err := rows.Scan(&d, &n); err != nil {
			t.Fatal(err)
		}
		got3[d] = true
		if _, ok := real[d]; !ok {
			t.Errorf("released diagnosis %q does not exist", d)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Patients with at most 4 diagnoses are never cut by the L0 bound: a
	// lower bound on a group's count after bounding.
	safe, err := up.Query(ctx, `WITH p AS (SELECT patient_id, count(DISTINCT diagnosis) AS nd FROM visits GROUP BY patient_id)
		SELECT v.diagnosis, count(DISTINCT v.patient_id) FILTER (WHERE p.nd <= 4) FROM visits v JOIN p USING (patient_id)
		WHERE v.diagnosis IS NOT NULL GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	common := 0
	for safe.Next() {
		var d string
		var n float64
		if err := safe.Scan(&d, &n); err != nil {
			t.Fatal(err)
		}
		if n >= tau+tail {
			common++
			if !got3[d] {
				t.Errorf("diagnosis %q with ≥ %v patients (threshold %v) was not released from the join", d, n, tau)
			}
		}
	}
	if err := safe.Err(); err != nil {
		t.Fatal(err)
	}
	if common == 0 {
		t.Fatalf("no common diagnosis in the demo data (threshold %v)", tau)
	}

	// The ledger: every charge of this analyst with a private key carries
	// the threshold's δ event.
	ledger := connect(t, ctx, ledgerDSN())
	var withThreshold int
	if err := ledger.QueryRow(ctx, "SELECT count(*) FROM dpproxy_ledger.charge WHERE analyst = 'joinq' AND events::text LIKE '%partition_threshold%'").Scan(&withThreshold); err != nil {
		t.Fatal(err)
	}
	if withThreshold != 2 {
		t.Fatalf("%d charges with a partition threshold, want 2 (queries 2 and 3)", withThreshold)
	}
	t.Logf("medians %v (K = %.0f ranks); %d diagnoses released with MAX(age), %d from the join (%d common)", got, k, n2, len(got3), common)
}
