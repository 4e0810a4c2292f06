package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestAttack110_SmallDatasetOneAnalystTakesEverySlot: with two DP slots
// on a dataset (upstream_max_connections: 2, so dp_concurrency 2) the
// per-analyst default was min(2, slots) = 2, the whole dataset: bob's two
// sessions of a 32 s statement (GROUP BY diagnosis with corr, the demo's
// longest slot) held both slots, and alice's one statement waited the
// whole dp_queue_timeout and was refused with 53000 (30.3 s, measured
// through the demo). An analyst's default share is now at most half the
// dataset's slots (at least one), so another analyst finds one free.
func TestAttack110_SmallDatasetOneAnalystTakesEverySlot(t *testing.T) {
	a := newAdmission(2, 0, 300*time.Millisecond) // per-analyst left to its default
	b1 := admitNow(t, a, "bob")
	bobWaits := make(chan error, 1)
	var b2 *ticket
	go func() {
		var err error
		b2, err = a.admit(context.Background(), "bob")
		bobWaits <- err
	}()
	time.Sleep(20 * time.Millisecond) // bob's second statement is admitted or queued
	start := time.Now()
	alice, err := a.admit(context.Background(), "alice")
	if err != nil {
		pe, _ := pgerr.As(err)
		code := ""
		if pe != nil {
			code = pe.Code
		}
		t.Fatalf("alice refused after %v (SQLSTATE %s) while bob held the dataset's slots: %v", time.Since(start).Round(time.Millisecond), code, err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("alice waited %v for a slot behind bob", d)
	}
	alice.done()
	b1.done()
	if err := <-bobWaits; err != nil && !errors.Is(err, context.Canceled) {
		// bob's second statement may time out in the queue while his first
		// and alice's ran: that is his own share, not an error here.
		if pe, ok := pgerr.As(err); !ok || pe.Code != insufficientResources {
			t.Fatal(err)
		}
	}
	if b2 != nil {
		b2.done()
	}
}
