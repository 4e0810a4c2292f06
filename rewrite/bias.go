// Privacy-critical: needs DP review.

package rewrite

import (
	"strings"

	"github.com/dpproxy/dpproxy/policy"
)

// # The bias of contribution bounding
//
// Bounding (bounds.go) removes rows: a unit's rows beyond R in a group,
// and with public keys the part of its rows beyond its allowance
// T = L0·R over all groups. The intervals release states are about the
// noise around the bounded answer; how far that answer is from the
// unbounded one is a property of the data, so it can only be stated as
// a DP estimate. addRemoved adds that estimate to a plan as one more
// measure, MeasureRemoved: per group, the rows of the query (rows that
// pass its WHERE, keys in their domain) that bounding removed.
//
// Per (unit, group) with n rows the SQL computes the removed rows
// r = n − b, where b is the bounded row count of bounds.go: b = min(n, R),
// times min(1, T/t) with t = Σ_g min(n_g, R) when groups are scaled. Per
// unit, ρ = Σ_g r_g = m − min(t, T) (m = Σ_g n_g) exactly, or
// Σ_g (n_g − min(n_g, R)) without scaling. Each unit's removed rows are
// then clipped to C = L0·R over all its groups: the released value of the
// group is r_g·min(1, C/ρ), computed in exact numeric as
// div(a_g·min(ρ, C)·10ᵏ, d·ρ)·10⁻ᵏ, where r_g = a_g/d with integers
// a_g = n_g − min(n_g, R) and d = 1 (t ≤ T), or a_g = n_g·t − min(n_g, R)·T
// and d = t (t > T). Truncation towards zero keeps every value in
// [0, r_g·min(1, C/ρ)], so for one unit
//
//	Σ_g value_g ≤ min(ρ, C) ≤ C   (L1 ≤ C, hence L∞ ≤ C and L2 ≤ C)
//
// and the values are functions of the unit's own rows.
//
// Clamping changes rows too: a value outside its column's declared
// bounds is clamped to them. When the plan sums plain columns with
// numeric bounds, the measure also counts, per (unit, group), the rows o_g
// with such a value outside its bounds (Measure.Outside): the released
// value is (r_g + o_g)·min(1, C/ρ') with ρ' = Σ_g (r_g + o_g), computed as
// above with a_g + o_g·d in place of a_g; the same argument gives
// Σ_g value_g ≤ C. A row both removed and clamped counts twice, so the
// estimate then is of the rows bounding affected, not of distinct rows. Release calibrates
// the measure's noise to L1 = LInf = C (sensitivity.L1/L2 with Bounds.L1 =
// C give C for both), charges it like any measure, and gives it a fixed
// share of the query's ε (release/bias.go). Clipping at C makes the
// estimate a lower bound in expectation when a unit loses more than C
// rows; the NOTICE says "at least" for that reason.
//
// Plans that choose rather than weight (private keys, quantiles), joins
// and sample-and-aggregate get no estimate (and so pay nothing for one).

// addRemoved appends the MeasureRemoved of a plan that bounds by weights;
// other plans are left as they are.
func addRemoved(t *policy.Table, p *Plan) {
	if !weightsOnly(p) {
		return
	}
	bounded := false
	for _, m := range p.Measures {
		switch m.Kind {
		case MeasureCount, MeasureSum, MeasureSumSq:
			bounded = true
		}
	}
	if !bounded {
		return
	}
	c := float64(p.MaxGroupsPerUnit * t.MaxRowsPerUnit)
	p.Measures = append(p.Measures, Measure{Kind: MeasureRemoved, LInf: c, L1: c, Outside: outsideSQL(t, p)})
}

// outsideSQL is the condition of a row with a value outside its bounds in
// one of the plan's summed plain columns (sums, averages, variances of a
// column with numeric bounds), or "" when there is none. NULL values
// make the comparison NULL: not outside.
func outsideSQL(t *policy.Table, p *Plan) string {
	var conds []string
	for _, c := range summedColumns(t, p) {
		v := quoteIdent(c.Name) + "::numeric"
		conds = append(conds, v+" < "+numericConst(c.Lower), v+" > "+numericConst(c.Upper))
	}
	if len(conds) == 0 {
		return ""
	}
	return "(" + strings.Join(conds, " OR ") + ")"
}

