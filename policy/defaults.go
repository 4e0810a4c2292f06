// The query defaults and the ε floor of a policy's budget.
//
// Not in the privacy-critical set (docs/ARCHITECTURE.md): they choose which
// query a session asks for when it sets nothing (ε, δ, mechanism, automatic
// contribution and clipping) and refuse ε too small to compute with; every
// query, defaulted or set, is checked again by release (checkRequest: ε,
// δ and mechanism valid) and charged by the ledger against the budget's
// caps (validate.go), whatever these return. A bug here asks for a
// different query or refuses one, never a release larger than its charge.

package policy

// minEpsilonPerQuery validates budget.min_epsilon_per_query (default
// DefaultMinEpsilonPerQuery): a finite number > 0, not above budget.epsilon
// (no query could run).
func (v *validator) minEpsilonPerQuery(r *rawBudget, b Budget) float64 {
	floor := DefaultMinEpsilonPerQuery
	path := p("budget", "min_epsilon_per_query")
	if r.MinEpsilonPerQuery != nil {
		if !finite(*r.MinEpsilonPerQuery) || *r.MinEpsilonPerQuery <= 0 {
			v.errorf(path, "budget.min_epsilon_per_query must be a positive number (default %g)", DefaultMinEpsilonPerQuery)
			return floor
		}
		floor = *r.MinEpsilonPerQuery
	} else {
		path = p("budget", "epsilon")
	}
	if b.Epsilon > 0 && b.Epsilon < floor {
		v.errorf(path, "budget.epsilon (%g) is below budget.min_epsilon_per_query (%g), so no query could run; lower min_epsilon_per_query", b.Epsilon, floor)
	}
	return floor
}

func (v *validator) defaults(r *rawDefaults, b Budget) Defaults {
	d := Defaults{Epsilon: 0.1, Mechanism: MechanismLaplace, Contribution: ContributionFixed, Clipping: ClippingFixed}
	if b.Epsilon > 0 && b.Epsilon < d.Epsilon {
		d.Epsilon = b.Epsilon
	}
	if r == nil {
		return d
	}
	switch r.Contribution {
	case "", ContributionFixed:
	case ContributionAuto:
		d.Contribution = ContributionAuto
	default:
		v.errorf(p("defaults", "contribution"), "defaults.contribution must be fixed or auto, not %q", r.Contribution)
	}
	switch r.Clipping {
	case "", ClippingFixed:
	case ClippingAuto:
		d.Clipping = ClippingAuto
	default:
		v.errorf(p("defaults", "clipping"), "defaults.clipping must be fixed or auto, not %q", r.Clipping)
	}
	if r.Epsilon != nil {
		if !finite(*r.Epsilon) || *r.Epsilon <= 0 {
			v.errorf(p("defaults", "epsilon"), "defaults.epsilon must be a positive number")
		} else if b.Epsilon > 0 && *r.Epsilon > b.Epsilon {
			v.errorf(p("defaults", "epsilon"), "defaults.epsilon (%g) is larger than budget.epsilon (%g); lower it", *r.Epsilon, b.Epsilon)
		} else if *r.Epsilon < b.MinEpsilonPerQuery {
			v.errorf(p("defaults", "epsilon"), "defaults.epsilon (%g) is below budget.min_epsilon_per_query (%g); raise it, or lower the floor", *r.Epsilon, b.MinEpsilonPerQuery)
		} else {
			d.Epsilon = *r.Epsilon
		}
	}
	if r.Delta != nil {
		if !finite(*r.Delta) || *r.Delta < 0 || *r.Delta >= 1 {
			v.errorf(p("defaults", "delta"), "defaults.delta must be in [0, 1)")
		} else if *r.Delta > b.Delta {
			v.errorf(p("defaults", "delta"), "defaults.delta (%g) is larger than budget.delta (%g)", *r.Delta, b.Delta)
		} else {
			d.Delta = *r.Delta
		}
	}
	switch r.Mechanism {
	case "":
	case MechanismLaplace:
	case MechanismGaussian:
		d.Mechanism = r.Mechanism
		if b.Delta <= 0 {
			v.errorf(p("defaults", "mechanism"), "mechanism gaussian needs budget.delta > 0; set budget.delta or use laplace")
		}
	default:
		v.errorf(p("defaults", "mechanism"), "unknown mechanism %q; use laplace or gaussian", r.Mechanism)
	}
	return d
}
