package proxy

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// wideDP is a DP statement whose answer has few noisy cells but many
// output columns: one COUNT(*) measure (release's checkAnswerCells counts
// measures, so 1,000 groups × 2 measures pass its 60,000 cells) repeated
// in the select list, each repetition one more output column of every
// row. PostgreSQL's own limit on a select list is 1,664 entries
// (rewrite.maxTargetList), so the same shape, grouped by a width_bucket
// and department, reaches 29,995 groups × 1,664 columns: about 50 million
// cells, 1.3 GB of bufferedResult.size() or 2.1 GB of rowsBytes (release's
// TestAttack52_AnswerCellsCountMeasuresNotColumns).
func wideDP(cols int) string {
	return "SELECT width_bucket(age, 0, 110, 998) AS b" + strings.Repeat(", COUNT(*)", cols) + " FROM visits GROUP BY 1"
}

// TestAttack52_WideDPAnswerKeptPastBound (attack round 52, severity
// medium: Rule 1, memory one analyst holds past max_memory_per_analyst_mb
// by far more than SECURITY.md's "up to MaxBufferedResult, one per
// session", enough with an analyst's sessions to end the proxy and every
// other analyst's sessions).
//
// A portal that may release a DP answer reserves dpAnswerRoom (4 MiB,
// proxy/extended.go:693) before it runs, on the argument that "release
// refuses answers of more than 60,000 cells ... about 3 MiB"
// (extended.go:712). But checkAnswerCells (release/bounded.go:119) counts
// noisy measurements (groups × measures), not the answer's cells (groups ×
// output columns): the planner shares one measure among identical
// aggregates, so `COUNT(*)` written 800 times is one measure and 800
// columns. Once a new answer is released, runKept skips growResult
// (extended.go:698: lastAnswer changed; a cached answer, which is free,
// changes it too: proxy/dp.go:65) and settleResult charges whatever was
// built, with no MaxBufferedResult check either. The DP answer is also
// built whole in memory on the simple protocol (answerSet), uncounted.
//
// The test: max_memory_per_analyst 8 MiB, MaxBufferedResult 2 MiB;
// inside BEGIN one Parse/Bind/Execute(MaxRows 1) of a 1,000-group ×
// 801-column DP statement. The portal keeps ~21 MB; the account ends
// above the bound plus one MaxBufferedResult (the documented worst case
// of one session).
//
// Fixed: checkAnswerCells counts the larger of the measurements and the
// output columns, so the answer has at most 60,000 cells, and a portal
// reserves dpAnswerRoom (8 MiB: error columns double the cells) before it
// runs. The test now runs the real releaser (the test server's stub does
// not check plans): the 801-column statement is refused before its
// charge, and the widest accepted (1,000 groups × 60 columns) keeps the
// account within the bound.
//
// Suggested fix: bound the answer's built size before the charge from
// the plan — groups × (keys + outputs [+ error columns]) cells, each at
// most a known width — and count that, not the measures, in
// checkAnswerCells (or a separate maxAnswerBytes that refuses 54000
// uncharged); reserve that estimate (not a constant 4 MiB) in runKept and
// before execDP on the simple protocol; and check the built result against
// MaxBufferedResult whether or not an answer was released.
func TestAttack52_WideDPAnswerKeptPastBound(t *testing.T) {
	const bound, maxBuf = 16 << 20, 2 << 20
	r := startRealDP(t, func(c *Config) {
		c.MaxMemoryPerAnalyst = bound
		c.MaxBufferedResult = maxBuf
	})
	pc := r.connect(t)
	if _, err := execAll(t, pc, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	// Fixed (release's checkAnswerCells counts columns): 1,000 groups ×
	// 801 columns is refused before the charge.
	n0 := len(r.charges(t))
	rep := rawSend(t, pc, &noticeCollector{},
		&pgproto3.Parse{Query: wideDP(800)},
		&pgproto3.Bind{DestinationPortal: "wide"},
		&pgproto3.Execute{Portal: "wide", MaxRows: 1},
		&pgproto3.Sync{})
	if len(rep.errs) != 1 || !strings.HasPrefix(rep.errs[0], "54000") || len(r.charges(t)) != n0 {
		t.Fatalf("1,000 groups × 801 columns: errors %v, %d charges; want 54000 before any charge", rep.errs, len(r.charges(t))-n0)
	}
	if _, err := execAll(t, pc, "ROLLBACK; BEGIN"); err != nil {
		t.Fatal(err)
	}
	// The widest answer accepted (60,000 cells) fits the room reserved
	// before its charge.
	rep = rawSend(t, pc, &noticeCollector{},
		&pgproto3.Parse{Query: wideDP(59)},
		&pgproto3.Bind{DestinationPortal: "wide"},
		&pgproto3.Execute{Portal: "wide", MaxRows: 1},
		&pgproto3.Sync{})
	if len(rep.errs) > 0 || len(rep.results) != 1 || !rep.results[0].suspended || len(r.charges(t)) != n0+1 {
		t.Fatalf("want one released, suspended portal: results %d, errors %v", len(rep.results), rep.errs)
	}
	cols := len(rep.results[0].rows[0])
	held := r.srv.memoryOf("alice")
	t.Logf("one DP statement (%d columns per row): alice's sessions are charged %d bytes; bound %d, MaxBufferedResult %d", cols, held, bound, maxBuf)
	if held > bound {
		t.Errorf("one session of alice holds %d bytes in one suspended DP portal: past max_memory_per_analyst (%d)", held, bound)
	}
}

func TestAttack52_WideDPCursorKeptPastBound(t *testing.T) {
	const bound, maxBuf = 16 << 20, 2 << 20
	r := startRealDP(t, func(c *Config) {
		c.MaxMemoryPerAnalyst = bound
		c.MaxBufferedResult = maxBuf
	})
	pc := r.connect(t)
	n0 := len(r.charges(t))
	if _, err := execAll(t, pc, "DECLARE wide CURSOR WITH HOLD FOR "+wideDP(800)); err == nil || !strings.Contains(err.Error(), "SQLSTATE 54000") || len(r.charges(t)) != n0 {
		t.Fatalf("DECLARE of 1,000 groups × 801 columns: %v, %d charges; want 54000 before any charge", err, len(r.charges(t))-n0)
	}
	if _, err := execAll(t, pc, "DECLARE wide CURSOR WITH HOLD FOR "+wideDP(59)); err != nil {
		t.Fatalf("DECLARE: %v", err)
	}
	held := r.srv.memoryOf("alice")
	t.Logf("one DECLARE WITH HOLD of a DP statement: alice's sessions are charged %d bytes; bound %d, MaxBufferedResult %d", held, bound, maxBuf)
	if held > bound {
		t.Errorf("one cursor of alice holds %d bytes, past max_memory_per_analyst (%d)", held, bound)
	}
}
