package proxy

import (
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestReview74_LastAnswerTextPinsQueryMessage (medium; rule 1: proxy
// memory one analyst holds indefinitely, uncounted, for one charge, by the
// number of her sessions — the class round 73 fixed for the answer's rows).
//
// newLastAnswer (proxy/dp.go:435) keeps text, the statement as
// pgsql.Split cut it: a substring of the Query message's string
// (pgsql/classify.go:44 sql[start:t.Pos]), so the record pins the whole
// message — up to MaxMessage (1 MiB) — though SHOW dp.last_answer only
// ever shows fingerprint(text) of it (the statement itself is at most
// rewrite.MaxStatementBytes, 64 KiB). A cached DP statement is free, so
// "SELECT COUNT(*) FROM visits; /* ~1 MB comment */" from each of an
// analyst's sessions keeps ~1 MiB per idle session, counted nowhere
// (session.memoryHeld does not see lastAnswer).
//
// Asserted: 8 idle sessions that each asked a cached DP statement with
// ~1 MB of comment after it hold well under 1 MiB of heap together.
//
// Suggested fix: keep strings.Clone(text) (the statement alone, ≤ 64 KiB)
// or, better, only what SHOW shows: compute the fingerprint when the
// record is made if it is cheap enough, or keep a clone of the text
// bounded by MaxStatementBytes.
//
// (Fixed: what kept each message was the session's decoded Query, reused
// until the next message arrived, as well as the last answer's text; the
// loop now forgets the last message before it waits, and the record keeps
// a copy of a short text or the fingerprint of a long one.)
func TestReview74_LastAnswerTextPinsQueryMessage(t *testing.T) {
	r := startRealDP(t, nil)
	const q = "SELECT COUNT(*) FROM visits"
	if _, err := execAll(t, r.connect(t), q); err != nil {
		t.Fatal(err)
	}
	// The statement itself is over 4,096 bytes (a comment inside it), so
	// that no text cache keeps it (pipeline.Texts, classifyCache): only
	// the last-answer record does.
	long := q + " /*" + strings.Repeat("c", 5000) + "*/"
	if _, err := execAll(t, r.connect(t), long); err != nil {
		t.Fatal(err)
	}
	n0 := len(r.charges(t))
	padded := long + "; /*" + strings.Repeat("x", 1000_000) + "*/"
	const sessions = 8
	before := heapAlloc()
	var conns []net.Conn
	for i := range sessions {
		nc := r.rawConn(t) // raw: the test's client keeps no copy of the message
		conns = append(conns, nc)
		sendMsgs(t, nc, &pgproto3.Query{String: padded})
		if got := discardUntilReady(t, nc); strings.Contains(got, "E") {
			t.Fatalf("session %d: %s", i, got)
		}
	}
	grew := heapAlloc() - before
	charged := len(r.charges(t)) - n0
	t.Logf("%d idle sessions after a cached DP statement with a 1 MB comment: heap grew %.1f MiB (%d new charges, account %d bytes)",
		sessions, float64(grew)/(1<<20), charged, r.srv.memoryOf("alice"))
	for _, nc := range conns { // the control: a short statement replaces the record
		sendMsgs(t, nc, &pgproto3.Query{String: q + " -- " + strings.Repeat("d", 4100)})
		if got := discardUntilReady(t, nc); strings.Contains(got, "E") {
			t.Fatal(got)
		}
	}
	after := heapAlloc() - before
	t.Logf("after a short DP statement in each session: heap %.1f MiB above the start", float64(after)/(1<<20))
	if grew > 2<<20 && grew-after > sessions<<19 {
		t.Errorf("%d idle sessions each pinned their ~1 MB Query message through SHOW dp.last_answer's text (heap +%.1f MiB, %.1f MiB of it freed once a short statement replaced the record), uncounted: lastAnswer.text is a substring of the message",
			sessions, float64(grew)/(1<<20), float64(grew-after)/(1<<20))
	}
}
