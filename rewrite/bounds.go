// Privacy-critical: needs DP review.

package rewrite

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// This file holds all clamping and contribution bounding of dpproxy: the
// per-measure sensitivity bounds of the plan (measureBounds,
// maxGroupsPerUnit) and the SQL that enforces them (emitSQL). Nothing else
// in the project clamps values or limits contributions; the noise added
// downstream is calibrated to the numbers computed here, so the two must
// agree, and they are kept side by side.
//
// # Guarantee
//
// Neighbouring databases differ by all rows of one privacy unit (the rows
// sharing one value of the table's unit_column). The SQL built by emitSQL
// guarantees, for every such unit u and whatever the data:
//
//  1. u contributes to at most Plan.MaxGroupsPerUnit released groups
//     (L0 bound), and to no group outside the public key domain (private
//     keys, partition.go: to no group whose private key is NULL), and
//     when the plan has private keys, u adds exactly 1 to the distinct-unit
//     count (the last column) of each group it contributes to;
//  2. in each group, u changes a count measure by at most max_rows_per_unit,
//     a sum measure over column c by at most
//     max_rows_per_unit · max(|lower_c|, |upper_c|), a sum of squares by at
//     most max_rows_per_unit · max(lower_c², upper_c²), and a count of
//     distinct units by at most 1 (L∞ bound, Measure.LInf).
//
// Hence the L1 sensitivity of the vector of one measure over all groups is
// at most L0·L∞ and the L2 sensitivity at most √L0·L∞ (the standard bounds
// for user-level contribution bounding; see Wilson et al., "Differentially
// Private SQL with Bounded User Contribution", PoPETs 2020, §3).
//
// # How the SQL enforces it
//
// Reading from the inside out:
//
//	dp_rows         one row per input row that passes the analyst's WHERE and
//	                whose keys are in the public domain (key IN (…), where
//	                a key is a column or a key expression of keyexpr.go
//	                whose domain comes from the policy or the query's
//	                constants, never from the data); summed
//	                columns are clamped per row:
//	                  CASE WHEN c IS NULL THEN NULL
//	                       ELSE LEAST(GREATEST(c::numeric, lower), upper) END
//	                (the CASE keeps NULL as NULL: GREATEST ignores NULLs and
//	                would otherwise turn NULL into lower). Squared columns
//	                are the clamped value times itself. Quantile values get
//	                their rank by value within the (unit, group).
//	dp_unit_groups  per (unit, group): for each measure n, the number of
//	                rows that count for it (non-NULL values after FILTER),
//	                and s, the exact numeric sum of their values; for
//	                quantiles at most R of the values, evenly spaced in rank
//	                (quantile.go).
//	dp_counted      (grouped, when a unit could reach more than L0 groups)
//	                per measure t = Σ over the unit's groups of min(n, R),
//	                its bounded rows in all, and g, its number of groups,
//	                for distinct units (groupsScale); or the rank of the
//	                group among the unit's groups by a hash of (unit, keys)
//	                (groupsSelect: private keys, quantiles).
//	dp_bounded      per (unit, group) the bounded value of each measure:
//	                counts min(n, R), sums s·min(n, R)/n, each weighted by
//	                min(1, T/t) with T = L0·R the unit's allowance over all
//	                groups (distinct units by min(1, L0/g)) (groupsScale),
//	                or only the L0 groups of smallest rank (groupsSelect);
//	                weighted values truncated towards zero in exact numeric
//	                (weighted).
//	final           summed per group in numeric (exact: no rounding can
//	                exceed the bounds) and cast to text; with private keys
//	                also COUNT(*), the number of (unit, group) rows of the
//	                group, i.e. its distinct units after bounding.
//
// # Two levels of bounding
//
// Nothing is chosen at random: every bounded value is a function of the
// unit's own rows. A unit's mean value times min(n, R) is bounded like R
// clamped rows (|mean| ≤ max(|lower|, |upper|)). With public keys the
// unit's bounded rows over all groups, t = Σ_g min(n_g, R), are scaled to
// at most its allowance T = L0·R: each group's value is weighted by
// min(1, T/t). For a measure with L∞ = R·M (M the largest |value|, 1 for
// counts) the group values c_g then satisfy |c_g| ≤ min(n_g, R)·M·min(1,
// T/t), so
//
//	L∞: |c_g| ≤ R·M
//	L1: Σ_g |c_g| ≤ t·M·min(1, T/t) ≤ T·M = L0·L∞
//	L2: Σ_g c_g² ≤ max_g |c_g| · Σ_g |c_g| ≤ L∞ · L0·L∞, so L2 ≤ √L0·L∞
//
// the same sensitivities as keeping at most L0 groups, without dropping
// or weighting a unit that is in more than L0 groups but within its
// allowance. Distinct-unit counts (1 per group, L1 ≤ L0) are weighted by
// min(1, L0/g) for g groups instead. Other units' values do not depend on
// whether u is present, so the bounds hold for u alone (PRIVACY.md, "Two
// levels of bounding").
// No random() also means PostgreSQL may run the scan and the first
// aggregation in parallel workers (random() is parallel-restricted).

