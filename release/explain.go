package release

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// ExplainColumn is the one column of an EXPLAIN answer, named like
// PostgreSQL's ("QUERY PLAN", text), so that clients and BI tools that read
// EXPLAIN output get the shape they expect.
var ExplainColumn = Column{Name: "QUERY PLAN", PGType: "text"}

// Explain describes, without touching data, the ledger or any budget, what
// Run would do for the plan with the given privacy parameters: the cost, one
// line per measurement (mechanism, L∞, sensitivity, noise scale, 95%
// half-width), one line per output column (how it is computed from the
// noisy measurements and its 95% half-width), the post-processing and the
// emitted SQL. Everything it reports is a function of the policy, the plan
// and the parameters (all public); no mechanism it builds is ever sampled.
//
// The parameters are checked exactly as Run checks them, so an EXPLAIN
// fails with the same error the query would (e.g. 22023 for a bad ε). Rows
// hold one text value each (see ExplainColumn).
func Explain(ds *policy.Dataset, plan *dpplan.Plan, p Params) ([]Column, [][]*string, error) {
	req := Request{Dataset: ds, Plan: plan, Epsilon: p.Epsilon, Delta: p.Delta, Mechanism: p.Mechanism, Upstream: noUpstream{}}
	mechanism := p.Mechanism
	// A zero Releaser: its mechanisms use crypto/rand, but Explain never
	// draws from them.
	cal, err := (&Releaser{}).calibrate(req) // calibrate.go
	if err != nil {
		return nil, nil, err
	}
	req, plan = cal.req, cal.req.Plan
	if plan.SampleAgg != nil {
		return explainSampleAgg(cal) // sampleagg.go
	}
	groupsText := fmt.Sprintf("data-dependent (partition selection; the answer holds the first %d by key)", dpplan.MaxSelectedGroups(plan))
	if !plan.PrivateGroups() {
		groups, err := groupKeys(plan.Keys)
		if err != nil {
			return nil, nil, err
		}
		groupsText = fmt.Sprint(len(groups))
	}
	clip, ms, sel := cal.clip, cal.ms, cal.sel
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }

	var eps, del float64
	for _, m := range ms {
		eps += m.mech.Epsilon()
		del += m.mech.Delta()
	}
	nm := len(ms)
	var autoEps float64
	if plan.Auto != nil {
		autoEps = splitBudget(req).autoEpsilon
		eps += autoEps
		nm++
	}
	if sel != nil {
		eps += sel.mech.Epsilon()
		del += sel.mech.Delta() + sel.delta
		nm++
	}
	if clip != nil {
		eps += clip.lap.Epsilon()
		nm++
	}
	if cal.cells != nil {
		eps += cal.cells.mech.Epsilon()
		del += cal.cells.mech.Delta()
		nm++
	}
	add("DP Aggregate on %s.%s  (mechanism=%s groups=%s max_groups_per_unit=%d measurements=%d)",
		plan.Dataset, plan.Table, mechanism, groupsText, plan.MaxGroupsPerUnit, nm)
	if plan.Join != nil {
		add("  Join: %s", plan.Join)
	}
	cost := fmt.Sprintf("  Cost: epsilon=%s", num(eps))
	if del > 0 {
		cost += fmt.Sprintf(" delta=%s", num(del))
	}
	if plan.HasBias() && len(ms) > 1 {
		cost += fmt.Sprintf(" (bias estimate: epsilon=%s; the rest split equally: epsilon=%s per measurement",
			num(ms[len(ms)-1].mech.Epsilon()), num(ms[0].mech.Epsilon()))
	} else {
		cost += fmt.Sprintf(" (split equally: epsilon=%s per measurement", num(ms[0].mech.Epsilon()))
	}
	if del > 0 {
		// δ goes only to the measurements that use it (release/quantile.go).
		users, share := 0, 0.0
		for _, m := range ms {
			if d := m.mech.Delta(); d > 0 {
				users, share = users+1, d
			}
		}
		if users > 0 {
			cost += fmt.Sprintf(", delta=%s to each of the %d measurements that use it", num(share), users)
		}
	}
	if sel != nil {
		cost += fmt.Sprintf(", threshold delta=%s", num(sel.delta))
	}
	cost += "; the accountant may charge less under its composition)"
	lines = append(lines, cost)
	if a := plan.Auto; a != nil {
		add("  Contribution bound: rows per unit chosen per query by the exponential mechanism among %v, trading the units each would cut (from a profile of the data) against its noise, L0·c·ln(20)/epsilon_m rows (epsilon=%s); the measurements below are at the largest candidate, a smaller one has proportionally less noise (a distinct count's follows min(groups, L0·c))",
			a.Candidates, num(autoEps))
	}
	if plan.OneWeight {
		add("  Contribution bound: %s", oneWeightText(plan, req.Dataset))
	}
	if clip != nil {
		var cols []string
		for _, c := range plan.Clip.Columns {
			cols = append(cols, fmt.Sprintf("%s in [%s, %s]", c.Column, boundNum(c.Lower), boundNum(c.Upper)))
		}
		add("  Clamping bounds: chosen per query from noisy histograms of each unit's largest and smallest value of %s (bins halving each range from both ends, Laplace noise_scale=%s units per bin, epsilon=%s): a bound moves in to an edge while the noisy units with values beyond it are at most %d standard deviations of their noise; the measurements below are at the declared bounds, tighter ones have proportionally less noise",
			strings.Join(cols, ", "), num(clip.bin/math.Sqrt2), num(clip.lap.Epsilon()), clipSigmas)
	}
	if sel != nil {
		d := explainSensitivity(mechanism, plan.MaxGroupsPerUnit, 1, 0)
		tau, _ := sel.threshold.Float64()
		add("  Partition selection: noisy count(distinct unit) per group  (linf=1 sensitivity=%s (%s) noise_scale=%s half_width_95=%s)",
			num(d), sensName(mechanism), num(sel.mech.NoiseMultiplier()*d), num(sel.mech.HalfWidth(0.95)))
		add("    keep a group iff its noisy distinct units >= threshold=%s (threshold delta=%s: a group of one unit is kept with probability <= %s); only kept groups are released",
			num(tau), num(sel.delta), num(perPartitionDelta(sel.delta, plan.MaxGroupsPerUnit)))
	}
	if c := cal.cells; c != nil {
		d := explainSensitivity(mechanism, plan.MaxGroupsPerUnit, 1, 0)
		add("  Minimum units per cell: noisy count(distinct unit) per group after bounding  (linf=1 sensitivity=%s (%s) noise_scale=%s half_width_95=%s epsilon=%s)",
			num(d), sensName(mechanism), num(c.mech.NoiseMultiplier()*d), num(c.mech.HalfWidth(0.95)), num(c.mech.Epsilon()))
		add("    a group whose noisy distinct units < min_units_per_cell=%d keeps its keys and has its values released as NULL (post-processing)", plan.MinUnits)
	} else if sel != nil && plan.MinUnits > 0 {
		add("    min_units_per_cell=%d: the threshold is max(partition threshold, %d), at no extra cost", plan.MinUnits, plan.MinUnits)
	}

	for i, m := range ms {
		if m.quant != nil {
			lines = append(lines, quantileExplain(i, m.quant))
			continue
		}
		l0 := plan.MaxGroupsPerUnit
		if m.measure.Kind == dpplan.MeasureUnits {
			l0 = dpplan.UnitGroups(plan, plan.RowsPerUnit) // as mechanisms calibrates
		}
		d := explainSensitivity(mechanism, l0, m.measure.LInf, m.measure.L1)
		add("  Measurement m%d: %s  (linf=%s sensitivity=%s (%s) noise_scale=%s half_width_95=%s)",
			i, measureText(m.measure), num(m.measure.LInf), num(d), sensName(mechanism),
			num(m.mech.NoiseMultiplier()*d), num(m.mech.HalfWidth(0.95)))
	}
	for _, o := range plan.Outputs {
		if o.Kind == dpplan.OutputKey && plan.Keys[o.Key].Private {
			add("  Output %s (%s): group key %d (private values: released only for groups kept by partition selection)", o.Name, o.PGType, o.Key)
			continue
		}
		add("  Output %s (%s): %s", o.Name, o.PGType, outputText(o, ms))
	}
	for i, o := range plan.Hidden {
		add("  Hidden value v%d (for expressions and HAVING): %s", len(plan.Outputs)+i, outputText(o, ms))
	}
	if u := unitsBoundText(plan); u != "" { // bias.go
		add("  Note: %s", u)
	}
	if plan.PrivateGroups() {
		// As the answer's NOTICE says it (release.go; review round 95).
		add("  Note: %s", selectionBoundText(plan))
	}
	if plan.Having != nil {
		add("  HAVING on noisy values (post-processing, no extra cost)")
	}
	if len(plan.OrderBy) > 0 || plan.Limit >= 0 || plan.Offset > 0 {
		var parts []string
		for _, ob := range plan.OrderBy {
			d := ""
			if ob.Desc {
				d = " DESC"
			}
			parts = append(parts, plan.Outputs[ob.Output].Name+d)
		}
		post := "  Post-processing on noisy rows:"
		if len(parts) > 0 {
			post += " ORDER BY " + strings.Join(parts, ", ")
		}
		if plan.Limit >= 0 {
			post += fmt.Sprintf(" LIMIT %d", plan.Limit)
		}
		if plan.Offset > 0 {
			post += fmt.Sprintf(" OFFSET %d", plan.Offset)
		}
		lines = append(lines, post)
	}
	if w := plan.Work; w.Rows > 0 {
		if w.Candidates > 0 {
			add("  Work: at most %d rows upstream in %d scan(s) and %d candidate groups of a private key, from the policy's max_rows (the answer's time slot is fixed from it before the charge)", w.Rows, w.Scans, w.Candidates)
		} else {
			add("  Work: at most %d rows upstream in %d scan(s), from the policy's max_rows (the answer's time slot is fixed from it before the charge)", w.Rows, w.Scans)
		}
	} else {
		add("  Work: not bounded: %s declare(s) no max_rows in the policy (answers are padded to response_time, or its next doubling)", strings.Join(w.Undeclared, ", "))
	}
	add("  SQL: %s", plan.SQL)

	rows := make([][]*string, len(lines))
	for i := range lines {
		rows[i] = []*string{&lines[i]}
	}
	return []Column{ExplainColumn}, rows, nil
}

