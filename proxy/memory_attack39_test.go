package proxy

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestAttack39_ReservationStarvesPool (medium; an honest client, default
// bounds): every Execute reserves min(MaxBufferedResult, what is left of
// the analyst's bound) — 64 MiB of the default 256 MiB — before it runs
// (reserveResult, attack round 38), and holds it for as long as the
// statement runs: for a DP statement that includes its wait in the
// admission queue (dp_queue_timeout, 30 s by default) and its whole
// upstream run. So an analyst has at most four statements in flight in
// the extended protocol, and a fifth Execute of any kind — here a SHOW,
// which keeps a few bytes — fails at once with 54000 "your sessions hold
// too much of the proxy's memory", although the analyst's sessions hold
// almost nothing. pgjdbc, pgx, asyncpg and psycopg (with parameters) send
// every statement in the extended protocol; a BI dashboard's pool of 8
// sessions of one analyst running its charts' DP queries at once (two
// read data at dp_concurrency_per_analyst = 2, the others wait their
// turn, each reserving 64 MiB) therefore sees spurious 54000s on its
// fifth session, instead of waiting for a DP slot — honest clients broken
// in normal use.
//
// The fix: reserve what the result can really take — e.g. nothing for a
// DP or session statement (the proxy builds its result; charge its size
// after, it is small and bounded by the plan's keys), and for a catalog
// result reserve in small steps as the relay buffers it (grow the
// reservation by tryCharge as br.raw grows, failing only when the
// account is really full), or wait (bounded) for room instead of
// refusing.
func TestAttack39_ReservationStarvesPool(t *testing.T) {
	gate := make(chan struct{})
	started := make(chan struct{}, 16)
	ts := startServer(t, serverOpts{mutate: func(c *Config) {
		// Four DP statements reading data at once (the default is 2 per
		// analyst, the other two would wait in the admission queue,
		// holding their reservations just the same).
		c.DPConcurrency, c.DPConcurrencyPerAnalyst = 8, 4
	}})
	ts.releaser.mu.Lock()
	ts.releaser.gate, ts.releaser.started = gate, started
	ts.releaser.mu.Unlock()
	const inFlight = 4
	var wg sync.WaitGroup
	for i := 0; i < inFlight; i++ {
		pc := ts.connect(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The extended protocol, as pgjdbc/pgx send it.
			_ = pc.ExecParams(context.Background(), fmt.Sprintf("SELECT COUNT(*) FROM visits WHERE age > %d", i), nil, nil, nil, nil).Read()
		}()
	}
	// Registered after the sessions' own cleanups, so run before them:
	// the statements end before their connections are closed.
	t.Cleanup(func() { close(gate); wg.Wait() })
	for i := 0; i < inFlight; i++ {
		select {
		case <-started:
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of %d DP statements started", i, inFlight)
		}
	}
	t.Logf("alice's account with %d DP statements in flight: %d MiB (bound %d MiB)", inFlight, ts.srv.memoryOf("alice")>>20, ts.srv.cfg.MaxMemoryPerAnalyst>>20)

	// A fifth session of the same analyst: a SHOW in the extended protocol.
	pc := ts.connect(t)
	r := pc.ExecParams(ctxT(t), "SHOW application_name", nil, nil, nil, nil).Read()
	if r.Err != nil {
		t.Errorf("with %d DP statements of one analyst in flight (their results a few hundred bytes each), the analyst's fifth session's SHOW fails: %v (sqlstate %s) — each running Execute reserves %d MiB of the %d MiB per-analyst bound",
			inFlight, r.Err, sqlstate(r.Err), ts.srv.cfg.MaxBufferedResult>>20, ts.srv.cfg.MaxMemoryPerAnalyst>>20)
	}
}

// TestAttack39_CursorPassesBound (medium; an authenticated analyst with a
// catalog): DECLARE (and COPY) still charge after the fact — checkMemory(0)
// then materialize the whole result (up to MaxBufferedResult, 64 MiB as
// shadowRows counts it: len + 8 per value, while a value really holds a
// *string, a heap string header and its bytes, about 3× that) and only
// then chargeMemoryOwn. The reservation of round 38 covers portals only:
// one DECLARE passes a 4 MiB per-analyst bound by far (the account ends at
// many times the bound), and the analyst's sessions that DECLARE at once
// each pass it by a whole result (≈ 200 MiB of real heap each), the very
// pattern round 38 closed for portals ("each had passed a check of the
// account before its result was known").
//
// Measured: 400,000 rows of empty strings — shadowRows counts 3.1 MiB (8 per value),
// the account is charged 9 MiB (rowsBytes) against a 4 MiB bound, and the
// heap grows by 19 MiB (≈ 48 bytes a row). With the defaults the same
// DECLARE of ≈ 8.4M rows passes shadowRows' 64 MiB limit only at ≈ 400 MiB
// of heap (extrapolated, not run): one statement of one session holds more
// than the analyst's whole 256 MiB bound, and each of the analyst's
// sessions holding a shadow connection at once can do the same.
//
// The fix: run cursors' and COPY's queries under reserveResult too (the
// relay limit / shadowRows' limit = the reservation, then settle to
// rowsBytes), and count shadowRows' values as rowsBytes does (24 + len).
func TestAttack39_CursorPassesBound(t *testing.T) {
	const budget = 4 << 20
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.MaxMemoryPerAnalyst = budget }})
	pc := ts.connect(t)
	before := heapAlloc()
	_, err := execAll(t, pc, "DECLARE c CURSOR WITH HOLD FOR SELECT '' AS v FROM generate_series(1, 400000)")
	held := heapAlloc() - before
	charged := ts.srv.memoryOf("alice")
	t.Logf("DECLARE: %v; account %d MiB, heap grew %d MiB (bound %d MiB)", err, charged>>20, held>>20, budget>>20)
	if err == nil && (charged > budget || held > 2*budget) {
		t.Errorf("a DECLARE of one session keeps a catalog result charged %d MiB (%d MiB of heap) under a %d MiB per-analyst bound: cursors are charged after they are materialized, not reserved before", charged>>20, held>>20, budget>>20)
	}
}