// # NULL unit values
//
// Rows whose unit column is NULL are excluded (WHERE unit IS NOT NULL).
// Pooling them into one pseudo-unit is NOT safe: adding a person whose rows
// have a NULL unit redraws the pool's random choice of rows and groups, so
// up to 2·L0 groups change (found by rewrite/audit_test.go). Excluded rows
// contribute nothing, so adding or removing them changes nothing. Answers
// therefore differ from PostgreSQL's own on rows without a unit; a steward
// who wants them counted must give them a unit (or declare the column NOT
// NULL upstream).
//
// # Ungrouped queries
//
// Without GROUP BY every unit contributes to the single group, so
// MaxGroupsPerUnit is 1 and the dp_counted step is omitted. The final
// aggregate then returns exactly one row even over no input (with NULL
// measures, which release treats as 0).

// # Bounds per query
//
// The policy gives each unit an allowance per query: at most
// max_groups_per_unit groups and max_rows_per_unit rows in each, so at
// most L0·L∞ rows in all and an L1 sensitivity of L0·L∞ (per row bound)
// for one measure over all groups. An ungrouped query has one group, so
// the unit's whole allowance goes to it: L∞ = max_groups_per_unit ·
// max_rows_per_unit rows, with L0 = 1, and the L1 sensitivity is the
// same L0·L∞ the policy already allows a grouped query (for the Gaussian
// mechanism the L2 sensitivity L0·L∞ is larger than a grouped query's
// √L0·L∞: the policy's L0·L∞ rows of one unit may all lie in the one
// group). Keeping only max_rows_per_unit rows there would drop rows the
// policy allows, biasing counts and sums down (the demo's first query lost
// 24% of its rows). The session may tighten either bound (SET
// dp.max_rows_per_unit / dp.max_groups_per_unit, like BigQuery's
// per-query contribution bounds), never loosen it. queryBounds gives the
// builder a view of the table with the bounds of this query; release
// checks Plan.RowsPerUnit against the policy (release/join.go).

