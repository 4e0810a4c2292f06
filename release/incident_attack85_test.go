package release

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5/pgconn"
)

// incidentClock is a memLedger that notes when each incident is written.
type incidentClock struct {
	*memLedger
	mu sync.Mutex
	at []time.Time
}

func (l *incidentClock) RecordIncident(ctx context.Context, ds *policy.Dataset, inc accountant.Incident) (accountant.IncidentResult, error) {
	l.mu.Lock()
	l.at = append(l.at, time.Now())
	l.mu.Unlock()
	return l.memLedger.RecordIncident(ctx, ds, inc)
}

// TestAttack85_IncidentWrittenAtPublishTime (attack round 85's lead, rule
// 1's time channel): an error after the charge is released at the end of
// its time slot, but its incident had been written to the ledger at the
// moment of the failure, and a suspension it opens shows at once to the
// analyst's other sessions (Reserve refuses a suspended analyst, 42501,
// before it checks the budget, 53400): a probe from another session
// learnt the failure's moment within the slot. The incident is now
// written at the publish time, whenever the failure happened, even when
// the statement's context has ended; the error says when it happened
// (ErrorReadyAt), so the proxy pads it to the slot the failure reached,
// not the next one. Deterministic: a fake upstream fails at once.
func TestAttack85_IncidentWrittenAtPublishTime(t *testing.T) {
	ds := loadPolicy(t)
	const step = 400 * time.Millisecond
	for _, cancelled := range []bool{false, true} {
		led := &incidentClock{memLedger: &memLedger{limit: 3}}
		r := newTestReleaser(t, led, 85)
		ctx, cancel := context.WithCancel(context.Background())
		if cancelled {
			cancel() // the session ended: the write still waits
		}
		start := time.Now()
		req := Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace,
			Upstream:  &fakeUpstream{err: &pgconn.PgError{Code: "22012"}},
			PublishAt: start.Add(step), PadStep: step}
		_, err := r.Run(ctx, req)
		returned := time.Now()
		cancel()
		if !errors.Is(err, ErrIncident) {
			t.Fatalf("cancelled=%v: %v, want the incident error", cancelled, err)
		}
		ready, inner := ErrorReadyAt(err)
		if !errors.Is(inner, ErrIncident) {
			t.Fatalf("ErrorReadyAt's error %v is not the incident's", inner)
		}
		led.mu.Lock()
		written := led.at[len(led.at)-1]
		led.mu.Unlock()
		t.Logf("cancelled=%v: failed after %v, incident written after %v, returned after %v (publish at %v)",
			cancelled, ready.Sub(start), written.Sub(start), returned.Sub(start), step)
		if written.Before(req.PublishAt) {
			t.Errorf("cancelled=%v: the incident was written %v before the publish time: its moment shows to the analyst's other sessions", cancelled, req.PublishAt.Sub(written))
		}
		if !ready.Before(req.PublishAt) || PadUntil(start, step, ready) != req.PublishAt {
			t.Errorf("cancelled=%v: the error's ready time %v after the start pads to %v, want the failure's slot %v", cancelled, ready.Sub(start), PadUntil(start, step, ready).Sub(start), step)
		}
	}
}

// TestReleaser_StopWritesWaitingIncidents (review round 87): an incident
// waiting for its publish time is written when the proxy stops (Stop),
// before the ledger closes, not lost with it.
func TestReleaser_StopWritesWaitingIncidents(t *testing.T) {
	ds := loadPolicy(t)
	led := &incidentClock{memLedger: &memLedger{limit: 3}}
	r := newTestReleaser(t, led, 87)
	start := time.Now()
	req := Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace,
		Upstream:  &fakeUpstream{err: &pgconn.PgError{Code: "22012"}},
		PublishAt: start.Add(time.Minute), PadStep: time.Minute}
	done := make(chan error, 1)
	go func() { _, err := r.Run(context.Background(), req); done <- err }()
	time.Sleep(100 * time.Millisecond) // the failure, then its wait
	led.mu.Lock()
	early := len(led.at)
	led.mu.Unlock()
	if early != 0 {
		t.Fatalf("the incident was written before its publish time")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := 0
	for n == 0 && ctx.Err() == nil {
		// Stop again until the failure has happened (a loaded machine may
		// not have run it yet): once stopping, an incident does not wait.
		r.Stop(ctx)
		led.mu.Lock()
		n = len(led.at)
		led.mu.Unlock()
		if n == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if n != 1 {
		t.Fatalf("after Stop %d incidents written, want 1 (%v after the start)", n, time.Since(start))
	}
	if err := <-done; !errors.Is(err, ErrIncident) {
		t.Fatalf("Run: %v, want the incident error", err)
	}
}
