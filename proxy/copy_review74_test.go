package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestReview74_CopyPostProcessingNullStringUnbounded (high; rule 1: one
// analyst's statement makes the proxy build and hold memory far past
// max_memory_per_analyst_mb, any number of times the bound, for one DP
// charge).
//
// Round 72's fix counts a COPY's lines before they are built
// (proxy/copy.go:56 copyLinesBytes) and, for a DP query, reserves the NULL
// string per answer cell before the charge (proxy/dp.go:60 keepNull).
// But a post-processing statement (a DP aggregate in a FROM, SELECT … FROM
// (SELECT COUNT(*) …) s, …) goes through execDP's KindPost branch
// (proxy/dp.go:41 → execPost) before that room is computed, so keepNull
// is never reserved; materialize then reports released = true and
// execCopy charges the lines with chargeMemoryOwn, unchecked
// (proxy/copy.go:57-58), and builds them: the outer result's every NULL
// cell becomes the analyst's NULL string. Here, under an 8 MiB bound, 2,000
// NULL rows of the outer query with a 20,000-byte NULL string: 40 MB of
// lines for one charge; with 100 KB NULL strings and the outer result's
// MaxBufferedResult (64 MiB of rows, ~900,000 NULL cells) it is ~90 GB.
//
// Suggested fix: in execCopy, when the query was a post-processing
// statement (its outer result is known only after the charge), either
// refuse a COPY of a post-processing statement whose NULL string is longer
// than a small constant before anything runs, or reserve keepNull times the
// outer result's cell bound (MaxBufferedResult / 40 bytes a cell) before
// the leaves are charged (execPost, like reserveResult), and build the
// lines only within what was reserved; at least, check copyLinesBytes
// against the bound (54000) before building when released rows came
// from the shadow.
func TestReview74_CopyPostProcessingNullStringUnbounded(t *testing.T) {
	const budget = 8 << 20
	const rows, nullLen = 2000, 20000
	r := startRealDP(t, func(c *Config) { c.MaxMemoryPerAnalyst = budget })
	n0 := len(r.charges(t))
	nc := r.rawConn(t)
	before := heapAlloc()
	q := fmt.Sprintf("COPY (SELECT NULL::int AS v FROM (SELECT COUNT(*) AS n FROM visits) s, generate_series(1, %d) g) TO STDOUT WITH (NULL '%s')", rows, strings.Repeat("x", nullLen))
	sendMsgs(t, nc, &pgproto3.Query{String: q})
	held, charged := heldWhileUnread(before, budget, func() int64 { return r.srv.memoryOf("alice") })
	reply := readCopyReply(t, nc)
	nCharges := len(r.charges(t)) - n0
	t.Logf("post-processing COPY of %d NULLs with a %d-byte NULL string: reply %s; %d charge(s); account %.2f MiB, heap held while the client did not read %.1f MiB (bound %d MiB)",
		rows, nullLen, reply.summary, nCharges, float64(charged)/(1<<20), float64(held)/(1<<20), budget>>20)
	if reply.copyBytes > budget || charged > budget {
		t.Errorf("one post-processing COPY under a %d MiB per-analyst bound was answered with %.1f MiB of lines (account %.1f MiB, heap %.1f MiB held while the client did not read), for %d charge(s): the NULL string per outer NULL cell is neither reserved before the charge (execDP's keepNull is skipped by KindPost) nor checked after it (execCopy's chargeMemoryOwn); want 54000 before the leaves are charged",
			budget>>20, float64(reply.copyBytes)/(1<<20), float64(charged)/(1<<20), float64(held)/(1<<20), nCharges)
	}
}