// measureBounds fills the clamping bounds and the L∞ bound of a measure.
// col is the measure's column (nil for COUNT(*) or an undeclared unit
// column).
func measureBounds(t *policy.Table, m Measure, col *policy.Column) Measure {
	rows := float64(t.MaxRowsPerUnit)
	switch m.Kind {
	case MeasureCount:
		// Each unit keeps at most max_rows_per_unit rows per group, each
		// counting 1.
		m.Integer = true
		m.LInf = rows
	case MeasureSum:
		// Each of at most max_rows_per_unit rows adds a value clamped to
		// [lower, upper], so |sum| ≤ rows·max(|lower|, |upper|).
		m.Lower, m.Upper = col.LowerNum, col.UpperNum
		m.Integer = col.Type == policy.TypeInt
		m.LInf = rows * math.Max(math.Abs(m.Lower), math.Abs(m.Upper))
	case MeasureUnits:
		// COUNT(DISTINCT unit_column): a unit is one value of the unit
		// column, so it adds at most 1 to each group however many rows
		// it has (rows with a NULL unit are excluded, see above).
		m.Integer = true
		m.LInf = 1
	case MeasureSumSq:
		// Each of at most max_rows_per_unit rows adds x² with x clamped to
		// [lower, upper], so 0 ≤ x² ≤ max(lower², upper²) and the unit's
		// per-group sum of squares lies in [0, rows·max(lower², upper²)].
		m.Lower, m.Upper = col.LowerNum, col.UpperNum
		m.Integer = col.Type == policy.TypeInt
		m.LInf = rows * math.Max(m.Lower*m.Lower, m.Upper*m.Upper)
	case MeasureQuantile:
		// Each unit adds or removes at most max_rows_per_unit clamped
		// values of the group, so every rank-based quantity of the group
		// (counts per bucket, the rank of any value, n) moves by at most
		// that much (quantile.go).
		m.LInf = rows
	}
	return m
}

// maxGroupsPerUnit is the L0 bound the SQL enforces: the policy's
// max_groups_per_unit, but never more than the number of groups that can
// be released (the product of the key domains), and 1 when ungrouped.
func maxGroupsPerUnit(t *policy.Table, keys []Key) int {
	if len(keys) == 0 {
		return 1
	}
	groups := 1
	for _, k := range keys {
		if k.Private {
			// No public domain to cap the number of groups by.
			return t.MaxGroupsPerUnit
		}
	}
	for _, k := range keys {
		groups *= len(k.Domain)
		if groups >= t.MaxGroupsPerUnit {
			return t.MaxGroupsPerUnit
		}
	}
	return min(groups, t.MaxGroupsPerUnit)
}

// groupBound is how the SQL enforces the L0 bound (see "Two levels of
// bounding" above).
type groupBound int

const (
	// groupsAll: no unit can reach more groups than the bound (ungrouped,
	// or public key domains with at most MaxGroupsPerUnit groups in all).
	groupsAll groupBound = iota
	// groupsScale: public keys; a unit whose bounded rows over all groups
	// exceed L0·R has its values in each weighted down to that total.
	groupsScale
	// groupsSelect: private keys (partition selection) or quantiles; a
	// unit keeps its L0 groups of smallest hash.
	groupsSelect
)

// groupBounding is the L0 mode of a plan emitted by emitSQL.
func groupBounding(p *Plan) groupBound {
	if len(p.Keys) == 0 {
		return groupsAll
	}
	for _, k := range p.Keys {
		if k.Private {
			return groupsSelect
		}
	}
	groups := 1
	for _, k := range p.Keys {
		groups *= len(k.Domain)
		if groups > p.MaxGroupsPerUnit {
			break
		}
	}
	if groups <= p.MaxGroupsPerUnit {
		return groupsAll
	}
	for _, m := range p.Measures {
		if m.Kind == MeasureQuantile {
			return groupsSelect
		}
	}
	return groupsScale
}

// CellsChanged is the number of released groups whose values one unit can
// change: every group of the key domains when groups are weighted
// (groupsScale: a unit within its allowance keeps all its groups, each
// with a value that need not lie on the noise grid), else at most
// MaxGroupsPerUnit. Release charges the grid rounding of real-valued
// measures once per such group (noise.Params.Cells); a larger figure only
// adds noise.
func (p *Plan) CellsChanged() int {
	if groupBounding(p) != groupsScale {
		return max(p.MaxGroupsPerUnit, 1)
	}
	n := 1
	for _, k := range p.Keys {
		n *= max(len(k.Domain), 1)
		if n >= 1<<20 {
			return 1 << 20
		}
	}
	return max(n, p.MaxGroupsPerUnit, 1)
}

