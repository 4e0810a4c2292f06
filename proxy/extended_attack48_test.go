package proxy

import (
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

const q48 = "SELECT department, COUNT(*) FROM visits GROUP BY 1"

// TestHeld48_PortalSettingsAtExecute (held): a DP portal parsed, bound and
// described under dp.epsilon = 0.2 is released with the ε in force at its
// first Execute (SET LOCAL inside a savepoint), its NOTICE, SHOW
// dp.last_answer and its ledger charge agree, and the rows of a
// row-limited Execute continued after ROLLBACK TO SAVEPOINT (which restores
// ε = 0.2) are the same charged answer: no second charge, nothing
// uncharged.
func TestHeld48_PortalSettingsAtExecute(t *testing.T) {
	r := startRealDP(t, nil)
	pc, nc := r.connectNotices(t, "alice", "alice")
	n0 := len(r.charges(t))
	rep := rawSend(t, pc, nc,
		&pgproto3.Query{String: "BEGIN; SET dp.epsilon = 0.2"},
		&pgproto3.Parse{Name: "s1", Query: q48},
		&pgproto3.Bind{PreparedStatement: "s1", DestinationPortal: "p1"},
		&pgproto3.Describe{ObjectType: 'P', Name: "p1"},
		&pgproto3.Sync{},
		&pgproto3.Query{String: "SAVEPOINT a; SET LOCAL dp.epsilon = 0.7"},
		&pgproto3.Execute{Portal: "p1", MaxRows: 3},
		&pgproto3.Sync{},
		&pgproto3.Query{String: "ROLLBACK TO SAVEPOINT a"},
		&pgproto3.Execute{Portal: "p1"},
		&pgproto3.Sync{},
	)
	if len(rep.errs) > 0 {
		t.Fatalf("errors: %v", rep.errs)
	}
	var got [][]string
	var notices []string
	for _, res := range rep.results {
		if res.suspended || res.tag == "SELECT 4" {
			got = append(got, res.rows...)
			notices = append(notices, res.notices...)
		}
	}
	t.Logf("results %+v", rep.results)
	if len(got) != 7 {
		t.Fatalf("got %d rows over the two Executes, want 7", len(got))
	}
	checkAnswer(t, r, "alice", got, notices, 0.7)
	if la := lastAnswerOf(t, pc); la["epsilon"] != "0.7" || la["cost_epsilon"] != "0.7" {
		t.Errorf("SHOW dp.last_answer: %v, want epsilon 0.7 and cost 0.7", la)
	}
	if n := len(since(r.charges(t), n0, "")); n != 1 {
		t.Errorf("%d charges for one portal, want 1", n)
	}
	if _, err := execAll(t, pc, "COMMIT"); err != nil {
		t.Fatal(err)
	}
}

// pbe is Parse, Bind and Execute of text in the unnamed statement and
// portal.
func pbe(text string, maxRows uint32) []pgproto3.FrontendMessage {
	return []pgproto3.FrontendMessage{
		&pgproto3.Parse{Query: text},
		&pgproto3.Bind{},
		&pgproto3.Describe{ObjectType: 'P'},
		&pgproto3.Execute{MaxRows: maxRows},
	}
}

// TestHeld48_PipelineWithoutSync (held): one pipeline without Sync between
// SETs and DP statements, then a refused statement, then a SET and a DP
// statement that are skipped until Sync. Each answer released is on its
// own charge at the ε set before it in the pipeline; the skipped statement
// is neither charged nor answered.
func TestHeld48_PipelineWithoutSync(t *testing.T) {
	r := startRealDP(t, nil)
	pc, nc := r.connectNotices(t, "alice", "alice")
	n0 := len(r.charges(t))
	var msgs []pgproto3.FrontendMessage
	msgs = append(msgs, pbe("SET dp.epsilon = 0.4", 0)...)
	msgs = append(msgs, pbe(q48, 0)...)
	msgs = append(msgs, pbe("SET dp.epsilon = 0.9", 0)...)
	msgs = append(msgs, pbe(q48, 0)...)
	msgs = append(msgs, pbe("SELECT * FROM visits", 0)...) // refused: 42501
	msgs = append(msgs, pbe("SET dp.epsilon = 0.6", 0)...)
	msgs = append(msgs, pbe(q48+" ORDER BY 1", 0)...)
	msgs = append(msgs, &pgproto3.Sync{})
	rep := rawSend(t, pc, nc, msgs...)
	if len(rep.errs) != 1 {
		t.Fatalf("errors %v, want the one refusal", rep.errs)
	}
	var answers []rawResult
	for _, res := range rep.results {
		if res.tag == "SELECT 7" {
			answers = append(answers, res)
		}
	}
	if len(answers) != 2 {
		t.Fatalf("%d answers, want 2: %+v", len(answers), rep.results)
	}
	checkAnswer(t, r, "alice", answers[0].rows, answers[0].notices, 0.4)
	checkAnswer(t, r, "alice", answers[1].rows, answers[1].notices, 0.9)
	if n := len(since(r.charges(t), n0, "")); n != 2 {
		t.Errorf("%d charges for two answers (and a skipped statement), want 2", n)
	}
	if la := lastAnswerOf(t, pc); la["epsilon"] != "0.9" {
		t.Errorf("SHOW dp.last_answer: %v, want the ε 0.9 answer", la)
	}
	res, err := execAll(t, pc, "SHOW dp.epsilon")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dp.epsilon after the failed pipeline: %v", rows(res[0]))
}