// TestAttack39_ReserveResultSpinsUnderSmallBuffer (low; needs an embedder's
// Config.MaxBufferedResult under 64 KiB — dpproxy.yaml does not expose it):
// reserveResult computes room = min(MaxBufferedResult, left); when
// MaxBufferedResult < 64 KiB ("least") room is always < least, so it
// calls checkMemory(least), which succeeds on an empty account, gives the
// 64 KiB back and loops — for ever: the session's goroutine spins a core
// and never answers (every Execute, Describe of a catalog portal). New()
// accepts any positive MaxBufferedResult. The fix: least =
// min(64 KiB, MaxBufferedResult) (or refuse MaxBufferedResult < 64 KiB in
// New), and bound the loop.
//
// The test waits generously for reserveResult to return; when it spins,
// the test stops it by filling the account (checkMemory then refuses).
func TestAttack39_ReserveResultSpinsUnderSmallBuffer(t *testing.T) {
	srv := &Server{cfg: Config{MaxBufferedResult: 16 << 10, MaxMemoryPerAnalyst: 256 << 20}, memory: map[string]*memAccount{}}
	c := &conn{srv: srv, sess: session{analyst: "alice"}}
	a := c.mem()
	done := make(chan error, 1)
	go func() {
		err := c.reserveResult()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("reserveResult on an empty account: %v", err)
		}
	case <-time.After(10 * time.Second):
		a.held.Add(1 << 40) // let the loop end (checkMemory now refuses)
		<-done
		t.Errorf("reserveResult with MaxBufferedResult = 16 KiB on an empty account never returned: its loop spins while min(MaxBufferedResult, left) < 64 KiB")
	}
}
