package rewrite

import (
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
)

// # Contribution bounds chosen per query (dp.contribution = auto)
//
// A policy's max_rows_per_unit must hold for every query, so it is set for
// the heaviest one; most queries (a filter to one department and one
// year) meet units with far fewer rows, and pay noise for rows nobody
// has. With auto bounds the plan carries, besides itself, the same
// statement planned with fewer rows per unit (the candidates c₁ < … < c_K,
// the last being the plan's own R), and a profile query. Release runs the
// profile, chooses one candidate by the exponential mechanism and answers
// with that candidate's plan, whose measures are calibrated to its own
// bound (release/autobounds.go). The choice trades bias against noise
// (Amin, Kulesza, Muñoz, Vassilvitskii, "Bounding User Contributions: A
// Bias-Variance Trade-off in Differential Privacy", ICML 2019): the
// profile counts, for each candidate c, the units that bounding at c
// leaves whole — at most c rows in each group of the query and at most
// L0·c in all (their row count at most c, when ungrouped) — and the
// number N of units; the utility of c is −w·(N − whole_c) − h_c, the units
// cut (w rows each) plus the noise's 95% half-width in rows
// (release/autobounds.go).
//
// Sensitivity of the utilities: adding or removing one unit changes N by
// 1 and each whole_c by 0 or 1 in the same direction, so N − whole_c
// moves by 0 or 1; h_c is a constant: the exponential mechanism with
// Δu = w is ε_sel-DP (McSherry and Talwar 2007). The answer then uses a
// plan that is DP for each fixed choice; by sequential composition the
// query costs ε_sel plus the answer's ε.
// The profile's SQL reads the same rows as the plan (the analyst's
// WHERE, keys in their domain, rows with a unit) and only counts them,
// so it cannot fail on any value.
//
// Candidates are 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, … up to R/2, then R:
// about 1.5× apart, so planning costs a few plans more.

// autoCandidates returns the candidates for r rows per unit (r ≥ 2): 1,
// 2, 3, 4, 6, 8, 12, … up to r/2, then r. A bound above r/2 saves less
// than half the noise of r and is not offered: on the demo, COUNT(*) with
// 16 of 20 visits per patient saved 20% of the noise but was chosen in 8%
// of releases at ε 0.1 (ε_sel = 0.01 cannot tell 549 cut patients from
// none reliably), each time 1,495 rows (0.75%) short, which took the
// interval's coverage of the truth from 0.94 to 0.84.
func autoCandidates(r int) []int {
	var out []int
	for c := 1; c <= r/2; {
		out = append(out, c)
		switch {
		case c < 4:
			c++
		case c&(c-1) == 0: // a power of two: 4 → 6, 8 → 12, …
			c += c / 2
		default: // 6 → 8, 12 → 16, …
			c = c / 3 * 4
		}
	}
	return append(out, r)
}

// autoEligible: plans that bound by weights (as bias.go), with more than
// one row per unit to choose from.
func autoEligible(p *Plan) bool {
	return dpplan.WeightsOnly(p) && p.RowsPerUnit >= 2 // bias.go
}

// addAutoBounds plans stmt once per candidate below p's rows per unit and
// attaches them with the profile query; p is left as is when a candidate
// plan does not have p's shape (which would be a planner bug).
func addAutoBounds(ds *policy.Dataset, stmt string, opts Options, p *Plan) error {
	cands := autoCandidates(p.RowsPerUnit)
	a := &AutoBounds{Candidates: cands}
	for _, c := range cands[:len(cands)-1] {
		o := opts
		o.AutoBounds, o.MaxRowsPerUnit = false, c
		cp, err := plan(ds, stmt, o)
		if err != nil {
			return err
		}
		if cp.RowsPerUnit != c || len(cp.Measures) != len(p.Measures) || len(cp.Outputs) != len(p.Outputs) {
			return nil
		}
		for i := range cp.Measures {
			if cp.Measures[i].Kind != p.Measures[i].Kind {
				return nil
			}
		}
		a.Plans = append(a.Plans, cp)
	}
	t, where := dpplan.SourceOf(p)
	a.CombinedSQL = pgemit.ProfileSQL(t, p, where, cands)
	p.Auto = a
	return nil
}

// # Averages and deviations: one row's weight per unit
//
// An average is a ratio: the noise of its sum and of its count both grow
// with the rows one unit may add, while the rows of the group grow less
// than that (a unit with 2 visits adds 2 under any bound of 2 or more). So
// the bound that minimises an average's noise is the smallest, one row's
// weight per unit in all: a unit in G groups weighs 1/G in each, split
// equally among its rows there (dpplan/bounds.go's weights at c = 1,
// L0 = 1), and the released average is the mean of the rows so weighted,
// each unit's rows weighing one row together. Weighting
// moves an average only as far as units with many rows differ from the
// rest: on the demo, each department's AVG(cost) moved by 1% or less (7
// to 23) while at ε = 0.1 its 95% half-width fell 5.5× (cardiology ±555
// → ±102, pediatrics ±2,528 → ±450; BENCHMARKS.md, "Averages and
// deviations at one row per unit"). The same holds for a variance or a
// deviation (ratios of sums). The count's utility of the candidates above
// does not see this: it chose 20 rows per unit, the widest, for the demo's
// AVG(cost) by department.
//
// Quantiles are left out on purpose: one value per unit changes what a
// median is of (the units' middle values, not the rows), and on the demo
// that moved each department's median by 50 to 500 while the exponential
// mechanism's error at 20 rows per unit was already 14 to 170 (only
// pediatrics, with few rows, gained).
//
// So under dp.contribution = auto a plan whose every released or hidden
// value is an average, a variance or a deviation, over one table with
// public keys (no join, no partition selection, no sample-and-aggregate,
// no min_units_per_cell), is planned at one row per unit and one group
// per unit, with no choice (no ε spent on one). A session's
// dp.max_rows_per_unit or dp.max_groups_per_unit, or dp.contribution =
// fixed, keeps its own bounds; a query that also releases a count, a sum
// or a quantile keeps the choice.

// ratioOnly reports whether every value p releases or uses (Outputs and
// Hidden, which HAVING and expressions read) is an average, a variance or
// a deviation, of one protected table with public keys.
func ratioOnly(p *Plan) bool {
	if p.Join != nil || p.SampleAgg != nil || p.PrivateGroups() || p.MinUnits > 0 {
		return false
	}
	ratios := 0
	for _, outs := range [][]dpplan.Output{p.Outputs, p.Hidden} {
		for _, o := range outs {
			switch o.Kind {
			case dpplan.OutputKey, dpplan.OutputExpr: // an expression's operands are Outputs or Hidden
			case dpplan.OutputAvg, dpplan.OutputVariance:
				ratios++
			default:
				return false
			}
		}
	}
	return ratios > 0
}

// oneWeight plans stmt at one row's weight per unit in all.
func oneWeight(ds *policy.Dataset, stmt string, opts Options) (*Plan, error) {
	opts.AutoBounds, opts.MaxRowsPerUnit, opts.MaxGroupsPerUnit, opts.OneWeight = false, 1, 1, true
	return plan(ds, stmt, opts) // build.go marks the plan OneWeight
}
