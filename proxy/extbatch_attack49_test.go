package proxy

import (
	"context"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Attack round 49: the extended-protocol batch as one implicit transaction
// (round 48's fix: extBatch/extBefore/extTxControl, changingSettings,
// skipUntilSync). Each test sends the same raw message sequence to a real
// PostgreSQL 15 (pgtest) and to the proxy, then compares SHOW of the
// settings afterwards. application_name is a setting both keep the same
// way; dp.epsilon, the one that matters for the ledger, is a placeholder
// setting in PostgreSQL and behaves the same there.

// msgSeq builds a raw message sequence.
type msgSeq []pgproto3.FrontendMessage

func (m msgSeq) pbe(q string) msgSeq { return append(m, pbe(q, 0)...) }
func (m msgSeq) query(q string) msgSeq {
	return append(m, &pgproto3.Query{String: q})
}
func (m msgSeq) fail() msgSeq { return append(m, &pgproto3.Parse{Query: "SELEC 1"}) } // 42601 at Parse
func (m msgSeq) sync() msgSeq { return append(m, &pgproto3.Sync{}) }

// extCompare runs msgs on a fresh PostgreSQL session and a fresh proxy
// session and returns SHOW show on each afterwards, with each side's
// reply.
type extSide struct {
	show string
	rep  rawReply
}

func extCompare(t *testing.T, ts *testServer, pgDSN string, msgs msgSeq, show string) (pg, px extSide) {
	t.Helper()
	run := func(pc *pgconn.PgConn) extSide {
		rep := rawSend(t, pc, &noticeCollector{}, msgs...)
		res, err := execAll(t, pc, "SHOW "+show)
		if err != nil {
			t.Fatalf("SHOW %s: %v", show, err)
		}
		return extSide{show: rows(res[0])[0][0], rep: rep}
	}
	pgc, err := pgconn.Connect(ctxT(t), pgDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pgc.Close(context.Background())
	pg = run(pgc)
	px = run(ts.connect(t))
	return pg, px
}

func extSetup(t *testing.T) (*testServer, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	return startServer(t, serverOpts{shadowDSN: shadowDB(t)}), pgtest.NewDatabase(t)
}

// TestAttack49_QueryInBatchCommitsItsSets (severity medium: a regression
// of round 48's fix; a SET the client was told succeeded, with
// ReadyForQuery 'I', is silently undone later, for dp.epsilon too).
//
// A simple Query message inside an extended batch (before Sync) ends the
// batch's implicit transaction in PostgreSQL: exec_simple_query runs in
// the transaction the extended messages started and commits it
// (finish_xact_command), then answers ReadyForQuery. A later error in the
// same batch aborts only the new transaction. The proxy keeps extBatch
// and extBefore across the Query, so the later extended error restores
// the settings from before the batch's first change: both the SETs of the
// extended messages before the Query and the SETs of the Query itself are
// undone. Before round 48's fix the proxy kept them, as PostgreSQL does.
//
// For the ledger: an analyst who lowered dp.epsilon with a simple Query
// (told 'SET', ReadyForQuery 'I') finds it back at the higher value after
// an unrelated extended error, and the next DP query is charged at it.
//
// Suggested fix: a Query message (simpleQuery) ends the extended batch's
// implicit transaction: reset extBefore/extTxControl (keep extBatch false
// until the next extended message) when a Query arrives, and, if the
// Query fails, undo the batch's changes before it too (see
// TestAttack49_FailedQueryInBatchAbortsBatch).
func TestAttack49_QueryInBatchCommitsItsSets(t *testing.T) {
	ts, pgDSN := extSetup(t)
	cases := []struct {
		name string
		msgs msgSeq
		show string
	}{
		// The SET is an extended message; a Query commits it.
		{"extended SET, Query, error", msgSeq{}.pbe("SET application_name = 'x'").query("SELECT 1").fail().sync(), "application_name"},
		// The SET is the Query's own.
		{"Query SET, error", msgSeq{}.pbe("SHOW TimeZone").query("SET application_name = 'x'").fail().sync(), "application_name"},
		{"Query SET dp.epsilon, error", msgSeq{}.pbe("SHOW TimeZone").query("SET dp.epsilon = 0.01").fail().sync(), "dp.epsilon"},
	}
	for _, c := range cases {
		pg, px := extCompare(t, ts, pgDSN, c.msgs, c.show)
		if pg.show == "" || pg.show == "0.1" {
			t.Fatalf("%s: PostgreSQL shows %q: the test's premise (the Query committed the SET) does not hold", c.name, pg.show)
		}
		if px.show != pg.show {
			t.Errorf("%s: SHOW %s after the batch: proxy %q, PostgreSQL %q (the Query's ReadyForQuery %q had told the client it was done)",
				c.name, c.show, px.show, pg.show, px.rep.ready)
		}
	}
}

// TestAttack49_FailedQueryInBatchAbortsBatch (severity low: the fix is
// incomplete; PostgreSQL compatibility).
//
// The other direction: an extended SET followed, before Sync, by a Query
// that fails. In PostgreSQL the Query runs in the batch's open implicit
// transaction, and its error aborts it: the extended SET is undone. The
// proxy's simpleQuery neither calls skipUntilSync nor uses extBefore, so
// the SET stays.
//
// Suggested fix: a failing Query inside an open extended batch restores
// extBefore (when no BEGIN/COMMIT/ROLLBACK decided), as skipUntilSync does.
func TestAttack49_FailedQueryInBatchAbortsBatch(t *testing.T) {
	ts, pgDSN := extSetup(t)
	for _, msgs := range []msgSeq{
		msgSeq{}.pbe("SET application_name = 'x'").query("SELEC 1").sync(),
		msgSeq{}.pbe("SET application_name = 'x'").query("SET DateStyle = 'German'; SELEC 1").sync(),
	} {
		pg, px := extCompare(t, ts, pgDSN, msgs, "application_name")
		if pg.show != "" {
			t.Fatalf("PostgreSQL shows %q: premise does not hold", pg.show)
		}
		if px.show != pg.show {
			t.Errorf("extended SET then a failing Query before Sync: proxy application_name %q, PostgreSQL %q (the failed Query aborted the batch's transaction)", px.show, pg.show)
		}
	}
}

// TestAttack49_CommitInBatchCommits (severity medium: a regression of
// round 48's fix, dp.epsilon included).
//
// COMMIT outside a transaction block, in an extended batch, warns "there
// is no transaction in progress" in PostgreSQL, but as a transaction
// statement it is followed by finish_xact_command: the batch's implicit
// transaction, with its SETs, is committed there. A later error in the
// batch does not undo them. The proxy's commit() does nothing outside a
// block (it does not set extTxControl, whose comment says COMMIT and
// ROLLBACK "decided for themselves"), so skipUntilSync undoes the SETs
// before the COMMIT. A client that pipelines "SET dp.epsilon = 0.01;
// COMMIT" precisely to make the SET stick loses it.
//
// Suggested fix: COMMIT (and ROLLBACK, see below) in an extended batch
// outside a block end the batch's implicit transaction: commit keeps the
// settings (extBefore = nil, so a later change starts a new one).
func TestAttack49_CommitInBatchCommits(t *testing.T) {
	ts, pgDSN := extSetup(t)
	for _, show := range []string{"application_name", "dp.epsilon"} {
		set := "SET application_name = 'x'"
		if show == "dp.epsilon" {
			set = "SET dp.epsilon = 0.01"
		}
		pg, px := extCompare(t, ts, pgDSN, msgSeq{}.pbe(set).pbe("COMMIT").fail().sync(), show)
		if pg.show == "" {
			t.Fatalf("PostgreSQL shows %q: premise does not hold", pg.show)
		}
		if px.show != pg.show {
			t.Errorf("SET, COMMIT, error in one batch: proxy %s %q, PostgreSQL %q (COMMIT committed the SET)", show, px.show, pg.show)
		}
	}
	// Control: without the COMMIT both undo the SET.
	pg, px := extCompare(t, ts, pgDSN, msgSeq{}.pbe("SET application_name = 'x'").fail().sync(), "application_name")
	if pg.show != "" || px.show != "" {
		t.Fatalf("control: SET then error: PostgreSQL %q, proxy %q, want both undone", pg.show, px.show)
	}
}

// TestAttack49_RollbackAndBeginInBatch (severity low-medium: the fix is
// incomplete where BEGIN/ROLLBACK "decide for themselves"; dp.epsilon
// stays at a value PostgreSQL would have rolled back).
//
// PostgreSQL 15, in an extended batch outside a block:
//   - ROLLBACK warns "there is no transaction in progress" and aborts the
//     implicit transaction (UserAbortTransactionBlock, TBLOCK_STARTED →
//     TBLOCK_ABORT_PENDING): the SETs before it are undone;
//   - BEGIN turns the implicit transaction into the block
//     (BeginTransactionBlock from TBLOCK_STARTED): the SETs before it are
//     part of the block, and ROLLBACK undoes them;
//   - after BEGIN … COMMIT, the next statements are a new implicit
//     transaction, so an error undoes the SETs after the COMMIT.
//
// The proxy keeps the SET in all three (rollback() outside a block does
// nothing; begin() takes txBegin after the SET; extTxControl stops
// tracking for the rest of the batch).
//
// Suggested fix: model PostgreSQL's states: ROLLBACK outside a block in a
// batch restores extBefore; BEGIN takes txBegin = extBefore when the batch
// already changed settings; COMMIT/ROLLBACK ending a block start a new
// implicit transaction (extBefore = nil, extTxControl = false).
func TestAttack49_RollbackAndBeginInBatch(t *testing.T) {
	ts, pgDSN := extSetup(t)
	cases := []struct {
		name string
		msgs msgSeq
	}{
		{"SET, ROLLBACK", msgSeq{}.pbe("SET application_name = 'x'").pbe("ROLLBACK").sync()},
		{"SET, BEGIN, ROLLBACK", msgSeq{}.pbe("SET application_name = 'x'").pbe("BEGIN").pbe("ROLLBACK").sync()},
		{"BEGIN, COMMIT, SET, error", msgSeq{}.pbe("BEGIN").pbe("COMMIT").pbe("SET application_name = 'x'").fail().sync()},
	}
	for _, c := range cases {
		pg, px := extCompare(t, ts, pgDSN, c.msgs, "application_name")
		if pg.show != "" {
			t.Fatalf("%s: PostgreSQL shows %q: premise does not hold", c.name, pg.show)
		}
		if px.show != pg.show {
			t.Errorf("%s: proxy application_name %q, PostgreSQL %q", c.name, px.show, pg.show)
		}
	}
}

// TestAttack49_SetLocalInBatch (severity low: PostgreSQL compatibility;
// a DP statement in the batch runs at another ε than the client set).
//
// SET LOCAL outside a transaction block warns in PostgreSQL ("SET LOCAL can
// only be used in transaction blocks") but, in an extended batch, takes
// effect for the batch's implicit transaction: a SHOW (or a DP query)
// later in the same batch sees it, and Sync ends it. The proxy ignores it:
// the batch is not treated as a transaction for SET LOCAL.
//
// Suggested fix: within an extended batch outside a block, SET LOCAL
// changes the setting and Sync (or the batch's end) restores it, as a
// block's COMMIT drops SET LOCAL.
func TestAttack49_SetLocalInBatch(t *testing.T) {
	ts, pgDSN := extSetup(t)
	msgs := msgSeq{}.pbe("SET LOCAL application_name = 'x'").pbe("SHOW application_name").sync()
	pg, px := extCompare(t, ts, pgDSN, msgs, "application_name")
	shown := func(s extSide) string {
		for _, r := range s.rep.results {
			if r.tag == "SHOW" && len(r.rows) == 1 {
				return r.rows[0][0]
			}
		}
		return "<none>"
	}
	if shown(pg) != "x" || pg.show != "" {
		t.Fatalf("PostgreSQL: SHOW in the batch %q, after %q: premise does not hold", shown(pg), pg.show)
	}
	if shown(px) != shown(pg) || px.show != pg.show {
		t.Errorf("SET LOCAL in an extended batch: proxy shows %q in the batch and %q after, PostgreSQL %q and %q",
			shown(px), px.show, shown(pg), pg.show)
	}
}

// TestAttack49_DiscardAllInPipeline (severity low: PostgreSQL
// compatibility, and the batch's undo then restores settings DISCARD ALL
// had reset while its prepared statements stay gone).
//
// PostgreSQL 15 refuses DISCARD ALL after another statement of the same
// extended batch (PreventInTransactionBlock with XACT_FLAGS_PIPELINING:
// 25001 "DISCARD ALL cannot be executed within a pipeline"); the proxy's
// discardAll only checks txStatus, so it runs, and a later error in the
// batch restores extBefore, the settings before DISCARD ALL, though the
// statements and portals it dropped stay dropped.
//
// Suggested fix: discardAll refuses (25001) when an extended batch has
// already run a statement before it (extBatch and an earlier Execute).
func TestAttack49_DiscardAllInPipeline(t *testing.T) {
	ts, pgDSN := extSetup(t)
	msgs := msgSeq{}.pbe("SET application_name = 'x'").pbe("DISCARD ALL").sync()
	pg, px := extCompare(t, ts, pgDSN, msgs, "application_name")
	if len(pg.rep.errs) != 1 {
		t.Fatalf("PostgreSQL errors %v: premise (25001) does not hold", pg.rep.errs)
	}
	if len(px.rep.errs) != 1 || px.rep.errs[0][:5] != pg.rep.errs[0][:5] {
		t.Errorf("DISCARD ALL after a SET in one extended batch: proxy errors %v, PostgreSQL %v", px.rep.errs, pg.rep.errs)
	}
	// Control: DISCARD ALL alone in its batch runs in both.
	pg, px = extCompare(t, ts, pgDSN, msgSeq{}.pbe("DISCARD ALL").sync(), "application_name")
	if len(pg.rep.errs) != 0 || len(px.rep.errs) != 0 {
		t.Fatalf("control: DISCARD ALL alone: PostgreSQL %v, proxy %v", pg.rep.errs, px.rep.errs)
	}
}
