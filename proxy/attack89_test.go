package proxy

import (
	"fmt"
	"github.com/dpproxy/dpproxy/internal/audit"
	"os"
	"path/filepath"
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

// TestAttack89_ChargedPostStatementAuditLineDropped (low). The audit log
// writes a statement line past the analyst's free-line bucket only when
// it is "charged" (audit.Statement: s.DP && !s.Cached && success), and
// s.DP comes from the session's lastDP, which only execDP (a single DP
// statement) sets. A post-processing statement that was charged (its
// leaves under one ledger charge) has no DPEvent, so its audit statement
// line is counted as free: an analyst who first spends their free lines
// (1,000 refused statements, well under a second) has the audit statement
// lines of their charged post-processing statements left out (the line
// that ties the statement's fingerprint to its "batch:" charge), while the
// same charge by a plain DP statement is written. SECURITY.md item 9: a
// charged answer is never left out.
func TestAttack89_ChargedPostStatementAuditLineDropped(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	al, err := audit.Open(audit.Config{Path: path, MaxSizeMB: 50}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()
	r := startRealDP(t, func(c *Config) {
		c.Observer = auditObserver{al}
	})
	// Control: without a flood, a charged post-processing statement has
	// its audit statement line.
	pc0 := r.connectAs(t, "alice", "alice", "hospital")
	if _, err := execAll(t, pc0, "SET dp.epsilon = 0.01"); err != nil {
		t.Fatal(err)
	}
	b0, _ := os.ReadFile(path)
	if _, err := execAll(t, pc0, "SELECT s.n + 2 AS m FROM (SELECT COUNT(*) AS n FROM visits WHERE age > 11) s"); err != nil {
		t.Fatalf("post-processing statement: %v", err)
	}
	b1, _ := os.ReadFile(path)
	if !strings.Contains(string(b1[len(b0):]), `"route":"dp"`) {
		t.Fatalf("control: no audit line for a post-processing statement without a flood: %q", b1[len(b0):])
	}
	pc0.Close(ctxT(t))
	stop := floodInBackground87(t, r.testServer)
	// Let the flood spend the audit burst of 1,000 free lines.
	for i := 0; i < 1000; i++ {
		if ok, _ := auditFilesContain(t, dir, `lines_not_logged`); ok {
			break
		}
		b, _ := os.ReadFile(path)
		if strings.Count(string(b), "\n") > audit.FreeLinesBurst+50 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	pc := r.connectAs(t, "alice", "alice", "hospital")
	if _, err := execAll(t, pc, "SET dp.epsilon = 0.01"); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	if _, err := execAll(t, pc, "SELECT COUNT(*) AS n FROM visits WHERE age > 3"); err != nil {
		t.Fatalf("plain DP statement: %v", err)
	}
	if _, err := execAll(t, pc, "SELECT s.n + 1 AS m FROM (SELECT COUNT(*) AS n FROM visits WHERE age > 7) s"); err != nil {
		t.Fatalf("post-processing statement: %v", err)
	}
	stop()
	time.Sleep(100 * time.Millisecond)
	after, _ := os.ReadFile(path)
	added := string(after[len(before):])
	// The two charged statements' audit lines (route dp, answered).
	dpLines := 0
	for _, l := range strings.Split(added, "\n") {
		if strings.Contains(l, `"route":"dp"`) && strings.Contains(l, `"outcome":"answered"`) && strings.Contains(l, `"cached":false`) {
			dpLines++
		}
	}
	t.Logf("audit statement lines of the two charged statements (plain DP, then post-processing) written during the flood: %d", dpLines)
	all := r.charges(t)
	var batch int
	for _, c := range all {
		if strings.HasPrefix(c.fingerprint, "batch:") {
			batch++
		}
	}
	if batch != 2 {
		t.Fatalf("the post-processing statements made %d batch charges, want 2", batch)
	}
	if dpLines == 0 {
		t.Fatalf("control: the plain charged DP statement's audit line is missing too")
	}
	if dpLines < 2 {
		t.Errorf("the charged post-processing statement's audit statement line was left out by the analyst's own flood of free statements (%d lines added); the plain DP statement's was written", strings.Count(added, "\n"))
	}
}