// noUpstream satisfies Request.Upstream for checkRequest; Explain never
// queries it.
type noUpstream struct{}

func (noUpstream) Query(context.Context, string, ...any) ([][]*string, error) {
	return nil, errors.New("release: EXPLAIN never runs SQL")
}

func sensName(mechanism string) string {
	if mechanism == policy.MechanismGaussian {
		return "L2"
	}
	return "L1"
}

// explainSensitivity is the sensitivity the measurement's mechanism was
// calibrated to (before any rounding charge of real mode); l1 is the
// measure's direct L1 bound (0 when none).
func explainSensitivity(mechanism string, l0 int, lInf, l1 float64) float64 {
	if lInf == 0 {
		lInf = 1 // as in mechanisms
	}
	b := sensitivity.Bounds{L0: l0, LInf: lInf, L1: l1}
	if mechanism == policy.MechanismGaussian {
		d, _ := sensitivity.L2(b)
		return d
	}
	d, _ := sensitivity.L1(b)
	return d
}

func measureText(m dpplan.Measure) string {
	arg := m.Column
	if m.Expr != nil {
		arg = "expression"
	}
	suffix := ""
	if m.Centre != "" {
		suffix += " centred at " + m.Centre
	}
	if m.Filter != nil {
		suffix += " filtered"
	}
	switch {
	case m.Kind == dpplan.MeasureRemoved && m.Outside:
		return "rows removed by contribution bounding plus rows with a summed value outside its bounds (clamped), each unit's clipped to its allowance (bias estimate)"
	case m.Kind == dpplan.MeasureRemoved && m.Units:
		return "units left out of the distinct counts by weighting (a unit in g > L_u groups counts L_u/g in each, L_u = min(groups, max_groups_per_unit·rows per unit)), each unit's total at most its linf, never reached (bias estimate: the intervals cover the bounded counts, not the numbers of distinct units)"
	case m.Kind == dpplan.MeasureRemoved:
		return "rows removed by contribution bounding, each unit's clipped to its allowance (bias estimate)"
	case m.Kind == dpplan.MeasureCount && arg == "":
		return "count(*)" + suffix
	case m.Kind == dpplan.MeasureUnits:
		return "count(distinct " + m.Column + ")" + suffix
	case m.Kind == dpplan.MeasureSum || m.Kind == dpplan.MeasureSumSq:
		return fmt.Sprintf("%s(%s) clamped to [%s, %s]", m.Kind, arg, num(m.Lower), num(m.Upper)) + suffix
	}
	return fmt.Sprintf("%s(%s)", m.Kind, arg) + suffix
}

