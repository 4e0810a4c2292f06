package proxy

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// noticeDP65 is a DP statement over one CASE key with two labels of
// labelLen bytes and avgs AVG(age) columns: 2 groups, so every AVG column's
// part of the NOTICE lists both groups by their labels ("per group: aaa…
// ±x, bbb… ±y").
func noticeDP65(labelLen, avgs int) string {
	return "SELECT CASE WHEN age < 55 THEN '" + strings.Repeat("a", labelLen) + "' ELSE '" +
		strings.Repeat("b", labelLen) + "' END AS k, " + strings.Repeat("AVG(age), ", avgs) +
		"COUNT(*) FROM visits GROUP BY 1"
}

// TestAttack65_NoticeOutgrowsAnswerBound (attack round 65, severity high:
// rule 1, memory kept by sessions past max_memory_per_analyst_mb and a
// ledger row past the 16 MiB answer bound, for one charge).
//
// release.checkAnswerCells bounds an answer before its charge by its cells
// (60,000) and bytes (16 MiB: groups × a row's width, a key as long as
// its longest value), but not its NOTICE: errorsText gives every AVG (and
// variance) column of a grouped answer its own part, and with at most 12
// groups (maxGroupsListed) that part names every group by its keys
// (perGroupText). A CASE key's labels are the analyst's constants.
//
// Attack: one 53 KB statement, two CASE labels of 20,000 bytes and 1,500
// AVG(age) columns, 2 groups: 3,004 cells, an answer of about 250 KB by
// release.AnswerBytes, charged once at the default ε. Its NOTICE is 60 MB
// (1,500 × 2 × 20 KB); the ledger stores it in the charge's answer (60 MB
// row, written by Release on the shared ledger pool), the client receives
// it, and the session keeps it for SHOW dp.last_answer (lastAnswer.res:
// Errors and Notice, two copies), uncounted in the analyst's memory (0
// bytes charged). Asking again is free: the answer is cached (too large
// for the in-memory cache, it is read back from the ledger, 60 MB a time)
// and every session of the analyst that asks keeps its own copies.
//
// Measured (no race detector): the statement took 2 s; the NOTICE and the
// stored answer were 60,091,697 and 60,254,746 bytes; with 4 more sessions
// asking the cached statement, the proxy's heap after GC stays 580–640 MB
// above its level before (about 145 MB a session; the same under the
// race detector), against max_memory_per_analyst 16 MiB (50
// sessions, the default share of one analyst, would keep ~7 GB).
//
// Fix direction: count the NOTICE in the answer's bytes before the charge
// (release.AnswerBytes/checkAnswerCells: per listed group and column, the
// group's label width, or list groups by index or not at all beyond a
// small byte budget), truncate the per-group list by bytes, not only by
// count, and charge what a session keeps for SHOW dp.last_answer to the
// analyst's memory (or keep only a bounded prefix of it).
func TestAttack65_NoticeOutgrowsAnswerBound(t *testing.T) {
	const bound = 16 << 20
	const answerBound = 16 << 20 // SECURITY.md: an answer has at most 60,000 cells and 16 MiB
	r := startRealDP(t, func(c *Config) { c.MaxMemoryPerAnalyst = bound })
	pc, nc := r.connectNotices(t, "alice", "alice")
	q := noticeDP65(20000, 1500)
	n0 := len(r.charges(t))
	start := time.Now()
	if _, err := execLong65(t, pc, q); err != nil {
		t.Fatalf("statement (%d bytes): %v", len(q), err)
	}
	noticeBytes := 0
	for _, n := range nc.take() {
		noticeBytes += len(n)
	}
	fresh := since(r.charges(t), n0, "alice")
	if len(fresh) != 1 {
		t.Fatalf("%d charges, want 1", len(fresh))
	}
	stored := len(fresh[0].answer)
	t.Logf("statement of %d bytes: one charge (ε %v) in %v; NOTICE %d bytes, stored answer %d bytes",
		len(q), fresh[0].costEps, time.Since(start), noticeBytes, stored)
	if stored > answerBound {
		t.Errorf("one answer's ledger row is %d bytes, past the 16 MiB answer bound (its NOTICE: %d bytes)", stored, noticeBytes)
	}

	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	const more = 4
	for range more {
		s := r.connect(t) // NOTICEs discarded by the client
		if _, err := execLong65(t, s, q); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(since(r.charges(t), n0, "alice")); n != 1 {
		t.Errorf("the cached statement charged again (%d charges)", n)
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	kept := int64(ms.HeapAlloc) - int64(base)
	held := r.srv.memoryOf("alice")
	t.Logf("after %d more sessions asked it (free, cached): the proxy's heap after GC is %d MB above its level before; alice's sessions are charged %d bytes (bound %d MB)",
		more, kept>>20, held, bound>>20)
	if kept > 2*bound {
		t.Errorf("alice's idle sessions keep %d MB of the proxy's heap (charged %d bytes), past twice max_memory_per_analyst (%d MB): each keeps its last answer's NOTICE",
			kept>>20, held, 2*bound>>20)
	}
	if _, err := execAll(t, pc, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
}
