package proxy

import (
	"context"
	"testing"
	"time"
)

// TestFirstPass_EndsWithTheStatement: the first pass of a multi-statement
// Query string that may release an answer (firstSyntaxError: every DP
// statement planned before any runs) is one statement, ended by
// statement_timeout like any other (attack round 55's note: it waited for
// the analyst's planning slot under the session's context, so a string
// whose first pass queued behind another session's planning could not be
// cancelled). Here the analyst's planning slot is held; the string is
// refused with 57014 when its statement_timeout passes, nothing of it has
// run and nothing is charged, and the session answers the next statement.
func TestFirstPass_EndsWithTheStatement(t *testing.T) {
	r := startRealDP(t, nil)
	pc := r.connect(t)
	if _, err := execAll(t, pc, "SET statement_timeout = 300"); err != nil {
		t.Fatal(err)
	}
	n0 := len(r.charges(t))
	slot := r.srv.planSlot("alice")
	slot <- struct{}{} // another statement of alice's is being planned
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := pc.Exec(ctx, "SET application_name = 'ran'; SELECT COUNT(*) FROM visits; SELECT 1").ReadAll()
	<-slot
	if ctx.Err() != nil {
		t.Fatal("the first pass was not ended by statement_timeout")
	}
	if sqlstate(err) != "57014" {
		t.Fatalf("err = %v, want 57014 (statement timeout)", err)
	}
	if n := len(r.charges(t)) - n0; n != 0 {
		t.Errorf("%d charges for a refused string", n)
	}
	res, err := execAll(t, pc, "SHOW application_name")
	if err != nil || len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) == "ran" {
		t.Fatalf("after the refused string: %v, %v (its SET must not have run)", res, err)
	}
}
