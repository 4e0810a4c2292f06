package proxy

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Attack round 44: each finding a failing test that asserts the safe
// behaviour.

// TestAttack44_BinaryCursorChargedThenRefused (low: a charge without an
// answer; G3 "Refused statements cost nothing").
//
// DECLARE … BINARY CURSOR FOR a DP query checks that every result column
// has a binary encoding (binaryEncodable) only after materialize has run
// the query — that is, after the DP release, its privacy charge and its
// padding. A DP answer with a timestamptz column (a date_trunc key, which
// BI tools send for every time series) is then refused with 0A000 "binary
// output of column … is not supported": the analyst paid and got nothing.
// The refusal depends only on the statement's text and the policy (the
// plan's column types, which execDeclare already has from queryColumns
// before the charge), never on the data, so this is no privacy leak; but
// with dp.cache = off every retry is charged again for nothing, and it is
// the one DECLARE refusal that comes after the charge (a duplicate name,
// no transaction block, too many cursors are all refused before it).
// binaryEncodable is also stricter than the encoder itself: encodeBinary
// writes timestamp and timestamptz (an extended-protocol Execute of the
// same statement with binary result formats is answered), so the refusal
// is not even needed.
//
// The control: the same DECLARE without BINARY is answered, and the same
// query through the extended protocol with binary results is answered.
//
// Suggested fix: in execDeclare, check binaryEncodable on the columns
// queryColumns returned, before checkDeclare and materialize (nothing run
// or charged), and accept oidTimestamp and oidTimestamptz there as
// encodeBinary does.
func TestAttack44_BinaryCursorChargedThenRefused(t *testing.T) {
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t)})
	pc := ts.connect(t)
	const q = "SELECT date_trunc('month', visit_date) AS m, COUNT(*) FROM visits GROUP BY 1"
	releases := func() int { return len(ts.releaser.requests()) }

	// Controls: the query is answerable, in text and in binary.
	n0 := releases()
	if _, err := execAll(t, pc, "BEGIN; DECLARE t CURSOR FOR "+q+"; FETCH 1 FROM t; ROLLBACK"); err != nil {
		t.Fatalf("control: DECLARE without BINARY: %v", err)
	}
	if got := releases() - n0; got != 1 {
		t.Fatalf("control: DECLARE ran %d releases, want 1", got)
	}
	if res := pc.ExecParams(ctxT(t), q, nil, nil, nil, []int16{1}).Read(); res.Err != nil || len(res.Rows) == 0 {
		t.Fatalf("control: binary Execute of the same query: %v (%d rows)", res.Err, len(res.Rows))
	}

	n0 = releases()
	_, err := execAll(t, pc, "BEGIN; DECLARE b BINARY CURSOR FOR "+q)
	ran := releases() - n0
	if _, rerr := execAll(t, pc, "ROLLBACK"); rerr != nil {
		t.Fatal(rerr)
	}
	switch {
	case err != nil && ran > 0:
		t.Errorf("DECLARE BINARY CURSOR was refused (%s: %v) after %d DP release(s) ran and were charged: a refusal must cost nothing (check the columns before the charge)",
			sqlstate(err), err, ran)
	case err == nil:
		// Answered: then FETCH must give the rows in binary.
		var res []*pgconn.Result
		if res, err = execAll(t, pc, "BEGIN; DECLARE b BINARY CURSOR FOR "+q+"; FETCH 1 FROM b; ROLLBACK"); err != nil {
			t.Errorf("FETCH from the binary cursor: %v", err)
		} else if len(res) < 3 || len(res[2].Rows) != 1 {
			t.Errorf("FETCH from the binary cursor returned no row")
		}
	}
}
