package release

import (
	"context"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/accountant"
)

// TestReview87_UnstoredAnswerServedFromMemory (low; round 84's fix). An
// answer whose JSON exceeds maxStoredAnswer is released with no stored
// answer (storedJSON gives nil), but record still puts it in the
// in-memory answer cache, whose bound counts raw bytes (answerSize), not
// JSON bytes: control characters are 6 JSON bytes each, U+2028 two bytes
// more than its three. So this proxy serves repeats free from memory while
// the ledger (other proxies, a restart, an eviction) charges them again —
// contrary to "memory only holds answers the ledger recorded" (SECURITY.md
// G3, cache.go) and to README's "repeating one charges again".
func TestReview87_UnstoredAnswerServedFromMemory(t *testing.T) {
	ds := loadPolicy(t)
	led := &memLedger{limit: 3}
	r := newTestReleaser(t, led, 87)
	req := Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1}
	key := cacheKey(req)
	cell := strings.Repeat("\x01", 1000)
	sa := &storedAnswer{Columns: []Column{{Name: "k", PGType: "text"}}}
	for range 500 { // about 0.5 MiB in memory, 3 MB of JSON
		sa.Rows = append(sa.Rows, []*string{&cell})
	}
	if storedJSON(sa) != nil {
		t.Fatal("setup: the answer's JSON fits maxStoredAnswer")
	}
	res := &accountant.Reservation{ID: 1, Analyst: "alice"}
	r.record(context.Background(), req, key, res, sa)
	led.mu.Lock()
	stored, released := led.released[1]
	led.mu.Unlock()
	if !released || stored != nil {
		t.Fatalf("setup: ledger released=%v stored %d bytes; want released with no stored answer", released, len(stored))
	}
	if _, ok := r.answers.get(answerKeyOf(req, key)); ok {
		t.Errorf("an answer the ledger did not store (JSON over %d bytes) is in the in-memory cache: this proxy repeats it free, the ledger charges it again", maxStoredAnswer)
	}
}
