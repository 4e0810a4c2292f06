package share

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPerOwner: an owner holds at most n slots; another owner is not
// held up by them; a waiter gives up with its context; a slot given back
// lets the next in.
func TestPerOwner(t *testing.T) {
	p := New(1)
	ctx := context.Background()
	done, err := p.Acquire(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := p.Acquire(short, "alice"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("alice's second slot: %v, want to wait until the context ends", err)
	}
	bob, err := p.Acquire(ctx, "bob")
	if err != nil {
		t.Fatalf("bob while alice holds hers: %v", err)
	}
	bob()
	got := make(chan error, 1)
	go func() {
		d, err := p.Acquire(ctx, "alice")
		if err == nil {
			d()
		}
		got <- err
	}()
	done()
	if err := <-got; err != nil {
		t.Fatalf("alice after giving hers back: %v", err)
	}
	// A free slot is taken even under an ended context (deterministically).
	ended, end := context.WithCancel(ctx)
	end()
	for range 100 {
		d, err := p.Acquire(ended, "carol")
		if err != nil {
			t.Fatalf("a free slot under an ended context: %v", err)
		}
		d()
	}
	if New(0).n != 1 {
		t.Error("New(0) must give one slot")
	}
}

// TestPerOwner_Waiting: Waiting counts the callers blocked on an owner's
// slots, per owner, and forgets them once they have one or give up.
func TestPerOwner_Waiting(t *testing.T) {
	p := New(1)
	ctx := context.Background()
	done, err := p.Acquire(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if p.Waiting("alice") != 0 {
		t.Fatalf("a held slot counts as waiting: %d", p.Waiting("alice"))
	}
	wctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 2)
	for range 2 {
		go func() {
			d, err := p.Acquire(wctx, "alice")
			if err == nil {
				d()
			}
			got <- err
		}()
	}
	for p.Waiting("alice") != 2 { // ends when both wait (a hang otherwise)
		time.Sleep(time.Millisecond)
	}
	if p.Waiting("bob") != 0 {
		t.Errorf("bob waits for alice's slot: %d", p.Waiting("bob"))
	}
	cancel()
	for range 2 {
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Errorf("waiter after cancel: %v", err)
		}
	}
	if n := p.Waiting("alice"); n != 0 {
		t.Errorf("%d waiters left after they gave up", n)
	}
	done()
}
