// Not in the privacy-critical set (docs/ARCHITECTURE.md): the NOTICE and
// EXPLAIN text of public parameters and of values already noised; a bug here
// makes a message wrong, never a release larger than its charge.

package release

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/policy"
)

// sampleAggWidths are the 95% half-widths of a sample-and-aggregate
// answer: per output column, its text where it is the same in every row
// (nil elsewhere), and the NOTICE's part for each statistic. ks are the
// released groups' block counts.
func sampleAggWidths(plan *dpplan.Plan, stats []measurement, ks []int) (widths []*string, parts []string) {
	sa := plan.SampleAgg
	widths = make([]*string, len(plan.Outputs)) // the same in every row, where k is
	for v, o := range plan.Outputs {
		if o.Kind != dpplan.OutputSampleAgg {
			continue
		}
		m := stats[o.Measure].mech
		var hw string
		switch {
		case len(plan.Keys) == 0 && len(ks) == 1: // one group, released
			hw = num(m.HalfWidth(0.95) / float64(ks[0]))
			widths[v] = &hw
		case len(sa.Levels) == 1: // k fixed
			hw = num(m.HalfWidth(0.95) / float64(sa.Levels[0]))
			widths[v] = &hw
		default:
			hw = num(m.HalfWidth(0.95)) + "/k"
		}
		parts = append(parts, fmt.Sprintf("±%s (%s, %s)", hw, o.Name, costText(m.Epsilon(), m.Delta())))
	}
	return widths, parts
}

// autoText is the NOTICE's statement of the choice.
func autoText(ac *autoChoice, i int, grouped bool) string {
	c := ac.cands[i]
	where := "in all"
	if grouped {
		// A unit keeps at most c rows in each group and L0·c in all
		// (dpplan/bounds.go): "in each group" alone read as c per group
		// in any number of groups.
		where = fmt.Sprintf("in each group and %d in all", ac.plans[i].MaxGroupsPerUnit*c)
	}
	cands := make([]string, len(ac.cands))
	for j, k := range ac.cands {
		cands[j] = strconv.Itoa(k)
	}
	return fmt.Sprintf("rows per unit: at most %d %s (chosen by DP among %s, epsilon %s)",
		c, where, strings.Join(cands, ", "), num(ac.sel.Epsilon()))
}

// oneWeightText is the NOTICE's statement of the bound dp.contribution =
// auto sets for plans of averages and deviations alone
// (rewrite/autobounds.go).
func oneWeightText(plan *dpplan.Plan, ds *policy.Dataset) string {
	policyRows := 0
	if t, ok := ds.Table(plan.Table); ok {
		policyRows = t.MaxRowsPerUnit
	}
	return fmt.Sprintf("rows per unit: one in all (each unit's rows weigh one row together), the least noise for averages and deviations; SET dp.contribution = fixed for the policy's %d", policyRows)
}

// clipText is the NOTICE's statement of the choice.
func clipText(cc *clipChoice, res []clipResult, kept bool) string {
	var parts []string
	for i, col := range cc.clip.Columns {
		r := res[i]
		switch {
		case kept || !r.changed:
			parts = append(parts, fmt.Sprintf("%s clamped to [%s, %s] as declared", col.Column, boundNum(col.Lower), boundNum(col.Upper)))
		default:
			parts = append(parts, fmt.Sprintf("%s clamped to [%s, %s] (declared [%s, %s]; about %s units with values beyond, ±%s)",
				col.Column, boundNum(r.bounds.Lower), boundNum(r.bounds.Upper), boundNum(col.Lower), boundNum(col.Upper), num(math.Round(r.beyond)), num(r.spread)))
		}
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" (bounds chosen by DP, epsilon %s)", num(cc.lap.Epsilon()))
}

