package integration

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/jackc/pgx/v5/pgconn"
	"go.yaml.in/yaml/v3"
)

// withAnalyst adds an analyst (password = name) to a config written by
// extraConfig, so a test has a budget of its own on the shared ledger.
func withAnalyst(t *testing.T, cfgPath, name string) {
	t.Helper()
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["analysts"].(map[string]any)[name] = map[string]any{"password": "plain:" + name}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestPartitionSelection_EndToEnd groups the demo's visits by diagnosis, a
// column without public values, through a real `dpproxy serve` with pgx:
// refused with δ = 0, answered with SET dp.delta = 1e-6; every released
// diagnosis is a real one with many patients, the rare ones (a few
// patients) are never released, the common ones always are, and the
// ledger charge includes the threshold's δ.
func TestPartitionSelection_EndToEnd(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfig(t)
	withAnalyst(t, cfgPath, "erin")
	p := startProxy(t, cfgPath, addr)
	c, noticesSoFar := connectWithNotices(t, ctx, p.dsn("erin"))
	const q = "SELECT diagnosis, COUNT(*) FROM visits GROUP BY diagnosis"

	// δ = 0 (the demo policy's default): refused, nothing charged.
	_, err := c.Exec(ctx, q)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "0A000" || !strings.Contains(pe.Hint, "SET dp.delta") || !strings.Contains(pe.Hint, "department") {
		t.Fatalf("GROUP BY diagnosis with δ = 0: %v, want 0A000 with a hint to SET dp.delta or group by department", err)
	}
	ledger := connect(t, ctx, ledgerDSN())
	var charges int
	if err := ledger.QueryRow(ctx, "SELECT count(*) FROM dpproxy_ledger.charge WHERE analyst = 'erin'").Scan(&charges); err != nil {
		t.Fatal(err)
	}
	if charges != 0 {
		t.Fatalf("the refused query left %d charges", charges)
	}

	if _, err := c.Exec(ctx, "SET dp.delta = 1e-6"); err != nil {
		t.Fatal(err)
	}
	// EXPLAIN shows the threshold, without spending.
	rows, err := c.Query(ctx, "EXPLAIN "+q)
	if err != nil {
		t.Fatal(err)
	}
	var explain []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		explain = append(explain, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// The selection the proxy builds: the policy's default ε = 0.1 split
	// over the count and the selection (0.05 each), Laplace on distinct
	// units with L1 = L0 = 1 (scale b = 20), threshold δ = 1e-6.
	sel, err := noise.NewLaplace(noise.Params{Epsilon: 0.05, Sensitivity: 1, Integer: true, Cells: 1})
	if err != nil {
		t.Fatal(err)
	}
	tauRat, err := noise.PartitionThreshold(sel, 1e-6, 1)
	if err != nil {
		t.Fatal(err)
	}
	if all := strings.Join(explain, "\n"); !strings.Contains(all, "threshold="+tauRat.RatString()+" ") {
		t.Fatalf("EXPLAIN lacks the threshold %s:\n%s", tauRat.RatString(), all)
	}
	tau, _ := tauRat.Float64()

	rows, err = c.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	released := map[string]int64{}
	for rows.Next() {
		var d string
		var n int64
		if err := rows.Scan(&d, &n); err != nil {
			t.Fatal(err)
		}
		released[d] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	// The truth: distinct patients per diagnosis, and those who have at
	// most 4 distinct diagnoses (never dropped by the L0 bound, so a lower
	// bound on the group's count after bounding).
	up := connect(t, ctx, env.upstreamDSN)
	truth, err := up.Query(ctx, `
		WITH p AS (SELECT patient_id, count(DISTINCT diagnosis) AS nd FROM visits GROUP BY patient_id)
		SELECT v.diagnosis, count(DISTINCT v.patient_id), count(DISTINCT v.patient_id) FILTER (WHERE p.nd <= 4)
		FROM visits v JOIN p USING (patient_id) GROUP BY v.diagnosis`)
	if err != nil {
		t.Fatal(err)
	}
	type counts struct{ all, safe float64 }
	real := map[string]counts{}
	for truth.Next() {
		var d string
		var all, safe int64
		if err := truth.Scan(&d, &all, &safe); err != nil {
			t.Fatal(err)
		}
		real[d] = counts{float64(all), float64(safe)}
	}
	if err := truth.Err(); err != nil {
		t.Fatal(err)
	}
	// The selection noise Z is discrete Laplace of scale b = L0/0.05 = 20:
	// P(Z ≥ k) = P(Z ≤ −k) = q^k/(1+q) with q = e^{−1/b}; k is the
	// smallest with q^k/(1+q) ≤ 1e-5 (k ≈ 217, τ = 264). A group is kept
	// iff n + Z ≥ τ (n its count after bounding, between "safe" and
	// "all"), so groups with all ≤ τ − k are dropped and groups with safe
	// ≥ τ + k are kept, each except with probability ≤ 1e-5: the test
	// falsely fails with probability ≤ 31e-5 over the demo's 31 diagnoses.
	decay := math.Exp(-1.0 / 20)
	k := 1.0
	for math.Pow(decay, k)/(1+decay) > 1e-5 {
		k++
	}
	rare, common := 0, 0
	for d, n := range real {
		_, ok := released[d]
		switch {
		case n.all <= tau-k:
			rare++
			if ok {
				t.Errorf("diagnosis %q with %v patients (threshold %v) was released", d, n.all, tau)
			}
		case n.safe >= tau+k:
			common++
			if !ok {
				t.Errorf("diagnosis %q with ≥ %v patients (threshold %v) was not released", d, n.safe, tau)
			}
		}
	}
	for d := range released {
		if _, ok := real[d]; !ok {
			t.Errorf("released diagnosis %q does not exist in the data", d)
		}
	}
	if rare == 0 || common == 0 {
		t.Fatalf("the demo data should hold rare and common diagnoses: %d rare, %d common (τ = %v, margin %v): %v", rare, common, tau, k, real)
	}
	notices := noticesSoFar()
	if len(notices) != 1 || !strings.HasPrefix(notices[0], "dp: epsilon 0.1, delta 1e-06 spent (pure)") ||
		!strings.Contains(notices[0], "partition selection") ||
		!strings.Contains(notices[0], "the intervals cover the bounded answer: each unit counts in at most 1 of its groups") {
		t.Fatalf("notices = %q: want the selection and what the intervals cover", notices)
	}
	// The ledger charge includes the threshold's δ.
	var costE, costD float64
	var events string
	if err := ledger.QueryRow(ctx, "SELECT cost_epsilon::float8, cost_delta::float8, events::text FROM dpproxy_ledger.charge WHERE analyst = 'erin'").
		Scan(&costE, &costD, &events); err != nil {
		t.Fatal(err)
	}
	if math.Abs(costE-0.1) > 1e-12 || costD != 1e-6 || !strings.Contains(events, "partition_threshold") {
		t.Fatalf("ledger charge ε = %v, δ = %v, events %s; want 0.1, 1e-6 with a partition_threshold event", costE, costD, events)
	}
	t.Logf("released %d of %d diagnoses (threshold %v, margin %v; %d rare, %d common)", len(released), len(real), tau, k, rare, common)
}
