package release

import (
	"fmt"
	"sort"

	"github.com/dpproxy/dpproxy/dpplan"
)

// Per-output cost (issue 5). The query's ε (and δ) is split equally between
// the plan's m measurements (mechanisms, splitDown): each measurement's
// mechanism gets ε/m (δ/m), and by basic composition the m releases are
// (ε, δ)-DP together. An output's cost is the sum over the distinct
// measurements it rests on:
//
//	COUNT(*), COUNT(col), COUNT(DISTINCT unit), SUM     1 measurement
//	AVG                                                  2 (sum, count)
//	VAR_*/STDDEV_*                                       3 (sum, count, sum of squares)
//	arithmetic over aggregates                           those of its aggregates
//	group keys                                           0 (public values)
//
// Outputs may share measurements (SUM(x) and AVG(x) share the sum), so the
// per-output figures can add up to more than the query's ε; measurements
// used only by HAVING are reported separately. The figures are the ε and δ
// the mechanisms were calibrated with; the accountant may charge the query
// less under its composition (zCDP, RDP, PLD). They depend on the plan and
// the query's ε and δ only, never on data.

// outputMeasures returns the measurements value v of Plan.Outputs ++
// Plan.Hidden rests on, each once, in increasing order.
func outputMeasures(plan *dpplan.Plan, v int) []int {
	n := len(plan.Outputs) + len(plan.Hidden)
	at := func(v int) *dpplan.Output { // no copy of the outputs per call (round 73: O(n²))
		if v < len(plan.Outputs) {
			return &plan.Outputs[v]
		}
		return &plan.Hidden[v-len(plan.Outputs)]
	}
	seen := map[int]bool{}
	visited := map[int]bool{}
	var visit func(v int)
	var refs func(e *dpplan.Expr)
	refs = func(e *dpplan.Expr) {
		if e == nil {
			return
		}
		if e.Op == "ref" && e.Ref >= 0 && e.Ref < n {
			visit(e.Ref)
		}
		for _, a := range e.Args {
			refs(a)
		}
	}
	visit = func(v int) {
		if visited[v] {
			return
		}
		visited[v] = true
		o := at(v)
		switch o.Kind {
		case dpplan.OutputKey:
		case dpplan.OutputExpr:
			refs(o.Expr)
		case dpplan.OutputAvg:
			seen[o.Measure], seen[o.CountMeasure] = true, true
		case dpplan.OutputVariance:
			seen[o.Measure], seen[o.CountMeasure], seen[o.SumSqMeasure] = true, true, true
		case dpplan.OutputSum:
			seen[o.Measure] = true
			if plan.Measures[o.Measure].Centre != "" {
				// Derived from the normalized sum and the count
				// (rewrite/centre.go).
				seen[o.CountMeasure] = true
			}
		default:
			seen[o.Measure] = true
		}
	}
	visit(v)
	out := make([]int, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Ints(out)
	return out
}

// measuresCost sums the calibrated ε and δ of the given measurements.
func measuresCost(ms []measurement, idx []int) (epsilon, delta float64) {
	for _, i := range idx {
		epsilon += ms[i].mech.Epsilon()
		delta += ms[i].mech.Delta()
	}
	return epsilon, delta
}

// costText renders "epsilon e" or "epsilon e, delta d" for the NOTICE.
func costText(epsilon, delta float64) string {
	if delta > 0 {
		return fmt.Sprintf("epsilon %s, delta %s", num(epsilon), num(delta))
	}
	return "epsilon " + num(epsilon)
}

// havingOnly returns the measurements that no output rests on (aggregates
// used only by HAVING), in increasing order.
func havingOnly(plan *dpplan.Plan) []int {
	used := map[int]bool{}
	for v := range plan.Outputs {
		for _, m := range outputMeasures(plan, v) {
			used[m] = true
		}
	}
	var out []int
	for m := range plan.Measures {
		if !used[m] && plan.Measures[m].Kind != dpplan.MeasureRemoved {
			out = append(out, m)
		}
	}
	return out
}