// scaledMeasures marks the measures whose per-unit values the SQL may
// weight (bounds.go, "Two levels of bounding") as not integer: sums and
// sums of squares always (a unit with more than L∞ rows in a group adds
// its sum times L∞/n), counts and distinct units when the plan scales
// groups. The noise is then added on a fine grid instead of the integers
// (noise.Params.Integer).
func scaledMeasures(p *Plan) {
	scale := groupBounding(p) == groupsScale
	for i := range p.Measures {
		m := &p.Measures[i]
		switch m.Kind {
		case MeasureSum, MeasureSumSq:
			m.Whole = m.Integer
			m.Integer = false
		case MeasureCount, MeasureUnits:
			if scale {
				m.Integer = false
			}
		}
	}
}

// truncDigits is the number of decimal places to which a weighted value
// is truncated (towards zero, so never above its exact bound): 15
// significant digits of the measure's L∞ bound, at least 6 places.
func truncDigits(linf float64) int {
	d := 15
	if linf > 0 && !math.IsInf(linf, 0) {
		d = 15 - int(math.Floor(math.Log10(linf)))
	}
	return min(max(d, 6), 60)
}

// weighted is the SQL of v·num/den truncated towards zero to k decimal
// places, for v numeric and num, den positive integer SQL expressions.
// Every step is exact: numeric products are exact, div is the truncated
// exact quotient, and the scaling back is a product with 10⁻ᵏ (a numeric
// quotient would be rounded to a chosen scale, possibly upwards).
func weighted(v, num, den string, k int) string {
	return "div(" + v + "::numeric * " + num + " * 1" + strings.Repeat("0", k) + ", " + den + ") * 0." + strings.Repeat("0", k-1) + "1"
}

// emitSQL builds the SQL of a plan; see the file comment for its shape.
// Every identifier is a policy name, quoted; every constant is produced by
// this package.
func emitSQL(t *policy.Table, p *Plan, where pred) string {
	return emitSQLProfile(t, p, where, nil)
}

