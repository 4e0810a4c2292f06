package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The shadow connection pool seen from clients (shadowpool.go,
// internal/shadow "Connection pooling").

const showShadowSettings = "SELECT current_setting('TimeZone') || '|' || current_setting('extra_float_digits') || '|' || current_setting('application_name')"

func oneValue(t *testing.T, pc *pgconn.PgConn, sql string) string {
	t.Helper()
	res, err := execAll(t, pc, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	last := res[len(res)-1]
	if len(last.Rows) != 1 {
		t.Fatalf("%s: %d rows", sql, len(last.Rows))
	}
	return string(last.Rows[0][0])
}

// TestShadowPool_SessionsKeepTheirState: two sessions share one shadow
// connection; each sees its own settings (start-up parameters as JDBC
// sends them, SET, SET LOCAL in a transaction, ROLLBACK), and a named
// prepared statement of one survives the other's use of the connection.
func TestShadowPool_SessionsKeepTheirState(t *testing.T) {
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.ShadowMaxConns = 1 }})
	ctx := ctxT(t)
	cfg, err := pgconn.ParseConfig(ts.dsn("alice", "alice", "hospital"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["extra_float_digits"] = "3"
	cfg.RuntimeParams["application_name"] = "PostgreSQL JDBC Driver"
	jdbc, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer jdbc.Close(context.Background())
	other := ts.connect(t)

	if got := oneValue(t, jdbc, showShadowSettings); got != "UTC|3|PostgreSQL JDBC Driver" {
		t.Fatalf("JDBC-like session: %s, want its start-up parameters", got)
	}
	if got := oneValue(t, other, "SET TimeZone = 'Europe/Paris'; SET extra_float_digits = 0; "+showShadowSettings); got != "Europe/Paris|0|" {
		t.Fatalf("second session: %s, want Europe/Paris|0|", got)
	}
	if got := oneValue(t, jdbc, showShadowSettings); got != "UTC|3|PostgreSQL JDBC Driver" {
		t.Fatalf("JDBC-like session after the other used the shadow connection: %s", got)
	}
	// A named prepared statement (the proxy's) outlives the other
	// session's use of the one shadow connection.
	if _, err := jdbc.Prepare(ctx, "s1", "SELECT current_setting('TimeZone') WHERE $1::int > 0", nil); err != nil {
		t.Fatal(err)
	}
	// SET LOCAL inside a transaction, then ROLLBACK.
	if got := oneValue(t, other, "BEGIN; SET LOCAL TimeZone = 'Asia/Tokyo'; SELECT current_setting('TimeZone')"); got != "Asia/Tokyo" {
		t.Fatalf("SET LOCAL in a transaction: %s", got)
	}
	res := jdbc.ExecPrepared(ctx, "s1", [][]byte{[]byte("1")}, nil, nil).Read()
	if res.Err != nil || len(res.Rows) != 1 || string(res.Rows[0][0]) != "UTC" {
		t.Fatalf("prepared statement of the JDBC-like session: %v %v", res.Err, res.Rows)
	}
	if got := oneValue(t, other, "SELECT current_setting('TimeZone')"); got != "Asia/Tokyo" {
		t.Fatalf("in the transaction after the other session's statement: %s", got)
	}
	if got := oneValue(t, other, "ROLLBACK; SELECT current_setting('TimeZone')"); got != "Europe/Paris" {
		t.Fatalf("after ROLLBACK: %s, want Europe/Paris", got)
	}
	if got := oneValue(t, other, "RESET ALL; "+showShadowSettings); got != "UTC|1|" {
		t.Fatalf("after RESET ALL: %s, want the defaults UTC|1|", got)
	}
	if st := ts.srv.shadowPool(ts.srv.cfg.Datasets["hospital"]).Stats(); st.Opened != 1 {
		t.Errorf("%d shadow connections opened for two sessions with a pool of one, want 1", st.Opened)
	}
}

// TestShadowPool_Exhausted: with every shadow connection busy (another
// analyst's), a catalog statement waits ShadowAcquireTimeout and then
// fails with 53300 and a hint; the session goes on, and works once a
// connection is free.
func TestShadowPool_Exhausted(t *testing.T) {
	shadow := shadowDB(t)
	if err := pgtest.Exec(context.Background(), shadow, "CREATE TABLE other.blocker (x int)"); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, serverOpts{shadowDSN: shadow, mutate: func(c *Config) {
		c.ShadowMaxConns, c.ShadowAcquireTimeout = 1, 300*time.Millisecond
	}})
	ctx := ctxT(t)
	locker, err := pgx.Connect(ctx, shadow)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "LOCK TABLE other.blocker IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	// The one shadow connection waits on the lock, held by bob.
	busy := ts.connectAs(t, "bob", "bob-secret", "hospital")
	done := make(chan error, 1)
	go func() {
		_, err := busy.Exec(context.Background(), "SELECT count(*) FROM other.blocker").ReadAll()
		done <- err
	}()
	pool := ts.srv.shadowPool(ts.srv.cfg.Datasets["hospital"])
	for deadline := time.Now().Add(10 * time.Second); pool.Stats().Open-pool.Stats().Idle < 1; {
		if time.Now().After(deadline) {
			t.Fatal("the blocked statement did not take the shadow connection")
		}
		time.Sleep(10 * time.Millisecond)
	}

	pc := ts.connect(t)
	start := time.Now()
	_, err = execAll(t, pc, "SELECT 1")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53300" || !strings.Contains(pe.Message, "catalog connections") || !strings.Contains(pe.Hint, "shadow_max_connections") {
		t.Fatalf("catalog statement with the pool exhausted: %#v, want 53300 with a hint", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("53300 after %v, before the acquire timeout (300ms)", d)
	}
	// The session is fine: the proxy answers, and the catalog once free.
	if got := oneValue(t, pc, "SHOW dp.epsilon"); got == "" {
		t.Fatal("SHOW dp.epsilon after 53300: empty")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the blocked statement: %v", err)
	}
	if got := oneValue(t, pc, "SELECT 2"); got != "2" {
		t.Fatalf("SELECT 2 after the pool freed up: %s", got)
	}
	if st := pool.Stats(); st.Exhausted != 1 || st.Opened != 1 {
		t.Errorf("pool stats %+v, want 1 exhausted and 1 opened", st)
	}
}

