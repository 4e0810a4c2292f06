package accountant

import (
	"context"
	"errors"

	"github.com/dpproxy/dpproxy/policy"
	"go.uber.org/zap"
)

// ErrBudgetExhausted is wrapped by the *pgerr.Error (SQLSTATE 53400) that
// Reserve returns when the charge does not fit in the remaining budget.
var ErrBudgetExhausted = errors.New("privacy budget exhausted")

// Event is one noisy release, the unit of composition.
type Event struct {
	Mechanism string // policy.MechanismLaplace or policy.MechanismGaussian
	// Epsilon, Delta: the (ε, δ) guarantee of this release on its own.
	Epsilon float64
	Delta   float64
	// NoiseMultiplier is the noise scale over its sensitivity: Laplace scale
	// b/Δ₁ or Gaussian σ/Δ₂. Tighter accountants (rdp, zcdp, pld) use it.
	NoiseMultiplier float64
}

// Charge is what one query costs.
type Charge struct {
	Analyst       string
	Dataset       string
	Events        []Event
	Fingerprint   string // rewrite.Plan.Fingerprint
	PolicyVersion string
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
}

// Remaining returns Limit − Spent, floored at zero.
func (s Status) Remaining() Spent {
	r := Spent{Epsilon: s.Limit.Epsilon - s.Spent.Epsilon, Delta: s.Limit.Delta - s.Spent.Delta}
	if r.Epsilon < 0 {
		r.Epsilon = 0
	}
	if r.Delta < 0 {
		r.Delta = 0
	}
	return r
}

// Reservation is a durable charge made before any data is read.
type Reservation struct {
	ID     int64
	Cost   Spent  // what this query added to the composed total
	Status Status // the analyst's budget after the charge
}

// Store is the ledger as the release path sees it. *Ledger implements it.
type Store interface {
	// Reserve durably charges c (committed before it returns) or refuses with
	// a 53400 *pgerr.Error wrapping ErrBudgetExhausted. Concurrent Reserve
	// calls for one analyst and dataset never overspend.
	Reserve(ctx context.Context, c Charge) (*Reservation, error)
	// Release records the released (noisy) answer on the reservation.
	Release(ctx context.Context, id int64, answer []byte) error
	// Status returns the analyst's budget on the dataset.
	Status(ctx context.Context, analyst string, ds *policy.Dataset) (Status, error)
}

// Ledger is the PostgreSQL-backed ledger. Safe for concurrent use; several
// proxy processes may share one ledger database.
type Ledger struct{}

// Open connects to the ledger database and creates or migrates its schema.
func Open(ctx context.Context, dsn string, logger *zap.Logger) (*Ledger, error) {
	return nil, errors.New("accountant: not implemented")
}

// Close releases the ledger's connections.
func (l *Ledger) Close() {}
