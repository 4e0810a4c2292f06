package integration

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestAttack98_SIGTERMWithStatementsInFlight (attack round 98: the
// lifecycle of a statement). The proxy receives SIGTERM while two
// analysts' DP statements are charged and not yet answered:
//
//   - a98's query waits upstream on a lock the steward holds;
//   - b98's query has been answered upstream and waits for the end of its
//     time slot (response_time 20 s, past the 10 s drain deadline).
//
// What must hold: neither is suspended nor has an incident (a shutdown is
// an availability failure, SECURITY.md G5); each charge stands and the
// ledger says which ones were answered: an answer the analyst received is
// on a released charge row, and a charge left reserved was not answered
// (rule 2: no answer lost, or shown, without the ledger saying so); no
// answer is shown before its publish time (G5: the slot hides when the
// upstream finished); `dpproxy ledger verify` is clean.
func TestAttack98_SIGTERMWithStatementsInFlight(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		cfg["analysts"].(map[string]any)["a98"] = map[string]any{"password": "plain:a98"}
		cfg["analysts"].(map[string]any)["b98"] = map[string]any{"password": "plain:b98"}
		cfg["datasets"].(map[string]any)["hospital"].(map[string]any)["response_time"] = "20s"
	})
	p := startProxy(t, cfgPath, addr)
	ledger := connect(t, ctx, ledgerDSN())
	before := lastChargeID(t, ctx, ledger)

	unlock := lockTable(t, ctx, "patients")
	aDone := queryInBackground(ctx, p.dsn("a98"),
		"SELECT COUNT(*) FROM patients WHERE region = 'east' AND birth_year > 1941")
	aID, st := waitForCharge(t, ctx, ledger, "a98", before)
	if st != "reserved" {
		t.Fatalf("a98's charge %d is %s while the lock holds", aID, st)
	}

	type outcome struct {
		n   int64
		err error
		at  time.Time
	}
	bDone := make(chan outcome, 1)
	bStart := time.Now()
	go func() {
		c, err := pgx.Connect(ctx, p.dsn("b98"))
		if err != nil {
			bDone <- outcome{err: err, at: time.Now()}
			return
		}
		defer c.Close(context.Background())
		var n int64
		err = c.QueryRow(ctx, "SELECT COUNT(*) FROM visits WHERE diagnosis = 'flu'").Scan(&n)
		bDone <- outcome{n: n, err: err, at: time.Now()}
	}()
	bID, _ := waitForCharge(t, ctx, ledger, "b98", before)
	time.Sleep(500 * time.Millisecond) // its upstream query (no lock on visits) is done

	sigAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var aErr error
	select {
	case aErr = <-aDone:
	case <-time.After(40 * time.Second):
		t.Fatal("a98's statement got no reply within 40 s of SIGTERM")
	}
	b := <-bDone
	t.Logf("a98 after %v: %v", time.Since(sigAt).Round(time.Millisecond), aErr)
	t.Logf("b98 after %v (started %v before SIGTERM): n=%d err=%v", b.at.Sub(sigAt).Round(time.Millisecond), sigAt.Sub(bStart).Round(time.Millisecond), b.n, b.err)
	select {
	case err := <-p.done:
		p.done <- err
		t.Logf("proxy exit: %v", err)
	case <-time.After(40 * time.Second):
		t.Fatal("proxy did not exit")
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}

	status := func(id int64) string {
		var s string
		if err := ledger.QueryRow(ctx, "SELECT status FROM dpproxy_ledger.charge WHERE id = $1", id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	aStatus, bStatus := status(aID), status(bID)
	t.Logf("ledger: a98 charge %d %s, b98 charge %d %s", aID, aStatus, bID, bStatus)
	for _, an := range []string{"a98", "b98"} {
		var incidents int
		var suspended bool
		if err := ledger.QueryRow(ctx, `SELECT incidents, suspended_at IS NOT NULL FROM dpproxy_ledger.budget
			WHERE dataset = 'hospital' AND analyst = $1`, an).Scan(&incidents, &suspended); err != nil {
			t.Fatal(err)
		}
		if incidents != 0 || suspended {
			t.Errorf("%s after SIGTERM: %d incidents, suspended %v; a shutdown is no incident", an, incidents, suspended)
		}
	}
	if aErr == nil {
		t.Errorf("a98 got an answer while the lock held")
	} else if aStatus != "reserved" {
		t.Errorf("a98 got no answer (%v) but its charge is %s", aErr, aStatus)
	}
	var pe *pgconn.PgError
	if errors.As(aErr, &pe) {
		t.Logf("a98's error: %s %s / %s / %s", pe.Code, pe.Message, pe.Detail, pe.Hint)
	}
	if b.err == nil {
		if bStatus != "released" {
			t.Errorf("b98 received an answer (%d) but the ledger says its charge %d is %s: an answer shown with the ledger saying it was not answered", b.n, bID, bStatus)
		}
		if el := b.at.Sub(bStart); el < 19*time.Second {
			t.Errorf("b98's answer came %v after it was sent, before its 20 s time slot ended", el.Round(time.Millisecond))
		}
	} else if bStatus != "reserved" {
		t.Errorf("b98 got no answer (%v) but its charge is %s", b.err, bStatus)
	}
	out, errOut, code := dpproxyCLI(t, "ledger", "verify", "--config", cfgPath)
	t.Logf("ledger verify (exit %d):\n%s%s", code, out, errOut)
	if code != 0 {
		t.Errorf("ledger verify failed")
	}
}

// TestAttack98_DataServerDownChargesEveryStatement (attack round 98): the
// data PostgreSQL of a dataset is down (stopped for a restart, an upgrade,
// a failover) while the proxy and the ledger are up. Every DP statement is
// charged in the ledger first, and only then does the proxy try to reach
// the data server, which refuses the connection: the analyst gets 58000
// "the data database became unavailable … the budget stays charged", for
// an answer nothing was read for. The failure does not depend on any
// row — no query was sent — yet each retry (a dashboard's refresh, a
// client's reconnect loop) spends ε again until the budget is gone. An
// availability failure known before anything is sent upstream must be
// refused before the charge, as an unreachable ledger is (58000, nothing
// charged).
func TestAttack98_DataServerDownChargesEveryStatement(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	data, _, dataDSN := privateDataCluster(t, ctx)
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		cfg["analysts"].(map[string]any)["c98"] = map[string]any{"password": "plain:c98"}
		ds := cfg["datasets"].(map[string]any)["hospital"].(map[string]any)
		ds["upstream"] = dataDSN
	})
	p := startProxy(t, cfgPath, addr)
	ledger := connect(t, ctx, ledgerDSN())
	session := connect(t, ctx, p.dsn("c98"))
	var n int64
	if err := session.QueryRow(ctx, "SELECT COUNT(*) FROM patients WHERE region = 'north'").Scan(&n); err != nil {
		t.Fatalf("before the outage: %v", err)
	}
	if err := data.Stop(); err != nil {
		t.Fatalf("stop the data cluster: %v", err)
	}
	time.Sleep(1500 * time.Millisecond) // the pool's idle connection is pinged, not handed out

	before := lastChargeID(t, ctx, ledger)
	const tries = 5
	for i := range tries {
		err := session.QueryRow(ctx, "SELECT COUNT(*) FROM patients WHERE region = 'south'").Scan(&n)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			t.Fatalf("try %d while the data server is down: %v, want a PostgreSQL error", i+1, err)
		}
		if i == 0 {
			t.Logf("c98 sees: %s %s / %s / %s", pe.Code, pe.Message, pe.Detail, pe.Hint)
		}
	}
	var charges int
	var spent float64
	if err := ledger.QueryRow(ctx, `SELECT count(*), coalesce(sum(cost_epsilon), 0)::float8 FROM dpproxy_ledger.charge
		WHERE analyst = 'c98' AND id > $1`, before).Scan(&charges, &spent); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d statements while the data server was down: %d charges, ε %.3g spent, nothing read", tries, charges, spent)
	if charges != 0 {
		t.Errorf("%d DP statements sent while the data server refused connections were charged %d times (ε %.3g) for answers nothing was read for", tries, charges, spent)
	}
	out, errOut, code := dpproxyCLI(t, "budget", "show", "--config", cfgPath, "--dataset", "hospital", "--analyst", "c98")
	t.Logf("budget show (exit %d):\n%s%s", code, out, errOut)
}

