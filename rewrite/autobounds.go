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