// summedColumns are the plain columns with numeric bounds that the plan's
// sums, averages and variances clamp (not those of expressions), once
// each, in the order the measures first use them: the columns whose
// clamped rows the bias estimate counts, and the candidates of auto
// clipping (autoclip.go).
func summedColumns(t *policy.Table, p *Plan) []*policy.Column {
	var out []*policy.Column
	seen := map[string]bool{}
	for _, m := range p.Measures {
		if (m.Kind != MeasureSum && m.Kind != MeasureSumSq) || m.Expr != "" || m.Column == "" || seen[m.Column] {
			continue
		}
		c, ok := t.Columns[m.Column]
		if !ok || !c.HasBounds || (c.Type != policy.TypeInt && c.Type != policy.TypeNumeric && c.Type != policy.TypeFloat) {
			continue
		}
		seen[m.Column] = true
		out = append(out, c)
	}
	return out
}

// weightsOnly reports whether the plan bounds contributions by weights
// alone (bounds.go): no join, no sample-and-aggregate, no private keys,
// no quantiles. Only such plans carry a bias estimate or auto bounds.
func weightsOnly(p *Plan) bool {
	if p.Join != nil || p.SampleAgg != nil || p.PrivateGroups() {
		return false
	}
	for _, m := range p.Measures {
		if m.Kind == MeasureQuantile {
			return false
		}
	}
	return true
}

// HasBias reports whether the plan carries a bias estimate; its measure is
// then the last one.
func (p *Plan) HasBias() bool {
	return len(p.Measures) > 0 && p.Measures[len(p.Measures)-1].Kind == MeasureRemoved
}

// removedSQL is the dp_bounded value of the MeasureRemoved n (the index as
// text) for a plan in the given mode, with R rows per group and the
// allowance T (both as SQL integers); its inputs are dp_n<n> (COUNT(*) per
// unit and group) and, grouped, the window columns of removedWindowSQL.
func removedSQL(n string, mode groupBound, grouped bool, rows, total string, k int, outside bool) string {
	nn := "dp_n" + n
	kept := "LEAST(" + nn + ", " + rows + ")"
	a, d, rho := nn+" - "+kept, "1", nn+" - "+kept
	switch {
	case mode == groupsScale:
		t, m := "dp_t"+n, "dp_u"+n
		a = "CASE WHEN " + t + " <= " + total + " THEN " + nn + " - " + kept + " ELSE " + nn + "::numeric * " + t + " - " + kept + " * " + total + " END"
		d = "CASE WHEN " + t + " <= " + total + " THEN 1 ELSE " + t + " END"
		rho = "(" + m + " - LEAST(" + t + ", " + total + "))"
	case grouped:
		rho = "dp_u" + n
	default:
		rho = "(" + rho + ")"
	}
	if outside {
		// r_g + o_g = (a_g + o_g·d)/d, and ρ gains Σ_g o_g (the window's
		// dp_ou, or the group's own o when ungrouped).
		o, ou := "dp_o"+n, "dp_ou"+n
		if !grouped {
			ou = o
		}
		a = "(" + a + ") + " + o + " * (" + d + ")"
		rho = "(" + rho + " + " + ou + ")"
	}
	return "CASE WHEN " + rho + " = 0 THEN 0 ELSE " + weighted("("+a+")", "LEAST("+rho+", "+total+")", "("+d+") * "+rho, k) + " END"
}

// removedWindowSQL is the per-unit window columns MeasureRemoved n needs
// in dp_counted ("" when ungrouped).
func removedWindowSQL(n string, mode groupBound, rows string, outside bool) string {
	nn := "dp_n" + n
	out := ""
	if outside {
		out = ", SUM(dp_o" + n + ") OVER dp_w AS dp_ou" + n
	}
	if mode == groupsScale {
		return ", SUM(LEAST(" + nn + ", " + rows + ")) OVER dp_w AS dp_t" + n + ", SUM(" + nn + ") OVER dp_w AS dp_u" + n + out
	}
	return ", SUM(" + nn + " - LEAST(" + nn + ", " + rows + ")) OVER dp_w AS dp_u" + n + out
}