// emitSQLProfile is emitSQL, with, when profile (the candidate rows per
// unit of autobounds.go) is not nil, the profile of the units as K + 1
// more columns after the measures: per group, the units whose first
// (unit, group) row it is (summed over the groups: N), and for each
// candidate c those of them within its bounds (at most c rows in each
// group, at most L0·c in all). Each unit is counted in exactly one group,
// so the sums over the groups are the profile of autobounds.go, read in
// the same scan as the answer of the plan's own bound.
func emitSQLProfile(t *policy.Table, p *Plan, where pred, profile []int) string {
	if p.Join != nil && p.Join.Shape == JoinKey {
		return elasticSQL(t, p, where) // join.go: bounded before the join
	}
	from := quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
	if p.Join != nil {
		from = p.Join.fromSQL() // join.go: bounded after the join
	}
	unit := quoteIdent(t.UnitColumn)
	rows := strconv.Itoa(t.MaxRowsPerUnit)
	l0 := strconv.Itoa(p.MaxGroupsPerUnit)
	// total is the unit's allowance over all groups, T = L0·R rows.
	total := strconv.Itoa(p.MaxGroupsPerUnit * t.MaxRowsPerUnit)
	mode := groupBounding(p)
	var keyCols, keyOut []string
	for j, k := range p.Keys {
		keyCols = append(keyCols, "dp_k"+strconv.Itoa(j))
		keyOut = append(keyOut, keySQL(k)+" AS dp_k"+strconv.Itoa(j))
	}

	// dp_rows: one row per input row, with its unit, keys and per-row
	// values. Rows without a unit are excluded (see "NULL unit values").
	cols := append([]string{unit + " AS dp_unit"}, keyOut...)
	conds := sourceConds(p, where, unit)
	partition := append([]string{unit}, quoteIdents(p.Keys)...)
	hasRow := make([]bool, len(p.Measures)) // measure i has a per-row value dp_x<i>
	for i, m := range p.Measures {
		v := rowValueSQL(t, m)
		if v == "" {
			continue
		}
		hasRow[i] = true
		cols = append(cols, v+" AS dp_x"+strconv.Itoa(i))
		if m.Kind == MeasureQuantile {
			cols = append(cols, quantileRankSQL(v, partition, i)...)
		}
	}

	// dp_unit_groups: one row per (unit, group) with the unit's counts,
	// exact sums and, for quantiles, its sorted values.
	group := append([]string{"dp_unit"}, keyCols...)
	agg := append([]string{}, group...)
	for i, m := range p.Measures {
		n, x := strconv.Itoa(i), "dp_x"+strconv.Itoa(i)
		switch {
		case m.Kind == MeasureRemoved:
			agg = append(agg, "COUNT(*) AS dp_n"+n)
			if hasRow[i] {
				// The rows with a value outside its bounds (bias.go).
				agg = append(agg, "SUM("+x+") AS dp_o"+n)
			}
		case m.Kind == MeasureCount && !hasRow[i]:
			agg = append(agg, "COUNT(*) AS dp_n"+n)
		case m.Kind == MeasureCount, m.Kind == MeasureUnits && m.Filter != "":
			agg = append(agg, "COUNT("+x+") AS dp_n"+n)
		case m.Kind == MeasureUnits:
			// 1 per (unit, group): nothing to aggregate.
		case m.Kind == MeasureQuantile:
			agg = append(agg, quantileKeepSQL(i, t.MaxRowsPerUnit)+" AS dp_a"+n)
		default:
			agg = append(agg, "SUM("+x+") AS dp_s"+n, "COUNT("+x+") AS dp_n"+n)
		}
	}

	if profile != nil {
		agg = append(agg, "COUNT(*) AS dp_np")
	}

	// dp_bounded: the bounded value of each measure per (unit, group).
	var bounded []string
	for i, m := range p.Measures {
		n := strconv.Itoa(i)
		var v string
		k := truncDigits(m.LInf)
		switch m.Kind {
		case MeasureCount:
			v = "LEAST(dp_n" + n + ", " + rows + ")"
			if mode == groupsScale {
				v = "CASE WHEN dp_t" + n + " <= " + total + " THEN " + v + " ELSE " + weighted(v, total, "dp_t"+n, k) + " END"
			}
		case MeasureUnits:
			v = "1"
			if m.Filter != "" {
				v = "CASE WHEN dp_n" + n + " > 0 THEN 1 ELSE 0 END"
			}
			if mode == groupsScale {
				v = "CASE WHEN dp_g <= " + l0 + " THEN " + v + " ELSE " + weighted("("+v+")", l0, "dp_g", k) + " END"
			}
		case MeasureQuantile:
			v = quantileUnitSQL("dp_a"+n, t.MaxRowsPerUnit)
		case MeasureRemoved:
			v = removedSQL(n, mode, len(p.Keys) > 0, rows, total, k, m.Outside != "") // bias.go
		default:
			s, c := "dp_s"+n, "dp_n"+n
			if mode == groupsScale {
				// t ≥ LEAST(n, R) ≥ 1 in the weighted branch (n = 0 has
				// s NULL and takes the first).
				t := "dp_t" + n
				v = "CASE WHEN " + c + " = 0 OR (" + c + " <= " + rows + " AND " + t + " <= " + total + ") THEN " + s + " ELSE " +
					weighted(s, "LEAST("+c+", "+rows+") * LEAST("+t+", "+total+")", c+"::numeric * "+t, k) + " END"
			} else {
				v = "CASE WHEN " + c + " <= " + rows + " THEN " + s + " ELSE " + weighted(s, rows, c, k) + " END"
			}
		}
		bounded = append(bounded, v+" AS dp_m"+n)
	}

	// final
	var final []string
	for _, k := range keyCols {
		final = append(final, k+"::text")
	}
	for i, m := range p.Measures {
		mi := "dp_m" + strconv.Itoa(i)
		if m.Kind == MeasureQuantile {
			final = append(final, quantileFinalSQL(t, m, mi))
			continue
		}
		final = append(final, "SUM("+mi+")::text")
	}
	if profile != nil {
		first, pmax, psum := "dp_pfirst = 1", "dp_pmax", "dp_psum"
		if len(p.Keys) == 0 {
			first, pmax, psum = "TRUE", "dp_np", "dp_np"
		}
		bounded = append(bounded, "CASE WHEN "+first+" THEN 1 ELSE 0 END AS dp_pu")
		final = append(final, "SUM(dp_pu)::text")
		for j, c := range profile {
			cj := strconv.Itoa(j)
			bounded = append(bounded, "CASE WHEN "+first+" AND "+pmax+" <= "+strconv.Itoa(c)+" AND "+psum+" <= "+
				strconv.Itoa(p.MaxGroupsPerUnit*c)+" THEN 1 ELSE 0 END AS dp_pc"+cj)
			final = append(final, "SUM(dp_pc"+cj+")::text")
		}
	}
	if p.PrivateGroups() {
		// Partition selection: each dp_bounded row is one (unit, group)
		// that survived the L0 bound, so COUNT(*) is the number of
		// distinct units in the group, and each unit adds 1 to at most
		// MaxGroupsPerUnit groups.
		final = append(final, "COUNT(*)::text")
	}

	// The levels nest final ⊃ dp_bounded ⊃ dp_counted ⊃ dp_unit_groups ⊃
	// dp_rows; they are written outside-in into one builder.
	var b strings.Builder
	b.Grow(1024)
	w := func(parts ...string) {
		for _, s := range parts {
			b.WriteString(s)
		}
	}
	join := func(items []string, sep string) {
		for i, s := range items {
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(s)
		}
	}
	hasG := false
	// groupsAll needs dp_counted only for the removed rows of a grouped
	// query (bias.go).
	window := mode == groupsAll && len(p.Keys) > 0 && (p.HasBias() || profile != nil)
	profileWindow := ""
	if profile != nil && len(p.Keys) > 0 {
		profileWindow = ", MAX(dp_np) OVER dp_w AS dp_pmax, SUM(dp_np) OVER dp_w AS dp_psum, ROW_NUMBER() OVER dp_w AS dp_pfirst"
	}
	w("SELECT ")
	join(final, ", ")
	w(" FROM (SELECT ")
	join(append(append([]string{}, keyCols...), bounded...), ", ")
	w(" FROM (")
	switch mode {
	case groupsScale:
		// Per unit and measure, t = Σ over the unit's groups of
		// min(n, R); g, its number of groups, for distinct units.
		w("SELECT *")
		for i, m := range p.Measures {
			n := strconv.Itoa(i)
			switch m.Kind {
			case MeasureUnits:
				if !hasG {
					w(", COUNT(*) OVER dp_w AS dp_g")
					hasG = true
				}
			case MeasureCount, MeasureSum, MeasureSumSq:
				w(", SUM(LEAST(dp_n", n, ", ", rows, ")) OVER dp_w AS dp_t", n)
			case MeasureRemoved:
				w(removedWindowSQL(n, mode, rows, m.Outside != ""))
			}
		}
		w(profileWindow, " FROM (")
	case groupsAll:
		if window {
			w("SELECT *")
			if p.HasBias() {
				w(removedWindowSQL(strconv.Itoa(len(p.Measures)-1), mode, rows, p.Measures[len(p.Measures)-1].Outside != ""))
			}
			w(profileWindow, " FROM (")
		}
	case groupsSelect:
		// The unit's groups in the order of a hash of (unit, keys), then
		// of the keys themselves, so that the order is total and a
		// function of the unit's own rows.
		hashed := []string{"dp_unit::text"}
		for _, k := range keyCols {
			hashed = append(hashed, k+"::text")
		}
		w("SELECT *, ROW_NUMBER() OVER (PARTITION BY dp_unit ORDER BY hashtextextended(")
		join(hashed, " || ',' || ")
		w(", ", selectSalt, ")")
		for _, k := range keyCols {
			w(", ", k)
		}
		w(") AS dp_group_rank FROM (")
	}
	w("SELECT ")
	join(agg, ", ")
	w(" FROM (SELECT ")
	join(cols, ", ")
	w(" FROM ", from, " WHERE ")
	join(conds, " AND ")
	w(") AS dp_rows GROUP BY ")
	join(group, ", ")
	w(") AS dp_unit_groups")
	switch mode {
	case groupsScale:
		w(" WINDOW dp_w AS (PARTITION BY dp_unit)) AS dp_counted")
	case groupsAll:
		if window {
			w(" WINDOW dp_w AS (PARTITION BY dp_unit)) AS dp_counted")
		}
	case groupsSelect:
		w(") AS dp_counted WHERE dp_group_rank <= ", l0)
	}
	w(") AS dp_bounded")
	if len(p.Keys) > 0 {
		w(" GROUP BY ")
		join(keyCols, ", ")
	}
	return b.String()
}

