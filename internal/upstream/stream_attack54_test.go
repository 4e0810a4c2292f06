package upstream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestHeld54_QueryEachConsumerCountsInStatementTimeout (formerly TestAttack54_QueryEachCountsTheConsumerInStatementTimeout; the behaviour is kept and documented) (low;
// availability and the incident breaker, an analyst whose private-key
// GROUP BY has many candidates; found on 3fde491): QueryEach hands each
// row to its consumer while the upstream statement is still running
// (upstream.go:134-136, eachTextRow), and the statement_timeout set by
// SET LOCAL (upstream.go:111) runs from the statement's start until its
// last row is sent: a data server whose socket is full waits for the
// proxy to read on, and cancels the statement at the first row after the
// limit. Partition selection's consumer (release/partition.go:296
// groupSelector.add) draws each candidate's noise there, so the proxy's
// CPU for the candidates — the "CPU gap" SECURITY.md states as only
// slowing answers, a few µs a candidate measured here, tens of µs in
// SECURITY.md's 110,000-candidate example, more when the proxy's two
// cores are busy with other analysts of any dataset — now counts against
// the data server's limit, where the non-streaming path (Query) read the
// whole result first and drew the noise under no limit. A private-key
// GROUP BY the old path answered then fails after its charge with 57014,
// classified as the analyst's incident ("timeout", release/incident.go
// classify; suspension at incident_limit) or, when another analyst ran on
// the dataset meanwhile, as a lost charge, and whether it does depends on
// the count of candidate groups (the data) and on other analysts' load on
// the proxy. Here a consumer slower than the timeout once (standing for
// the noise of many candidates) makes QueryEach fail where Query, over
// the same 40 MB result under the same timeout, succeeds.
//
// Fix: do not run the consumer's work inside the upstream's time limit:
// give QueryEach a limit of its own (the plan's work bound plus a public
// allowance per candidate, or the proxy's slot), or stream the rows into
// bounded state first (digest and unit count; the kept keys in a second,
// ordered read, or a temporary file) and draw the noise after the
// statement ends; at least count a streamed selection's time-out as an
// availability failure, not the analyst's incident, and state it in
// SECURITY.md.
func TestHeld54_QueryEachConsumerCountsInStatementTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := pgtest.NewDatabase(t)
	const timeout = 2 * time.Second
	p, err := New(ctx, Config{DSN: dsn, StatementTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// 20,000 rows of 2,000 bytes: 40 MB, far more than the sockets
	// between the data server and the proxy buffer.
	const sql = `SELECT g, repeat('x', 2000) FROM generate_series(1, 20000) g`
	// The buffered path for contrast (on a loaded machine it may itself
	// time out; the assertion below holds either way, so no skip).
	if rows, err := p.Query(ctx, sql); err != nil {
		t.Logf("Query itself did not finish within %v on this machine: %v", timeout, err)
	} else if len(rows) != 20000 {
		t.Fatalf("Query returned %d rows, want 20000", len(rows))
	}
	n, slow := 0, false
	err = p.QueryEach(ctx, sql, func(row []*string) error {
		n++
		if !slow {
			// The consumer's work for many candidates, once: longer than
			// the statement's whole limit (not a timed assertion: the
			// sleep only has to exceed the timeout).
			slow = true
			time.Sleep(timeout + timeout/2)
		}
		return nil
	})
	// Kept, and budgeted for (SECURITY.md, "Groups of a private key"):
	// the consumer's time counts in the statement's time-out, which the
	// time-out check before the charge now covers with the most
	// candidates the plan can have (dpplan.CandidateCost); past it, it ends as
	// a statement time-out (57014), which release classifies as any
	// time-out (no incident when other analysts' load caused it).
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Errorf("QueryEach with a consumer slower than the time-out: %v after %d of 20,000 rows, want 57014 (statement_timeout), as SECURITY.md says", err, n)
	}
}
