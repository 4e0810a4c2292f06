package proxy

import (
	"testing"
	"time"
)

// TestAttack73_NoticeBuiltWholeBeforeItsCut (attack round 73, severity
// medium: rule 1, the proxy's memory after the charge, unbounded by
// anything counted before it).
//
// Round 65 found a 60 MB NOTICE (1,500 AVG columns, each listing two
// 20 KB CASE labels, "per group: aaa… ±x, bbb… ±y") and cut the answer's
// error text at 64 KiB (release/text.go capErrors). The cut is applied
// after the text is built: release.errorsText (release/post.go:581) still
// formats every output's part with perGroupText's labels, joins them
// (strings.Join) and appends the rest, 60 MB and its copies, and only
// then release.go:335 cuts it. Nothing before the charge counts it
// (checkAnswerCells and AnswerBytes count the answer's cells), nor the
// analyst's memory account. A profile of one such statement: errorsText
// allocated 920 MB (perGroupText 171 MB, outputMeasures 504 MB, called per
// output over every output), and the live heap peaked 232–699 MiB above
// its level before, for a 53 KB statement and one charge.
// dp_concurrency_per_analyst (2) such releases of one analyst, and
// several analysts, run at once.
//
// Measured here: the live heap's peak while noticeDP65(20000, 1500) runs,
// against the same statement with 1-byte labels (the control), under a
// 16 MiB analyst bound.
//
// Asserted: the peak stays within twice the analyst's bound.
//
// Suggested fix: build the error text against its byte budget (stop
// appending parts once maxErrorsBytes is reached, and cap each group
// label before it is formatted), rather than build it whole and cut it;
// compute outputMeasures once per plan.
func TestAttack73_NoticeBuiltWholeBeforeItsCut(t *testing.T) {
	const bound = 16 << 20
	r := startRealDP(t, func(c *Config) { c.MaxMemoryPerAnalyst = bound })
	pc, nc := r.connectNotices(t, "alice", "alice")
	peakOf := func(q string) (int64, time.Duration) {
		stop, done := make(chan struct{}), make(chan uint64)
		base := heapAlloc()
		go heapPeak65(stop, done)
		start := time.Now()
		_, err := execLong65(t, pc, q)
		took := time.Since(start)
		close(stop)
		peak := <-done
		if err != nil {
			t.Fatalf("statement of %d bytes: %v", len(q), err)
		}
		n := 0
		for _, m := range nc.take() {
			n += len(m)
		}
		grew := int64(peak) - base
		t.Logf("statement of %d bytes: %v, NOTICE %d bytes, live heap peaked %d MiB above its level before", len(q), took.Round(time.Millisecond), n, grew>>20)
		return grew, took
	}
	control, _ := peakOf(noticeDP65(1, 1500))
	grew, _ := peakOf(noticeDP65(20000, 1500))
	if grew > 2*bound {
		t.Errorf("one DP statement (two 20 KB CASE labels, 1,500 AVG columns) made the proxy's live heap peak %d MiB above its level after its charge (control with 1-byte labels: %d MiB), past twice alice's %d MiB bound: its NOTICE's error text is built whole before it is cut at 64 KiB",
			grew>>20, control>>20, bound>>20)
	}
}