// sourceConds is the WHERE of dp_rows: rows with a unit, that pass the
// analyst's WHERE, with every key in its public domain (or not NULL, for
// private keys).
func sourceConds(p *Plan, where pred, unit string) []string {
	conds := []string{unit + " IS NOT NULL"}
	if where != nil {
		conds = append(conds, where.sql())
	}
	for _, k := range p.Keys {
		if k.Private {
			// No public domain; the NULL group is not released.
			conds = append(conds, keySQL(k)+" IS NOT NULL")
			continue
		}
		conds = append(conds, keySQL(k)+" IN ("+domainList(k)+")")
	}
	return conds
}

// selectSalt seeds the hash that orders a unit's groups (groupsSelect).
// Any constant gives the same guarantee (the order is a function of the
// unit's rows); it is fixed so that audits can reproduce a release.
const selectSalt = "7919"

// clampSQL is column c cast to numeric and clamped to its policy bounds.
func clampSQL(t *policy.Table, c string) string {
	return "LEAST(GREATEST(" + quoteIdent(c) + "::numeric, " + numericConst(t.Columns[c].Lower) + "), " +
		numericConst(t.Columns[c].Upper) + ")"
}

// rowValueSQL is the per-row value dp_x of a measure in dp_rows, or ""
// when the measure needs none (COUNT(*) and COUNT(DISTINCT unit) without
// FILTER):
//
//   - sums: the clamped column, or the expression (rowexpr.go; its columns
//     clamped), minus Centre for normalized sums; sums of squares: that
//     value times itself;
//   - counts: the column or the expression (NULL-ness is all that counts),
//     or 1 for COUNT(*) with a filter; distinct units: the unit column;
//   - with FILTER (WHERE cond): CASE WHEN cond THEN value END, so rows
//     failing the filter give NULL, which no aggregate counts or sums.
//
// A filtered measure is bounded on the rows that pass its filter (n and s
// of dp_unit_groups count and sum only those), so the L∞ bounds above
// hold for it. On data within the contribution limits nothing is
// weighted, so the answer equals PostgreSQL's FILTER.
func rowValueSQL(t *policy.Table, m Measure) string {
	var v string
	switch m.Kind {
	case MeasureQuantile:
		v = quantileValueSQL(t, m)
	case MeasureSum, MeasureSumSq:
		if m.Expr != "" {
			v = m.Expr
			if m.Centre != "" {
				v = "(" + v + " - " + numericConst(m.Centre) + ")"
			}
		} else {
			c := quoteIdent(m.Column)
			v = clampSQL(t, m.Column)
			if m.Centre != "" {
				v = "(" + v + " - " + numericConst(m.Centre) + ")"
			}
			if m.Kind == MeasureSumSq {
				v += " * " + v
			}
			v = "CASE WHEN " + c + " IS NULL THEN NULL ELSE " + v + " END"
		}
		if m.Expr != "" && m.Kind == MeasureSumSq {
			v = v + " * " + v
		}
	case MeasureUnits:
		if m.Filter == "" {
			return ""
		}
		v = quoteIdent(t.UnitColumn)
	case MeasureRemoved:
		if m.Outside == "" {
			return ""
		}
		return "CASE WHEN " + m.Outside + " THEN 1 ELSE 0 END"
	case MeasureCount:
		switch {
		case m.Expr != "":
			v = m.Expr
		case m.Column != "":
			v = quoteIdent(m.Column)
		case m.Filter != "":
			v = "1"
		default:
			return ""
		}
	}
	if m.Filter != "" {
		v = "CASE WHEN " + m.Filter + " THEN " + v + " END"
	}
	return v
}

