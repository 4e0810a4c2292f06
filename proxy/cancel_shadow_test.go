package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// slowCatalog is a catalog statement (no protected table) that keeps the
// shadow busy for many seconds.
const slowCatalog = "SELECT count(*) FROM generate_series(1, 3000000000) AS g"

// TestCatalog_CancelShadowQuery: a forwarded catalog statement runs under a
// context pgconn does not watch (watchShadow); a CancelRequest must still
// stop it at once with 57014, the session must go on, and the shadow
// connection it ran on must not return to the pool with a CancelRequest
// still on its way (the next statements on the pool run to completion).
// With statement_timeout set, pgconn watches the context instead.
func TestCatalog_CancelShadowQuery(t *testing.T) {
	ts := startShadowServer(t)
	ctx := context.Background()
	pc := ts.connect(t)
	for round := 0; round < 3; round++ {
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := pc.Exec(ctx, slowCatalog).ReadAll()
			done <- err
		}()
		time.Sleep(300 * time.Millisecond)
		if err := pc.CancelRequest(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "57014" {
				t.Fatalf("round %d: cancelled catalog statement = %v, want 57014", round, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the catalog statement was not cancelled (%v)", round, time.Since(start))
		}
		// The session and the pool go on: many quick statements, none
		// hit by a stray CancelRequest.
		for i := 0; i < 50; i++ {
			res, err := execAll(t, pc, "SELECT 1 AS one")
			if err != nil || rows(res[0])[0][0] != "1" {
				t.Fatalf("round %d: SELECT 1 after the cancel: %v", round, err)
			}
		}
	}

	// statement_timeout: pgconn's own watch, 57014 too.
	if _, err := execAll(t, pc, "SET statement_timeout = 300"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := execAll(t, pc, slowCatalog)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" || time.Since(start) > 10*time.Second {
		t.Fatalf("catalog statement under statement_timeout = %v after %v, want 57014 at once", err, time.Since(start))
	}
	if _, err := execAll(t, pc, "RESET statement_timeout; SELECT 1"); err != nil {
		t.Fatal(err)
	}
}
