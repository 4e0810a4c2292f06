// Privacy-critical: needs DP review.

package policy

import (
	"sort"
	"strings"
	"time"
)

// Budget windows and teams (issue 18; PRIVACY.md "Budget windows").
//
// budget.window renews the per-analyst (and global, and team) budgets
// every period: what an analyst spends is counted per window, and the
// accountant composes within the current window. budget.lifetime bounds
// the composition of everything ever charged, over all windows, and is
// required with a window: the guarantee a person has over the life of the
// dataset is the lifetime cap's. A window is a rate limit on spending, not
// a new guarantee.
//
// A team is a group of analysts who share one budget on the dataset, on
// top of each member's own: a charge must fit in the member's budget, the
// team's and the global cap.

// Lifetime is the cap over all windows (budget.lifetime).
type Lifetime struct {
	Epsilon, Delta             float64 // per analyst
	GlobalEpsilon, GlobalDelta float64 // across analysts; 0: none
}

// Team is an analyst group sharing one budget.
type Team struct {
	Name    string
	Members []string // sorted
	// Epsilon and Delta are the team's budget (per window when the dataset
	// has one); LifetimeEpsilon/Delta its cap over all windows. A Delta
	// (LifetimeDelta) of 0 means no team cap on δ: the team shares ε only.
	Epsilon, Delta                 float64
	LifetimeEpsilon, LifetimeDelta float64
}

// TeamLedgerPrefix starts the ledger's budget-row name of a team
// ("team:NAME"); analyst names may not start with it (internal/config).
const TeamLedgerPrefix = "team:"

// StewardLedgerPrefix starts the ledger's budget-row name of a steward's
// own budget ("steward:NAME"), which `dpproxy policy init` charges for its
// DP quantiles under its own limit (--steward-epsilon), not the policy's;
// analyst names may not start with it (internal/config).
const StewardLedgerPrefix = "steward:"

// TeamOf returns the analyst's team, if any.
func (d *Dataset) TeamOf(analyst string) (*Team, bool) {
	n, ok := d.teamOf[analyst]
	if !ok {
		return nil, false
	}
	return d.Teams[n], true
}

// Window bounds: shorter than an hour is not a budget, longer than ten
// years is no renewal.
const (
	minWindow = time.Hour
	maxWindow = 3650 * 24 * time.Hour
)

func (v *validator) window(r *rawBudget, d *Dataset) {
	if r == nil {
		return
	}
	if r.Window == "" {
		if r.Lifetime != nil {
			v.errorf(p("budget", "lifetime"), "budget.lifetime needs budget.window (without a window, budget.epsilon is already the lifetime cap)")
		}
		return
	}
	w, err := ParseWindow(r.Window)
	if err != nil || w < minWindow || w > maxWindow {
		v.errorf(p("budget", "window"), "budget.window %q must be a period between 1h and 3650d, written like 30d or 12h", r.Window)
		return
	}
	d.Budget.Window = w
	lt := r.Lifetime
	if lt == nil || lt.Epsilon == nil {
		v.errorf(p("budget", "window"), "budget.window needs budget.lifetime.epsilon: the cap on an analyst's ε over all windows (the guarantee is the lifetime cap's; PRIVACY.md)")
		return
	}
	if !finite(*lt.Epsilon) || *lt.Epsilon < d.Budget.Epsilon {
		v.errorf(p("budget", "lifetime", "epsilon"), "budget.lifetime.epsilon must be a number at least budget.epsilon (%g)", d.Budget.Epsilon)
	} else {
		d.Budget.Lifetime.Epsilon = *lt.Epsilon
	}
	switch {
	case lt.Delta != nil:
		if !finite(*lt.Delta) || *lt.Delta < d.Budget.Delta || *lt.Delta >= 1 {
			v.errorf(p("budget", "lifetime", "delta"), "budget.lifetime.delta must be in [budget.delta, 1)")
		} else {
			d.Budget.Lifetime.Delta = *lt.Delta
		}
	case d.Budget.Delta > 0:
		v.errorf(p("budget", "lifetime"), "budget.lifetime.delta is required when budget.delta > 0")
	}
	if lt.GlobalEpsilon != nil {
		if d.Budget.GlobalEpsilon == 0 || !finite(*lt.GlobalEpsilon) || *lt.GlobalEpsilon < d.Budget.GlobalEpsilon {
			v.errorf(p("budget", "lifetime", "global_epsilon"), "budget.lifetime.global_epsilon needs budget.global_epsilon and must be at least it")
		} else {
			d.Budget.Lifetime.GlobalEpsilon = *lt.GlobalEpsilon
		}
	}
	if lt.GlobalDelta != nil {
		if d.Budget.GlobalDelta == 0 || !finite(*lt.GlobalDelta) || *lt.GlobalDelta < d.Budget.GlobalDelta || *lt.GlobalDelta >= 1 {
			v.errorf(p("budget", "lifetime", "global_delta"), "budget.lifetime.global_delta needs budget.global_delta and must be in [global_delta, 1)")
		} else {
			d.Budget.Lifetime.GlobalDelta = *lt.GlobalDelta
		}
	}
}