// exprBounds fills the bounds of a measure over an expression or a
// normalized sum from the exact interval iv of its per-row values
// (sensitivity/interval.go): Lower, Upper are iv rounded outwards to
// float64, and LInf is at least both the exact bound and the float formula
// release re-checks it against.
func exprBounds(t *policy.Table, m Measure, iv sensitivity.Interval) Measure {
	rows := t.MaxRowsPerUnit
	if m.Kind == MeasureCount {
		m.Integer = true
		m.LInf = sensitivity.CountLInf(rows)
		return m
	}
	if iv.Empty() {
		iv = sensitivity.Point(new(big.Rat), true)
	}
	m.Lower, m.Upper = sensitivity.RatDown(iv.Lo), sensitivity.RatUp(iv.Hi)
	centre := new(big.Rat)
	if m.Centre != "" {
		centre.SetString(m.Centre)
	}
	// Per-row values of the measure: x − centre, or (x − centre)².
	shifted := sensitivity.Sub(iv, sensitivity.Point(centre, centre.IsInt()))
	m.Integer = shifted.Int
	switch {
	case m.Kind == MeasureSum && m.Centre != "":
		m.LInf = math.Max(sensitivity.CentredSumLInf(rows, m.Lower, m.Upper, centre), sensitivity.SumLInfInterval(rows, shifted))
	case m.Kind == MeasureSum:
		m.LInf = math.Max(sensitivity.SumLInf(rows, m.Lower, m.Upper), sensitivity.SumLInfInterval(rows, shifted))
	case m.Kind == MeasureSumSq && m.Centre != "":
		sq := sensitivity.Mul(shifted, shifted)
		m.LInf = math.Max(sensitivity.CentredSumSqLInf(rows, m.Lower, m.Upper, centre), sensitivity.SumLInfInterval(rows, sq))
	case m.Kind == MeasureSumSq:
		sq := sensitivity.Mul(shifted, shifted)
		m.LInf = math.Max(sensitivity.SumSqLInf(rows, m.Lower, m.Upper), sensitivity.SumLInfInterval(rows, sq))
	}
	return m
}

