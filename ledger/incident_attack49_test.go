package ledger

import (
	"context"
	"testing"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
)

// TestAttack49_IncidentRetryCountsTwice (attack round 49, severity low:
// an analyst suspended below the dataset's incident_limit; the steward's
// view counts incidents that did not happen).
//
// Round 45/46's fix retries an incident the ledger "could not record"
// (release.recordLater: the same accountant.Incident, same ChargeID, every
// 250 ms … 30 s until a write returns nil). A write can fail after it took
// effect: RecordIncident's transaction commits and its reply is lost, or
// the 5 s incidentTimeout expires while COMMIT is in flight (pgx returns
// the context error; the server committed). The retry then writes the
// same incident again, and RecordIncident is not idempotent: it adds 1 to
// budget.incidents and inserts another incident row each time, keyed by
// nothing. With incident_limit 2 one incident suspends the analyst.
//
// The test writes the same incident twice, as recordLater does after such
// an ambiguous failure, and expects it counted once. Control: a second
// incident of another charge is counted.
//
// Suggested fix: make the write idempotent on the charge: a unique index
// on dpproxy_ledger.incident(charge_id) (one incident per charge is all
// afterCharge makes), INSERT … ON CONFLICT (charge_id) DO NOTHING first,
// and update budget.incidents only when the row was inserted; return the
// current count and state either way.
func TestAttack49_IncidentRetryCountsTwice(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	l := openLedger(t, dsn)
	ds := testPolicy("hospital", 3, 1e-6, policy.AccountantPure)
	ds.Budget.IncidentLimit = 2

	res, err := l.Reserve(ctx, charge("alice", ds, laplace(0.1)))
	if err != nil {
		t.Fatal(err)
	}
	inc := accountant.Incident{Analyst: "alice", Dataset: "hospital", ChargeID: res.ID,
		Fingerprint: "fp-alice", Kind: "upstream", SQLState: "22012"}
	first, err := l.RecordIncident(ctx, ds, inc)
	if err != nil || first.Incidents != 1 || first.Suspended {
		t.Fatalf("first write: %+v, %v; want 1 incident, not suspended", first, err)
	}
	// recordLater's retry of the same incident, after the first write's
	// reply was lost.
	again, err := l.RecordIncident(ctx, ds, inc)
	if err != nil {
		t.Fatal(err)
	}
	if again.Incidents != 1 || again.Suspended {
		t.Errorf("the same incident (charge %d) written again, as recordLater retries it: %d incidents, suspended %v; want 1, not suspended (incident_limit 2)",
			res.ID, again.Incidents, again.Suspended)
	}
	if n := queryOne[int64](t, dsn, `SELECT count(*) FROM dpproxy_ledger.incident WHERE charge_id = $1`, res.ID); n != 1 {
		t.Errorf("%d incident rows for charge %d, want 1", n, res.ID)
	}

	// Control (bob): two incidents of two charges reach incident_limit 2.
	var last accountant.IncidentResult
	for range 2 {
		r, err := l.Reserve(ctx, charge("bob", ds, laplace(0.1)))
		if err != nil {
			t.Fatal(err)
		}
		last, err = l.RecordIncident(ctx, ds, accountant.Incident{Analyst: "bob", Dataset: "hospital", ChargeID: r.ID,
			Fingerprint: "fp-bob", Kind: "upstream", SQLState: "22012"})
		if err != nil {
			t.Fatal(err)
		}
	}
	if last.Incidents != 2 || !last.Suspended {
		t.Fatalf("control: two charges' incidents: %+v; want 2, suspended", last)
	}
}
