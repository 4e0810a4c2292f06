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

// TestAttack46_OneRecordedIncidentLiftsSuspensionOfAnother (attack round
// 46, severity low-medium: the breaker's local suspension fails open while
// an incident is still unrecorded).
//
// recordLater (round 45's fix) runs one goroutine per incident the ledger
// could not record, and each one, once its own incident is written, drops
// the analyst's local suspension: r.localSuspended.Delete(key), with key =
// analyst+dataset. Its comment says the analyst "is refused here
// meanwhile, so makes no other", but two statements of the analyst that
// were already past suspendedHere (DPConcurrencyPerAnalyst is 2 by
// default, per proxy; a long query and a short one) can both fail after
// their charges while the ledger is down. Their retry schedules differ
// (250 ms doubling to 30 s, from each incident's own time), so when the
// ledger comes back the first goroutine records its incident and lifts the
// suspension while the second incident stays unrecorded for up to 30 s
// more (or as long as its own writes keep failing: each write is its own
// 5 s attempt). Meanwhile the ledger counts one incident fewer than
// happened, and the analyst's queries run and are charged as if the other
// incident had not happened: with incident_limit L, an incident that
// should have suspended them is followed by further probes, each another
// bit past the limit, which SECURITY.md (G5) says the breaker bounds.
//
// The test: two concurrent charged queries of alice fail upstream (22012)
// while the ledger refuses incidents; then the ledger takes exactly one
// more incident write (the second incident's retry is still failing, as it
// would between its retries); once one incident is recorded, alice's next
// query must still be refused before the upstream, since the other
// incident is known to this process only. Control: before the ledger
// takes anything, the same query is refused.
//
// Suggested fix: count the unrecorded incidents per key (a counter under
// a mutex, or a map key → set of charge ids) and lift the local
// suspension only when the last of them has been recorded; or have one
// retry goroutine per key that drains a queue of that key's incidents.
func TestAttack46_OneRecordedIncidentLiftsSuspensionOfAnother(t *testing.T) {
	ds := loadPolicy(t)
	ds.Budget.IncidentLimit = 5
	led := &gatedIncidentLedger{memLedger: &memLedger{limit: 100}}
	r := newTestReleaser(t, led, 4601)

	// Two statements in flight at once, both failing after their charge.
	up := &barrierUpstream{arrived: make(chan struct{}, 2), release: make(chan struct{})}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1 * float64(i+1),
				Mechanism: policy.MechanismLaplace, Upstream: up}
			_, errs[i] = r.Run(context.Background(), req)
		}()
	}
	<-up.arrived
	<-up.arrived
	close(up.release)
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrIncident) {
			t.Fatalf("query %d: %v, want the incident error", i, err)
		}
	}
	// Let the retry goroutines end once the test is over.
	t.Cleanup(func() { led.setAccept(1 << 30) })

	probe := func(eps float64) (int, error) {
		u := &fakeUpstream{rows: [][]*string{{s("cardiology"), s("10"), s("100"), s("10")}}}
		req := Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: eps,
			Mechanism: policy.MechanismLaplace, Upstream: u}
		_, err := r.Run(context.Background(), req)
		return len(u.calls), err
	}
	// Control: both incidents unrecorded, alice is refused here.
	if calls, err := probe(0.5); !errors.Is(err, accountant.ErrSuspended) || calls != 0 {
		t.Fatalf("control: after two unrecorded incidents: %v (%d upstream calls), want suspended", err, calls)
	}

	// The ledger takes one incident write; the other's keeps failing.
	led.setAccept(1)
	deadline := time.Now().Add(10 * time.Second)
	for led.recorded() < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if led.recorded() != 1 {
		t.Fatalf("%d incidents recorded, want 1", led.recorded())
	}
	// recordLater deletes the key right after its write returns.
	time.Sleep(50 * time.Millisecond)

	calls, err := probe(0.6)
	if !errors.Is(err, accountant.ErrSuspended) || calls != 0 {
		t.Errorf("one of two unrecorded incidents was recorded and the other is still unrecorded, yet alice's next DP query ran (err %v, %d upstream calls): the local suspension was lifted while the ledger counts %d of her 2 incidents",
			err, calls, led.recorded())
	}
}

// gatedIncidentLedger is a memLedger whose RecordIncident accepts only
// the number of writes it is allowed (setAccept), failing the others as a
// ledger that is down or times out would.
type gatedIncidentLedger struct {
	*memLedger
	gmu    sync.Mutex
	accept int
}

func (l *gatedIncidentLedger) setAccept(n int) {
	l.gmu.Lock()
	l.accept = n
	l.gmu.Unlock()
}

func (l *gatedIncidentLedger) recorded() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.incidents)
}

func (l *gatedIncidentLedger) RecordIncident(ctx context.Context, ds *policy.Dataset, inc accountant.Incident) (accountant.IncidentResult, error) {
	l.gmu.Lock()
	if l.accept <= 0 {
		l.gmu.Unlock()
		return accountant.IncidentResult{}, errors.New("ledger down")
	}
	l.accept--
	l.gmu.Unlock()
	return l.memLedger.RecordIncident(ctx, ds, inc)
}

// barrierUpstream blocks every query until release is closed, then fails
// it with division by zero (a data-dependent error after the charge).
type barrierUpstream struct {
	arrived chan struct{}
	release chan struct{}
}

func (u *barrierUpstream) Query(ctx context.Context, _ string, _ ...any) ([][]*string, error) {
	u.arrived <- struct{}{}
	<-u.release
	return nil, &pgconn.PgError{Code: "22012"}
}
