// Privacy-critical: needs DP review.

package pgemit

import (
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// OutsideSQL is the condition of a row with a value outside its bounds in
// one of the plan's summed plain columns (sums, averages, variances of a
// column with numeric bounds), or "" when there is none. NULL values
// make the comparison NULL: not outside.
func OutsideSQL(t *policy.Table, p *dpplan.Plan) string {
	var conds []string
	for _, c := range dpplan.SummedColumns(t, p) {
		v := QuoteIdent(c.Name) + "::numeric"
		out := v + " < " + NumericConst(c.Lower) + " OR " + v + " > " + NumericConst(c.Upper)
		if c.Type != policy.TypeInt {
			// A value the measure does not read (readNumeric) is not
			// clamped: not outside, and not read here either.
			out = "(" + numericRead(QuoteIdent(c.Name)) + " AND (" + out + "))"
		}
		conds = append(conds, out)
	}
	if len(conds) == 0 {
		return ""
	}
	return "(" + strings.Join(conds, " OR ") + ")"
}

// removedSQL is the dp_bounded value of the MeasureRemoved n (the index as
// text) for a plan in the given mode, with R rows per group and the
// allowance T (both as SQL integers); its inputs are dp_n<n> (COUNT(*) per
// unit and group) and, grouped, the window columns of removedWindowSQL.
func removedSQL(n string, mode dpplan.GroupBound, grouped bool, rows, total string, k int, outside bool) string {
	nn := "dp_n" + n
	kept := "LEAST(" + nn + ", " + rows + ")"
	a, d, rho := nn+" - "+kept, "1", nn+" - "+kept
	switch {
	case mode == dpplan.GroupsScale:
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
func removedWindowSQL(n string, mode dpplan.GroupBound, rows string, outside bool) string {
	nn := "dp_n" + n
	out := ""
	if outside {
		out = ", SUM(dp_o" + n + ") OVER dp_w AS dp_ou" + n
	}
	if mode == dpplan.GroupsScale {
		return ", " + boundedTotal(n, rows) + " AS dp_t" + n + ", SUM(" + nn + ") OVER dp_w AS dp_u" + n + out
	}
	return ", SUM(" + nn + " - LEAST(" + nn + ", " + rows + ")) OVER dp_w AS dp_u" + n + out
}

// removedUnitsSQL is the dp_bounded value of a MeasureRemoved with Units
// (rewrite/bias.go), from dp_g, the unit's number of groups: 0 for a unit
// in at most L0 groups (nothing weighted), else min(g − L0, C)/g with C
// the clip (⌊LInf⌋ of the measure), truncated towards zero by weighted. A
// unit in g groups then adds at most min(g − L0, C) ≤ C over all of them,
// at most (g − L0)/g < 1 to one, whatever its rows: L1 ≤ C and L∞ ≤ C.
func removedUnitsSQL(l0, clip string, k int) string {
	return "CASE WHEN dp_g <= " + l0 + " THEN 0 ELSE " + weighted("1", "LEAST(dp_g - "+l0+", "+clip+")", "dp_g", k) + " END"
}
