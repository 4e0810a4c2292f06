package proxy

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestAttack54_DiscardAllInQueryString (low; session-state fidelity, no
// privacy impact; found reviewing e885302's question of settings changed
// outside a statement): PostgreSQL refuses DISCARD ALL inside the
// implicit transaction block of a multi-statement Query string (25001,
// PreventInTransactionBlock), so nothing is discarded. The proxy checks
// only an explicit block and a pipeline (proxy/session.go:523-530
// discardAll: s.txStatus != 'I', s.pipelined; s.implicitTx is not
// looked at), so "DISCARD ALL; SELECT 1" runs it: prepared statements,
// portals and cursors are dropped at once (session.go:531-534), while its
// settings' reset goes through changingSettings into the implicit
// transaction. With a later statement failing ("DISCARD ALL; SELECT
// 1/0") the implicit transaction aborts and endXact restores the
// settings from before DISCARD, but not the dropped statements: a
// half-undone DISCARD that no PostgreSQL session can reach (a client's
// pool believes its statement cache intact or its session reset, and
// neither is). Checked against PostgreSQL 15 itself.
//
// Fix: in discardAll refuse with 25001 when s.implicitTx is set too
// ("DISCARD ALL cannot run inside a transaction block"), as PostgreSQL
// does (and in the first pass of a multi-statement Query, before any
// statement of it runs).
func TestAttack54_DiscardAllInQueryString(t *testing.T) {
	type outcome struct{ discard, app, deallocate string }
	run := func(dsn, q string) outcome {
		pc, err := pgconn.Connect(ctxT(t), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close(context.Background())
		if _, err := execAll(t, pc, `SET application_name = 'before'; PREPARE p AS SELECT COUNT(*) FROM visits`); err != nil {
			t.Fatal(err)
		}
		var o outcome
		o.discard = "ok"
		if _, err := execAll(t, pc, q); err != nil {
			o.discard = errCode(err)
		}
		res, err := execAll(t, pc, `SHOW application_name`)
		o.app = "?"
		if err == nil && len(res) > 0 && len(res[0].Rows) > 0 {
			o.app = string(res[0].Rows[0][0])
		}
		o.deallocate = "ok"
		if _, err := execAll(t, pc, `DEALLOCATE p`); err != nil {
			o.deallocate = errCode(err)
		}
		return o
	}
	pg := shadowDB(t)
	ts := startShadowServer(t)
	for _, q := range []string{`DISCARD ALL; SELECT 1`, `DISCARD ALL; SELECT 1/0`} {
		want := run(pg, q)
		got := run(ts.dsn("alice", "alice", "hospital"), q)
		if got != want {
			t.Errorf("%q then SHOW application_name and DEALLOCATE p: proxy %+v, PostgreSQL %+v", q, got, want)
		}
	}
}

func errCode(err error) string {
	if pe, ok := err.(*pgconn.PgError); ok {
		return pe.Code
	}
	return err.Error()
}
