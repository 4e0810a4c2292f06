package proxy

import (
	"bytes"
	"strings"
	"testing"
)

// TestHeld48_CursorChargedOnceAtDeclare (held): a DP cursor is released at
// DECLARE with the ε in force then; a SET before FETCH changes nothing; a
// WITH HOLD cursor survives COMMIT with the same charged rows; a WITH HOLD
// cursor of a rolled-back transaction is gone (its charge stays, and the
// same DECLARE again is answered from the cache, free, with the same rows).
func TestHeld48_CursorChargedOnceAtDeclare(t *testing.T) {
	r := startRealDP(t, nil)
	pc, nc := r.connectNotices(t, "alice", "alice")

	// SET between DECLARE and FETCH.
	n0 := len(r.charges(t))
	if _, err := execAll(t, pc, "BEGIN; SET dp.epsilon = 0.3; DECLARE c CURSOR FOR "+q48); err != nil {
		t.Fatal(err)
	}
	declNotices := nc.take()
	res, err := execAll(t, pc, "SET dp.epsilon = 0.8; FETCH 3 FROM c; FETCH ALL FROM c; COMMIT")
	if err != nil {
		t.Fatal(err)
	}
	got := append(rows(res[1]), rows(res[2])...)
	checkAnswer(t, r, "alice", got, append(declNotices, nc.take()...), 0.3)
	if n := len(since(r.charges(t), n0, "")); n != 1 {
		t.Errorf("%d charges for one cursor, want 1", n)
	}

	// WITH HOLD across COMMIT.
	n0 = len(r.charges(t))
	if _, err = execAll(t, pc, "BEGIN; SET dp.epsilon = 0.45; DECLARE h CURSOR WITH HOLD FOR "+q48+"; COMMIT"); err != nil {
		t.Fatal(err)
	}
	declNotices = nc.take()
	res, err = execAll(t, pc, "SET dp.epsilon = 0.2; FETCH ALL FROM h; CLOSE h")
	if err != nil {
		t.Fatal(err)
	}
	checkAnswer(t, r, "alice", rows(res[1]), append(declNotices, nc.take()...), 0.45)
	if n := len(since(r.charges(t), n0, "")); n != 1 {
		t.Errorf("%d charges for one held cursor, want 1", n)
	}

	// WITH HOLD in a rolled-back transaction.
	n0 = len(r.charges(t))
	if _, err = execAll(t, pc, "BEGIN; SET dp.epsilon = 0.55; DECLARE g CURSOR WITH HOLD FOR "+q48+"; FETCH 2 FROM g; ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	nc.take()
	if _, err = execAll(t, pc, "FETCH ALL FROM g"); sqlstate(err) != "34000" {
		t.Errorf("FETCH from a held cursor of a rolled-back transaction: %v, want 34000", err)
	}
	if n := len(since(r.charges(t), n0, "")); n != 1 {
		t.Errorf("%d charges after the rolled-back DECLARE, want 1 (a charge is never rolled back)", n)
	}
	res, err = execAll(t, pc, "SET dp.epsilon = 0.55; BEGIN; DECLARE g CURSOR FOR "+q48+"; FETCH ALL FROM g; COMMIT")
	if err != nil {
		t.Fatal(err)
	}
	notices := nc.take()
	if len(notices) == 0 || !strings.HasPrefix(notices[len(notices)-1], "dp: cached answer") {
		t.Errorf("DECLARE again after the rollback: NOTICE %q, want the cached answer", notices)
	}
	checkAnswer(t, r, "alice", rows(res[3]), notices, 0)
	if n := len(since(r.charges(t), n0, "")); n != 1 {
		t.Errorf("%d charges after DECLARE again, want still 1", n)
	}
}

// TestHeld48_CopyCharged (held): COPY (a DP query) TO STDOUT is released
// once, at the ε in force, and its rows are the charge's answer.
func TestHeld48_CopyCharged(t *testing.T) {
	r := startRealDP(t, nil)
	pc, nc := r.connectNotices(t, "alice", "alice")
	if _, err := execAll(t, pc, "SET dp.epsilon = 0.35"); err != nil {
		t.Fatal(err)
	}
	n0 := len(r.charges(t))
	var buf bytes.Buffer
	if _, err := pc.CopyTo(ctxT(t), &buf, "COPY ("+q48+") TO STDOUT"); err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		got = append(got, strings.Split(line, "\t"))
	}
	checkAnswer(t, r, "alice", got, nc.take(), 0.35)
	if n := len(since(r.charges(t), n0, "")); n != 1 {
		t.Errorf("%d charges for one COPY, want 1", n)
	}
}
