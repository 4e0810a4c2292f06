package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/citus"
	"github.com/jackc/pgx/v5"
)

// The Citus tests (make test-citus, DPPROXY_CITUS=1): the demo's data
// cluster is a Citus coordinator with two workers on loopback, patients and
// visits distributed by patient_id and colocated. The rest of the suite's
// DP tests named in the Makefile's CITUS_TESTS run against it unchanged.

func requireCitus(t *testing.T) {
	t.Helper()
	requireDemo(t)
	if !citusMode() {
		t.Skip("DPPROXY_CITUS is not 1: the Citus tests run under make test-citus")
	}
}

// TestCitus_Distributed checks the cluster the suite runs on: two workers,
// both demo tables hash-distributed by patient_id in one colocation group,
// and every row reachable through the coordinator.
func TestCitus_Distributed(t *testing.T) {
	requireCitus(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, env.upstreamDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var workers int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_dist_node WHERE groupid <> 0 AND isactive").Scan(&workers); err != nil {
		t.Fatal(err)
	}
	if workers != citusWorkers || len(env.citusWorkers) != citusWorkers {
		t.Errorf("%d active workers in pg_dist_node, %d printed by the demo; want %d", workers, len(env.citusWorkers), citusWorkers)
	}
	rows, err := conn.Query(ctx, `SELECT logicalrelid::text, partmethod::text, column_to_column_name(logicalrelid, partkey), colocationid
		FROM pg_dist_partition WHERE logicalrelid IN ('patients'::regclass, 'visits'::regclass) ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type dist struct {
		method, column string
		coloc          int64
	}
	got := map[string]dist{}
	for rows.Next() {
		var name string
		var d dist
		if err := rows.Scan(&name, &d.method, &d.column, &d.coloc); err != nil {
			t.Fatal(err)
		}
		got[name] = d
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range []string{"patients", "visits"} {
		if d := got[tbl]; d.method != "h" || d.column != "patient_id" {
			t.Errorf("%s: partition method %q by %q, want hash (h) by patient_id", tbl, d.method, d.column)
		}
	}
	if got["patients"].coloc != got["visits"].coloc {
		t.Errorf("patients and visits are in colocation groups %d and %d, want one", got["patients"].coloc, got["visits"].coloc)
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM visits").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 200000 {
		t.Errorf("visits has %d rows through the coordinator, want the demo's 200000", n)
	}
	// doctor says so, and finds no Citus object among the data role's
	// readable columns.
	out, _, _ := dpproxyCLI(t, "doctor", "--config", filepath.Join(env.dataDir, "dpproxy.yaml"))
	for _, want := range []string{
		"ok: hospital: table visits is distributed by its unit column patient_id (Citus, hash, colocation group",
		"ok: hospital: table patients is distributed by its unit column patient_id (Citus, hash, colocation group",
		"ok: hospital: data role dpproxy_reader can SELECT only the",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "colocation groups (") {
		t.Errorf("doctor warns of several colocation groups:\n%s", out)
	}
}

// citusShapes are the DP shapes whose emitted SQL must run on Citus with the
// per-unit stage in the shards: every aggregate, quantiles, the unit join,
// private keys (partition selection), date keys, automatic contribution
// bounds (the demo's default) and fixed ones, automatic clipping, and
// sample-and-aggregate.
var citusShapes = []struct {
	name, settings, query string
}{
	{"count", "", "SELECT COUNT(*) FROM visits"},
	{"count fixed bounds", "SET dp.contribution = fixed", "SELECT COUNT(*) FROM visits"},
	{"sum and avg by department", "", "SELECT department, SUM(length_of_stay), AVG(cost) FROM visits GROUP BY department"},
	{"stddev and variance", "", "SELECT department, STDDEV(cost), VARIANCE(age) FROM visits GROUP BY department"},
	{"count distinct units", "", "SELECT COUNT(DISTINCT patient_id) FROM visits"},
	{"quantile exponential", "", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits"},
	{"quantile grouped", "", "SELECT department, percentile_disc(0.9) WITHIN GROUP (ORDER BY length_of_stay) FROM visits GROUP BY department"},
	{"unit join", "", "SELECT p.sex, COUNT(*), AVG(v.cost) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY p.sex"},
	{"private keys", "SET dp.delta = 1e-7", "SELECT diagnosis, COUNT(*) FROM visits GROUP BY diagnosis"},
	{"date keys", "", "SELECT date_trunc('year', visit_date) AS y, COUNT(*) FROM visits GROUP BY 1"},
	{"automatic clipping", "SET dp.contribution = fixed; SET dp.clipping = auto", "SELECT AVG(cost), SUM(cost) FROM visits"},
	{"sample-and-aggregate", "", "SELECT corr(cost, age) FROM visits"},
}

// TestCitus_ShapesPushedDown answers each shape through the proxy (an
// extra proxy of the demo, analyst cyrus of this test only, so that the
// suite's analysts keep their budgets), then runs EXPLAIN (VERBOSE) of the SQL the proxy's EXPLAIN
// prints on the coordinator and checks with citus.CheckPushDown that the
// per-unit stage runs in the shards, never on the coordinator.
func TestCitus_ShapesPushedDown(t *testing.T) {
	requireCitus(t)
	cfg, addr := extraConfigWith(t, func(cfg map[string]any) {
		cfg["analysts"].(map[string]any)["cyrus"] = map[string]any{"password": "plain:cyrus"}
	})
	startProxy(t, cfg, addr)
	dsn := fmt.Sprintf("postgres://cyrus:cyrus@%s/hospital?sslmode=disable", addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	up, err := pgx.Connect(ctx, env.upstreamDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close(ctx)
	coordPort := int(up.Config().Port)
	for _, sh := range citusShapes {
		t.Run(sh.name, func(t *testing.T) {
			c, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			if _, err := c.Exec(ctx, "SET dp.epsilon = 0.1; SET dp.cache = off"); err != nil {
				t.Fatal(err)
			}
			if sh.settings != "" {
				if _, err := c.Exec(ctx, sh.settings); err != nil {
					t.Fatalf("%s: %v", sh.settings, err)
				}
			}
			rows, err := c.Query(ctx, sh.query, pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				t.Fatalf("%s: %v", sh.query, err)
			}
			n := 0
			for rows.Next() {
				n++
			}
			if err := rows.Err(); err != nil || n == 0 {
				t.Fatalf("%s: %d rows, %v", sh.query, n, err)
			}
			sql := proxyExplainSQL(t, ctx, c, sh.query)
			var args []any
			if strings.Contains(sql, "$2") {
				// Sample-and-aggregate's key pads travel as parameters;
				// any bytes do for EXPLAIN.
				args = []any{[]byte("k"), []byte("k")}
			}
			plan := explainText(t, ctx, up, sql, args...)
			pd, err := citus.CheckPushDown(plan, coordPort, []string{"patient_id", "dp_unit", "dp_ju"})
			if err != nil {
				t.Fatalf("%s: %v\nSQL: %s\nplan:\n%s", sh.query, err, sql, plan)
			}
			if pd.Tasks < 32 {
				t.Errorf("%s: the distributed scan has %d tasks, want one per shard (32)", sh.query, pd.Tasks)
			}
			where := "window in the shards"
			if len(pd.WorkerGroupKeys) > 0 {
				where = pd.WorkerGroupKeys[0]
			}
			t.Logf("%s: %d tasks, per-unit stage in the shards (%s)", sh.name, pd.Tasks, where)
		})
	}
}

// proxyExplainSQL returns the emitted SQL the proxy's EXPLAIN prints for a
// DP query (its "SQL:" line).
func proxyExplainSQL(t *testing.T, ctx context.Context, c *pgx.Conn, query string) string {
	t.Helper()
	rows, err := c.Query(ctx, "EXPLAIN "+query, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", query, err)
	}
	defer rows.Close()
	for rows.Next() {
		line := string(rows.RawValues()[0])
		if sql, ok := strings.CutPrefix(strings.TrimSpace(line), "SQL: "); ok {
			return sql
		}
	}
	t.Fatalf("EXPLAIN %s printed no SQL: line (%v)", query, rows.Err())
	return ""
}

// explainText runs EXPLAIN (VERBOSE, COSTS OFF) of sql on conn.
func explainText(t *testing.T, ctx context.Context, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	rows, err := conn.Query(ctx, "EXPLAIN (VERBOSE, COSTS OFF) "+sql, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		t.Fatalf("EXPLAIN of the emitted SQL: %v\n%s", err, sql)
	}
	return planText(t, rows)
}

// planText is the text of an EXPLAIN's rows, one line each.
func planText(t *testing.T, rows pgx.Rows) string {
	t.Helper()
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		b.Write(rows.RawValues()[0])
		b.WriteByte('\n')
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
