package proxy

import (
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/release"
)

// labelDP is a DP statement over public keys whose cells are long: a CASE
// bucket key whose two labels are labelLen bytes each, crossed with a
// width_bucket key of buckets+2 values, and one COUNT(*). It has
// 2·(buckets+2) groups and 3 columns, so it passes checkAnswerCells
// (groups × columns ≤ 60,000) and answerRoom estimates 64 bytes a cell,
// but every row carries a label of labelLen bytes taken from the text.
func labelDP(labelLen, buckets int) string {
	return "SELECT CASE WHEN age < 55 THEN '" + strings.Repeat("a", labelLen) +
		"' ELSE '" + strings.Repeat("b", labelLen) + "' END AS k, width_bucket(age, 0, 110, " +
		strconv.Itoa(buckets) + ") AS b, COUNT(*) FROM visits GROUP BY 1, 2"
}

// TestAttack55_LongCaseLabelsOutgrowAnswerRoom (attack round 55, severity
// medium: Rule 1, memory one analyst holds past max_memory_per_analyst_mb
// by far more than SECURITY.md's "up to MaxBufferedResult, one per
// session").
//
// A kept DP answer (a portal, a cursor, COPY) has its room checked before
// the charge by answerRoom (proxy/dp.go): groups × columns × 64 bytes.
// Once charged, it is kept whatever it has grown to (runKept skips
// growResult, the cursor's DECLARE charges what it built). But a cell is
// not at most 64 bytes: a CASE bucket key's labels are string constants of
// the analyst's text (rewrite/casekey.go), released in every row of their
// group. One 64 KiB statement — two labels of 30,000 bytes crossed with a
// 10,000-value width_bucket — passes checkAnswerCells at exactly 60,000
// cells and answerRoom estimates 3.8 MB, while its answer is 20,000 rows
// of 30 KB: 600 MB, kept per session past every bound (and built whole,
// uncounted, on the simple protocol, and written whole to the ledger as
// its stored answer).
//
// The test uses a smaller shape (2,000 groups × 20,000-byte labels: about
// 40 MB where answerRoom says 384 KB) against a 16 MiB analyst bound and
// a 2 MiB MaxBufferedResult: a DECLARE … WITH HOLD keeps it and alice's
// account ends past the bound plus one MaxBufferedResult.
//
// Suggested fix: estimate a key cell from its domain (the longest value
// of the key's domain, which the plan holds: public values, CASE labels,
// derived keys' texts) rather than a constant 64 bytes, both in answerRoom
// and in a byte bound checked with checkAnswerCells before the charge
// (refuse 54000 uncharged when groups × Σ column widths exceeds it), so
// that the simple protocol's built answer and the ledger's stored answer
// are bounded too.
func TestAttack55_LongCaseLabelsOutgrowAnswerRoom(t *testing.T) {
	const bound, maxBuf = 16 << 20, 2 << 20
	r := startRealDP(t, func(c *Config) {
		c.MaxMemoryPerAnalyst = bound
		c.MaxBufferedResult = maxBuf
	})
	pc := r.connect(t)
	n0 := len(r.charges(t))
	q := labelDP(20000, 998)
	t.Logf("statement: %d bytes", len(q))
	_, err := execAll(t, pc, "DECLARE long CURSOR WITH HOLD FOR "+q)
	charged := len(r.charges(t)) - n0
	held := r.srv.memoryOf("alice")
	t.Logf("DECLARE: err %v; %d charges; alice's sessions are charged %d bytes (bound %d, MaxBufferedResult %d)", err, charged, held, bound, maxBuf)
	if all := r.charges(t); charged > 0 {
		t.Logf("the ledger's stored answer of the charge: %d bytes", len(all[len(all)-1].answer))
	}
	if err == nil && held > bound+maxBuf {
		t.Errorf("one cursor of alice holds %d bytes, past max_memory_per_analyst (%d) plus one MaxBufferedResult (%d): answerRoom estimated %d bytes for it",
			held, bound, maxBuf, 2*1000*3*release.AnswerCellBytes)
	}
	if err != nil && charged != 0 {
		t.Errorf("refused (%v) after its charge", err)
	}
}
