// Privacy-critical: needs DP review.

package accountant

import (
	"math"
	"time"

	"github.com/dpproxy/dpproxy/policy"
)

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
