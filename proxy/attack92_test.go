package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// churnPhase runs work from n sessions of alice for d while bob runs
// SELECT 1 in a loop, and returns how many statements alice ran, how
// many connections the shadow server accepted meanwhile and bob's median
// and 90th-percentile latency.
func churnPhase(t *testing.T, fwd *countingForwarder, bob *pgconn.PgConn, alice []*pgconn.PgConn, d time.Duration, work func(*pgconn.PgConn) error) (stmts, dials int64, bobMed, bobP90 time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+20*time.Second)
	defer cancel()
	var bobTimes []time.Duration
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var n atomic.Int64
	dials0 := fwd.accepted.Load()
	for _, a := range alice {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = work(a)
				n.Add(1)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		start := time.Now()
		if _, err := bob.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
			t.Logf("bob: %v", err)
		}
		bobTimes = append(bobTimes, time.Since(start))
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	return n.Load(), fwd.accepted.Load() - dials0, median(bobTimes), pct(bobTimes, 0.9)
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[int(float64(len(s)-1)*p)]
}

// TestAttack92_RefusedSettingChurnsSharedShadowPool (medium; rule: no
// analyst's statement can change another's resources): a session setting
// the proxy accepts but the shadow refuses (TimeZone '+9999': isOffset lets
// any digits through, PostgreSQL allows ±15:59) makes every catalog
// statement of the session take a pooled shadow connection — the idle one
// another analyst's statement would have reused — fail its Apply and
// close it (acquireShadow's dropShadow). The statement costs the analyst
// nothing (a 22023 refusal, no budget, no rate limit), and its share of
// the pool bounds how many connections it destroys at once, not how many
// a second: every other analyst's next catalog statement finds the idle
// set empty and opens a new shadow connection (a fork, the backend's
// start-up and catalog cache, authentication, nine set_configs) for
// SELECT 1. Control: the same sessions running a valid catalog statement
// as fast.
func TestAttack92_RefusedSettingChurnsSharedShadowPool(t *testing.T) {
	fwd, ts, bob, alice := startChurn92(t)
	ctx := ctxT(t)
	// Does the proxy accept it, and does the shadow refuse it?
	if _, err := alice[0].Exec(ctx, "SET TimeZone = '+9999'").ReadAll(); err != nil {
		t.Fatalf("SET TimeZone: %v", err)
	}
	_, err := alice[0].Exec(ctx, "SELECT 1").ReadAll()
	t.Logf("alice's SELECT 1 under TimeZone '+9999': %v (SQLSTATE %s)", err, sqlstate(err))
	if _, err := alice[0].Exec(ctx, "RESET TimeZone").ReadAll(); err != nil {
		t.Fatal(err)
	}

	const d = 3 * time.Second
	valid := func(a *pgconn.PgConn) error { _, err := a.Exec(ctx, "SELECT 1").ReadAll(); return err }
	cStmts, cDials, cMed, cP90 := churnPhase(t, fwd, bob, alice, d, valid)
	t.Logf("control (alice's %d sessions run SELECT 1): %d statements, %d shadow connections opened; bob's SELECT 1 median %v, p90 %v",
		len(alice), cStmts, cDials, cMed, cP90)

	for _, a := range alice {
		if _, err := a.Exec(ctx, "SET TimeZone = '+9999'").ReadAll(); err != nil {
			t.Fatal(err)
		}
	}
	aStmts, aDials, aMed, aP90 := churnPhase(t, fwd, bob, alice, d, valid)
	t.Logf("attack (TimeZone '+9999' in alice's %d sessions): %d refused statements, %d shadow connections opened (%.0f/s); bob's SELECT 1 median %v, p90 %v",
		len(alice), aStmts, aDials, float64(aDials)/d.Seconds(), aMed, aP90)
	st := ts.srv.shadowPool(ts.srv.cfg.Datasets["hospital"]).Stats()
	t.Logf("pool: %+v", st)
	if aDials > 4*cDials+20 {
		t.Errorf("alice's free, refused catalog statements made the shadow server accept %d connections in %v (%d for as many valid ones), each closing a pooled connection other analysts share; bob's SELECT 1 median %v against %v: a refused setting must not cost the shared pool a connection",
			aDials, d, cDials, aMed, cMed)
	}
}

