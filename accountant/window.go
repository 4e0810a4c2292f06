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
// The clock is the proxy's (injectable: Ledger.now), never the client's.
// A row whose window_start is in the clock's future (a proxy with a clock
// behind the one that opened the window) does not renew: a skewed clock
// can delay a renewal, never bring one forward. A row that existed before
// its dataset had a window starts its first window at its first charge
// after that, with its spending so far (nothing is refunded).

// windowOf returns the start of the window of a row at now, and whether
// the row renews (its stored state belongs to an earlier window). start is
// the row's stored window_start (zero: none yet).
func windowOf(start, now time.Time, window time.Duration) (time.Time, bool) {
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

// renewsAt is the end of the window that starts at start.
func renewsAt(start time.Time, window time.Duration) time.Time {
	if window <= 0 || start.IsZero() {
		return time.Time{}
	}
	return start.Add(window)
}

// rowKind says whose budget a row is.
type rowKind int

const (
	rowGlobal rowKind = iota
	rowTeam
	rowAnalyst
)

// rowLimits are one budget row's caps: per window (or in all, without a
// window) and over all windows (+Inf: none).
type rowLimits struct {
	kind     rowKind
	name     string // ledger analyst column: "", "team:T" or the analyst
	window   Spent
	lifetime Spent
}

var noCap = Spent{Epsilon: math.Inf(1), Delta: math.Inf(1)}

// limitsFor returns the caps of every row a charge of analyst on ds
// touches, in the order their rows are locked by name (the ledger sorts
// by name; the global row "" comes first). The analyst's window cap is
// the policy's (grants are added by Reserve from the row).
func limitsFor(ds *policy.Dataset, analyst string) []rowLimits {
	b := ds.Budget
	windowed := b.Window > 0
	g := rowLimits{kind: rowGlobal, name: globalAnalyst, window: globalLimit(b), lifetime: noCap}
	if windowed {
		if b.Lifetime.GlobalEpsilon > 0 {
			g.lifetime.Epsilon = b.Lifetime.GlobalEpsilon
		}
		if b.Lifetime.GlobalDelta > 0 {
			g.lifetime.Delta = b.Lifetime.GlobalDelta
		}
	}
	ab := ds.AnalystBudget(analyst)
	a := rowLimits{kind: rowAnalyst, name: analyst, window: Spent{Epsilon: ab.Epsilon, Delta: ab.Delta}, lifetime: noCap}
	if windowed {
		a.lifetime = Spent{Epsilon: b.Lifetime.Epsilon, Delta: b.Lifetime.Delta}
	}
	out := []rowLimits{g, a}
	if t, ok := ds.TeamOf(analyst); ok {
		// A team without a delta shares only ε: no team cap on δ (each
		// member's own δ budget and the global cap still apply).
		tl := rowLimits{kind: rowTeam, name: policy.TeamLedgerPrefix + t.Name, window: Spent{Epsilon: t.Epsilon, Delta: orNoCap(t.Delta)}, lifetime: noCap}
		if windowed {
			tl.lifetime = Spent{Epsilon: t.LifetimeEpsilon, Delta: orNoCap(t.LifetimeDelta)}
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

// ownLimits returns the caps of the budget row named name: an analyst's,
// or a team's ("team:T"); ok is false for a team the policy does not name.
func ownLimits(ds *policy.Dataset, name string) (rowLimits, bool) {
	if t, isTeam := strings.CutPrefix(name, policy.TeamLedgerPrefix); isTeam {
		team := ds.Teams[t]
		if team == nil || len(team.Members) == 0 {
			return rowLimits{}, false
		}
		return limitsFor(ds, team.Members[0])[2], true
	}
	return limitsFor(ds, name)[1], true
}

// chargesOfRow is the SQL condition selecting the charges of the budget row
// named by the parameter $n (an analyst, or "team:T": the charges made by
// members of T), for audit rows' last_charge_id.
func chargesOfRow(n string) string {
	return "(analyst = $" + n + " OR ($" + n + " LIKE 'team:%' AND team = substr($" + n + ", 6)))"
}
