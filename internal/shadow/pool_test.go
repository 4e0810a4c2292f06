package shadow

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
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgproto3"
)

// poolRole creates a login role with a connection limit (like a shadow
// cluster's max_connections, but for this role only) and returns its DSN
// to the database of superDSN.
func poolRole(t *testing.T, superDSN string, connLimit int) string {
	t.Helper()
	role := fmt.Sprintf("pool_%d_%s", os.Getpid(), strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name())))
	if len(role) > 60 {
		role = role[:60]
	}
	ctx := context.Background()
	if err := pgtest.Exec(ctx, superDSN,
		fmt.Sprintf("DROP ROLE IF EXISTS %s", ident(role)),
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD 'pw' CONNECTION LIMIT %d", ident(role), connLimit),
	); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(superDSN)
	if err != nil {
		t.Fatal(err)
	}
	if err := pgtest.Exec(ctx, superDSN, "GRANT CONNECT, TEMP ON DATABASE "+ident(strings.TrimPrefix(u.Path, "/"))+" TO "+ident(role)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The database (and its connections) is dropped after this runs
		// (cleanups run last-in first-out), so end the sessions first.
		_ = pgtest.Exec(context.Background(), superDSN,
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = "+literal(role),
		)
		for i := 0; i < 50; i++ {
			if err := pgtest.Exec(context.Background(), superDSN, "REVOKE ALL ON DATABASE "+ident(strings.TrimPrefix(u.Path, "/"))+" FROM "+ident(role), "DROP ROLE IF EXISTS "+ident(role)); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	u.User = url.UserPassword(role, "pw")
	return u.String()
}

func newPool(t *testing.T, cfg PoolConfig) *Pool {
	t.Helper()
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// pooledScalar runs a one-value query on a pooled connection.
func pooledScalar(t *testing.T, c *Conn, sql string) string {
	t.Helper()
	res, err := c.PgConn().Exec(ctxT(t), sql).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return string(res[0].Rows[0][0])
}

func TestPool_ReuseAndExhaustion(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	p := newPool(t, PoolConfig{DSN: dsn, MaxConns: 2, AcquireTimeout: 300 * time.Millisecond})
	ctx := ctxT(t)
	a, err := p.Acquire(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Acquire(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if a.PgConn().PID() == b.PgConn().PID() {
		t.Fatal("two acquisitions share a backend")
	}
	start := time.Now()
	if _, err := p.Acquire(ctx, ""); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("third Acquire of a pool of 2 = %v, want ErrPoolExhausted", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("ErrPoolExhausted after %v, want after the acquire timeout (300ms)", d)
	}
	// A waiter gets the connection released while it waits.
	pidA := a.PgConn().PID()
	go func() {
		time.Sleep(50 * time.Millisecond)
		p.Release(a, true)
	}()
	c, err := p.Acquire(ctx, "")
	if err != nil {
		t.Fatalf("Acquire while a connection is released: %v", err)
	}
	if c.PgConn().PID() != pidA {
		t.Errorf("the waiter got backend %d, want the released %d", c.PgConn().PID(), pidA)
	}
	p.Release(c, true)
	p.Release(b, true)
	st := p.Stats()
	if st.Open != 2 || st.Idle != 2 || st.Opened != 2 || st.Exhausted != 1 || st.Waited != 2 {
		t.Errorf("Stats() = %+v, want 2 open, 2 idle, 2 opened, 1 exhausted, 2 waited", st)
	}
	p.Close()
	if _, err := p.Acquire(ctx, ""); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Acquire after Close = %v, want ErrPoolClosed", err)
	}
	if st := p.Stats(); st.Open != 0 {
		t.Errorf("after Close: %d connections open", st.Open)
	}
}

func TestPool_StateIsNotShared(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	p := newPool(t, PoolConfig{DSN: dsn, MaxConns: 1})
	ctx := ctxT(t)

	// A connection with an open transaction is not pooled.
	c, err := p.Acquire(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	pid := c.PgConn().PID()
	if _, err := c.PgConn().Exec(ctx, "BEGIN; SELECT 1").ReadAll(); err != nil {
		t.Fatal(err)
	}
	if !c.HasState() {
		t.Fatal("HasState() = false inside a transaction")
	}
	p.Release(c, true)
	if !c.PgConn().IsClosed() {
		t.Fatal("a connection released inside a transaction was not closed")
	}
	c, err = p.Acquire(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.PgConn().PID() == pid || c.HasState() {
		t.Fatalf("got backend %d (state %v) after releasing %d inside a transaction; want a fresh one", c.PgConn().PID(), c.HasState(), pid)
	}
	// Read-only: not even a temporary table can be made.
	if _, err := c.PgConn().Exec(ctx, "CREATE TEMP TABLE t (x int)").ReadAll(); !isSQLState(err, "25006") {
		t.Errorf("CREATE TEMP TABLE on a pooled connection: %v, want 25006 (read-only transaction)", err)
	}
	// A connection released as not reusable (a cancelled statement) is
	// closed.
	p.Release(c, false)
	if !c.PgConn().IsClosed() {
		t.Fatal("a connection released as not reusable was not closed")
	}
	if st := p.Stats(); st.Open != 0 || st.Opened != 2 {
		t.Errorf("Stats() = %+v, want 0 open, 2 opened", st)
	}
}

func TestConn_Apply(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	p := newPool(t, PoolConfig{DSN: dsn, MaxConns: 1, Configure: func(c *pgconn.Config) {
		c.RuntimeParams["application_name"] = "pooltest"
	}})
	ctx := ctxT(t)
	c, err := p.Acquire(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	sessionA := []Setting{{"TimeZone", "Asia/Tokyo"}, {"extra_float_digits", "3"}, {"application_name", "PostgreSQL JDBC Driver"}}
	if err := c.Apply(ctx, sessionA); err != nil {
		t.Fatal(err)
	}
	const show = "SELECT current_setting('TimeZone') || '|' || current_setting('extra_float_digits') || '|' || current_setting('application_name')"
	if got := pooledScalar(t, c, show); got != "Asia/Tokyo|3|PostgreSQL JDBC Driver" {
		t.Fatalf("after Apply: %s", got)
	}
	p.Release(c, true)

	// The next holder, with other values, gets its own.
	c, err = p.Acquire(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, []Setting{{"TimeZone", "UTC"}, {"extra_float_digits", "1"}}); err != nil {
		t.Fatal(err)
	}
	// application_name was not asked for: back to the connection's own.
	if got := pooledScalar(t, c, show); got != "UTC|1|pooltest" {
		t.Fatalf("second holder: %s, want UTC|1|pooltest", got)
	}
	// Apply sends only what differs from what it last set: a value changed
	// behind its back (which nothing does in the proxy) stays, and the
	// connection, no longer in the state Apply left, is closed at Release.
	if c.Changed() {
		t.Fatal("Changed() after Apply alone")
	}
	if _, err := c.PgConn().Exec(ctx, "SET TimeZone = 'Europe/Paris'").ReadAll(); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, []Setting{{"TimeZone", "UTC"}, {"extra_float_digits", "1"}}); err != nil {
		t.Fatal(err)
	}
	if got := pooledScalar(t, c, "SELECT current_setting('TimeZone')"); got != "Europe/Paris" {
		t.Fatalf("Apply of unchanged settings sent something: TimeZone %s", got)
	}
	if !c.Changed() {
		t.Fatal("Changed() = false after a SET behind Apply's back")
	}
	p.Release(c, true)
	if !c.PgConn().IsClosed() {
		t.Fatal("a connection whose TimeZone changed behind Apply's back was pooled")
	}
	if c, err = p.Acquire(ctx, ""); err != nil {
		t.Fatal(err)
	}
	// The pool's own settings are not Apply's.
	if err := c.Apply(ctx, []Setting{{"statement_timeout", "1ms"}}); err == nil || !strings.Contains(err.Error(), "statement_timeout") {
		t.Fatalf("Apply of statement_timeout = %v, want a refusal", err)
	}
	// A value the server refuses: the others are applied, the error names
	// the setting, the connection still works.
	err = c.Apply(ctx, []Setting{{"TimeZone", "Mars/Olympus_Mons"}, {"extra_float_digits", "2"}})
	if err == nil || !strings.Contains(err.Error(), "TimeZone") {
		t.Fatalf("Apply of a bad TimeZone = %v, want an error naming TimeZone", err)
	}
	if got := pooledScalar(t, c, "SELECT current_setting('extra_float_digits')"); got != "2" {
		t.Errorf("extra_float_digits = %s after a partly refused Apply, want 2", got)
	}
	p.Release(c, true)
	if st := p.Stats(); st.Opened != 2 || st.Open != 1 {
		t.Errorf("Stats() = %+v, want 2 opened (the first closed for its changed TimeZone), 1 open", st)
	}
}

func isSQLState(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// TestPool_KnownState: connections open read-only with the pool's
// statement_timeout, lock_timeout and idle_in_transaction_session_timeout;
// a statement over the timeout fails with 57014 and leaves its connection
// reusable.
func TestPool_KnownState(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	p := newPool(t, PoolConfig{DSN: dsn, MaxConns: 1, StatementTimeout: 300 * time.Millisecond, Configure: func(c *pgconn.Config) {
		// Configure cannot undo the pool's state.
		c.RuntimeParams["default_transaction_read_only"] = "off"
		c.RuntimeParams["statement_timeout"] = "0"
	}})
	ctx := ctxT(t)
	c, err := p.Acquire(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	const show = "SELECT current_setting('default_transaction_read_only') || ' ' || current_setting('statement_timeout') || ' ' || current_setting('lock_timeout') || ' ' || current_setting('idle_in_transaction_session_timeout')"
	if got := pooledScalar(t, c, show); got != "on 300ms 150ms 300ms" {
		t.Fatalf("pooled connection's settings: %s, want on 300ms 150ms 300ms", got)
	}
	pid := c.PgConn().PID()
	start := time.Now()
	_, err = c.PgConn().Exec(ctx, "SELECT count(*) FROM pg_attribute a, pg_attribute b, pg_attribute c").ReadAll()
	if !isSQLState(err, "57014") {
		t.Fatalf("a statement over the timeout: %v, want 57014", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the statement ran %v under a 300ms statement_timeout", d)
	}
	p.Release(c, true)
	if c, err = p.Acquire(ctx, ""); err != nil {
		t.Fatal(err)
	}
	defer p.Release(c, true)
	if c.PgConn().PID() != pid {
		t.Errorf("the connection whose statement timed out was not reused")
	}
	if p.StatementTimeout() != 300*time.Millisecond {
		t.Errorf("StatementTimeout() = %v", p.StatementTimeout())
	}
}

// TestPool_OwnerShare: an owner holds at most MaxConnsPerOwner
// connections; its next Acquire waits for one of its own and fails with
// ErrOwnerLimit after AcquireTimeout, while other owners get connections.
func TestPool_OwnerShare(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	p := newPool(t, PoolConfig{DSN: dsn, MaxConns: 4, MaxConnsPerOwner: 2, AcquireTimeout: 300 * time.Millisecond})
	ctx := ctxT(t)
	acquire := func(owner string) *Conn {
		t.Helper()
		c, err := p.Acquire(ctx, owner)
		if err != nil {
			t.Fatalf("Acquire(%q): %v", owner, err)
		}
		return c
	}
	a1, a2 := acquire("alice"), acquire("alice")
	start := time.Now()
	if _, err := p.Acquire(ctx, "alice"); !errors.Is(err, ErrOwnerLimit) {
		t.Fatalf("alice's third Acquire = %v, want ErrOwnerLimit", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("ErrOwnerLimit after %v, want after the acquire timeout", d)
	}
	b1, b2 := acquire("bob"), acquire("bob")
	// alice waits for one of her own, not for the pool.
	go func() {
		time.Sleep(50 * time.Millisecond)
		p.Release(a1, true)
	}()
	a3 := acquire("alice")
	if a3 != a1 {
		t.Errorf("alice's waiting Acquire got another connection than the one she released")
	}
	// Uncounted callers ("") are bound by the pool only.
	p.Release(b1, true)
	c := acquire("")
	for _, x := range []*Conn{a2, a3, b2, c} {
		p.Release(x, true)
	}
	if st := p.Stats(); st.OwnerLimited != 1 || st.Exhausted != 0 || st.Opened != 4 {
		t.Errorf("Stats() = %+v, want 1 owner-limited, 0 exhausted, 4 opened", st)
	}
	if got := p.MaxConnsPerOwner(); got != 2 {
		t.Errorf("MaxConnsPerOwner() = %d", got)
	}
	// The default share is a quarter of the pool, at least one.
	for _, tc := range []struct{ max, want int }{{20, 5}, {3, 1}, {1, 1}} {
		q, err := NewPool(PoolConfig{DSN: dsn, MaxConns: tc.max})
		if err != nil {
			t.Fatal(err)
		}
		if got := q.MaxConnsPerOwner(); got != tc.want {
			t.Errorf("MaxConns %d: default share %d, want %d", tc.max, got, tc.want)
		}
		q.Close()
	}
}

// TestPool_OwnerShareHandoff: a release by an owner at its share hands
// the share to the owner's oldest waiter, and to that one only; a waiter
// that gives up leaves the line; when nobody waits, the count goes down.
func TestPool_OwnerShareHandoff(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	p := newPool(t, PoolConfig{DSN: dsn, MaxConns: 4, MaxConnsPerOwner: 1, AcquireTimeout: time.Minute})
	ctx := ctxT(t)
	waiters := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.waiting["alice"])
	}
	waitFor := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); waiters() != n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d waiters, want %d", waiters(), n)
			}
		}
	}
	first, err := p.Acquire(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		c   *Conn
		err error
	}
	results := make([]chan got, 3)
	cancelSecond, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range results {
		results[i] = make(chan got, 1)
		wctx := ctx
		if i == 1 {
			wctx = cancelSecond
		}
		go func() {
			c, err := p.Acquire(wctx, "alice")
			results[i] <- got{c, err}
		}()
		waitFor(i + 1) // in line in this order
	}
	cancel()
	if r := <-results[1]; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the cancelled waiter got %v, %v", r.c, r.err)
	}
	waitFor(2)
	p.Release(first, true)
	r0 := <-results[0]
	if r0.err != nil {
		t.Fatalf("the oldest waiter: %v", r0.err)
	}
	select {
	case r := <-results[2]:
		t.Fatalf("the younger waiter was served too (%v, %v) while alice holds her share", r.c, r.err)
	default:
	}
	if waiters() != 1 {
		t.Errorf("%d waiters after one hand-off, want 1", waiters())
	}
	p.Release(r0.c, true)
	r2 := <-results[2]
	if r2.err != nil {
		t.Fatalf("the last waiter: %v", r2.err)
	}
	p.Release(r2.c, true)
	p.mu.Lock()
	held, waiting := len(p.held), len(p.waiting)
	p.mu.Unlock()
	if held != 0 || waiting != 0 {
		t.Errorf("after every release: %d owners counted, %d waiting, want none", held, waiting)
	}
}

func TestPool_BrokenIdleConnectionReplaced(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	p := newPool(t, PoolConfig{DSN: dsn, MaxConns: 1})
	ctx := ctxT(t)
	c, err := p.Acquire(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	pid := c.PgConn().PID()
	p.Release(c, true)
	// The server ends the idle connection (a restart, an administrator).
	if err := pgtest.Exec(ctx, dsn, fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond) // idle long enough to be checked
	c, err = p.Acquire(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(c, true)
	if c.PgConn().PID() == pid {
		t.Fatal("Acquire handed out the connection the server closed")
	}
	if got := pooledScalar(t, c, "SELECT 1"); got != "1" {
		t.Fatalf("SELECT 1 = %s", got)
	}
}

// TestPool_IdleConnectionReusedQuickly: a connection idle for over a
// second is checked and handed out at once, with the proxy's context
// watcher (cancel requests, 5s deadline) configured. A check through a
// short context (CheckConn) would send a cancel request and wait for the
// watcher's deadline.
func TestPool_IdleConnectionReusedQuickly(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	p := newPool(t, PoolConfig{DSN: dsn, MaxConns: 1, Configure: func(c *pgconn.Config) {
		c.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 5 * time.Second}
		}
	}})
	ctx := ctxT(t)
	c, err := p.Acquire(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	pid := c.PgConn().PID()
	p.Release(c, true)
	time.Sleep(1200 * time.Millisecond)
	start := time.Now()
	if c, err = p.Acquire(ctx, ""); err != nil {
		t.Fatal(err)
	}
	defer p.Release(c, true)
	if d := time.Since(start); d > time.Second {
		t.Errorf("Acquire of a connection idle for 1.2s took %v", d)
	}
	if c.PgConn().PID() != pid {
		t.Errorf("got backend %d, want the idle %d (it is alive)", c.PgConn().PID(), pid)
	}
}

// TestPool_ManySessionsFewConnections: 150 concurrent sessions, each with
// its own settings, run catalog statements through a pool of 20 against a
// role limited to 20 connections (as a shadow cluster with
// max_connections 20 would be): all succeed, each sees its own settings.
func TestPool_ManySessionsFewConnections(t *testing.T) {
	super := pgtest.NewDatabase(t)
	dsn := poolRole(t, super, 20)
	ctx := ctxT(t)
	// The limit is real: a 21st direct connection is refused.
	var direct []*pgconn.PgConn
	defer func() {
		for _, c := range direct {
			c.Close(context.Background())
		}
	}()
	for i := 0; i < 20; i++ {
		c, err := pgconn.Connect(ctx, dsn)
		if err != nil {
			t.Fatalf("direct connection %d: %v", i+1, err)
		}
		direct = append(direct, c)
	}
	if c, err := pgconn.Connect(ctx, dsn); err == nil {
		c.Close(ctx)
		t.Fatal("a 21st connection of a role limited to 20 succeeded; the test would prove nothing")
	}
	for _, c := range direct {
		c.Close(ctx)
	}
	direct = nil
	// Backends exit a moment after their client's Terminate: wait until
	// the role's limit is free again.
	u, _ := url.Parse(dsn)
	for deadline := time.Now().Add(30 * time.Second); ; {
		conn, err := pgconn.Connect(ctx, super)
		if err != nil {
			t.Fatal(err)
		}
		res, err := conn.Exec(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = "+literal(u.User.Username())).ReadAll()
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(res[0].Rows[0][0]) == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s backends of the role still there 30s after their clients closed", res[0].Rows[0][0])
		}
		time.Sleep(20 * time.Millisecond)
	}

	p := newPool(t, PoolConfig{DSN: dsn, MaxConns: 20, AcquireTimeout: 30 * time.Second})
	const sessions, statements = 150, 8
	var wg sync.WaitGroup
	var failures atomic.Int64
	errs := make(chan error, sessions)
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			digits := fmt.Sprint(i%4 - 1) // -1..2
			want := []Setting{{"extra_float_digits", digits}, {"application_name", fmt.Sprintf("s%d", i)}}
			for j := 0; j < statements; j++ {
				c, err := p.Acquire(ctx, "")
				if err != nil {
					failures.Add(1)
					errs <- err
					return
				}
				err = c.Apply(ctx, want)
				var res []*pgconn.Result
				if err == nil {
					res, err = c.PgConn().Exec(ctx, "SELECT current_setting('extra_float_digits') || ' ' || current_setting('application_name') FROM pg_class WHERE relname = 'pg_class'").ReadAll()
				}
				p.Release(c, true)
				if err == nil {
					if got, w := string(res[0].Rows[0][0]), digits+" "+want[1].Value; got != w {
						err = fmt.Errorf("session %d saw %q, want its own %q", i, got, w)
					}
				}
				if err != nil {
					failures.Add(1)
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d sessions failed, first: %v", n, sessions, <-errs)
	}
	if st := p.Stats(); st.Opened > 20 || st.Open > 20 {
		t.Errorf("Stats() = %+v: more than 20 connections", st)
	}
}

// TestPool_ClosedConnectionsBackendEnds: a connection the pool gives up
// on while its statement runs (the proxy's deadline, attack round 78)
// takes its backend with it within a few seconds, even when the statement
// would run on (here statement_timeout was lifted on the connection, as
// the attack did through a hole in the catalog allow-list): the pool's
// connections check that their client is still there
// (client_connection_check_interval), so the shadow's backends stay
// within the pool's bound.
func TestPool_ClosedConnectionsBackendEnds(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	p := newPool(t, PoolConfig{DSN: dsn, MaxConns: 1})
	ctx := ctxT(t)
	c, err := p.Acquire(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := pooledScalar(t, c, "SELECT current_setting('client_connection_check_interval')"); got != "1s" {
		t.Fatalf("client_connection_check_interval = %s, want 1s", got)
	}
	pid := c.PgConn().PID()
	if _, err := c.PgConn().Exec(ctx, "SET statement_timeout = 0").ReadAll(); err != nil {
		t.Fatal(err)
	}
	// The proxy's relay writes the statement on the socket itself
	// (proxy/relay.go), and closes it at its deadline without pgconn
	// (whose own close would send a CancelRequest first).
	hc, err := c.PgConn().Hijack()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(c, false)
	msg, err := (&pgproto3.Query{String: "SELECT pg_sleep(60)"}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hc.Conn.Write(msg); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	state := func() string {
		var s string
		err := admin.QueryRow(ctx, "SELECT coalesce(max(state), 'gone') FROM pg_stat_activity WHERE pid = $1", pid).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for i := 0; state() != "active"; i++ {
		if i > 100 {
			t.Fatal("the statement did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The pool's deadline: the connection is closed, not its statement
	// cancelled (as when the shadow does not answer a cancel in time).
	_ = hc.Conn.Close()
	start := time.Now()
	for state() != "gone" {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the backend of the closed connection still runs its statement after %v", time.Since(start).Round(time.Second))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("backend gone %v after its connection was closed", time.Since(start).Round(10*time.Millisecond))
}
