package proxy

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestAttack73_LastAnswerKeepsWholeAnswerPerSession (attack round 73,
// severity medium: rule 1, proxy memory one analyst holds indefinitely,
// for one charge, past max_memory_per_analyst_mb by the number of her
// sessions).
//
// execDP (proxy/dp.go:87) keeps the session's last DP answer for SHOW
// dp.last_answer as &lastAnswer{res: res, req: req}: the whole
// release.Result, its Rows and Widths included, and the request with its
// plan. SHOW dp.last_answer reads only res.Cached, res.Cost and res.Errors
// of it, but the rows stay reachable from the session until its next DP
// statement. Nothing counts them: session.memoryHeld (proxy/memory.go)
// adds statements, portals and savepoints; the answer's room (answerRoom)
// is charged only while the reply is written and given back by endSending
// once it is (round 66's fix). An answer over the in-memory cache's entry
// bound (2 MiB) is served from the ledger, parsed afresh per statement
// (release.cached), so every session keeps its own copy.
//
// Attack: alice releases labelDP(1700, 4000) once (a 14 MB answer, one
// charge at ε 0.1), then asks it again, free, from 6 more sessions that
// read every reply to the end and stay idle. Round 66's test stopped
// reading; here the client behaves and the memory stays anyway.
//
// Asserted: the proxy's live heap grows by at most twice alice's 16 MiB
// bound; alice's account is charged nothing once her replies are read.
//
// Suggested fix: keep in lastAnswer only what SHOW dp.last_answer shows
// (at, the text's fingerprint, ε, δ, mechanism, Cached, Cost, Errors and
// the leaves count), never res.Rows/res.Widths or the plan; or count it in
// memoryHeld.
func TestAttack73_LastAnswerKeepsWholeAnswerPerSession(t *testing.T) {
	const bound = 16 << 20
	r := startRealDP(t, func(c *Config) { c.MaxMemoryPerAnalyst = bound })
	leaf := labelDP(1700, 4000)
	first := r.connect(t)
	if _, err := execLong65(t, first, leaf); err != nil {
		t.Fatal(err)
	}
	n0 := len(r.charges(t))
	const sessions = 6
	before := heapAlloc()
	var conns []*pgconn.PgConn
	for i := range sessions {
		pc := r.connect(t)
		conns = append(conns, pc)
		res, err := execLong65(t, pc, leaf)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		if len(res) != 1 || len(res[0].Rows) == 0 {
			t.Fatalf("session %d: no rows", i)
		}
	}
	grew := heapAlloc() - before
	charged := len(r.charges(t)) - n0
	held := r.srv.memoryOf("alice")
	t.Logf("%d idle sessions that read a cached 14 MB DP answer to the end (%d new charges): live heap grew by %d MiB; alice's account %d bytes (bound %d MiB)",
		sessions, charged, grew>>20, held, bound>>20)
	// Since attack round 84 an answer over 2 MiB is not stored in the
	// ledger (release.maxStoredAnswer): each repetition is charged.
	if charged != sessions {
		t.Errorf("%d charges for %d repetitions of an answer too large to store, want one each", charged, sessions)
	}
	// The control: a small DP answer in each session replaces its
	// lastAnswer, and the memory goes with it.
	for _, pc := range conns {
		if _, err := execLong65(t, pc, "SELECT COUNT(*) FROM visits"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("after one small DP answer in each session the heap is %d MiB above the start", (heapAlloc()-before)>>20)
	if grew > 2*bound {
		t.Errorf("alice's %d idle sessions, whose clients read every reply, hold %d MiB of DP answers (%d charges) past twice her %d MiB bound, uncounted (account %d bytes): SHOW dp.last_answer's record keeps each session's whole release.Result",
			sessions, grew>>20, charged, bound>>20, held)
	}
}