func quoteIdents(keys []Key) []string {
	var out []string
	for _, k := range keys {
		out = append(out, keySQL(k))
	}
	return out
}

// numericConst writes a policy bound (validated by policy as a decimal
// number) as a numeric constant.
func numericConst(s string) string {
	return "(" + s + ")::numeric"
}

// domainConsts writes the public values of a key as constants of its type
// (validated by policy: integers, YYYY-MM-DD dates, true/false).
func domainConsts(k Key) []string {
	out := make([]string, len(k.Domain))
	for i, v := range k.Domain {
		var b strings.Builder
		writeDomainConst(&b, k.Type, v)
		out[i] = b.String()
	}
	return out
}

// domainList is strings.Join(domainConsts(k), ", ") written into one
// builder (a Rewrite writes every value of every key's domain).
func domainList(k Key) string {
	var b strings.Builder
	n := 0
	for _, v := range k.Domain {
		n += len(v) + 10
	}
	b.Grow(n)
	for i, v := range k.Domain {
		if i > 0 {
			b.WriteString(", ")
		}
		writeDomainConst(&b, k.Type, v)
	}
	return b.String()
}

func writeDomainConst(b *strings.Builder, typ policy.Type, v string) {
	switch typ {
	case policy.TypeInt:
		b.WriteString("(" + v + ")")
	case policy.TypeDate:
		b.WriteString(quoteString(v) + "::date")
	case policy.TypeBool:
		b.WriteString(strings.ToUpper(v))
	default:
		if !strings.ContainsAny(v, `'\`) {
			// quoteString's common case, without its allocations.
			b.WriteByte('\'')
			b.WriteString(v)
			b.WriteByte('\'')
			return
		}
		b.WriteString(quoteString(v))
	}
}
