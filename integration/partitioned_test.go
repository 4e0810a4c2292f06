package integration

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/dpproxy/dpproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
)

// partitionedDB is the database of the demo's data cluster with the demo's
// rows, visits and patients hash-partitioned by patient_id into
// partitionedParts partitions each (the same bounds: partitionwise joins on
// the unit pair partition i of one with partition i of the other).
const (
	partitionedDB    = "hospital_part"
	partitionedParts = 8
)

// setupPartitioned creates partitionedDB (once per run) with
// demo.PartitionedCopy and returns its superuser DSN.
func setupPartitioned(t *testing.T, ctx context.Context) string {
	t.Helper()
	c, err := pgcluster.External(env.upstreamDSN)
	if err != nil {
		t.Fatal(err)
	}
	if err := demo.PartitionedCopy(ctx, c, partitionedDB, partitionedParts, demo.Options{}); err != nil {
		t.Fatal(err)
	}
	return strings.Replace(env.upstreamDSN, "/"+demo.Database, "/"+partitionedDB, 1)
}

// perUnitGroupKey matches a Group Key line of an aggregate over patient_id
// (first key) in a plain EXPLAIN: one per partition when the aggregate runs
// partitionwise.
var perUnitGroupKey = regexp.MustCompile(`Group Key: (\w+\.)?patient_id\b`)

// TestPartitioned_PerUnitPerPartition runs an extra proxy over the demo's
// data with visits hash-partitioned by patient_id (8 partitions): its
// answers match the truth within their noise, and EXPLAIN of the emitted
// SQL, planned as the proxy plans it (partitionwise aggregation and joins on
// in the transaction, internal/upstream), runs the per-unit aggregate once
// per partition; with PostgreSQL's default (off) it runs once, over an
// Append of all partitions.
func TestPartitioned_PerUnitPerPartition(t *testing.T) {
	requireDemo(t)
	if citusMode() {
		t.Skip("one-node partitioning; the Citus run distributes the tables instead")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	partDSN := setupPartitioned(t, ctx)
	// Analyst parker, of this test only: the suite's analysts keep their
	// budgets.
	cfg, addr := extraConfigWith(t, func(cfg map[string]any) {
		hc := cfg["datasets"].(map[string]any)["hospital"].(map[string]any)
		hc["upstream"] = strings.Replace(hc["upstream"].(string), "/"+demo.Database+"?", "/"+partitionedDB+"?", 1)
		cfg["analysts"].(map[string]any)["parker"] = map[string]any{"password": "plain:parker"}
	})
	startProxy(t, cfg, addr)
	c := connect(t, ctx, fmt.Sprintf("postgres://parker:parker@%s/hospital?sslmode=disable", addr))
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "SET dp.epsilon = 1; SET dp.cache = off; SET dp.contribution = fixed"); err != nil {
		t.Fatal(err)
	}
	admin := connect(t, ctx, partDSN)
	defer admin.Close(ctx)

	// Answers: the demo's patients have at most 20 visits, the policy's
	// bound, so the DP counts estimate the true ones; ε = 1 spread over the
	// count and the bias estimate leaves a Laplace scale near 20/0.9 per
	// cell, so 400 is over 17 scales (false failure below 1e-7 per cell).
	const query = "SELECT department, COUNT(*) FROM visits GROUP BY department"
	want := map[string]int64{}
	rows, err := admin.Query(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		want[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	got := countsByKey(t, ctx, c, query)
	if len(got) != len(want) {
		t.Fatalf("DP answer has %d departments, want %d", len(got), len(want))
	}
	for k, w := range want {
		if math.Abs(float64(got[k]-w)) > 400 {
			t.Errorf("department %s: DP count %d, true %d: off by more than 400", k, got[k], w)
		}
	}
	var total string
	if err := c.QueryRow(ctx, "SELECT COUNT(*) FROM visits", pgx.QueryExecModeSimpleProtocol).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if n, err := strconv.ParseFloat(total, 64); err != nil || math.Abs(n-200000) > 400 {
		t.Errorf("DP COUNT(*) = %s, want 200000 ± 400", total)
	}

	// EXPLAIN of the emitted SQL, per shape: partitionwise as the proxy
	// runs it, then with the setting off.
	for _, sh := range []struct {
		query          string
		perPartition   bool
		knownLimitNote string
	}{
		{"SELECT COUNT(*) FROM visits", true, ""},
		{"SELECT department, AVG(cost) FROM visits GROUP BY department", true, ""},
		// Known limits. A quantile ranks each unit's values with window
		// functions before its per-unit GROUP BY, and the unit join cuts
		// each unit's patients rows with a window before the join;
		// PostgreSQL runs no window partitionwise, and a join input that
		// is a windowed subquery is not partitioned: the rows of all
		// partitions are sorted together. When this changes, move the
		// shape up.
		{"SELECT department, COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY department", false, "a window over the unit cuts the patients rows before the join"},
		{"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits", false, "window functions over the unit before the per-unit aggregate"},
	} {
		sql := proxyExplainSQL(t, ctx, c, sh.query)
		on := explainWith(t, ctx, admin, "on", sql)
		off := explainWith(t, ctx, admin, "off", sql)
		nOn, nOff := len(perUnitGroupKey.FindAllString(on, -1)), len(perUnitGroupKey.FindAllString(off, -1))
		switch {
		case sh.perPartition && (nOn != partitionedParts || nOff >= partitionedParts):
			t.Errorf("%s: per-unit Group Keys %d with partitionwise aggregation on, %d off; want %d (one per partition) and fewer\non:\n%s\noff:\n%s", sh.query, nOn, nOff, partitionedParts, on, off)
		case sh.perPartition:
			t.Logf("%s: the per-unit aggregate runs in each of the %d partitions (%d Group Key lines on patient_id; %d with partitionwise aggregation off)", sh.query, partitionedParts, nOn, nOff)
		case nOn != 1:
			t.Errorf("%s: %d per-unit Group Keys with partitionwise aggregation on, want 1 (known limit: %s); if it now runs per partition, mark the shape so\n%s", sh.query, nOn, sh.knownLimitNote, on)
		default:
			t.Logf("%s: known limit, the per-unit aggregate runs once over all partitions (%s)", sh.query, sh.knownLimitNote)
		}
	}
}

// explainWith returns EXPLAIN (COSTS OFF) of sql planned with partitionwise
// aggregation and joins set to setting, in a read-only transaction as the
// proxy's upstream runs it.
func explainWith(t *testing.T, ctx context.Context, conn *pgx.Conn, setting, sql string) string {
	t.Helper()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL enable_partitionwise_aggregate = "+setting+"; SET LOCAL enable_partitionwise_join = "+setting); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) "+sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("EXPLAIN: %v\n%s", err, sql)
	}
	return planText(t, rows)
}