// TestAttack92_CancelledCatalogStatementsChurnSharedShadowPool (medium;
// the same rule): a catalog statement whose own statement_timeout (1 ms,
// the analyst's SET) ends while it holds a shadow connection has the
// connection closed, not pooled (a late cancel could hit the next
// holder), and one that ends while the pool opens a connection for it
// abandons the half-open connection (pgconn.ConnectConfig under the
// statement's context). Both cost the shadow server a fork (and a cancel
// connection), both are free (57014, nothing charged, no rate limit), and
// the analyst's share bounds how many at once, not how many a second.
// Measured (2-core machine, 8 sessions of alice, 3 s): control, the same
// statement without the timeout: 5 shadow connections, bob's SELECT 1
// median 0.4 ms; with it: 2,800–3,400 shadow connections (about 1,000 a
// second; the pool's Opened moved by 6: nearly all abandoned during
// start-up), and bob's SELECT 1 median 420–590 ms: alice's statements take
// the idle connection bob's last statement left and close it, so each of
// bob's statements opens a new one among alice's forks.
func TestAttack92_CancelledCatalogStatementsChurnSharedShadowPool(t *testing.T) {
	fwd, ts, bob, alice := startChurn92(t)
	ctx := ctxT(t)
	const q = "SELECT count(*) FROM generate_series(1, 200000)"
	const d = 3 * time.Second
	work := func(a *pgconn.PgConn) error { _, err := a.Exec(ctx, q).ReadAll(); return err }
	cStmts, cDials, cMed, cP90 := churnPhase(t, fwd, bob, alice, d, work)
	t.Logf("control (alice's %d sessions run %q): %d statements, %d shadow connections opened; bob's SELECT 1 median %v, p90 %v",
		len(alice), q, cStmts, cDials, cMed, cP90)
	for _, a := range alice {
		if _, err := a.Exec(ctx, "SET statement_timeout = 1").ReadAll(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := alice[0].Exec(ctx, q).ReadAll()
	t.Logf("alice's statement under statement_timeout 1 ms: %v", err)
	aStmts, aDials, aMed, aP90 := churnPhase(t, fwd, bob, alice, d, work)
	t.Logf("attack (statement_timeout 1 ms): %d cancelled statements, %d shadow connections opened (%.0f/s); bob's SELECT 1 median %v, p90 %v",
		aStmts, aDials, float64(aDials)/d.Seconds(), aMed, aP90)
	t.Logf("pool: %+v", ts.srv.shadowPool(ts.srv.cfg.Datasets["hospital"]).Stats())
	// Each closed connection is at most two (its replacement and its
	// cancel): the analyst's bucket, over the phase and its start.
	bound := int64(2*(shadowChurnBurst+shadowChurnPerSecond*(d.Seconds()+1))) + cDials + 10
	if aDials > bound {
		t.Errorf("alice's cancelled catalog statements made the shadow server accept %d connections in %v (%d uncancelled; want at most %d); bob's SELECT 1 median %v against %v",
			aDials, d, cDials, bound, aMed, cMed)
	}
}

// startChurn92 starts a proxy whose shadow connections are counted (fwd),
// bob's session (its shadow connection already pooled) and eight of
// alice's.
func startChurn92(t *testing.T) (*countingForwarder, *testServer, *pgconn.PgConn, []*pgconn.PgConn) {
	t.Helper()
	fwd := newCountingForwarder(t, shadowDB(t))
	ts := startServer(t, serverOpts{shadowDSN: fwd.dsn})
	bob := ts.connectAs(t, "bob", "bob-secret", "hospital")
	if _, err := bob.Exec(ctxT(t), "SELECT 1").ReadAll(); err != nil {
		t.Fatal(err)
	}
	var alice []*pgconn.PgConn
	for i := 0; i < 8; i++ {
		alice = append(alice, ts.connect(t))
	}
	return fwd, ts, bob, alice
}