// boundNum writes a bound exactly (no rounding to significant digits).
func boundNum(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// selectionBoundText says what the intervals of a query with private keys
// cover: such a plan keeps each unit in at most max_groups_per_unit of
// its groups (dpplan/bounds.go: a hash order chooses them) and carries
// no bias estimate (rewrite/bias.go), so the NOTICE says it plainly.
func selectionBoundText(plan *dpplan.Plan) string {
	return fmt.Sprintf("the intervals cover the bounded answer: each unit counts in at most %d of its groups, and what that removed is not estimated",
		plan.MaxGroupsPerUnit)
}

// describe is the NOTICE/EXPLAIN text of the selection (public parameters
// only).
func (s *selection) describe() string {
	tau, _ := s.threshold.Float64()
	rule := ""
	if s.min > 0 {
		rule = fmt.Sprintf(", at least min_units_per_cell %d", s.min)
	}
	return fmt.Sprintf("groups chosen by partition selection: kept if noisy distinct units ≥ %s (%s noise, ±%s at 95%%; threshold delta %s%s)",
		num(tau), s.mech.Name(), num(s.mech.HalfWidth(0.95)), num(s.delta), rule)
}

// minUnitsText is the NOTICE's statement of the rule (public figures and
// the number of suppressed groups, a function of noisy counts only).
func minUnitsText(k int, unit string, suppressed, groups int, how string) string {
	if unit == "" {
		unit = "units"
	} else {
		unit += "s"
	}
	return fmt.Sprintf("%d of %d groups suppressed (values NULL): fewer than about %d %s (min_units_per_cell %d, %s)",
		suppressed, groups, k, unit, k, how)
}

// weightedUnitsText says, when groups are weighted (GroupsScale), that the
// count is the bounded one: a unit in g > L0 groups counts L0/g in each,
// so a group's count can be below its number of units and more groups
// are suppressed than their units alone would make (never fewer).
func weightedUnitsText(plan *dpplan.Plan, unit string) string {
	if dpplan.GroupBounding(plan) != dpplan.GroupsScale {
		return ""
	}
	if unit == "" {
		unit = "unit"
	}
	return fmt.Sprintf("; in the count that decides suppression each %s counts %d in all over its groups (%d/g in each of g > %d groups), so that count can be below the group's number of %ss",
		unit, plan.MaxGroupsPerUnit, plan.MaxGroupsPerUnit, plan.MaxGroupsPerUnit, unit)
}

// describe is the count's mechanism for the NOTICE and EXPLAIN.
func (c *cellCount) describe() string {
	return fmt.Sprintf("noisy distinct units < %s, %s noise ±%s at 95%%, %s", c.min.RatString(), c.mech.Name(),
		num(c.mech.HalfWidth(0.95)), costText(c.mech.Epsilon(), c.mech.Delta()))
}

// quantileErrorText is the NOTICE's accuracy statement for a quantile
// output.
func quantileErrorText(o dpplan.Output, m *quantileMech, cost string) string {
	// The utility is −|rank − q·n|: a bucket beyond the group's values is
	// within R of the target rank once (1 − q)·n ≤ R (above) or q·n ≤ R
	// (below), so a group of fewer than R/min(q, 1 − q) rows may get any
	// value of the range, and MIN (q = 0) any value down to the lower bound.
	// (No "; " here: it separates the NOTICE's parts.)
	r := m.HalfWidth(0.95)
	subject := quantileSubject(m.measure)
	lo, hi := boundText(o, m.measure.Lower), boundText(o, m.measure.Upper)
	head := "exponential mechanism: the released value is "
	switch q := m.q.Q; {
	case q <= 0:
		return fmt.Sprintf("%sat most %s rows above the smallest in the order of %s, to the bucket width %s, and may lie anywhere down to %s (%s, %s)",
			head, num(r), subject, exactNum(m.q.Width), lo, o.Name, cost)
	case q >= 1:
		return fmt.Sprintf("%sat most %s rows below the largest in the order of %s, to the bucket width %s, and may lie anywhere up to %s (%s, %s)",
			head, num(r), subject, exactNum(m.q.Width), hi, o.Name, cost)
	}
	small := ""
	if n := math.Ceil(r / math.Min(m.q.Q, 1-m.q.Q)); n >= 2 {
		small = fmt.Sprintf(", or anywhere in [%s, %s] in a group of fewer than %s rows", lo, hi, num(n))
	}
	return fmt.Sprintf("%swithin ±%s rows of the true one in the order of %s, to the bucket width %s%s (%s, %s)",
		head, num(r), subject, exactNum(m.q.Width), small, o.Name, cost)
}

// boundText writes a quantile measure's bound as its output prints: a
// date column's bounds are days since 1970-01-01.
func boundText(o dpplan.Output, x float64) string {
	if o.PGType == "date" {
		return dayText(int64(math.Floor(x)))
	}
	return exactNum(x)
}

// quantileExplain is the EXPLAIN line of a quantile measure.
func quantileExplain(i int, m *quantileMech) string {
	q := m.q
	return fmt.Sprintf("  Measurement m%d: %s(q=%s) of %s clamped to [%s, %s]  (exponential mechanism over %d buckets of width %s, utility −|rank − q·n|, rank sensitivity=%s, epsilon per group=%s, rank_error_95=%s)",
		i, q.Func, exactNum(q.Q), quantileSubject(m.measure), exactNum(m.measure.Lower), exactNum(m.measure.Upper), q.Buckets, exactNum(q.Width),
		num(m.measure.LInf), num(m.groupEpsilon), num(m.HalfWidth(0.95)))
}

// quantileSubject names what a quantile measure orders: its column, or
// "an expression" (rewrite/quantile_expr.go; the SQL line shows it).
func quantileSubject(ms dpplan.Measure) string {
	if ms.Expr != nil {
		return "an expression"
	}
	return ms.Column
}

// exactNum prints a public constant (a bound, a bucket width) exactly.
func exactNum(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// sampleAggNote is the NOTICE's account of the mechanism: k, or per
// group the k chosen (as "k=64 for 3 groups, k=2 for 1 group", largest k
// first).
// ks are the released groups' k (a group min_units_per_cell withheld has
// none: its k, chosen from its noisy count, would tell its size).
func sampleAggNote(sa *dpplan.SampleAgg, plan *dpplan.Plan, ks []int) string {
	how := "fixed by dp.sample_blocks"
	if sa.CountMeasure >= 0 {
		how = fmt.Sprintf("chosen from a noisy unit count, about %d units per block", sa.BlockUnits)
	}
	if len(plan.Keys) == 0 && len(ks) == 1 {
		return fmt.Sprintf("sample-and-aggregate over k=%d blocks (%s; each block's answer clipped to the output range)", ks[0], how)
	}
	n := map[int]int{}
	for _, k := range ks {
		n[k]++
	}
	var parts []string
	for i := len(sa.Levels) - 1; i >= 0; i-- {
		k := sa.Levels[i]
		switch c := n[k]; {
		case c == 1:
			parts = append(parts, fmt.Sprintf("k=%d for 1 group", k))
		case c > 1:
			parts = append(parts, fmt.Sprintf("k=%d for %d groups", k, c))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "no group released")
	}
	groups := "groups without data answer the midpoint plus noise"
	if plan.PrivateGroups() {
		groups = "groups chosen by DP partition selection: released iff their noisy unit count reaches the threshold"
	}
	return fmt.Sprintf("sample-and-aggregate per group over k blocks (%s; %s; each block's answer clipped to the output range; %s)",
		strings.Join(parts, ", "), how, groups)
}

// explainSampleAgg is Explain for a sample-and-aggregate plan: the same
// mechanisms Run would build (never sampled), the rule for k and the SQL
// with the secret key redacted.
func explainSampleAgg(cal *calibration) ([]Column, [][]*string, error) {
	req := cal.req
	plan, sa := req.Plan, req.Plan.SampleAgg
	count, stats, tau := cal.saCount, cal.saStats, cal.saTau
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	var eps, del float64
	for _, m := range append([]noise.Mechanism{count}, mechs(stats)...) {
		if m != nil {
			eps += m.Epsilon()
			del += m.Delta()
		}
	}
	if tau != nil {
		del += saThresholdDelta(req)
	}
	add("DP Sample-and-aggregate on %s.%s  (mechanism=%s statistics=%d)", plan.Dataset, plan.Table, req.Mechanism, len(stats))
	cost := fmt.Sprintf("  Cost: epsilon=%s", num(eps))
	if del > 0 {
		cost += fmt.Sprintf(" delta=%s", num(del))
	}
	lines = append(lines, cost+" (the accountant may charge less under its composition)")
	per := ""
	if tau != nil {
		per = " per group"
		f, _ := tau.Float64()
		add("  Groups: from the data, by DP partition selection: a group is released iff its noisy count of distinct units is ≥ %s (threshold delta=%s); a unit counts in at most L0=%d groups, so the noise is calibrated to %s = %s·(u−l)/k",
			num(f), num(saThresholdDelta(req)), plan.MaxGroupsPerUnit, sensName(req.Mechanism), map[bool]string{true: "√L0", false: "L0"}[req.Mechanism == policy.MechanismGaussian])
	} else if len(plan.Keys) > 0 {
		per = " per group"
		add("  Groups: every combination of the keys' public values (absent groups answer the midpoint plus noise); a unit counts in at most L0=%d of them, so the noise is calibrated to %s = %s·(u−l)/k", plan.MaxGroupsPerUnit,
			sensName(req.Mechanism), map[bool]string{true: "√L0", false: "L0"}[req.Mechanism == policy.MechanismGaussian])
	}
	if count != nil && len(sa.Levels) == 1 {
		purpose := "partition selection"
		if plan.MinUnits > 0 {
			purpose = "min_units_per_cell"
		}
		add("  Blocks: k=%d (SET dp.sample_blocks); a noisy count of distinct units%s (epsilon=%s, half_width_95=%s) for %s", sa.Levels[0],
			per, num(count.Epsilon()), num(count.HalfWidth(0.95)), purpose)
	} else if count != nil {
		add("  Blocks: k chosen%s at run time from a noisy count of distinct units (epsilon=%s, half_width_95=%s): the largest k in %v with k·%d ≤ count, else %d",
			per, num(count.Epsilon()), num(count.HalfWidth(0.95)), sa.Levels, sa.BlockUnits, sa.Levels[0])
	} else {
		add("  Blocks: k=%d (SET dp.sample_blocks)", sa.Levels[0])
	}
	if plan.MinUnits > 0 {
		add("  Minimum units per cell: a group whose noisy count of distinct units (the count above) is below min_units_per_cell=%d is %s (post-processing)",
			plan.MinUnits, map[bool]string{true: "not released", false: "released with NULL statistics"}[tau != nil])
	}
	add("  Units are split into the k blocks by HMAC-SHA-256 of the unit under the dataset's secret key; each unit is in exactly one block")
	l0 := float64(plan.MaxGroupsPerUnit)
	if req.Mechanism == policy.MechanismGaussian {
		l0 = math.Sqrt(l0)
	}
	for _, o := range plan.Outputs {
		if o.Kind != dpplan.OutputSampleAgg {
			continue
		}
		m := stats[o.Measure]
		line := fmt.Sprintf("  Output %s (%s): %s per block%s, clipped to [%s, %s] (empty or NULL blocks count as %s), averaged over k blocks; sensitivity (u−l)/k = %s/k, noise_scale=%s/k",
			o.Name, o.PGType, m.measure.Column, per, num(o.Lower), num(o.Upper), num(dpplan.SampleMid(o.Lower, o.Upper)),
			num(m.measure.LInf), num(m.mech.NoiseMultiplier()*m.measure.LInf*l0))
		if count == nil {
			line += fmt.Sprintf(" (half_width_95=%s)", num(m.mech.HalfWidth(0.95)/float64(sa.Levels[0])))
		} else {
			line += fmt.Sprintf(" (half_width_95=%s/k)", num(m.mech.HalfWidth(0.95)))
		}
		lines = append(lines, line)
	}
	add("  SQL: %s", plan.RedactedSQL())
	rows := make([][]*string, len(lines))
	for i := range lines {
		rows[i] = []*string{&lines[i]}
	}
	return []Column{ExplainColumn}, rows, nil
}

// maxErrorsBytes bounds the error text of an answer (its NOTICE's "95%
// error" part, SHOW dp.last_answer, the answer stored in the ledger):
// one part per output and per named group made a 60 MB NOTICE of 1,500
// averages over two 20 KB labels, past every answer bound (attack round
// 65). Cutting it is post-processing of the released text.
const maxErrorsBytes = 64 << 10

// capErrors cuts errs at maxErrorsBytes, on a character boundary, saying
// where the rest is.
func capErrors(errs string) string {
	if len(errs) <= maxErrorsBytes {
		return errs
	}
	return pgerr.Truncate(errs, maxErrorsBytes) + " (cut at 64 KiB; SET dp.error_columns = on puts each value's 95% interval in the answer)"
}

// releasedOnly drops the groups hidden marks (min_units_per_cell) from
// what the NOTICE's error text reads: their noisy values, labels and
// half-widths. hidden nil: nothing is dropped.
func releasedOnly(hidden []bool, noisy [][]*big.Rat, groups [][]string, widths [][]float64) ([][]*big.Rat, [][]string, [][]float64) {
	if !slices.Contains(hidden, true) {
		return noisy, groups, widths
	}
	tw := make([][]float64, len(widths))
	for v, w := range widths {
		tw[v] = w
		if len(w) == len(hidden) {
			tw[v] = released(hidden, w)
		}
	}
	var tg [][]string // unknown groups stay unknown
	if len(groups) == len(hidden) {
		tg = released(hidden, groups)
	}
	return released(hidden, noisy), tg, tw
}

// released is xs without the groups hidden marks (never nil: an empty
// list when every group is withheld).
func released[T any](hidden []bool, xs []T) []T {
	out := make([]T, 0, len(xs))
	for g, h := range hidden {
		if !h {
			out = append(out, xs[g])
		}
	}
	return out
}

// biasText is the NOTICE's statement of the bias estimate, or "" when the
// plan has none: the noisy rows removed, summed over the groups and
// floored at 0, with its 95% half-width; as a share of the rows read when
// the query has an unfiltered COUNT(*) to compare with.
//
// unit is the policy's privacy_unit ("" for "unit"). Under one row's
// weight per unit (Plan.OneWeight) the estimate counts units whose rows
// were weighed together (C = 1 clips each to 1), and says so in those
// words: "removed 37,065 rows" had read as data dropped (new-user run).
func biasText(plan *dpplan.Plan, ms []measurement, noisy [][]*big.Rat, groups [][]string, unit string) string {
	if !plan.HasBias() || len(noisy) == 0 {
		return ""
	}
	r := len(plan.Measures) - 1
	count := -1
	for i, m := range plan.Measures {
		if m.Kind == dpplan.MeasureCount && m.Column == "" && m.Expr == nil && m.Filter == nil && !plan.Measures[r].Units {
			count = i
			break
		}
		if m.Kind == dpplan.MeasureUnits && m.Filter == nil && plan.Measures[r].Units {
			count = i // the released distinct counts, to compare with
			break
		}
	}
	removed, kept := new(big.Rat), new(big.Rat)
	for _, g := range noisy {
		removed.Add(removed, g[r])
		if count >= 0 {
			kept.Add(kept, g[count])
		}
	}
	x, _ := removed.Float64()
	x = math.Max(x, 0)
	h := math.Sqrt(float64(len(noisy))) * ms[r].mech.HalfWidth(0.95)
	share := ""
	if k, _ := kept.Float64(); count >= 0 && k > 0 {
		share = num(roundShare(100*x/(k+x))) + "% of the rows read, "
		if plan.Measures[r].Units {
			share = num(roundShare(100*x/(k+x))) + "% of the total, "
		}
	}
	if plan.Measures[r].Units {
		// Distinct counts under weights (rewrite/bias.go, Measure.Units).
		lu := dpplan.UnitGroups(plan, plan.RowsPerUnit)
		return fmt.Sprintf("each unit counts in at most %s (a unit in more groups, g, counts %d/g in each), so the distinct counts "+
			"leave out about %s units summed over the groups (%s±%s, %s)%s; the intervals cover these bounded counts, "+
			"not the numbers of distinct units", groupsWord(lu), lu,
			num(math.Round(x)), share, num(h), costText(ms[r].mech.Epsilon(), ms[r].mech.Delta()), unitsPerGroupText(noisy, r, groups, ms[r].mech.HalfWidth(0.95)))
	}
	cost := costText(ms[r].mech.Epsilon(), ms[r].mech.Delta())
	// An estimate within its own noise of 0 ("removed about 504 rows
	// (±599)") is said to be so: read alone, it looked like a loss.
	within := ""
	if x <= h {
		within = ", which the noise cannot tell from none"
	}
	if unit == "" {
		unit = "unit"
	}
	if plan.OneWeight {
		clamped := ""
		if plan.Measures[r].Outside {
			clamped = " or a value clamped to its column's bounds"
		}
		return fmt.Sprintf("each %s's rows weigh one row together: about %s %ss had several rows%s (±%s, %s)%s; the intervals cover this weighted answer",
			unit, num(math.Round(x)), unit, clamped, num(h), cost, within)
	}
	what := "contribution bounding removed at least about %s rows"
	if plan.Measures[r].Outside {
		// Rows removed plus rows with a value clamped to its bounds
		// (rewrite/bias.go).
		what = "contribution bounding removed, or clamping changed, about %s rows"
	}
	return fmt.Sprintf(what+" (%s±%s, %s)%s; the intervals cover the bounded answer",
		num(math.Round(x)), share, num(h), cost, within)
}

// roundShare rounds a percentage to one decimal.
func roundShare(p float64) float64 { return math.Round(p*10) / 10 }

// unitsPerGroupText lists the estimate of the units left out per group
// (column r of noisy, floored at 0: post-processing), each with one
// group's 95% half-width h; with more than maxGroupsListed groups, the
// group with the most. "" when the groups are not known.
func unitsPerGroupText(noisy [][]*big.Rat, r int, groups [][]string, h float64) string {
	if len(groups) != len(noisy) || len(noisy) < 2 {
		return ""
	}
	vals := make([]float64, len(noisy))
	top := 0
	for g, row := range noisy {
		vals[g], _ = row[r].Float64()
		vals[g] = math.Max(0, math.Round(vals[g]))
		if vals[g] > vals[top] {
			top = g
		}
	}
	if len(vals) > maxGroupsListed {
		return fmt.Sprintf(", most in %s (about %s ±%s)", groupLabel(groups[top]), num(vals[top]), num(h))
	}
	items := make([]string, len(vals))
	for g, v := range vals {
		items[g] = groupLabel(groups[g]) + " " + num(v)
	}
	return fmt.Sprintf("; per group about %s (each ±%s)", strings.Join(items, ", "), num(h))
}

// unitsBoundText is the NOTICE's and EXPLAIN's warning where bounding may
// have lowered an aggregate and the plan carries no estimate of how much:
// distinct-unit counts that weighting lowers (SET dp.bias = off, or a plan
// whose estimate counts rows), and every aggregate beside a grouped
// quantile (quantileGroupsText); "" when there is none.
func unitsBoundText(plan *dpplan.Plan) string {
	if q := quantileGroupsText(plan); q != "" {
		return q
	}
	if dpplan.GroupBounding(plan) != dpplan.GroupsScale || (plan.HasBias() && plan.Measures[len(plan.Measures)-1].Units) {
		return ""
	}
	if !dpplan.UnitsWeighted(plan, plan.RowsPerUnit) {
		return "" // no unit can be in more groups than it counts whole in
	}
	lu := dpplan.UnitGroups(plan, plan.RowsPerUnit)
	for _, m := range plan.Measures {
		if m.Kind == dpplan.MeasureUnits {
			return fmt.Sprintf("distinct counts count each unit in at most %s (a unit in more groups, g, counts %d/g in each): "+
				"their intervals cover these bounded counts, which can be far below the numbers of distinct units", groupsWord(lu), lu)
		}
	}
	return ""
}

// quantileGroupsText says what a grouped quantile does to the aggregates
// beside it. A quantile over public keys whose groups a unit can outnumber
// keeps each unit in its max_groups_per_unit groups of smallest hash
// (dpplan.GroupsSelect), and the statement's counts, sums and averages are
// computed over the same rows, with no estimate of what that removed (new
// user's run 94: COUNT(*) beside percentile_cont came out at about a third
// of each department's count, "±240", and nothing said so). "" for other
// plans, private keys (selectionBoundText says it there) and statements of
// quantiles alone.
func quantileGroupsText(plan *dpplan.Plan) string {
	if dpplan.GroupBounding(plan) != dpplan.GroupsSelect || plan.PrivateGroups() || !plan.HasQuantile() {
		return ""
	}
	for _, m := range plan.Measures {
		if m.Kind != dpplan.MeasureQuantile {
			return fmt.Sprintf("a grouped quantile keeps each unit in at most %s of its groups (chosen by a hash of the unit and keys), "+
				"and so do this statement's other aggregates: their intervals cover those rows only, which can be far fewer than the data's, "+
				"and what that removed is not estimated; for counts, sums and averages bounded in every group, ask them in a statement without the quantile, "+
				"or in a CTE of their own joined to the quantile's (WITH q AS (…), c AS (…) SELECT … FROM q JOIN c …: each CTE is charged on its own)",
				groupsWord(plan.MaxGroupsPerUnit))
		}
	}
	return ""
}

// groupsWord is "1 group" or "n groups".
func groupsWord(n int) string {
	if n == 1 {
		return "1 group"
	}
	return strconv.Itoa(n) + " groups"
}

// selectionRefusal is checkSelection's refusal of private keys without δ,
// with the hint of what to group by instead.
func selectionRefusal(req Request) error {
	var private, public, buckets []string
	t, _ := req.Dataset.Table(req.Plan.Table)
	for _, k := range req.Plan.Keys {
		if k.Private {
			private = append(private, k.Column)
			// A numeric column with bounds can be grouped in buckets of
			// a public domain instead.
			if t == nil {
				continue
			}
			if c := t.Columns[k.Column]; c != nil && c.Type.Numeric() && c.Lower != "" {
				buckets = append(buckets, "width_bucket("+k.Column+", "+c.Lower+", "+c.Upper+", 10)")
			}
		}
	}
	if t != nil {
		for _, name := range t.ColumnOrder {
			if c := t.Columns[name]; !c.Hidden && len(c.PublicValues) > 0 {
				public = append(public, name)
			}
		}
	}
	hint := "SET dp.delta = 1e-7 (grouping by a column without public values uses DP partition selection, which costs δ)"
	if len(buckets) > 0 {
		hint += ", or GROUP BY buckets of public bounds (" + strings.Join(buckets, ", ") + ")"
	}
	if len(public) > 0 {
		hint += ", or GROUP BY a column with public values (" + strings.Join(public, ", ") + ")"
	}
	return pgerr.New(pgerr.FeatureNotSupported, "GROUP BY %s needs dp.delta > 0: the column has no public values, so its groups are chosen by DP partition selection",
		strings.Join(private, ", ")).WithHint("%s", hint)
}

// firstKNote is note's text for passed selected groups of which kept are
// released.
func firstKNote(passed, kept int) string {
	if passed <= kept {
		return ""
	}
	return fmt.Sprintf("%d groups passed partition selection; the answer holds the first %d by key (an answer holds at most %d noisy cells and %d MiB, shared by a statement's DP aggregates): filter with WHERE, or group by a coarser key",
		passed, kept, dpplan.MaxAnswerCells, dpplan.MaxAnswerBytes>>20)
}