// TestShadowPool_ManySessions: 150 concurrent sessions with their own
// settings run catalog statements through the proxy, whose shadow role is
// limited to 20 connections (as a shadow cluster with max_connections 20
// would be) and whose pool has 20: every statement succeeds with the
// session's own settings.
func TestShadowPool_ManySessions(t *testing.T) {
	super := shadowDB(t)
	u, err := url.Parse(super)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	role := fmt.Sprintf("shadowpool_%d", os.Getpid())
	ctx := ctxT(t)
	if err := pgtest.Exec(ctx, super,
		"DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize(),
		"CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN PASSWORD 'pw' CONNECTION LIMIT 20",
		"GRANT CONNECT ON DATABASE "+pgx.Identifier{db}.Sanitize()+" TO "+pgx.Identifier{role}.Sanitize(),
	); err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "pw")
	ts := startServer(t, serverOpts{shadowDSN: u.String(), mutate: func(c *Config) {
		c.ShadowMaxConns, c.ShadowAcquireTimeout, c.MaxConnections, c.MaxConnectionsPerAnalyst = 20, 30*time.Second, 200, 200
	}})
	t.Cleanup(func() {
		// Before the database is dropped: stop the server (its pool
		// closes), then drop the role.
		ts.stop()
		_ = pgtest.Exec(context.Background(), super,
			"REVOKE ALL ON DATABASE "+pgx.Identifier{db}.Sanitize()+" FROM "+pgx.Identifier{role}.Sanitize(),
			"DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize())
	})

	const sessions, statements = 150, 5
	conns := make([]*pgconn.PgConn, sessions)
	var wg sync.WaitGroup
	var failures atomic.Int64
	errs := make(chan error, 2*sessions)
	fail := func(err error) {
		failures.Add(1)
		errs <- err
	}
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pgconn.Connect(ctx, ts.dsn("alice", "alice", "hospital"))
			if err != nil {
				fail(err)
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close(context.Background())
			}
		}
	}()
	if failures.Load() > 0 {
		t.Fatalf("connecting: %v", <-errs)
	}
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			digits := fmt.Sprint(i%4 - 1)
			app := fmt.Sprintf("s%d", i)
			if _, err := c.Exec(ctx, "SET extra_float_digits = "+digits+"; SET application_name = '"+app+"'").ReadAll(); err != nil {
				fail(err)
				return
			}
			for j := 0; j < statements; j++ {
				res, err := c.Exec(ctx, "SELECT current_setting('extra_float_digits') || ' ' || current_setting('application_name') FROM pg_class WHERE relname = 'visits'").ReadAll()
				if err != nil {
					fail(fmt.Errorf("session %d: %w", i, err))
					return
				}
				if got, want := string(res[0].Rows[0][0]), digits+" "+app; got != want {
					fail(fmt.Errorf("session %d saw %q, want its own %q", i, got, want))
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d sessions failed, first: %v", n, sessions, <-errs)
	}
	if st := ts.srv.shadowPool(ts.srv.cfg.Datasets["hospital"]).Stats(); st.Opened > 20 {
		t.Errorf("pool stats %+v: more than 20 shadow connections", st)
	}
}