// TestAttack98_ClientGoneMidStatement (attack round 98, held): the client's
// connection drops while its DP statement waits upstream after the charge.
// The release finishes anyway: its answer is recorded (the charge is
// released, not left unanswered), no incident, and the same query from a
// new session is answered from the cache at no cost.
func TestAttack98_ClientGoneMidStatement(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		cfg["analysts"].(map[string]any)["d98"] = map[string]any{"password": "plain:d98"}
	})
	p := startProxy(t, cfgPath, addr)
	ledger := connect(t, ctx, ledgerDSN())
	before := lastChargeID(t, ctx, ledger)
	const q = "SELECT COUNT(*) FROM patients WHERE region = 'west' AND birth_year > 1943"
	unlock := lockTable(t, ctx, "patients")
	c, err := pgx.Connect(ctx, p.dsn("d98"))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		var n int64
		_ = c.QueryRow(ctx, q).Scan(&n)
	}()
	id, st := waitForCharge(t, ctx, ledger, "d98", before)
	if st != "reserved" {
		t.Fatalf("charge %d %s while the lock holds", id, st)
	}
	_ = c.PgConn().Conn().Close() // the client's socket goes away
	time.Sleep(300 * time.Millisecond)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := ledger.QueryRow(ctx, "SELECT status FROM dpproxy_ledger.charge WHERE id = $1", id).Scan(&st); err != nil {
			t.Fatal(err)
		}
		if st == "released" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st != "released" {
		t.Fatalf("charge %d of the gone client's statement is %s, want released (answer recorded)", id, st)
	}
	c2 := connect(t, ctx, p.dsn("d98"))
	var n int64
	if err := c2.QueryRow(ctx, q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	var charges, incidents int
	if err := ledger.QueryRow(ctx, `SELECT (SELECT count(*) FROM dpproxy_ledger.charge WHERE analyst = 'd98'),
		(SELECT count(*) FROM dpproxy_ledger.incident WHERE analyst = 'd98')`).Scan(&charges, &incidents); err != nil {
		t.Fatal(err)
	}
	if charges != 1 || incidents != 0 {
		t.Fatalf("d98: %d charges, %d incidents; want 1 (the repetition cached) and 0", charges, incidents)
	}
	_ = cfgPath
}
