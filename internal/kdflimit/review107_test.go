package kdflimit

import "testing"

// TestReview107_EvictedAtTimeoutDoesNotRun: evict removes a waiter from
// the room and closes its turn; a waiter whose MaxWait timer fired first
// found itself gone from the waiters, took that for next having handed it
// the slot, and ran its derivation beside the one holding the slot, whose
// end then handed the slot to a third (two derivations at once, the bound
// of one broken). The test sets up the race's state directly: the slot
// busy, a full room, a new network's request evicting the newest waiter of
// the fullest network, then that waiter's timeout.
func TestReview107_EvictedAtTimeoutDoesNotRun(t *testing.T) {
	l := New()
	l.busy = true
	var last *waiter
	for i := 0; l.nWaiting < MaxWaiting; i++ {
		network := "net" + string(rune('a'+i/PerNetwork))
		if len(l.waiting[network]) == 0 {
			l.turns = append(l.turns, network)
		}
		w := &waiter{turn: make(chan struct{})}
		l.waiting[network] = append(l.waiting[network], w)
		l.nWaiting++
		if network == "neta" {
			last = w
		}
	}
	l.mu.Lock()
	made := l.evict("other")
	l.mu.Unlock()
	if !made || !last.evicted {
		t.Fatalf("evict made room: %v; the fullest network's newest waiter evicted: %v", made, last.evicted)
	}
	if l.givenAtTimeout("neta", last) {
		t.Errorf("a waiter evicted as its timer fired counts as handed the slot: it would run beside the derivation holding it")
	}
	if l.nWaiting != MaxWaiting-1 {
		t.Errorf("nWaiting = %d, want %d", l.nWaiting, MaxWaiting-1)
	}
}
