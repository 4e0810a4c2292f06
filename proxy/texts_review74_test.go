package proxy

import (
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestReview74_TextCachePinsQueryMessages (medium, pre-existing, found
// while checking round 73's last-answer fix; rule 1: proxy memory one
// session holds indefinitely, uncounted, far past
// max_memory_per_analyst_mb, without any charge after the first).
//
// pipeline.Texts.put (pipeline/texts.go:58 tc.m[text] = d) keeps each DP
// statement text of up to 4,096 bytes as a map key and counts len(text)
// (≤ 64 KiB in all). But text is the statement as pgsql.Split cut it
// from the Query message (pgsql/classify.go:44, a substring), so every key
// pins its whole message, up to MaxMessage (1 MiB): 256 keys a session,
// 256 MiB, counted as a few KiB. Here one session sends 40 Query messages,
// each a short DP statement (distinct by a comment, the same plan: one
// charge, then cached answers, free) followed by "; /* ~1 MB */".
//
// Asserted: the session's idle heap stays within a few MiB.
//
// Suggested fix: strings.Clone the text before it becomes a key (in
// Texts.put; likewise classifyCache.m[sql] and lastAnswer.text), or
// clone each statement in pgsql.Split's callers once, so a statement
// never references its message.
func TestReview74_TextCachePinsQueryMessages(t *testing.T) {
	r := startRealDP(t, nil)
	const q = "SELECT COUNT(*) FROM visits"
	if _, err := execAll(t, r.connect(t), q); err != nil {
		t.Fatal(err)
	}
	n0 := len(r.charges(t))
	nc := r.rawConn(t)
	const messages = 40
	pad := strings.Repeat("x", 1000_000)
	before := heapAlloc()
	for i := range messages {
		sendMsgs(t, nc, &pgproto3.Query{String: q + " -- " + strconv.Itoa(i) + "\n; /*" + pad + "*/"})
		if got := discardUntilReady(t, nc); strings.Contains(got, "E") {
			t.Fatalf("message %d: %s", i, got)
		}
	}
	grew := heapAlloc() - before
	t.Logf("%d Query messages of ~1 MB, each a short cached DP statement: one idle session's heap grew %.1f MiB (%d new charges; alice's account %d bytes)",
		messages, float64(grew)/(1<<20), len(r.charges(t))-n0, r.srv.memoryOf("alice"))
	if grew > 8<<20 {
		t.Errorf("one idle session holds %.1f MiB after %d cached DP statements, uncounted (account %d bytes): pipeline.Texts keeps each statement, a substring of its ~1 MB Query message, as a map key",
			float64(grew)/(1<<20), messages, r.srv.memoryOf("alice"))
	}
}