// outputText says how an output is computed and its 95% half-width. For
// averages and variances the half-width depends on the group's noisy count
// n, known only after the release; the formula is given with its constants
// (the same bounds as avgHalfWidth and varHalfWidth).
func outputText(o dpplan.Output, ms []measurement) string {
	switch o.Kind {
	case dpplan.OutputKey:
		return fmt.Sprintf("group key %d (public values)", o.Key)
	case dpplan.OutputCount:
		// The released count's half-width, as the NOTICE states it (with
		// the 1/2 of rounding a weighted count to a whole number).
		return fmt.Sprintf("noisy m%d, floored at 0  (half_width_95=%s)", o.Measure, num(countHalfWidth(ms[o.Measure].mech)))
	case dpplan.OutputSum:
		if c := ms[o.Measure].measure.Centre; c != "" {
			return fmt.Sprintf("noisy m%d + %s · noisy m%d  (half_width_95=%s)", o.Measure, c, o.CountMeasure, num(sumHalfWidth(o, ms)))
		}
		return fmt.Sprintf("noisy m%d  (half_width_95=%s)", o.Measure, num(sumHalfWidth(o, ms)))
	case dpplan.OutputAvg:
		hs := ms[o.Measure].mech.HalfWidth(0.975)
		hc := ms[o.CountMeasure].mech.HalfWidth(0.975)
		m := spreadM(o, ms)
		form := fmt.Sprintf("m%d / max(m%d, 1)", o.Measure, o.CountMeasure)
		if c := ms[o.Measure].measure.Centre; c != "" {
			form = c + " + " + form
		}
		return fmt.Sprintf("%s clamped to [%s, %s]  (half_width_95=min(%s, %s/n), n = the group's noisy count)",
			form, num(o.Lower), num(o.Upper), num(o.Upper-o.Lower), num(hs+m*hc))
	case dpplan.OutputVariance:
		const p = 1 - 0.05/3
		hq := ms[o.SumSqMeasure].mech.HalfWidth(p)
		hs := ms[o.Measure].mech.HalfWidth(p)
		hc := ms[o.CountMeasure].mech.HalfWidth(p)
		m := spreadM(o, ms)
		r := (o.Upper - o.Lower) / 2
		form, capv := "pop", r*r
		if o.Sample {
			form, capv = "samp", 2*r*r
		}
		h := fmt.Sprintf("min(%s, %s/n)", num(capv), num(hq+2*m*hs+m*m*hc))
		what := "variance"
		if o.Sqrt {
			what, h = "sqrt of variance", "sqrt("+h+")"
		}
		return fmt.Sprintf("%s_%s from n=m%d, sum=m%d, sumsq=m%d, within [0, %s]  (half_width_95≈%s, first order, n = the group's noisy count)",
			what, form, o.CountMeasure, o.Measure, o.SumSqMeasure, num(capv), h)
	case dpplan.OutputQuantile:
		q := ms[o.Measure].quant
		return fmt.Sprintf("midpoint of the bucket of m%d selected by the exponential mechanism  (rank_error_95=%s, bucket width %s)",
			o.Measure, num(ms[o.Measure].mech.HalfWidth(0.95)), exactNum(q.q.Width))
	case dpplan.OutputExpr:
		return "arithmetic over noisy values, evaluated after noise (post-processing; NULL on division by 0)"
	}
	return "?"
}

// perPartitionDelta is δ_p = 1 − (1−δ)^{1/L0}, the bound on the
// probability that one group of one unit is kept (as in
// noise/threshold.go; for EXPLAIN).
func perPartitionDelta(delta float64, l0 int) float64 {
	return -math.Expm1(math.Log1p(-delta) / float64(l0))
}