func (v *validator) teams(raw map[string]*rawTeam, d *Dataset) {
	if len(raw) == 0 {
		return
	}
	d.Teams = map[string]*Team{}
	d.teamOf = map[string]string{}
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		rt, path := raw[n], p("teams", n)
		if !identRE.MatchString(n) {
			v.errorf(path, "team %q is not a plain identifier; use letters, digits and underscores", n)
			continue
		}
		if rt == nil || len(rt.Members) == 0 {
			v.errorf(path, "team %q needs members: [analyst, …]", n)
			continue
		}
		t := &Team{Name: n}
		if rt.Epsilon == nil || !finite(*rt.Epsilon) || *rt.Epsilon <= 0 {
			v.errorf(append(path, "epsilon"), "team %q needs epsilon: a positive number, the budget its members share", n)
		} else if *rt.Epsilon < d.Budget.EpsilonFloor() {
			v.errorf(append(path, "epsilon"), "team %q: epsilon (%g) is below budget.min_epsilon_per_query, so no query could run", n, *rt.Epsilon)
		} else {
			t.Epsilon = *rt.Epsilon
		}
		if rt.Delta != nil {
			if !finite(*rt.Delta) || *rt.Delta < 0 || *rt.Delta >= 1 {
				v.errorf(append(path, "delta"), "team %q: delta must be in [0, 1)", n)
			} else {
				t.Delta = *rt.Delta
			}
		}
		if d.Budget.Window > 0 {
			if rt.LifetimeEpsilon == nil || !finite(*rt.LifetimeEpsilon) || *rt.LifetimeEpsilon < t.Epsilon {
				v.errorf(append(path, "lifetime_epsilon"), "team %q: the dataset has budget.window, so the team needs lifetime_epsilon, at least its epsilon", n)
			} else {
				t.LifetimeEpsilon = *rt.LifetimeEpsilon
			}
			t.LifetimeDelta = t.Delta
			if rt.LifetimeDelta != nil {
				if !finite(*rt.LifetimeDelta) || *rt.LifetimeDelta < t.Delta || *rt.LifetimeDelta >= 1 {
					v.errorf(append(path, "lifetime_delta"), "team %q: lifetime_delta must be in [delta, 1)", n)
				} else {
					t.LifetimeDelta = *rt.LifetimeDelta
				}
			}
		} else if rt.LifetimeEpsilon != nil || rt.LifetimeDelta != nil {
			v.errorf(path, "team %q: lifetime_epsilon and lifetime_delta need budget.window", n)
		}
		seen := map[string]bool{}
		for _, m := range rt.Members {
			switch {
			case m == "" || strings.HasPrefix(m, TeamLedgerPrefix):
				v.errorf(append(path, "members"), "team %q: %q is not an analyst name", n, m)
			case seen[m]:
				v.errorf(append(path, "members"), "team %q lists %s twice", n, m)
			case d.teamOf[m] != "":
				v.errorf(append(path, "members"), "analyst %s is in teams %s and %s; an analyst may be in one team per dataset", m, d.teamOf[m], n)
			default:
				seen[m] = true
				d.teamOf[m] = n
				t.Members = append(t.Members, m)
			}
		}
		sort.Strings(t.Members)
		d.Teams[n] = t
	}
}
