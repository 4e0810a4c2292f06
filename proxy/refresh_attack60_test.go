package proxy

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/internal/shadow"
	"github.com/dpproxy/dpproxy/policy"
)

// TestAttack60_RefreshLockQueueFailsOthersCatalog (attack round 60,
// severity low–medium: one analyst, within their share of the shadow
// pool, makes every other analyst's catalog statements on the dataset's
// tables fail with 55P03 at each refresh of the public tables, and keeps
// the refresh from ever succeeding, so every analyst reads a stale copy).
//
// A refresh of the shadow (datasets.X.public_refresh, every 10 s at the
// least, or SIGHUP: cmd/dpproxy/public.go) rebuilds the whole shadow in
// one transaction (internal/shadow/shadow.go build): DROP TABLE … CASCADE
// and CREATE TABLE of every table of the policy, protected and public, in
// file order, then the copy of the public tables, with lock_timeout 10 s
// (refreshLockTimeout) so that it "fails rather than queue every catalog
// statement behind it". But it does queue them: once it holds the
// AccessExclusiveLock of the first tables (visits, patients), it waits up
// to 10 s for the next one, and PostgreSQL's lock queue puts every later
// AccessShareLock request on any of those tables behind it. Analyst A
// only has to keep one catalog statement reading a public table running
// (SELECT count(*) FROM regions, generate_series(1, 200000000): allowed,
// ended by catalog_statement_timeout, 10 s, then started again from
// another of A's pooled connections); at the refresh, analyst B's
// statements that touch any table the refresh already locked — a BI
// tool's SELECT * FROM visits LIMIT 0 probe (routed to the shadow),
// pg_relation_size, a read of the public table itself — wait in the queue
// for the shadow's lock_timeout (half of catalog_statement_timeout: 5 s by
// default) and fail with 55P03, and the refresh fails too (the previous
// copy stays), every period. Here with catalog_statement_timeout 4 s
// (lock_timeout 2 s) to keep the test fast.
//
// Measured: without A's statement the refresh takes a few tens of ms and
// B's statements during it answer at once; with it, B's LIMIT 0 probe of
// visits fails with 55P03 after 2 s.
//
// Suggested fix: never let the refresh wait in the lock queue holding
// other locks — take every table's lock first with LOCK TABLE … NOWAIT
// (retrying the whole transaction later), or build the new copy under
// other names and swap them in with a short lock_timeout (tens of ms) and
// retries; or keep the protected tables (which a refresh does not change)
// out of the refresh's transaction.
func TestAttack60_RefreshLockQueueFailsOthersCatalog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a shadow cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, file, _, _ := runtime.Caller(0)
	text, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "internal", "testdata", "hospital.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := policy.Parse(strings.NewReader(string(text)+`  regions:
    public: true
    columns:
      region: {type: text, public_values: [north, south, east, west, central]}
      population: {type: int, lower: 0, upper: 10000000}
`), "hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	up := pgtest.NewDatabase(t)
	if err := pgtest.Exec(ctx, up,
		`CREATE TABLE visits (visit_id bigint PRIMARY KEY, patient_id bigint, visit_date date, department text,
			diagnosis text, age int, cost numeric(10,2), length_of_stay int)`,
		`CREATE TABLE patients (patient_id bigint PRIMARY KEY, birth_year int, sex text, region text)`,
		`CREATE TABLE regions (region text PRIMARY KEY, population int)`,
		`INSERT INTO regions VALUES ('north', 1000), ('south', 2000), ('east', 3000), ('west', 4000), ('central', 5000)`,
	); err != nil {
		t.Fatal(err)
	}
	shc := pgtest.NewCluster(t)
	sh := shc.DSN("postgres")
	if err := pgtest.Exec(ctx, sh, "DROP ROLE IF EXISTS shadow_reader", "CREATE ROLE shadow_reader LOGIN PASSWORD 'shadow_reader'"); err != nil {
		t.Fatal(err)
	}
	// refresh is what dpproxy's refresh loop runs (cmd/dpproxy/public.go);
	// once the shadow is built, a refresh replaces rows only.
	var rebuilds atomic.Int32
	refresh := func() error {
		_, rebuilt, err := shadow.Refresh(ctx, sh, up, ds, "shadow_reader", shadow.Options{LockTimeout: time.Second})
		if rebuilt {
			rebuilds.Add(1)
		}
		return err
	}
	if err := refresh(); err != nil {
		t.Fatalf("initial build: %v", err)
	}
	ts := startServer(t, serverOpts{shadowDSN: shc.RoleDSN("shadow_reader", "shadow_reader", "postgres"), mutate: func(c *Config) {
		c.Datasets["hospital"].Policy = ds
		c.CatalogStatementTimeout = 4 * time.Second // lock_timeout 2 s
	}})
	a := ts.connectAs(t, "alice", "alice", "hospital")
	b := ts.connectAs(t, "bob", "bob-secret", "hospital")
	probe := func() (time.Duration, error) {
		start := time.Now()
		_, err := execAll(t, b, "SELECT * FROM visits LIMIT 0")
		return time.Since(start), err
	}

	// The control: a refresh alone, and B's probe meanwhile.
	done := make(chan error, 1)
	go func() { done <- refresh() }()
	d, err := probe()
	if err != nil || d > time.Second {
		t.Fatalf("control: B's probe during a refresh: %v after %v", err, d)
	}
	if err := <-done; err != nil {
		t.Fatalf("control: refresh: %v", err)
	}

	// A keeps a catalog statement reading the public table running.
	aDone := make(chan error, 1)
	go func() {
		_, err := execAll(t, a, "SELECT count(*) FROM regions r, generate_series(1, 200000000) g")
		aDone <- err
	}()
	time.Sleep(300 * time.Millisecond)
	go func() { done <- refresh() }()
	time.Sleep(300 * time.Millisecond)
	d, err = probe()
	if err != nil || d > 1500*time.Millisecond {
		t.Errorf("analyst B's SELECT * FROM visits LIMIT 0 during a refresh while analyst A reads the public table: %v after %v; want it answered at once, as without A", err, d.Round(time.Millisecond))
	}
	if err := <-done; err != nil {
		t.Errorf("the refresh during A's read failed: %v; want it to replace the rows without waiting for A", err)
	}
	<-aDone
	if n := rebuilds.Load(); n != 1 {
		t.Errorf("%d rebuilds, want only the first build (the refreshes replace rows)", n)
	}
	// A row added upstream reaches the shadow at the next refresh.
	if err := pgtest.Exec(ctx, up, `INSERT INTO regions VALUES ('island', 6000)`); err != nil {
		t.Fatal(err)
	}
	if err := refresh(); err != nil {
		t.Fatal(err)
	}
	rows, err := execAll(t, b, "SELECT population FROM regions WHERE region = 'island'")
	if err != nil || len(rows) == 0 {
		t.Errorf("the refreshed public table: %v %v, want the new row", rows, err)
	}
}
