package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Issue 37's attack round (on rounds 35 and 36's fixes): each finding a
// failing test that asserts the safe behaviour.

// TestAttack37_CancelledPostFreesDPSlot (high): a post-processing
// statement takes one DP admission slot for all its leaves (execPost:
// c.ticket), and paced does not give that ticket back itself (own is
// false). When the client cancels (CancelRequest, or its own
// statement_timeout) while the leaves run, paced returns 57014 at once and
// leaves the batch running in the background (c.pendingDP), but execPost's
// deferred tk.done() then frees the slot: the batch goes on reading the
// data server with no slot. One session holds one such batch (its next DP
// statement waits for it), but an analyst has max_connections_per_analyst
// sessions (50 by default): start a heavy post-processing statement in
// each, cancel it as soon as it is charged, and the analyst runs 50 upstream
// queries at once against dp_concurrency_per_analyst = 2, filling the
// upstream pool (upstream_max_connections, 10) that other analysts' charged
// queries wait on. And because the slot is gone from the activity set,
// another analyst's query that times out meanwhile is not "contended"
// (ticket.contended): its time-out counts as that analyst's incident and
// trips their breaker (suspension) - one analyst's statements change
// another's standing. Plain DP statements are not affected (paced's own
// ticket is released by the background goroutine). The fix: in execPost
// hand the ticket to the background goroutine when paced returns early
// (e.g. paced takes ownership of c.ticket and releases it when run ends),
// so the slot is held for as long as the batch runs.
func TestAttack37_CancelledPostFreesDPSlot(t *testing.T) {
	gate := make(chan struct{})
	started := make(chan struct{}, 16)
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) {
		c.DPConcurrency = 4
		c.DPConcurrencyPerAnalyst = 1
		c.DPQueueTimeout = 2 * time.Second
		for _, d := range c.Datasets {
			d.Upstream = nopUpstream{}
		}
	}})
	ts.releaser.mu.Lock()
	ts.releaser.gate, ts.releaser.started = gate, started
	ts.releaser.mu.Unlock()
	t.Cleanup(func() { close(gate) }) // runs before the server stops
	adm := ts.srv.admissions[ts.srv.cfg.Datasets["hospital"]]
	slots := func() int {
		adm.mu.Lock()
		defer adm.mu.Unlock()
		return adm.total
	}

	const q = "SELECT s.n + 1 AS m FROM (SELECT COUNT(*) AS n FROM visits) s"
	run := func(pc *pgconn.PgConn) chan error {
		errs := make(chan error, 1)
		go func() {
			_, err := pc.Exec(context.Background(), q).ReadAll()
			errs <- err
		}()
		return errs
	}

	// bob's first session: the batch starts (charged), then he cancels.
	bob1 := ts.connectAs(t, "bob", "bob-secret", "hospital")
	errs1 := run(bob1)
	select {
	case <-started:
	case err := <-errs1:
		t.Fatalf("bob's post-processing statement ended before its leaf ran: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("bob's post-processing statement's leaf never ran")
	}
	if err := bob1.CancelRequest(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs1:
		if sqlstate(err) != "57014" {
			t.Fatalf("bob's cancelled statement: %v, want 57014", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("bob's cancel was not answered")
	}
	// The batch still runs in the background (the gate is closed only at
	// the end of the test): its slot must still be held.
	if n := slots(); n != 1 {
		t.Errorf("after bob cancelled his post-processing statement, whose leaves still run upstream, the dataset's DP slots held = %d, want 1: the running batch holds no slot", n)
	}

	// bob's second session: with dp_concurrency_per_analyst = 1 and his
	// first batch still running, this one must wait for a slot (53000
	// after dp_queue_timeout), never run alongside it.
	bob2 := ts.connectAs(t, "bob", "bob-secret", "hospital")
	errs2 := run(bob2)
	select {
	case <-started:
		t.Errorf("bob's second post-processing statement ran its leaf while his cancelled one still runs upstream: two of his batches read the data server at once with dp_concurrency_per_analyst = 1 (each cancelled statement frees its slot; with 50 sessions, 50 at once)")
		_ = bob2.CancelRequest(ctxT(t))
		<-errs2
	case err := <-errs2:
		if sqlstate(err) != "53000" {
			t.Errorf("bob's second statement: %v, want 53000 (waited for his slot)", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("bob's second statement neither ran nor failed")
	}
}
