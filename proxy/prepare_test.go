package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQL-level PREPARE / EXECUTE / DEALLOCATE of DP statements (issue 31):
// EXECUTE binds its constants as literals and runs the statement as if
// sent itself (one release per EXECUTE); PREPARE of a statement that
// cannot be answered fails at once; other statements, non-constant
// arguments and EXECUTE in the extended protocol are refused with hints.
func TestSQLPrepareExecute(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	res, err := execAll(t, pc, "PREPARE byd(text) AS SELECT COUNT(*) FROM visits WHERE department = $1")
	if err != nil || res[0].CommandTag.String() != "PREPARE" {
		t.Fatalf("PREPARE: %v %v", res, err)
	}
	res, err = execAll(t, pc, "EXECUTE byd('oncology')")
	if err != nil || len(res) != 1 || len(res[0].Rows) != 1 || !strings.HasPrefix(res[0].CommandTag.String(), "SELECT") {
		t.Fatalf("EXECUTE: %v %v", res, err)
	}
	ts.releaser.mu.Lock()
	n := len(ts.releaser.reqs)
	var sql string
	if n > 0 {
		sql = ts.releaser.reqs[n-1].Plan.SQL
	}
	ts.releaser.mu.Unlock()
	if n != 1 || !strings.Contains(sql, `"department" = 'oncology'`) {
		t.Fatalf("%d releases, SQL %s", n, sql)
	}
	for _, tc := range []struct{ sql, code string }{
		{"EXECUTE byd", "42601"},                                // wrong number of parameters
		{"EXECUTE byd(department)", "0A000"},                    // not a constant
		{"EXECUTE nosuch(1)", "26000"},                          // not prepared
		{"PREPARE byd AS SELECT COUNT(*) FROM visits", "42P05"}, // duplicate
		{"PREPARE raw AS SELECT * FROM visits", "42501"},        // refused at PREPARE
		{"PREPARE cat AS SELECT 1", "0A000"},                    // not a DP statement
	} {
		if _, err := execAll(t, pc, tc.sql); sqlstate(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.sql, err, tc.code)
		}
	}
	if _, err := execAll(t, pc, "DEALLOCATE byd"); err != nil {
		t.Fatal(err)
	}
	if _, err := execAll(t, pc, "EXECUTE byd('oncology')"); sqlstate(err) != "26000" {
		t.Errorf("after DEALLOCATE: %v", err)
	}
	// EXECUTE through the extended protocol is refused at Parse.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := execAll(t, pc, "PREPARE q2 AS SELECT COUNT(*) FROM visits"); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Prepare(ctx, "", "EXECUTE q2", nil); sqlstate(err) != "0A000" {
		t.Errorf("extended EXECUTE: %v", err)
	}
	// A statement prepared with PREPARE is bound by name in the protocol.
	rr := pc.ExecPrepared(ctx, "q2", nil, nil, nil).Read()
	if rr.Err != nil || len(rr.Rows) != 1 {
		t.Errorf("Bind of q2: %v %v", rr.Rows, rr.Err)
	}
}

// recordingObserver keeps the statements an Observer is told of.
type recordingObserver struct {
	mu  sync.Mutex
	evs []StatementEvent
}

func (r *recordingObserver) Statement(ev StatementEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

// TestSQLExecute_ObservedAsDP: an EXECUTE that releases a DP answer is
// reported to the Observer (the audit log, the metrics and the dashboard's
// recent DP statements: cmd/dpproxy/ops.go) as the DP statement it runs,
// with the prepared statement's fingerprint, as a Bind/Execute of it is;
// reported as a session statement, its charge was missing from the
// dashboard's recent DP statements and counted under the session route.
func TestSQLExecute_ObservedAsDP(t *testing.T) {
	rec := &recordingObserver{}
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.Observer = rec }})
	pc := ts.connect(t)
	const text = "SELECT COUNT(*) FROM visits WHERE department = $1"
	if _, err := execAll(t, pc, "PREPARE byd(text) AS "+text); err != nil {
		t.Fatal(err)
	}
	if _, err := execAll(t, pc, "EXECUTE byd('oncology')"); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.evs) != 2 {
		t.Fatalf("%d statements observed, want 2", len(rec.evs))
	}
	ev := rec.evs[1]
	if ev.Route != "dp" || ev.DP == nil || ev.Fingerprint() != fingerprint(text) {
		t.Errorf("EXECUTE observed as route %q, DP %v, fingerprint %s; want dp, a DP event, %s", ev.Route, ev.DP, ev.Fingerprint(), fingerprint(text))
	}
}

