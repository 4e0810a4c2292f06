package proxy

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// admitNow admits analyst or fails the test.
func admitNow(t *testing.T, a *admission, analyst string) *ticket {
	t.Helper()
	tk, err := a.admit(context.Background(), analyst)
	if err != nil {
		t.Fatalf("admit %s: %v", analyst, err)
	}
	return tk
}

// TestAdmission_PerAnalystCap: an analyst holds at most perAnalyst slots
// however many statements they send; another analyst is admitted at once
// while the first one's extra statements wait.
func TestAdmission_PerAnalystCap(t *testing.T) {
	a := newAdmission(4, 2, time.Minute)
	m1, m2 := admitNow(t, a, "mallory"), admitNow(t, a, "mallory")
	waited := make(chan *ticket)
	go func() {
		tk, err := a.admit(context.Background(), "mallory")
		if err != nil {
			t.Error(err)
		}
		waited <- tk
	}()
	time.Sleep(20 * time.Millisecond) // let the third statement queue
	alice := admitNow(t, a, "alice")  // a free slot: alice does not queue behind mallory
	select {
	case <-waited:
		t.Fatal("mallory's third statement was admitted past her cap of 2")
	default:
	}
	m1.done()
	m3 := <-waited
	if !m3.contended.Load() || !alice.contended.Load() || !m2.contended.Load() {
		t.Fatal("statements of two analysts that ran together are not marked contended")
	}
	for _, tk := range []*ticket{m2, m3, alice} {
		tk.done()
	}
	if a.total != 0 || len(a.running) != 0 || len(a.live) != 0 {
		t.Fatalf("slots left held: total %d, running %v", a.total, a.running)
	}
}

// TestAdmission_Fair: with the dataset full, freed slots go to the
// analysts with waiters in turn, not in arrival order: mallory's ten
// queued statements do not keep alice's one waiting.
func TestAdmission_Fair(t *testing.T) {
	a := newAdmission(2, 2, time.Minute)
	held := []*ticket{admitNow(t, a, "mallory"), admitNow(t, a, "mallory")}
	var mu sync.Mutex
	var order []string // in the order of admission: each holds its slot until release
	release := make(chan struct{})
	var wg sync.WaitGroup
	queuedNow := 0
	enqueue := func(analyst string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := a.admit(context.Background(), analyst)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, analyst)
			mu.Unlock()
			<-release
			tk.done()
		}()
		// Each waiter queues before the next (arrival order is known).
		queuedNow++
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			a.mu.Lock()
			n := queued(a)
			a.mu.Unlock()
			if n == queuedNow {
				break
			}
		}
	}
	for range 10 {
		enqueue("mallory")
	}
	enqueue("alice")
	for _, tk := range held {
		tk.done()
	}
	// The two freed slots are handed out before anyone gives one back.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(order)
		mu.Unlock()
		if n >= 2 {
			break
		}
	}
	close(release)
	wg.Wait()
	pos := -1
	for i, an := range order {
		if an == "alice" {
			pos = i
		}
	}
	if pos < 0 || pos > 2 {
		t.Fatalf("alice was served %dth of %d after mallory's queue, want within the first turns: %v", pos+1, len(order), order)
	}
}

// queued counts the waiting tickets of every analyst. Called with a.mu
// held.
func queued(a *admission) int {
	n := 0
	for _, q := range a.waiting {
		n += len(q)
	}
	return n
}

// TestAdmission_TimeoutAndCancel: a statement that waits past the queue
// timeout gets 53000 (uncharged: the release never starts), one whose
// client cancels gets 57014; neither leaves a slot or a waiter behind.
func TestAdmission_TimeoutAndCancel(t *testing.T) {
	a := newAdmission(1, 1, 30*time.Millisecond)
	held := admitNow(t, a, "alice")
	_, err := a.admit(context.Background(), "bob")
	if pe, ok := pgerr.As(err); !ok || pe.Code != insufficientResources {
		t.Fatalf("queue timeout: %v, want 53000", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	a.timeout = time.Minute
	_, err = a.admit(ctx, "bob")
	if err == nil || !errors.Is(err, context.Canceled) && !isCode(err, pgerr.QueryCanceled) {
		t.Fatalf("cancelled wait: %v, want 57014", err)
	}
	held.done()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.total != 0 || queued(a) != 0 || len(a.turns) != 0 || len(a.waiting) != 0 {
		t.Fatalf("left behind: total %d, waiters %d, turns %v", a.total, queued(a), a.turns)
	}
}

func isCode(err error, code string) bool {
	pe, ok := pgerr.As(err)
	return ok && pe.Code == code
}

// TestAdmission_AloneNotContended: statements of one analyst only are not
// contended (a time-out of theirs stays their own incident).
func TestAdmission_AloneNotContended(t *testing.T) {
	a := newAdmission(4, 4, time.Minute)
	t1, t2 := admitNow(t, a, "alice"), admitNow(t, a, "alice")
	if t1.contended.Load() || t2.contended.Load() {
		t.Fatal("one analyst's own statements marked contended")
	}
	t1.done()
	t2.done()
	t3 := admitNow(t, a, "bob")
	if t3.contended.Load() {
		t.Fatal("a statement that ran after another analyst's ended is marked contended")
	}
	t3.done()
}
