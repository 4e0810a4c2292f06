// Privacy-critical: needs DP review.

package pgemit

import (
	"math"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// The SQL that enforces the bounds: SQL and the clamped per-row
// values. See dpplan/bounds.go for the bounding argument (the guarantee,
// the two levels of bounding, the bounds per query); the shape of the SQL
// that enforces it follows.
//
// # How the SQL enforces it
//
// Reading from the inside out:
//
//	dp_rows         one row per input row that passes the analyst's WHERE and
//	                whose keys are in the public domain (key IN (…), where
//	                a key is a column or a key expression of rewrite/keyexpr.go
//	                whose domain comes from the policy or the query's
//	                constants, never from the data); summed
//	                columns are clamped per row:
//	                  CASE WHEN c IS NULL THEN NULL
//	                       ELSE LEAST(GREATEST(c::numeric, lower), upper) END
//	                (a non-integer column NULL above 64 bytes and rounded
//	                to at most 30 decimals: readNumeric, columnNumeric)
//	                (the CASE keeps NULL as NULL: GREATEST ignores NULLs and
//	                would otherwise turn NULL into lower). Squared columns
//	                are the clamped value times itself. Quantile values get
//	                their rank by value within the (unit, group).
//	dp_unit_groups  per (unit, group): for each measure n, the number of
//	                rows that count for it (non-NULL values after FILTER),
//	                and s, the exact numeric sum of their values; for
//	                quantiles at most R of the values, evenly spaced in rank
//	                (rewrite/quantile.go).
//	dp_counted      (grouped, when a unit could reach more than L0 groups)
//	                per measure t = Σ over the unit's groups of min(n, R),
//	                its bounded rows in all, and g, its number of groups,
//	                for distinct units (dpplan.GroupsScale); or the rank of the
//	                group among the unit's groups by a hash of (unit, keys)
//	                (dpplan.GroupsSelect: private keys, quantiles).
//	dp_bounded      per (unit, group) the bounded value of each measure:
//	                counts min(n, R), sums s·min(n, R)/n, each weighted by
//	                min(1, T/t) with T = L0·R the unit's allowance over all
//	                groups (distinct units by min(1, L_u/g), L_u =
//	                min(G, L0·R): dpplan.UnitGroups) (dpplan.GroupsScale),
//	                or only the L0 groups of smallest rank (dpplan.GroupsSelect);
//	                weighted values truncated towards zero in exact numeric
//	                (weighted), or, for counts, in int8 fixed point
//	                (fixedCount: the same digits times 10ᵏ).
//	final           summed per group in numeric (exact: no rounding can
//	                exceed the bounds; a fixed-point count's sum is scaled
//	                back by 10⁻ᵏ) and cast to text; with private keys or
//	                min_units_per_cell also the group's distinct units
//	                after bounding (COUNT(*) of its (unit, group) rows,
//	                each weighted by min(1, L0/g) under GroupsScale).

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

// SQL builds the SQL of a plan; see the file comment for its shape.
// Every identifier is a policy name, quoted by this package; constants
// are either written by this package or are plan data written by the
// planner from validated nodes (Measure.Expr, Filter and Outside; the
// literals of WHERE conditions and key expressions: see doc.go).
func SQL(t *policy.Table, p *dpplan.Plan, where dpplan.Pred) string {
	return ProfileSQL(t, p, where, nil)
}

// ProfileSQL is SQL, with, when profile (the candidate rows per
// unit of rewrite/autobounds.go) is not nil, the profile of the units as K + 1
// more columns after the measures (and after the unit count, when the plan
// has one: dpplan.Plan.UnitsCounted), the last of the row: per group, the units whose first
// (unit, group) row it is (summed over the groups: N), and for each
// candidate c those of them within its bounds (at most c rows in each
// group, at most L0·c in all). Each unit is counted in exactly one group,
// so the sums over the groups are the profile of rewrite/autobounds.go, read in
// the same scan as the answer of the plan's own bound.
func ProfileSQL(t *policy.Table, p *dpplan.Plan, where dpplan.Pred, profile []int) string {
	from := QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name)
	if p.Join != nil {
		from = joinFromSQL(p.Join) // dpplan/join.go: bounded after the join
	}
	unit := unitSQL(t) // one text per unit (key_sql.go)
	rows := strconv.Itoa(t.MaxRowsPerUnit)
	l0 := strconv.Itoa(p.MaxGroupsPerUnit)
	// total is the unit's allowance over all groups, T = L0·R rows.
	totalRows := p.MaxGroupsPerUnit * t.MaxRowsPerUnit
	total := strconv.Itoa(totalRows)
	mode := dpplan.GroupBounding(p)
	// Distinct-unit counts count a unit whole in up to L_u groups
	// (dpplan.UnitGroups); below the groups of the key domains some unit
	// can be in more, and is weighted.
	unitGroups := dpplan.UnitGroups(p, t.MaxRowsPerUnit)
	lu := strconv.Itoa(unitGroups)
	unitsWeighted := dpplan.UnitsWeighted(p, t.MaxRowsPerUnit)
	var keyCols, keyOut []string
	for j, k := range p.Keys {
		keyCols = append(keyCols, "dp_k"+strconv.Itoa(j))
		keyOut = append(keyOut, keyValueSQL(t, k)+" AS dp_k"+strconv.Itoa(j))
	}

	// dp_rows: one row per input row, with its unit, keys and per-row
	// values. Rows without a unit are excluded ("NULL unit values" above).
	cols := append([]string{unit + " AS dp_unit"}, keyOut...)
	conds := sourceConds(t, p, where, unit)
	partition := append([]string{unit}, quoteIdents(p.Keys)...)
	hasRow := make([]bool, len(p.Measures)) // measure i has a per-row value dp_x<i>
	for i, m := range p.Measures {
		v := rowValue(t, p, m, false) // a SUM is centred per (unit, group): centredSum
		if v == "" {
			continue
		}
		hasRow[i] = true
		cols = append(cols, v+" AS dp_x"+strconv.Itoa(i))
		if m.Kind == dpplan.MeasureQuantile {
			cols = append(cols, quantileRankSQL(v, partition, i)...)
		}
	}

	// dp_unit_groups: one row per (unit, group) with the unit's counts,
	// exact sums and, for quantiles, its sorted values.
	group := append([]string{"dp_unit"}, keyCols...)
	agg := append([]string{}, group...)
	if p.PrivateGroups() {
		// Sorted, not hashed (internal/upstream noHashAggSQL), after a
		// secret salted hash of the keys: the order a person's rows
		// meet the sort in is theirs (groupSaltSQL).
		group = append([]string{"dp_unit", groupSaltSQL(keyCols)}, keyCols...)
	}
	for i, m := range p.Measures {
		n, x := strconv.Itoa(i), "dp_x"+strconv.Itoa(i)
		switch {
		case m.Kind == dpplan.MeasureRemoved && m.Units:
			// From dp_g alone (removedUnitsSQL).
		case m.Kind == dpplan.MeasureRemoved:
			agg = append(agg, "COUNT(*) AS dp_n"+n)
			if hasRow[i] {
				// The rows with a value outside its bounds (rewrite/bias.go).
				agg = append(agg, "SUM("+x+") AS dp_o"+n)
			}
		case m.Kind == dpplan.MeasureCount && !hasRow[i]:
			agg = append(agg, "COUNT(*) AS dp_n"+n)
		case m.Kind == dpplan.MeasureCount, m.Kind == dpplan.MeasureUnits && m.Filter != nil:
			agg = append(agg, "COUNT("+x+") AS dp_n"+n)
		case m.Kind == dpplan.MeasureUnits:
			// 1 per (unit, group): nothing to aggregate.
		case m.Kind == dpplan.MeasureQuantile:
			agg = append(agg, quantileKeepSQL(i, t.MaxRowsPerUnit)+" AS dp_a"+n)
		default:
			agg = append(agg, centredSum(m, x)+" AS dp_s"+n, "COUNT("+x+") AS dp_n"+n)
		}
	}

	if profile != nil {
		agg = append(agg, "COUNT(*) AS dp_np")
	}

	// dp_bounded: the bounded value of each measure per (unit, group).
	var bounded []string
	fixed := make([]int, len(p.Measures)) // k when measure i is in int8 fixed point (fixedCount)
	for i, m := range p.Measures {
		n := strconv.Itoa(i)
		var v string
		k := truncDigits(m.LInf)
		switch m.Kind {
		case dpplan.MeasureCount:
			v = "LEAST(dp_n" + n + ", " + rows + ")"
			if mode == dpplan.GroupsScale {
				if f, ok := fixedCount(v, "dp_t"+n, t.MaxRowsPerUnit, totalRows, k); ok {
					v, fixed[i] = f, k
				} else {
					v = "CASE WHEN dp_t" + n + " <= " + total + " THEN " + v + " ELSE " + weighted(v, total, "dp_t"+n, k) + " END"
				}
			}
		case dpplan.MeasureUnits:
			v = "1"
			if m.Filter != nil {
				v = "CASE WHEN dp_n" + n + " > 0 THEN 1 ELSE 0 END"
			}
			if mode == dpplan.GroupsScale && unitsWeighted {
				// Whole in up to L_u groups, min(1, L_u/g) in each of g
				// (dpplan.UnitGroups).
				v = "CASE WHEN dp_g <= " + lu + " THEN " + v + " ELSE " + weighted("("+v+")", lu, "dp_g", k) + " END"
			}
		case dpplan.MeasureQuantile:
			v = quantileUnitSQL("dp_a"+n, t.MaxRowsPerUnit)
		case dpplan.MeasureRemoved:
			v = removedSQL(n, mode, len(p.Keys) > 0, rows, total, k, m.Outside) // rewrite/bias.go
			if m.Units {
				// Only weighting removes part of a distinct unit; in
				// other modes each unit counts 1 in each of its groups.
				v = "0"
				if mode == dpplan.GroupsScale && unitsWeighted {
					v = removedUnitsSQL(lu, strconv.FormatInt(int64(math.Floor(m.LInf)), 10), k)
				}
			}
		default:
			s, c := "dp_s"+n, "dp_n"+n
			if mode == dpplan.GroupsScale {
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
		if m.Kind == dpplan.MeasureQuantile {
			final = append(final, quantileFinalSQL(t, m, mi))
			continue
		}
		if k := fixed[i]; k > 0 {
			final = append(final, "(SUM("+mi+") * "+tenToMinus(k)+")::text")
			continue
		}
		final = append(final, "SUM("+mi+")::text")
	}
	if p.UnitsCounted() {
		// Partition selection and the minimum of units per cell: each
		// dp_bounded row is one (unit, group) that survived the L0 bound
		// (GroupsSelect, GroupsAll), so COUNT(*) is the number of
		// distinct units in the group, and each unit adds 1 to at most
		// MaxGroupsPerUnit groups. When groups are weighted
		// (GroupsScale), a unit in g > L0 groups counts min(1, L0/g) in
		// each, as a weighted distinct count: it adds at most 1 to each
		// group and min(g, L0) ≤ L0 over all of them (L1 ≤ L0), and
		// Σ min(1, L0/g)² ≤ L0 (L2 ≤ √L0).
		if mode == dpplan.GroupsScale {
			bounded = append(bounded, "CASE WHEN dp_g <= "+l0+" THEN 1 ELSE "+weighted("1", l0, "dp_g", truncDigits(1))+" END AS dp_units")
			final = append(final, "SUM(dp_units)::text")
		} else {
			final = append(final, "COUNT(*)::text")
		}
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
	// dpplan.GroupsAll needs dp_counted only for the removed rows of a grouped
	// query (rewrite/bias.go).
	window := mode == dpplan.GroupsAll && len(p.Keys) > 0 && (p.HasBias() || profile != nil)
	profileWindow := ""
	if profile != nil && len(p.Keys) > 0 {
		profileWindow = ", MAX(dp_np) OVER dp_w AS dp_pmax, SUM(dp_np) OVER dp_w AS dp_psum, ROW_NUMBER() OVER dp_w AS dp_pfirst"
	}
	// A quantile's final summary is a subquery of the select list over the
	// group's values, which Citus cannot push down: dp_bounded is then a
	// CTE (PostgreSQL inlines it, the plan is the same; Citus runs it, the
	// per-unit stage, in the shards, and the final stage on the
	// coordinator over its rows).
	cte := p.HasQuantile() // the final stage runs over dp_bounded as a CTE
	if cte {
		w("WITH dp_bounded AS (SELECT ")
	} else {
		w("SELECT ")
		join(final, ", ")
		w(" FROM (SELECT ")
	}
	join(append(append([]string{}, keyCols...), bounded...), ", ")
	w(" FROM (")
	switch mode {
	case dpplan.GroupsScale:
		// Per unit and measure, t = Σ over the unit's groups of
		// min(n, R); g, its number of groups, for distinct units.
		w("SELECT *")
		for i, m := range p.Measures {
			n := strconv.Itoa(i)
			switch m.Kind {
			case dpplan.MeasureUnits:
				if !hasG && unitsWeighted {
					w(", COUNT(*) OVER dp_w AS dp_g")
					hasG = true
				}
			case dpplan.MeasureCount, dpplan.MeasureSum, dpplan.MeasureSumSq:
				w(", ", boundedTotal(n, rows), " AS dp_t", n)
			case dpplan.MeasureRemoved:
				if m.Units {
					if !hasG && unitsWeighted {
						w(", COUNT(*) OVER dp_w AS dp_g")
						hasG = true
					}
					continue
				}
				w(removedWindowSQL(n, mode, rows, m.Outside))
			}
		}
		if p.UnitsCounted() && !hasG {
			w(", COUNT(*) OVER dp_w AS dp_g")
		}
		w(profileWindow, " FROM (")
	case dpplan.GroupsAll:
		if window {
			w("SELECT *")
			if p.HasBias() {
				w(removedWindowSQL(strconv.Itoa(len(p.Measures)-1), mode, rows, p.Measures[len(p.Measures)-1].Outside))
			}
			w(profileWindow, " FROM (")
		}
	case dpplan.GroupsSelect:
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
	if p.HasQuantile() {
		// The quantile ranks sort each unit's values (quantileRankSQL).
		w(" FROM ", shuffledSQL(t, p, from, conds, unit))
	} else {
		w(" FROM ", from, " WHERE ")
		join(conds, " AND ")
	}
	w(") AS dp_rows GROUP BY ")
	join(group, ", ")
	w(") AS dp_unit_groups")
	switch mode {
	case dpplan.GroupsScale:
		w(" WINDOW dp_w AS (PARTITION BY dp_unit)) AS dp_counted")
	case dpplan.GroupsAll:
		if window {
			w(" WINDOW dp_w AS (PARTITION BY dp_unit)) AS dp_counted")
		}
	case dpplan.GroupsSelect:
		w(") AS dp_counted WHERE dp_group_rank <= ", l0)
	}
	if cte {
		w(") SELECT ")
		join(final, ", ")
		w(" FROM dp_bounded")
	} else {
		w(") AS dp_bounded")
	}
	if len(p.Keys) > 0 {
		w(" GROUP BY ")
		join(keyCols, ", ")
	}
	return b.String()
}

// sourceConds is the WHERE of dp_rows: rows with a unit, that pass the
// analyst's WHERE, with every key in its public domain (or, for private
// keys, a value keyValueSQL keeps).
func sourceConds(t *policy.Table, p *dpplan.Plan, where dpplan.Pred, unit string) []string {
	conds := unitConds(t, unit)
	if where != nil {
		conds = append(conds, PredSQL(where))
	}
	for _, k := range p.Keys {
		if k.Private {
			// No public domain; the NULL group is not released, nor are
			// keys longer than MaxPrivateKeyBytes.
			conds = append(conds, keyValueSQL(t, k)+" IS NOT NULL")
			continue
		}
		conds = append(conds, domainOperand(t, k)+" IN ("+domainList(k)+")")
	}
	return conds
}

// Sorting a person's own values (attack round 113). PostgreSQL sorts
// with a quicksort (src/include/lib/sort_template.h: Bentley–McIlroy, a
// pivot from the median of three or of three medians of three, a check
// for sorted input) that has no fallback: McIlroy's "killer adversary"
// (Software—Practice and Experience, 1999), run against a copy of it,
// writes values whose order in the input makes it compare about n²/13
// times. The rows a sort over (unit, value…) meets together are one
// person's, read in the order they were stored (an index on the unit
// returns them in that order, and an incremental sort then sorts them
// alone): one patient's 50,000 visits (within max_rows) with such
// (age, length_of_stay) made the per-unit GROUP BY of a private key run
// 2.2–4.5 s against 0.3 s, and answer at 8 and 16 s against a 2 s slot;
// 46,000 such costs made a median's ranks 1.4–2.5 s against 0.55–0.8 s.
// A quicksort is O(n log n) in expectation over its input's order
// whatever the values, so the emitted SQL hides the order from the
// person: a sort that only groups sorts by a hash of the keys with a
// seed drawn for each query first (groupSaltSQL), and a sort by a value
// reads the unit's rows in a random order (shuffledSQL).

// querySeedSQL is a seed drawn by the data server for each execution
// (an uncorrelated subquery: one InitPlan, run once; under Citus the
// coordinator's, read by the shards): 52 random bits, never shown to the
// analyst, who sees the SQL but not its run.
const querySeedSQL = "(SELECT (random() * 4503599627370496)::int8)"

// groupSaltSQL is a GROUP BY column after the unit: the keys' texts (one
// text per value, keyValueSQL, so equal keys have one salt and the
// groups are the same) hashed in turn from a seed of the query's own
// (querySeedSQL). The sort then meets a person's groups in the order of
// hashes they cannot know, and their rows' ties only within a group.
func groupSaltSQL(keyCols []string) string {
	h := querySeedSQL
	for _, k := range keyCols {
		h = "hashtextextended(" + k + "::text, " + h + ")"
	}
	return h
}

// shuffledSQL is from's rows that pass conds, each unit's in a random
// order (sorted by the unit, then random()): the input of a sort by a
// unit's values that the person whose rows they are cannot order. Columns
// keep their names: a table's visible columns, the only ones the data role
// may read (a column grant allows no *: the CI run of round 113's first
// fix failed every quantile after its charge on the demo), or all of a
// join's relation, a subquery of named columns (joinFromSQL).
func shuffledSQL(t *policy.Table, p *dpplan.Plan, from string, conds []string, unit string) string {
	cols := "*"
	if p.Join == nil {
		var q []string
		for _, c := range t.VisibleColumns() {
			q = append(q, QuoteIdent(c))
		}
		cols = strings.Join(q, ", ")
	}
	return "(SELECT " + cols + " FROM " + from + " WHERE " + strings.Join(conds, " AND ") + " ORDER BY " + unit + ", random()) AS dp_shuffled"
}

// selectSalt seeds the hash that orders a unit's groups (dpplan.GroupsSelect).
// Any constant gives the same guarantee (the order is a function of the
// unit's rows); it is fixed so that audits can reproduce a release.
const selectSalt = "7919"

// ClampSQL is column c cast to numeric (rounded unless an integer:
// columnNumeric) and clamped to its policy bounds.
func ClampSQL(t *policy.Table, c string) string {
	return "LEAST(GREATEST(" + columnNumeric(QuoteIdent(c), t.Columns[c].Type == policy.TypeInt) + ", " + NumericConst(t.Columns[c].Lower) + "), " +
		NumericConst(t.Columns[c].Upper) + ")"
}

// rowValue is the per-row value dp_x of a measure in dp_rows, or ""
// when the measure needs none (COUNT(*) and COUNT(DISTINCT unit) without
// FILTER):
//
//   - sums: the clamped column, or the expression (rewrite/rowexpr.go; its columns
//     clamped), minus Centre for normalized sums; sums of squares: that
//     value times itself;
//   - counts: the column or the expression (NULL-ness is all that counts),
//     or 1 for COUNT(*) with a filter; distinct units: the unit column;
//   - with FILTER (WHERE cond): CASE WHEN cond THEN value END, so rows
//     failing the filter give NULL, which no aggregate counts or sums.
//
// A filtered measure is bounded on the rows that pass its filter (n and s
// of dp_unit_groups count and sum only those), so the L∞ bounds of
// dpplan/bounds.go's guarantee
// hold for it. On data within the contribution limits nothing is
// weighted, so the answer equals PostgreSQL's FILTER.
//
// With centred false, a SUM's value is not centred (the caller subtracts
// Centre·COUNT once per unit and group: centredSum). A sum of squares is
// always centred per row.
func rowValue(t *policy.Table, p *dpplan.Plan, m dpplan.Measure, centred bool) string {
	centre := m.Centre != "" && (centred || m.Kind == dpplan.MeasureSumSq)
	var v string
	switch m.Kind {
	case dpplan.MeasureQuantile:
		v = quantileValueSQL(t, m)
	case dpplan.MeasureSum, dpplan.MeasureSumSq:
		if m.Expr != nil {
			v = ValueSQL(m.Expr)
			if centre {
				v = "(" + v + " - " + NumericConst(m.Centre) + ")"
			}
		} else {
			c := QuoteIdent(m.Column)
			v = ClampSQL(t, m.Column)
			if centre {
				v = "(" + v + " - " + NumericConst(m.Centre) + ")"
			}
			if m.Kind == dpplan.MeasureSumSq {
				v += " * " + v
			}
			v = readNumeric(c, t.Columns[m.Column].Type == policy.TypeInt, v)
		}
		if m.Expr != nil && m.Kind == dpplan.MeasureSumSq {
			v = v + " * " + v
		}
	case dpplan.MeasureUnits:
		if m.Filter == nil {
			return ""
		}
		v = QuoteIdent(t.UnitColumn)
	case dpplan.MeasureRemoved:
		if !m.Outside {
			return ""
		}
		return "CASE WHEN " + OutsideSQL(t, p) + " THEN 1 ELSE 0 END"
	case dpplan.MeasureCount:
		switch {
		case m.Expr != nil:
			v = ValueSQL(m.Expr)
		case m.Column != "":
			v = QuoteIdent(m.Column)
		case m.Filter != nil:
			v = "1"
		default:
			return ""
		}
	}
	if m.Filter != nil {
		v = "CASE WHEN " + PredSQL(m.Filter) + " THEN " + v + " END"
	}
	return v
}

// centredSum is the exact sum of m's per-row values x over one unit and
// group, centred: Σ(x − c) = Σx − c·n over the n non-NULL values, in
// exact numeric arithmetic, so the result is the same number as summing
// x − c row by row; it saves a numeric subtraction (and allocation) per
// row (BENCHMARKS.md, issue 15). NULL when every x is NULL, as SUM.
func centredSum(m dpplan.Measure, x string) string {
	if m.Kind != dpplan.MeasureSum || m.Centre == "" {
		return "SUM(" + x + ")"
	}
	return "(SUM(" + x + ") - " + NumericConst(m.Centre) + " * COUNT(" + x + "))"
}

func quoteIdents(keys []dpplan.Key) []string {
	var out []string
	for _, k := range keys {
		out = append(out, keySQL(k))
	}
	return out
}

// NumericConst writes a policy bound (validated by policy as a decimal
// number) as a numeric constant.
func NumericConst(s string) string {
	return "(" + s + ")::numeric"
}

// domainList writes the public values of a key as constants of its type
// (validated by policy: integers, YYYY-MM-DD dates, true/false), joined
// by ", " into one builder (a Rewrite writes every value of every key's
// domain).
func domainList(k dpplan.Key) string {
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
		writeDomainConst(&b, domainType(k), v)
	}
	return b.String()
}

// domainType is the type of a key's values: its column's, or for
// date_trunc keys typed by rewrite/trunckey.go timestamp or their text.
func domainType(k dpplan.Key) policy.Type {
	if k.Func == "date_trunc" && len(k.Args) > 1 {
		if k.Args[1] == "timestamp" {
			return "timestamp"
		}
		return policy.TypeText // the key's text (key_sql.go)
	}
	return k.Type
}

func writeDomainConst(b *strings.Builder, typ policy.Type, v string) {
	switch typ {
	case "timestamp":
		b.WriteString(QuoteString(v) + "::timestamp")
	case policy.TypeInt:
		b.WriteString("(" + v + ")")
	case policy.TypeDate:
		b.WriteString(QuoteString(v) + "::date")
	case policy.TypeBool:
		b.WriteString(strings.ToUpper(v))
	default:
		if !strings.ContainsAny(v, `'\`) {
			// QuoteString's common case, without its allocations.
			b.WriteByte('\'')
			b.WriteString(v)
			b.WriteByte('\'')
			return
		}
		b.WriteString(QuoteString(v))
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
	return "div(" + v + "::numeric * " + num + " * " + tenTo(k) + ", " + den + ") * " + tenToMinus(k)
}

// tenTo and tenToMinus are 10ᵏ and 10⁻ᵏ as SQL constants.
func tenTo(k int) string      { return "1" + strings.Repeat("0", k) }
func tenToMinus(k int) string { return "0." + strings.Repeat("0", k-1) + "1" }

// boundedTotal is dp_t of measure n: Σ over the unit's groups of
// min(n, R), its bounded rows in all. min(n, R) ≤ R ≤ 1,000,000
// (policy's maxContribution) fits int4, so its SUM is an exact int8 (a
// count of the unit's rows, far below 2⁶³) rather than a numeric, and
// the comparisons and products over it are integer ones.
func boundedTotal(n, rows string) string {
	return "SUM(LEAST(dp_n" + n + ", " + rows + ")::int4) OVER dp_w"
}

// fixedCount is the GroupsScale value of a count, min(n, R)·min(1, T/t)
// with v = min(n, R), in int8 fixed point: the value times 10ᵏ, truncated
// towards zero, which is exactly weighted's numeric value times 10ᵏ (both
// are ⌊v·T·10ᵏ/t⌋ when t > T, v·10ᵏ otherwise), so the sum over the
// group's rows times 10⁻ᵏ (the final stage) is the numeric sum, digit for
// digit. Integer division of non-negative int8 truncates; t is cast so
// that the division stays an integer one whatever dp_t's type. ok is
// false when v·T·10ᵏ ≤ R·T·10ᵏ might not fit int8: then weighted's
// numeric is used. About 15% of a grouped count's time on 1M rows
// (BENCHMARKS.md).
func fixedCount(v, t string, r, total, k int) (string, bool) {
	if float64(r)*float64(total)*math.Pow10(k) >= 9e18 {
		return "", false
	}
	p, tot := tenTo(k), strconv.Itoa(total)
	return "CASE WHEN " + t + " <= " + tot + " THEN " + v + " * " + p + " ELSE " + v + " * " + tot + " * " + p + " / " + t + "::int8 END", true
}
