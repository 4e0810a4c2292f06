// Privacy-critical: needs DP review.

package accountant

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/dpproxy/dpproxy/policy"
)

// ErrBudgetExhausted is wrapped by the *pgerr.Error (SQLSTATE 53400) that
// Reserve returns when the charge does not fit in the remaining budget.
var ErrBudgetExhausted = errors.New("privacy budget exhausted")

// ErrLedgerUnavailable is wrapped by the *pgerr.Error (SQLSTATE 58000) that
// the ledger (package ledger) returns when its database cannot be reached. DP queries
// are refused (fail closed) until it is back.
var ErrLedgerUnavailable = errors.New("privacy ledger unavailable")

// Event is one noisy release, the unit of composition.
type Event struct {
	// Mechanism is policy.MechanismLaplace or policy.MechanismGaussian; any
	// other value ("" or another name: partition selection, exponential
	// mechanism, …) is a release that every accountant composes by its
	// (ε, δ) alone.
	Mechanism string
	// Epsilon, Delta: the (ε, δ) guarantee of this release on its own.
	Epsilon float64
	Delta   float64
	// NoiseMultiplier is the noise scale over its sensitivity: Laplace scale
	// b/Δ₁ or Gaussian σ/Δ₂. Tighter accountants (rdp, zcdp, pld) use it;
	// zero means unknown, and the event is then composed by its (ε, δ).
	NoiseMultiplier float64
}

// Charge is what one query costs.
type Charge struct {
	Analyst       string
	Dataset       string
	Events        []Event
	Fingerprint   string // rewrite.Plan.Fingerprint
	PolicyVersion string
	// Policy is the dataset's loaded policy. Reserve takes the limits from
	// it on every call (Policy.AnalystBudget(Analyst) for the analyst,
	// Policy.Budget.GlobalEpsilon/GlobalDelta for the cap across analysts)
	// and the composition method from Policy.Budget.Accountant, so a data
	// steward raises a budget by editing the policy. Required.
	Policy *policy.Dataset
}

// Spent is a composed (ε, δ) amount.
type Spent struct {
	Epsilon float64
	Delta   float64
}

// Status is an analyst's budget on one dataset.
type Status struct {
	Dataset    string
	Accountant string
	Spent      Spent
	Limit      Spent
	// Renews is when the current budget window ends and Spent goes back
	// to zero (window.go); zero when the dataset has no budget.window.
	Renews time.Time
	// Lifetime is the spending over all windows and its cap
	// (budget.lifetime); nil when the dataset has no window.
	Lifetime *Lifetime
}

// Lifetime is a budget row's spending over all its windows and the
// policy's lifetime cap on it.
type Lifetime struct {
	Spent Spent
	Limit Spent
}

// Remaining returns Limit − Spent, floored at zero (see [Spent.Sub]).
func (s Status) Remaining() Spent { return s.Limit.Sub(s.Spent) }

// Sub returns s − t on each coordinate, floored at zero. The subtraction is
// done in exact decimal on the shortest decimal form of each figure (see
// decimal.go), so 3 − 2.9 is 0.1, not 0.10000000000000009; +Inf − finite is
// +Inf, and a NaN or infinite t gives 0. The ledger uses it for what one
// charge added to a row (after − before) and for the budget remaining.
func (s Spent) Sub(t Spent) Spent {
	return Spent{Epsilon: decSub(s.Epsilon, t.Epsilon), Delta: decSub(s.Delta, t.Delta)}
}

// decSub returns a − b in exact decimal, floored at zero; +Inf − finite is
// +Inf.
func decSub(a, b float64) float64 {
	if math.IsInf(a, 1) {
		return a
	}
	if math.IsNaN(a) || math.IsNaN(b) || math.IsInf(b, 0) {
		return 0
	}
	r := dec(a)
	r.Sub(r, dec(b))
	if r.Sign() <= 0 {
		return 0
	}
	f, _ := r.Float64()
	return f
}

// Reservation is a durable charge made before any data is read.
type Reservation struct {
	ID     int64
	Cost   Spent  // what this query added to the composed total
	Status Status // the analyst's budget after the charge
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
	// Release records the released (noisy) answer on the reservation.
	Release(ctx context.Context, id int64, answer []byte) error
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
