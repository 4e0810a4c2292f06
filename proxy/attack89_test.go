package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

// Attack round 89: today's fixes (rounds 84–88).

// post16 is a post-processing statement of 16 DP leaves (rewrite's
// maxLeaves), each a different count.
func post16() string {
	var from, sum []string
	for i := 1; i <= 16; i++ {
		from = append(from, fmt.Sprintf("(SELECT COUNT(*) AS n FROM visits WHERE age > %d) s%d", i, i))
		sum = append(sum, fmt.Sprintf("s%d.n", i))
	}
	return "SELECT " + strings.Join(sum, " + ") + " AS m FROM " + strings.Join(from, " CROSS JOIN ")
}

// TestAttack89_CachedPostLeavesLogUnlimited (medium). Round 86/87 put an
// analyst's free lines behind a per-analyst token bucket (60 at once, then
// 2 a second), and logs a cached single DP answer at Debug (dp.go execDP:
// it "spends nothing and repeats an answer already logged"). But a
// post-processing statement (proxy/post.go execPost) writes its
// "dp answer released" line at Info on the session's unlimited logger
// (c.log) for every one of its up to 16 leaves, whether they were charged
// or answered from the answer cache. So once the 16 leaves are charged
// once, repeating the statement is free and writes 16 unlimited Info lines
// each time: with response_time unset (the default) nothing paces it.
func TestAttack89_CachedPostLeavesLogUnlimited(t *testing.T) {
	w := &logLines87{}
	r := startRealDP(t, func(c *Config) {
		c.Logger = productionLogger(w, zapcore.InfoLevel)
	})
	pc := r.connectAs(t, "alice", "alice", "hospital")
	if _, err := execAll(t, pc, "SET dp.epsilon = 0.01"); err != nil {
		t.Fatal(err)
	}
	q := post16()
	if _, err := execAll(t, pc, q); err != nil {
		t.Fatalf("first (charged) run: %v", err)
	}
	chargesBefore := len(r.charges(t))
	linesBefore := strings.Count(w.String(), "dp answer released")
	const n = 200
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := execAll(t, pc, q); err != nil {
			t.Fatalf("repeat %d: %v", i, err)
		}
	}
	el := time.Since(start)
	time.Sleep(50 * time.Millisecond)
	chargesAfter := len(r.charges(t))
	lines := strings.Count(w.String(), "dp answer released") - linesBefore
	var bytes int
	for _, l := range strings.Split(w.String(), "\n") {
		if strings.Contains(l, "dp answer released") {
			bytes += len(l) + 1
		}
	}
	t.Logf("%d free repetitions in %v: %d new charges, %d \"dp answer released\" Info lines (%d bytes of such lines in all), %.0f lines/s from one session",
		n, el.Round(time.Millisecond), chargesAfter-chargesBefore, lines, bytes, float64(lines)/el.Seconds())
	if chargesAfter != chargesBefore {
		t.Fatalf("the repetitions were charged (%d new charges): not free", chargesAfter-chargesBefore)
	}
	// The analyst's bucket allows 60 lines at once and 2 a second.
	if allowed := 60 + int(2*el.Seconds()) + 2; lines > allowed {
		t.Errorf("free (cached) post-processing statements wrote %d Info lines in %v, past the per-analyst bound of about %d (60 then 2/s): the cached leaves' lines go to the unlimited session logger", lines, el.Round(time.Millisecond), allowed)
	}
}
