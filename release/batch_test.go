package release

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// batchReqs are two leaves of one statement over a fake upstream that
// answers one ungrouped count row.
func batchReqs(t *testing.T, ds *policy.Dataset, up Upstream, eps float64) []Request {
	t.Helper()
	var reqs []Request
	for _, q := range []string{"SELECT COUNT(*) FROM visits", "SELECT COUNT(*) FROM visits WHERE age > 30"} {
		p, err := rewrite.RewriteWith(ds, q, rewrite.Options{NoBias: true})
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, Request{Analyst: "alice", Dataset: ds, Plan: p, Epsilon: eps, Mechanism: policy.MechanismLaplace, Upstream: up})
	}
	return reqs
}

// TestRunBatch_OneCharge: the leaves of one statement are reserved in one
// ledger charge, before any is run, with the events of both; the answers
// are recorded on that reservation, and a repeated leaf is answered from
// the cache without a charge.
func TestRunBatch_OneCharge(t *testing.T) {
	ds := loadPolicy(t)
	up := &fakeUpstream{rows: [][]*string{{s("40")}}}
	led := &memLedger{limit: 3}
	r := newTestReleaser(t, led, 3)
	res, err := r.RunBatch(context.Background(), batchReqs(t, ds, up, 0.25))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0] == nil || res[1] == nil || len(res[0].Rows) != 1 || len(res[1].Rows) != 1 {
		t.Fatalf("results = %+v", res)
	}
	if len(led.reserved) != 1 || len(led.reserved[0].Events) != 2 || len(up.calls) != 2 {
		t.Fatalf("%d charges (%+v), %d upstream queries; want one charge of both leaves' events, then two queries", len(led.reserved), led.reserved, len(up.calls))
	}
	if res[0].ReservationID != res[1].ReservationID {
		t.Errorf("leaves on reservations %d and %d", res[0].ReservationID, res[1].ReservationID)
	}
	var stored []storedAnswer
	if err := json.Unmarshal(led.released[1], &stored); err != nil || len(stored) != 2 {
		t.Fatalf("recorded answer %s: %v", led.released[1], err)
	}
	// Again: both leaves from the cache, nothing charged or run.
	again, err := r.RunBatch(context.Background(), batchReqs(t, ds, up, 0.25))
	if err != nil || !again[0].Cached || !again[1].Cached || len(led.reserved) != 1 || len(up.calls) != 2 {
		t.Fatalf("repeated batch: %v, cached %v/%v, %d charges, %d queries", err, again[0].Cached, again[1].Cached, len(led.reserved), len(up.calls))
	}
}

// TestRunBatch_RefusedAsAWhole: a statement whose leaves together exceed
// the budget is refused (53400) before anything is charged or read, even
// though its first leaf alone would fit.
func TestRunBatch_RefusedAsAWhole(t *testing.T) {
	ds := loadPolicy(t)
	up := &fakeUpstream{rows: [][]*string{{s("40")}}}
	led := &memLedger{limit: 0.3}
	_, err := newTestReleaser(t, led, 4).RunBatch(context.Background(), batchReqs(t, ds, up, 0.2))
	if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.ConfigurationLimit {
		t.Fatalf("err = %v, want 53400", err)
	}
	if len(led.reserved) != 0 || len(up.calls) != 0 {
		t.Fatalf("%d charges, %d upstream queries; want none", len(led.reserved), len(up.calls))
	}
}

// TestRunBatch_OneIncident: a failure after the charge is one incident of
// the statement, with the one fixed error.
func TestRunBatch_OneIncident(t *testing.T) {
	ds := loadPolicy(t)
	up := &fakeUpstream{err: errors.New("boom")}
	led := &memLedger{limit: 3}
	_, err := newTestReleaser(t, led, 5).RunBatch(context.Background(), batchReqs(t, ds, up, 0.25))
	if err == nil || len(led.reserved) != 1 || len(led.incidents) != 1 || len(up.calls) != 1 {
		t.Fatalf("err %v, %d charges, %d incidents, %d queries; want an error, 1, 1, 1", err, len(led.reserved), len(led.incidents), len(up.calls))
	}
	if led.incidents[0].Fingerprint != led.reserved[0].Fingerprint {
		t.Errorf("incident of %q, charge %q", led.incidents[0].Fingerprint, led.reserved[0].Fingerprint)
	}
}

// TestRunBatch_SameLeafTwice: the same query twice in one statement is
// answered once, charged once, and both leaves get that answer.
func TestRunBatch_SameLeafTwice(t *testing.T) {
	ds := loadPolicy(t)
	up := &fakeUpstream{rows: [][]*string{{s("40")}}}
	led := &memLedger{limit: 3}
	reqs := batchReqs(t, ds, up, 0.25)
	reqs[1] = reqs[0]
	res, err := newTestReleaser(t, led, 6).RunBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(led.reserved) != 1 || len(led.reserved[0].Events) != 1 || len(up.calls) != 1 || res[0] != res[1] {
		t.Fatalf("%d charges, %d events, %d queries, same answer %v; want 1, 1, 1, true", len(led.reserved), len(led.reserved[0].Events), len(up.calls), res[0] == res[1])
	}
}
