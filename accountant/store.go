// Not in the privacy-critical set (docs/ARCHITECTURE.md): the interface the
// PostgreSQL ledger implements and its errors, reviewed with the ledger for
// its reserve-before-read protocol (ledger/doc.go, "Ledger-critical"); the
// composition it must apply is the rest of this package.

package accountant

import (
	"context"
	"errors"

	"github.com/dpproxy/dpproxy/policy"
)

// ErrBudgetExhausted is wrapped by the *pgerr.Error (SQLSTATE 53400) that
// Reserve returns when the charge does not fit in the remaining budget.
var ErrBudgetExhausted = errors.New("privacy budget exhausted")

// ErrLedgerUnavailable is wrapped by the *pgerr.Error (SQLSTATE 58000) that
// the ledger (package ledger) returns when its database cannot be reached. DP queries
// are refused (fail closed) until it is back.
var ErrLedgerUnavailable = errors.New("privacy ledger unavailable")

// Reservation is a durable charge made before any data is read.
type Reservation struct {
	ID      int64
	Analyst string // whose charge: the ledger bounds each analyst's share of its connections
	Cost    Spent  // what this query added to the composed total
	Status  Status // the analyst's budget after the charge
	// Renewed names the budget rows whose window this charge renewed
	// ("" the global row, "team:T" a team, else the analyst).
	Renewed []string
}

// Store is the ledger as the release path sees it. The PostgreSQL ledger
// (package ledger) implements it; release's tests use fakes.
type Store interface {
	// Reserve durably charges c (committed before it returns) or refuses with
	// a 53400 *pgerr.Error wrapping ErrBudgetExhausted. Concurrent Reserve
	// calls for one analyst and dataset never overspend.
	Reserve(ctx context.Context, c Charge) (*Reservation, error)
	// Release records the released (noisy) answer on the reservation (nil:
	// released without a stored answer, which the answer cache then misses).
	Release(ctx context.Context, res *Reservation, answer []byte) error
	// Status returns the analyst's budget on the dataset.
	Status(ctx context.Context, analyst string, ds *policy.Dataset) (Status, error)
	// Cached returns the released answer of the newest released charge with
	// this fingerprint under this policy version, if any.
	Cached(ctx context.Context, dataset, fingerprint, policyVersion string) ([]byte, bool, error)
	// RecordIncident counts an error after a charge and opens the circuit
	// breaker at the policy's incident limit (see [Incident]).
	RecordIncident(ctx context.Context, ds *policy.Dataset, inc Incident) (IncidentResult, error)
}

// ErrSuspended marks the refusal of a charge by an open circuit breaker:
// the analyst is suspended on the dataset after an incident.
var ErrSuspended = errors.New("analyst suspended after an incident")

// Incident is one failure after a charge that is not an availability
// failure (the emitted SQL raised an error or timed out, a released value
// could not be read, the noise could not be added). Whether it happens may
// depend on one person's data: a release at ε = ∞ of at most one bit. The
// Store counts incidents and, at the policy's budget.incident_limit,
// suspends the analyst on the dataset (Reserve then refuses, wrapping
// [ErrSuspended]), so no failure becomes an oracle (package ledger,
// incident.go).
type Incident struct {
	Analyst     string
	Dataset     string
	ChargeID    int64
	Fingerprint string
	// Kind says what failed: "upstream" (the emitted SQL raised an error),
	// "timeout", "result" (a returned value could not be read), "noise",
	// "panic".
	Kind string
	// SQLState is the upstream error's SQLSTATE, or "".
	SQLState string
}

// IncidentResult is what RecordIncident did.
type IncidentResult struct {
	Incidents int  // the analyst's incidents on the dataset since the last resume
	Suspended bool // the breaker is now open
}
