package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestAttack78_TsStatThroughAliasPoisonsOtherAnalyst: attack round 78,
// through a real `dpproxy serve`. The catalog route's allow-lists take
// alias.f for a column when f is not a pg_ name, but PostgreSQL calls
// f(alias) when the alias is a function in FROM returning a scalar
// (pgsql TestAttack78_AliasOfScalarFunctionCallsFunction). ts_stat runs
// its argument as SQL, so analyst iso_a runs set_config on the shared
// shadow connections:
//
//	SELECT t.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(''simple'',
//	    set_config(''statement_timeout'', ''1'', false))']) t
//
// statement_timeout is pinned by the pool, not reported by PostgreSQL and
// not replayed by Apply, so the connections go back to the pool with 1 ms
// and stay so: analyst iso_b's catalog statements then run under iso_a's
// statement_timeout, and a catalog statement of a few milliseconds fails
// with 57014. Measured with psql against `dpproxy demo` (alice poisoning,
// bob reading): 6 of 6 of bob's statements saw current_setting(
// 'statement_timeout') = 1ms, and bob's `SELECT count(*) FROM pg_class a,
// pg_class b, pg_class c` failed with "canceling statement due to
// statement timeout". Here: iso_a's statement ran 20 of 20 times, 6 of 6
// of iso_b's statements saw 1ms, and 6 of 6 of iso_b's pg_class
// self-joins (6 ms on an unpoisoned connection) failed with 57014.
// Expected once fixed: iso_a's statement is refused (42501) and iso_b
// sees the pool's 2s.
func TestAttack78_TsStatThroughAliasPoisonsOtherAnalyst(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, _ := isolationProxy(t)

	const poison = `SELECT t.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(''simple'', set_config(''statement_timeout'', ''1'', false))']) t`
	// iso_a: two sessions (their share of the pool), 10 statements each.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 2; i++ {
		a := pgConnect(t, ctx, p.dsn("iso_a"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				_, err := a.Exec(ctx, poison).ReadAll()
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	accepted := 0
	for err := range errs {
		if err == nil {
			accepted++
		}
	}
	if accepted > 0 {
		t.Errorf("iso_a's ts_stat through alias notation was run %d of 20 times, want refused (42501)", accepted)
	}

	b := pgConnect(t, ctx, p.dsn("iso_b"))
	poisoned, failed := 0, 0
	for i := 0; i < 6; i++ {
		res, err := b.Exec(ctx, "SELECT current_setting('statement_timeout')").ReadAll()
		if err != nil {
			t.Fatalf("iso_b's SELECT current_setting: %v", err)
		}
		if got := string(res[0].Rows[0][0]); got != "2s" {
			poisoned++
			if poisoned == 1 {
				t.Logf("iso_b's catalog statement runs with statement_timeout %q (the pool's is 2s)", got)
			}
		}
		_, err = b.Exec(ctx, "SELECT count(*) FROM pg_class a, pg_class b").ReadAll()
		if sqlState(err) == "57014" {
			failed++
		} else if err != nil {
			t.Fatalf("iso_b's catalog statement: %v", err)
		}
	}
	if poisoned > 0 || failed > 0 {
		t.Errorf("%s", fmt.Sprintf("iso_a changed iso_b's shadow sessions: %d of 6 of iso_b's catalog statements saw iso_a's statement_timeout, %d of 6 of its pg_class self-joins failed with 57014", poisoned, failed))
	}
}

// TestAttack78_ShadowBackendsOutlivePoolBound: attack round 78, the same
// hole (alias.f of a scalar function in FROM calls f; ts_stat runs SQL
// text) used to escape the shadow pool's bounds. iso_a first sets
// statement_timeout = 0 on its pooled connection, then runs pg_sleep on
// it: the server no longer ends the statement, the proxy gives up at the
// catalog timeout plus its 5s grace and closes the connection, but a
// PostgreSQL backend sleeping (or computing) does not notice that its
// client went away (client_connection_check_interval is 0 by default), so
// it stays, outside the pool's count. Each round adds iso_a's share of
// backends; SECURITY.md says the pool bounds the shadow's backends
// whatever the sessions do ("many sessions cannot exhaust the shadow
// cluster's max_connections"). Measured against `dpproxy demo` (alice,
// share 5, catalog timeout 10s): 5 backends more in pg_sleep per 15 s
// round, 17 after 3 rounds, past the pool's bound of 20 within a minute
// and towards the shadow cluster's max_connections of 100, past which
// every analyst's catalog statements (and post-processing statements)
// cannot get a connection. Here (pool 4, share 2, catalog timeout 2s):
// the backends named by iso_a's application_name after three rounds,
// against at most 4 the pool may hold.
func TestAttack78_ShadowBackendsOutlivePoolBound(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, shadowAdmin := isolationProxy(t)
	admin := connect(t, ctx, shadowAdmin)

	const (
		app     = "attack78_zombie"
		noLimit = `SELECT t.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(''simple'', set_config(''statement_timeout'', ''0'', false))']) t`
		sleep   = `SELECT t.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(''simple'', pg_sleep(40)::text)']) t`
	)
	start := time.Now()
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			a := pgConnect(t, ctx, p.dsn("iso_a"))
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = a.Exec(ctx, "SET application_name = '"+app+"'").ReadAll()
				_, _ = a.Exec(ctx, noLimit).ReadAll()
				_, _ = a.Exec(ctx, sleep).ReadAll()
			}()
		}
		wg.Wait()
	}
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	t.Logf("after %v: %d shadow backends carry iso_a's application_name", time.Since(start).Round(time.Second), n)
	if n > 4 {
		t.Errorf("%d shadow backends of iso_a's statements are left on the shadow cluster after its statements returned, more than the pool's 4 connections", n)
	}
}
