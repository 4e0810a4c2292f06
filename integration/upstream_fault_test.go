package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// privateDataCluster starts a PostgreSQL cluster of the test's own with a
// copy of the demo's hospital schema (same column types, so the shared
// shadow catalog the extra proxy rebuilds stays the same) and its patients
// rows, and returns it with its superuser DSN of hospital. The demo's data
// cluster, which also holds the shared ledger, is left alone.
func privateDataCluster(t *testing.T, ctx context.Context) (*pgcluster.Cluster, pgcluster.Options, string) {
	t.Helper()
	opts := pgcluster.Options{Dir: filepath.Join(t.TempDir(), "data"), NoFsync: true}
	c, err := pgcluster.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start a private data cluster: %v", err)
	}
	opts.Port = c.Port
	t.Cleanup(func() { _ = c.Stop() })
	admin := connect(t, ctx, c.DSN("postgres"))
	if _, err := admin.Exec(ctx, "CREATE DATABASE hospital"); err != nil {
		t.Fatal(err)
	}
	dsn := c.DSN("hospital")

	dump := exec.CommandContext(ctx, filepath.Join(c.BinDir, "pg_dump"), "--schema-only", "--no-owner", "--no-privileges",
		"-t", "public.visits", "-t", "public.patients", env.upstreamDSN)
	schema, err := dump.Output()
	if err != nil {
		t.Fatalf("pg_dump the demo schema: %v", err)
	}
	load := exec.CommandContext(ctx, "psql", dsn, "-X", "-q", "-v", "ON_ERROR_STOP=1")
	load.Stdin = bytes.NewReader(schema)
	if out, err := load.CombinedOutput(); err != nil {
		t.Fatalf("load the schema: %v\n%s", err, out)
	}
	var rows bytes.Buffer
	if _, err := connect(t, ctx, env.upstreamDSN).PgConn().CopyTo(ctx, &rows, "COPY patients TO STDOUT"); err != nil {
		t.Fatal(err)
	}
	if _, err := connect(t, ctx, dsn).PgConn().CopyFrom(ctx, &rows, "COPY patients FROM STDIN"); err != nil {
		t.Fatal(err)
	}
	return c, opts, dsn
}

// TestUpstream_RestartMidSession: the data PostgreSQL of a dataset is
// restarted while a DP query of a session waits upstream (after its charge
// was committed). The analyst gets the one generic upstream error (58000,
// no upstream text) saying the charge stands; the charge stays reserved
// (nothing refunded, no answer released); the same session then gets
// answers again (the proxy reconnects); every answer the analyst received
// is on a released ledger row; `dpproxy ledger verify` is clean.
func TestUpstream_RestartMidSession(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	data, opts, dataDSN := privateDataCluster(t, ctx)
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		cfg["analysts"].(map[string]any)["frank"] = map[string]any{"password": "plain:frank"}
		ds := cfg["datasets"].(map[string]any)["hospital"].(map[string]any)
		ds["upstream"] = dataDSN
	})
	p := startProxy(t, cfgPath, addr)
	ledger := connect(t, ctx, ledgerDSN())
	session := connect(t, ctx, p.dsn("frank"))

	var answered []int64 // charge ids of the answers frank received
	query := func(q string) (int64, error) {
		before := lastChargeID(t, ctx, ledger)
		var n int64
		err := session.QueryRow(ctx, q).Scan(&n)
		if err == nil {
			id, status := waitForCharge(t, ctx, ledger, "frank", before)
			answered = append(answered, id)
			if status != "released" {
				t.Errorf("answer of %q received with its charge %d %s, want released", q, id, status)
			}
		}
		return n, err
	}
	if _, err := query("SELECT COUNT(*) FROM patients WHERE region = 'north'"); err != nil {
		t.Fatalf("before the restart: %v", err)
	}

	// Block the next query upstream, after its charge.
	locker := connect(t, ctx, dataDSN)
	if _, err := locker.Exec(ctx, "BEGIN; LOCK TABLE patients IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	before := lastChargeID(t, ctx, ledger)
	done := make(chan error, 1)
	go func() {
		var n int64
		done <- session.QueryRow(ctx, "SELECT COUNT(*) FROM patients WHERE region = 'south'").Scan(&n)
	}()
	inflight, status := waitForCharge(t, ctx, ledger, "frank", before)
	if status != "reserved" {
		t.Fatalf("charge %d is %s while its query waits upstream, want reserved", inflight, status)
	}

	// Restart the data cluster (fast shutdown: every backend is ended).
	if err := data.Stop(); err != nil {
		t.Fatalf("stop the data cluster: %v", err)
	}
	err := <-done
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "58000" || !strings.Contains(pe.Detail, "stays charged") {
		t.Fatalf("in-flight query when the data cluster went down: %v, want 58000 saying the budget stays charged", err)
	}
	for _, s := range []string{pe.Message, pe.Detail, pe.Hint} {
		if strings.Contains(s, "terminat") || strings.Contains(s, "administrator") || strings.Contains(s, "patients") {
			t.Errorf("the upstream error text reached the analyst: %q", s)
		}
	}
	restarted, err := pgcluster.Start(ctx, opts)
	if err != nil {
		t.Fatalf("restart the data cluster: %v", err)
	}
	t.Cleanup(func() { _ = restarted.Stop() })

	// The charge stands; nothing was released for it.
	var answer *string
	if err := ledger.QueryRow(ctx, "SELECT status, answer::text FROM dpproxy_ledger.charge WHERE id = $1", inflight).Scan(&status, &answer); err != nil {
		t.Fatal(err)
	}
	if status != "reserved" || answer != nil {
		t.Fatalf("charge %d of the failed query: %s with answer %v, want reserved without an answer", inflight, status, answer)
	}

	// The same session gets answers again: the proxy reconnects.
	var last error
	for i, q := range []string{
		"SELECT COUNT(*) FROM patients WHERE region = 'east'",
		"SELECT COUNT(*) FROM patients WHERE region = 'west'",
	} {
		if _, last = query(q); last != nil {
			t.Errorf("query %d after the restart: %v", i+1, last)
		}
	}

	// Every answer frank received is on a released row, and only those.
	var released []int64
	rows, err := ledger.Query(ctx, "SELECT id FROM dpproxy_ledger.charge WHERE analyst = 'frank' AND status = 'released' ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	released, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(released) != fmt.Sprint(answered) {
		t.Fatalf("released charges of frank %v, answers received on charges %v: want the same", released, answered)
	}
	out, errOut, code := dpproxyCLI(t, "ledger", "verify", "--config", cfgPath)
	if code != 0 || strings.Contains(out, "mismatch") ||
		!strings.Contains(out, fmt.Sprintf("charged but unanswered: charge %d ", inflight)) {
		t.Fatalf("ledger verify after the restart: exit %d\n%s%s", code, out, errOut)
	}
}
