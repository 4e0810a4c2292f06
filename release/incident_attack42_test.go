package release

import (
	"context"
	"errors"
	"testing"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestAttack42_ResourceErrorUnderOthersLoadSuspends (attack round 42,
// severity medium: one analyst gets another suspended).
//
// A time-out under another analyst's load is not an incident
// (TestRun_TimeoutUnderOthersLoad), because that load is the other
// analyst's, not a row of this analyst's data. PostgreSQL's class 53
// errors — 53100 disk_full (temporary files of concurrent sorts and hash
// joins filling the disk; "could not resize shared memory segment … No
// space left on device" when concurrent parallel queries exhaust /dev/shm,
// 64 MB by default in Docker, which docker-compose.yml uses), 53200
// out_of_memory and 53000 insufficient_resources ("too many dynamic shared
// memory segments") — are the same kind of failure: the server's shared
// resources ran out while several analysts' DP statements ran. classify
// (incident.go) treats only 53300 as availability, so alice, running her
// two heavy DP statements (spilling sorts, parallel hash joins) at the
// moment bob's runs, turns bob's statement into bob's incident, and with
// the default incident_limit of 1 bob is suspended on the dataset until
// a steward resumes him: a change of another analyst's standing.
//
// The test releases bob's statement against an upstream that fails with
// each of these SQLSTATEs while another analyst's statement ran
// (Request.Contended true): bob must get a non-incident error, stay
// unsuspended and keep the charge. Alone (Contended false) the same
// errors may stay incidents (a person's long values can make one
// statement spill): the control case.
//
// Suggested fix: in afterCharge, treat the resource-exhaustion errors
// (53000, 53100, 53200) like a time-out: an availability failure, no
// incident, when req.Contended() reports another analyst's load; the
// incident otherwise.
func TestAttack42_ResourceErrorUnderOthersLoadSuspends(t *testing.T) {
	ds := loadPolicy(t)
	for _, code := range []string{"53100", "53200", "53000"} {
		for _, contended := range []bool{true, false} {
			led := &memLedger{limit: 3}
			r := newTestReleaser(t, led, 42)
			req := Request{Analyst: "bob", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace,
				Upstream:  &fakeUpstream{err: &pgconn.PgError{Code: code, Message: "could not resize shared memory segment: No space left on device"}},
				Contended: func() bool { return contended }}
			_, err := r.Run(context.Background(), req)
			if err == nil {
				t.Fatalf("%s: Run() succeeded against a failing upstream", code)
			}
			if !contended {
				// Control: alone, it is bob's own incident (as a
				// time-out alone is).
				if !errors.Is(err, ErrIncident) {
					t.Errorf("%s alone: Run() = %v, want the incident", code, err)
				}
				continue
			}
			if errors.Is(err, ErrIncident) || len(led.incidents) != 0 {
				t.Errorf("%s while another analyst's DP statement ran: recorded as bob's incident (%d incidents, suspended %v): another analyst's load suspends bob", code, len(led.incidents), led.suspended)
			}
			if led.spent < 0.1-1e-12 {
				t.Errorf("%s: spent %v, want the charge to stand", code, led.spent)
			}
			// Bob's next statement must run.
			req.Upstream, req.Contended, req.NoCache = &fakeUpstream{rows: [][]*string{{s("cardiology"), s("10"), s("100"), s("10")}}}, nil, true
			if _, err := r.Run(context.Background(), req); errors.Is(err, accountant.ErrSuspended) {
				t.Errorf("%s under another analyst's load: bob is suspended: %v", code, err)
			}
		}
	}
}
