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
