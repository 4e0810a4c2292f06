// Privacy-critical: needs DP review.

package accountant

import (
	"math"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/policy"
)

// Budget windows and teams (issue 18; policy/window.go, PRIVACY.md
// "Budget windows").
//
// With budget.window, every budget row (an analyst's, a team's, the
// dataset's global row) has a window_start. A charge at time now falls in
// the window [start + k·window, start + (k+1)·window) that holds now; when
// k > 0 the row renews: its per-window composition state starts empty.
// Its lifetime state is never emptied: every charge is composed into it,
// by the same method, and a charge must fit under the lifetime cap too. So
// the composed (ε, δ) of all releases ever charged to a row is at most its
// lifetime cap — the guarantee over the life of the dataset — and the
// window limit only bounds how fast it is spent.
//
// The clock is the proxy's (the ledger's, injectable for tests), never
// the client's. A row whose window_start is in the clock's future (a proxy
// with a clock behind the one that opened the window) does not renew: a
// skewed clock can delay a renewal, never bring one forward. A row that existed before
// its dataset had a window starts its first window at its first charge
// after that, with its spending so far (nothing is refunded).

// WindowOf returns the start of the window of a row at now, and whether
// the row renews (its stored state belongs to an earlier window). start is
// the row's stored window_start (zero: none yet).
func WindowOf(start, now time.Time, window time.Duration) (time.Time, bool) {
	if window <= 0 {
		return time.Time{}, false
	}
	if start.IsZero() {
		return now, false
	}
	if now.Before(start) {
		return start, false
	}
	k := now.Sub(start) / window
	if k == 0 {
		return start, false
	}
	return start.Add(k * window), true
}

// RenewsAt is the end of the window that starts at start.
func RenewsAt(start time.Time, window time.Duration) time.Time {
	if window <= 0 || start.IsZero() {
		return time.Time{}
	}
	return start.Add(window)
}

// GlobalAnalyst is the name of a dataset's global budget row (the
// optional cap across all analysts). PostgreSQL user names cannot be empty,
// so no analyst can be called that; the ledger rejects a charge with an
// empty analyst.
const GlobalAnalyst = ""

// SharedMethodName is the method a budget row shared by several analysts
// (the dataset's global row, a team's) composes with when the dataset's
// accountant is name: rdp for pld, name otherwise.
//
// A shared row composes every member's releases, so its state must not
// grow with what one of them chooses. Every method's state is a fixed set
// of sums except pld's, which keeps one entry per distinct release
// (TestAttack68_SharedRowStateFixed). RDP's state is one sum per order
// (rdp.go); its figure is a valid upper bound for the same releases
// (pld.go falls back to it), a few per cent above the PLD's for many
// releases.
func SharedMethodName(name string) string {
	if name == policy.AccountantPLD {
		return policy.AccountantRDP
	}
	return name
}

// RowKind says whose budget a row is.
type RowKind int

// The kinds of budget row a charge must fit in.
const (
	RowGlobal  RowKind = iota // the dataset's cap across all analysts
	RowTeam                   // a team's shared budget (teams: in the policy)
	RowAnalyst                // the analyst's own budget
)

// RowLimits are one budget row's caps: per window (or in all, without a
// window) and over all windows (+Inf: none).
type RowLimits struct {
	Kind     RowKind
	Name     string // the row's Name: GlobalAnalyst, "team:T" or the analyst
	Window   Spent
	Lifetime Spent
}

var noCap = Spent{Epsilon: math.Inf(1), Delta: math.Inf(1)}

// LimitsFor returns the caps of every row a charge of analyst on ds
// touches: the global row, the analyst's and their team's (the ledger
// locks the analyst's first, then the shared ones by name). The analyst's
// window cap is the policy's (grants are added by Reserve from the row).
func LimitsFor(ds *policy.Dataset, analyst string) []RowLimits {
	b := ds.Budget
	windowed := b.Window > 0
	g := RowLimits{Kind: RowGlobal, Name: GlobalAnalyst, Window: GlobalLimit(b), Lifetime: noCap}
	if windowed {
		if b.Lifetime.GlobalEpsilon > 0 {
			g.Lifetime.Epsilon = b.Lifetime.GlobalEpsilon
		}
		if b.Lifetime.GlobalDelta > 0 {
			g.Lifetime.Delta = b.Lifetime.GlobalDelta
		}
	}
	ab := ds.AnalystBudget(analyst)
	a := RowLimits{Kind: RowAnalyst, Name: analyst, Window: Spent{Epsilon: ab.Epsilon, Delta: ab.Delta}, Lifetime: noCap}
	if windowed {
		a.Lifetime = Spent{Epsilon: b.Lifetime.Epsilon, Delta: b.Lifetime.Delta}
	}
	out := []RowLimits{g, a}
	if t, ok := ds.TeamOf(analyst); ok {
		// A team without a delta shares only ε: no team cap on δ (each
		// member's own δ budget and the global cap still apply).
		tl := RowLimits{Kind: RowTeam, Name: policy.TeamLedgerPrefix + t.Name, Window: Spent{Epsilon: t.Epsilon, Delta: orNoCap(t.Delta)}, Lifetime: noCap}
		if windowed {
			tl.Lifetime = Spent{Epsilon: t.LifetimeEpsilon, Delta: orNoCap(t.LifetimeDelta)}
		}
		out = append(out, tl)
	}
	return out
}

// orNoCap is +Inf for 0 (a team δ the policy does not set).
func orNoCap(x float64) float64 {
	if x == 0 {
		return math.Inf(1)
	}
	return x
}

// OwnLimits returns the caps of the budget row named Name: an analyst's,
// or a team's ("team:T"); ok is false for a team the policy does not name.
func OwnLimits(ds *policy.Dataset, name string) (RowLimits, bool) {
	if t, isTeam := strings.CutPrefix(name, policy.TeamLedgerPrefix); isTeam {
		team := ds.Teams[t]
		if team == nil || len(team.Members) == 0 {
			return RowLimits{}, false
		}
		return LimitsFor(ds, team.Members[0])[2], true
	}
	return LimitsFor(ds, name)[1], true
}

// GlobalLimit returns the dataset-wide cap across analysts
// (budget.global_epsilon, budget.global_delta); +Inf on a coordinate that
// has none.
func GlobalLimit(b policy.Budget) Spent {
	g := Spent{Epsilon: math.Inf(1), Delta: math.Inf(1)}
	if b.GlobalEpsilon > 0 {
		g.Epsilon = b.GlobalEpsilon
	}
	if b.GlobalDelta > 0 {
		g.Delta = b.GlobalDelta
	}
	return g
}

// HasCap reports whether s caps at least one coordinate (is not +Inf on
// both).
func HasCap(s Spent) bool { return !math.IsInf(s.Epsilon, 1) || !math.IsInf(s.Delta, 1) }
