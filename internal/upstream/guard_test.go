package upstream

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/catalog"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

const guardPolicy = `dataset: d
privacy_unit: patient
budget: {epsilon: 1}
tables:
  visits:
    unit_column: patient_id
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      cost: {type: numeric, lower: 0, upper: 10}
      secret: {access: none}
`

// TestPool_GuardCatalogChanged: a DP query whose transaction finds a
// column of the policy with another type than at start-up is withheld
// (pgerr.ErrCatalogChanged, SQLSTATE 55000), and the pool refuses every
// later query without running it; changes to columns the policy does not
// read (or hides) change nothing; a type change that waits for a running
// query's locks does not withhold that query (catalog.GuardSQL's argument).
func TestPool_GuardCatalogChanged(t *testing.T) {
	ctx := context.Background()
	dsn, p := guardedPool(t, "CREATE TABLE visits (patient_id text, cost numeric, secret int, other int)",
		"INSERT INTO visits VALUES ('a', 1, 1, 1), ('b', 2, 2, 2)")
	const q = "SELECT count(*) FROM visits"
	mustAnswer := func(what string) {
		t.Helper()
		if rows, err := p.Query(ctx, q); err != nil || len(rows) != 1 {
			t.Fatalf("%s: Query = %v, %v; want one row", what, rows, err)
		}
		if err := p.Stale(); err != nil {
			t.Fatalf("%s: Stale() = %v, want nil", what, err)
		}
	}
	mustAnswer("unchanged")
	// Columns the policy does not read: a new one, another's type, a
	// hidden one's type.
	if err := pgtest.Exec(ctx, dsn, "ALTER TABLE visits ADD COLUMN note text", "ALTER TABLE visits ALTER COLUMN other TYPE bigint",
		"ALTER TABLE visits ALTER COLUMN secret TYPE bigint"); err != nil {
		t.Fatal(err)
	}
	mustAnswer("columns the policy does not read changed")

	// A type change that waits for a running query's locks: the query
	// (which sleeps while holding ACCESS SHARE on visits) is answered.
	done := make(chan error, 1)
	go func() {
		_, err := p.Query(ctx, "SELECT count(*), pg_sleep(1) FROM visits")
		done <- err
	}()
	waitFor(t, dsn, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(1)%' AND state = 'active' AND pid <> pg_backend_pid()")
	alter := make(chan error, 1)
	go func() { alter <- pgtest.Exec(ctx, dsn, "ALTER TABLE visits ALTER COLUMN patient_id TYPE varchar(20)") }()
	waitFor(t, dsn, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'ALTER TABLE visits%' AND wait_event_type = 'Lock'")
	if err := <-done; err != nil {
		t.Fatalf("the query the ALTER waited for: %v, want its answer", err)
	}
	if err := <-alter; err != nil {
		t.Fatal(err)
	}
	// The unit column's type changed: withheld, then refused.
	_, err := p.Query(ctx, q)
	if pe, ok := pgerr.As(err); !ok || !errors.Is(err, pgerr.ErrCatalogChanged) || pe.Code != pgerr.ObjectNotInPrerequisiteState || pe.Hint == "" {
		t.Fatalf("after the unit column's type changed: %v, want 55000 wrapping ErrCatalogChanged with a hint", err)
	}
	if err := p.Stale(); !errors.Is(err, pgerr.ErrCatalogChanged) {
		t.Fatalf("Stale() = %v, want ErrCatalogChanged", err)
	}
	before := p.pool.Stat().AcquireCount()
	if _, err = p.Query(ctx, q); !errors.Is(err, pgerr.ErrCatalogChanged) {
		t.Fatalf("a later query: %v, want ErrCatalogChanged", err)
	}
	if after := p.pool.Stat().AcquireCount(); after != before {
		t.Errorf("the refused query took %d upstream connections, want none", after-before)
	}
	// A message that names no column or type (the doctor does).
	if msg := err.Error(); strings.Contains(msg, "patient_id") || strings.Contains(msg, "varchar") {
		t.Errorf("the error names the column or type: %q", msg)
	}
}

// waitFor polls sql (a count) until it is positive.
func waitFor(t *testing.T, dsn, sql string) {
	t.Helper()
	for i := 0; i < 600; i++ {
		var n int
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		err = conn.QueryRow(context.Background(), sql).Scan(&n)
		conn.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", sql)
}

// TestPool_GuardQueryFailsOnNewType: SQL planned for the start-up's types
// that fails on the new ones (trim_scale of a unit column made text) gets
// the guard's error, not the server's (which release would take for the
// analyst's incident); a failure with the types unchanged stays the
// server's.
func TestPool_GuardQueryFailsOnNewType(t *testing.T) {
	ctx := context.Background()
	dsn, p := guardedPool(t, "CREATE TABLE visits (patient_id numeric, cost numeric)", "INSERT INTO visits VALUES (1, 1)")
	const q = "SELECT count(DISTINCT trim_scale(patient_id)) FROM visits"
	if _, err := p.Query(ctx, q); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Query(ctx, "SELECT 1/0"); errors.Is(err, pgerr.ErrCatalogChanged) || p.Stale() != nil {
		t.Fatalf("a data error with the types unchanged: %v (stale %v), want the server's error", err, p.Stale())
	}
	if err := pgtest.Exec(ctx, dsn, "ALTER TABLE visits ALTER COLUMN patient_id TYPE text"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Query(ctx, q); !errors.Is(err, pgerr.ErrCatalogChanged) {
		t.Fatalf("SQL that fails on the new type: %v, want ErrCatalogChanged", err)
	}
}

// guardedPool creates a database with setup, takes the fingerprint of
// guardPolicy's columns there and returns the database and a pool that
// guards every query with it (closed at the test's end).
func guardedPool(t *testing.T, setup ...string) (string, *Pool) {
	t.Helper()
	return guardedPoolOf(t, 0, setup...)
}

// guardedPoolOf is guardedPool with a pool of maxConns connections (0:
// pgxpool's default).
func guardedPoolOf(t *testing.T, maxConns int32, setup ...string) (string, *Pool) {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	if err := pgtest.Exec(ctx, dsn, setup...); err != nil {
		t.Fatal(err)
	}
	ds, err := policy.Parse(strings.NewReader(guardPolicy), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	fp, err := catalog.Fingerprint(ctx, conn, ds)
	if err != nil || len(fp) != 32 {
		t.Fatalf("Fingerprint = %q, %v; want an md5", fp, err)
	}
	p, err := New(ctx, Config{DSN: dsn, StatementTimeout: 30 * time.Second, MaxConns: maxConns, Guard: catalog.GuardSQL(ds), Fingerprint: fp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return dsn, p
}