// TestPreparedStatements_Bounded: a session's named prepared statements
// are bounded (maxPreparedStatements), so one analyst cannot hold the
// proxy's memory with statements it never runs; past the bound PREPARE
// and Parse get 54000 with a hint, nothing is kept, and DEALLOCATE makes
// room again.
func TestPreparedStatements_Bounded(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	var b strings.Builder
	for i := 0; i < maxPreparedStatements; i++ {
		fmt.Fprintf(&b, "PREPARE p%d(text) AS SELECT COUNT(*) FROM visits WHERE department = $1;", i)
		if (i+1)%256 == 0 {
			if _, err := execAll(t, pc, b.String()); err != nil {
				t.Fatalf("PREPARE %d: %v", i, err)
			}
			b.Reset()
		}
	}
	_, err := execAll(t, pc, "PREPARE one_more(text) AS SELECT COUNT(*) FROM visits WHERE department = $1")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "54000" || !strings.Contains(pe.Hint, "DEALLOCATE") {
		t.Fatalf("PREPARE past the bound: %v, want 54000 with a hint", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pc.Prepare(ctx, "one_more_parse", "SELECT COUNT(*) FROM visits WHERE department = $1", nil); sqlstate(err) != "54000" {
		t.Fatalf("Parse past the bound: %v, want 54000", err)
	}
	if _, err := execAll(t, pc, "DEALLOCATE p0"); err != nil {
		t.Fatal(err)
	}
	if _, err := execAll(t, pc, "PREPARE one_more(text) AS SELECT COUNT(*) FROM visits WHERE department = $1"); err != nil {
		t.Fatalf("PREPARE after DEALLOCATE: %v", err)
	}
	// The unnamed statement is never refused.
	if r := pc.ExecParams(ctx, "SELECT COUNT(*) FROM visits", nil, nil, nil, nil).Read(); r.Err != nil {
		t.Fatalf("unnamed statement: %v", r.Err)
	}
}

// TestCursorAndCopy_ObservedAsDP: DECLARE … CURSOR FOR and COPY (…) TO
// STDOUT of a DP query release and charge it, so they are observed as
// that DP statement (route dp, its fingerprint, its DP event), like an
// EXECUTE: the dashboard's recent DP statements and the metrics left
// them out as session statements.
func TestCursorAndCopy_ObservedAsDP(t *testing.T) {
	rec := &recordingObserver{}
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.Observer = rec }})
	pc := ts.connect(t)
	const q = "SELECT department, COUNT(*) FROM visits GROUP BY department"
	if _, err := execAll(t, pc, "BEGIN; DECLARE c CURSOR FOR "+q+"; COMMIT"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out strings.Builder
	if _, err := pc.CopyTo(ctx, &out, "COPY ("+q+") TO STDOUT"); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var dp int
	for _, ev := range rec.evs {
		if ev.Route == "dp" && ev.DP != nil && ev.Fingerprint() == fingerprint(q) {
			dp++
		}
	}
	if dp != 2 {
		var got []string
		for _, ev := range rec.evs {
			got = append(got, ev.Route)
		}
		t.Fatalf("%d of DECLARE and COPY observed as the DP statement, want 2 (routes %v)", dp, got)
	}
}