// TestShadowPool_AnalystShare: one analyst's sessions hold at most
// ShadowMaxConnsPerAnalyst shadow connections; their next catalog
// statement waits for one of them and fails with 53300 and a hint naming
// the share, while another analyst's catalog statements are answered.
func TestShadowPool_AnalystShare(t *testing.T) {
	shadow := shadowDB(t)
	if err := pgtest.Exec(context.Background(), shadow, "CREATE TABLE other.blocker (x int)", "GRANT SELECT ON other.blocker TO PUBLIC"); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, serverOpts{shadowDSN: shadow, mutate: func(c *Config) {
		c.ShadowMaxConns, c.ShadowMaxConnsPerAnalyst, c.ShadowAcquireTimeout = 4, 2, 300*time.Millisecond
	}})
	ctx := ctxT(t)
	locker, err := pgx.Connect(ctx, shadow)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "LOCK TABLE other.blocker IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	// alice's two sessions each wait on the lock, holding her share.
	done := make(chan error, 2)
	for i := 0; i < 2; i++ {
		busy := ts.connect(t)
		go func() {
			_, err := busy.Exec(context.Background(), "SELECT count(*) FROM other.blocker").ReadAll()
			done <- err
		}()
	}
	pool := ts.srv.shadowPool(ts.srv.cfg.Datasets["hospital"])
	for deadline := time.Now().Add(10 * time.Second); pool.Stats().Open-pool.Stats().Idle < 2; {
		if time.Now().After(deadline) {
			t.Fatal("alice's blocked statements did not take two shadow connections")
		}
		time.Sleep(10 * time.Millisecond)
	}
	third := ts.connect(t)
	_, err = execAll(t, third, "SELECT 1")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53300" || !strings.Contains(pe.Message, "your catalog connections") || !strings.Contains(pe.Hint, "2 of the 4") {
		t.Fatalf("alice's third catalog statement: %#v, want 53300 naming her share", err)
	}
	// bob is not held up by alice.
	bob := ts.connectAs(t, "bob", "bob-secret", "hospital")
	for i := 0; i < 5; i++ {
		if got := oneValue(t, bob, "SELECT current_user IS NOT NULL"); got != "t" {
			t.Fatalf("bob's catalog statement: %s", got)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Fatalf("alice's blocked statement: %v", err)
		}
	}
	if got := oneValue(t, third, "SELECT 2"); got != "2" {
		t.Fatalf("alice's SELECT 2 once her statements ended: %s", got)
	}
	if st := pool.Stats(); st.OwnerLimited != 1 || st.Exhausted != 0 {
		t.Errorf("pool stats %+v, want 1 owner-limited, 0 exhausted", st)
	}
}
