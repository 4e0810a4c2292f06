// Privacy-critical: needs DP review.

package pgemit

import (
	"math/big"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// The SQL of sample-and-aggregate: keyed-hash blocks, per-block answers
// clipped to the output range, averaged. See rewrite/sampleagg.go for the
// mechanism and its guarantee.

// blockHashSQL is the unit's block hash: the first 56 bits of
// HMAC-SHA-256(key, unit::text) as a non-negative bigint (56 bits so the
// cast through bit(56) cannot go negative). Block of k: hash % k; the bias
// of 2⁵⁶ mod k is below k/2⁵⁶. The key pads are the bind parameters $1
// (K⊕ipad) and $2 (K⊕opad), see Plan.QueryArgs: the SQL text holds no
// secret.
func blockHashSQL(unit string) string {
	mac := "sha256($2::bytea || sha256($1::bytea || convert_to(" + unit + "::text, 'UTF8')))"
	return "('x' || substr(encode(" + mac + ", 'hex'), 1, 14))::bit(56)::bigint"
}

// SampleAggSQL builds the SQL of a sample-and-aggregate plan. Reading
// from the inside out:
//
//	dp_rows     rows of the table (or of the joined relation, dpplan/join.go)
//	            passing WHERE with a non-NULL unit and, when grouped, keys
//	            in their public domains; the keys (dp_k…); both inputs of
//	            each call clamped to their policy bounds (NULL stays NULL)
//	            and cast to float8 (the type of PostgreSQL's aggregates);
//	            the unit's block hash; the row's rank among the rows of
//	            the unit (of the unit and group, when grouped) in hash
//	            order; when grouped, a hash of (unit, keys) per row.
//	dp_picked   (grouped, only when max_groups_per_unit is below the
//	            number of groups) rows with rank ≤ max_rows_per_unit, each
//	            with dp_gr, the hash of its (unit, group).
//	dp_ranked   (idem) each row with the rank of its group among the
//	            unit's groups, DENSE_RANK by (dp_gr, keys): the unit's
//	            groups in hash order.
//	dp_bounded  rows with rank ≤ max_rows_per_unit (and group rank ≤
//	            MaxGroupsPerUnit), with the block of each level (hash % k).
//	dp_blocks   f per (group, block) of each level (GROUPING SETS, one per
//	            level; inputs sorted inside the call so the float8 result
//	            does not depend on row order), and the block's distinct
//	            units (only when k is chosen from the count).
//	final       per group and level: Σ_b (clip(f_b::numeric, l, u) − c),
//	            NULL f_b adding 0, summed in numeric; and Σ_b units = n
//	            (only with the count).
//
// Every choice (rows kept, groups kept) is made per unit from that unit's
// own rows, in hash order, so adding or removing a unit changes no other
// unit's kept rows (dpplan/bounds.go, "Guarantee").
func SampleAggSQL(t *policy.Table, p *dpplan.Plan, where dpplan.Pred) string {
	sa := p.SampleAgg
	calls := sa.Calls
	unit := unitSQL(t) // one text per unit (key_sql.go)
	from := QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name)
	if p.Join != nil {
		from = joinFromSQL(p.Join) // dpplan/join.go: bounded after the join
	}
	// Inputs: each distinct column once.
	var inCols []string
	inIdx := map[string]int{}
	for _, s := range calls {
		for _, c := range []string{s.Y, s.X} {
			if _, ok := inIdx[c]; !ok {
				inIdx[c] = len(inCols)
				inCols = append(inCols, c)
			}
		}
	}
	in := func(c string) string { return "dp_c" + strconv.Itoa(inIdx[c]) }
	var keyCols, keyExprs []string
	for j, k := range p.Keys {
		keyCols = append(keyCols, "dp_k"+strconv.Itoa(j))
		keyExprs = append(keyExprs, keyValueSQL(t, k))
	}
	grouped := len(p.Keys) > 0
	// The group rank is needed only when a unit could reach more groups
	// than it may keep.
	rankGroups := grouped && (p.PrivateGroups() || p.MaxGroupsPerUnit < dpplan.DomainProduct(p.Keys, p.MaxGroupsPerUnit+1))

	cols := []string{unit + " AS dp_unit"}
	for j := range keyCols {
		cols = append(cols, keyExprs[j]+" AS "+keyCols[j])
	}
	cols = append(cols, blockHashSQL(unit)+" AS dp_hash")
	var raw []string // the inputs' values, for the row order below
	for _, c := range inCols {
		raw = append(raw, QuoteIdent(c))
		// round(…, 30) before the cast: a numeric below 1e-308 (e.g.
		// 1e-1000) would make ::float8 raise 22003 on that row, an error
		// that depends on the data (TestEmittedSQL_Total). The clamped
		// value is finite; rounding it moves it by at most 5e-31.
		cols = append(cols, readNumeric(QuoteIdent(c), t.Columns[c].Type == policy.TypeInt, "round("+ClampSQL(t, c)+", 30)::float8")+" AS "+in(c))
	}
	// Rows and groups are chosen in hash order (dpplan/bounds.go, "Two levels of
	// bounding"): a function of the unit's own rows. Rows are taken one
	// copy of each distinct input first, then second copies, and so on
	// (dp_dup), each round in the order of a hash of the inputs, so that a
	// unit's kept rows spread over its distinct values; ties are broken by
	// the inputs, and identical inputs contribute alike.
	dup := "ROW_NUMBER() OVER (PARTITION BY " + strings.Join(append(append([]string{unit}, keyExprs...), raw...), ", ") + ") AS dp_dup"
	cols = append(cols, dup)
	var ins []string
	for _, c := range inCols {
		ins = append(ins, in(c))
	}
	rowRank := "ROW_NUMBER() OVER (PARTITION BY " + strings.Join(append([]string{"dp_unit"}, keyCols...), ", ") + " ORDER BY dp_dup, hashtextextended(ROW(" +
		strings.Join(ins, ", ") + ")::text, " + selectSalt + "), " + strings.Join(ins, ", ") + ") AS dp_row_rank"
	if rankGroups {
		hashed := []string{unit + "::text"}
		for _, k := range keyExprs {
			hashed = append(hashed, "("+k+")::text")
		}
		cols = append(cols, "hashtextextended("+strings.Join(hashed, " || ',' || ")+", "+selectSalt+") AS dp_r")
	}
	conds := unitConds(t, unit)
	if where != nil {
		conds = append(conds, PredSQL(where))
	}
	for j, k := range p.Keys {
		if k.Private {
			conds = append(conds, keyExprs[j]+" IS NOT NULL") // rewrite/partition.go
			continue
		}
		conds = append(conds, keyExprs[j]+" IN ("+domainList(k)+")")
	}
	// The unit's block is the least hash of its rows' unit texts: one
	// block per unit even where PostgreSQL's equality is looser than the
	// text (1000 and 1000.0 of a numeric, 'Zed' and 'zed' of a citext:
	// TestAttack56_SampleAggUnitTextSpreadsBlocks), a function of the
	// unit's own rows.
	block := "MIN(dp_hash) OVER (PARTITION BY dp_unit) AS dp_block"
	// dp_dup sorts each unit's rows by their values: they are read in a
	// random order (shuffledSQL, attack round 113).
	rows := "SELECT *, " + rowRank + ", " + block + " FROM (SELECT " + strings.Join(cols, ", ") + " FROM " + shuffledSQL(t, p, from, conds, unit) + ") AS dp_dups"

	carry := append(append([]string{"dp_unit"}, keyCols...), "dp_block")
	for _, c := range inCols {
		carry = append(carry, in(c))
	}
	rowsCap := strconv.Itoa(t.MaxRowsPerUnit)
	src := "(" + rows + ") AS dp_rows WHERE dp_row_rank <= " + rowsCap
	if rankGroups {
		picked := "SELECT " + strings.Join(carry, ", ") + ", MAX(CASE WHEN dp_row_rank = 1 THEN dp_r END) OVER (PARTITION BY " +
			strings.Join(append([]string{"dp_unit"}, keyCols...), ", ") + ") AS dp_gr FROM " + src
		ranked := "SELECT " + strings.Join(carry, ", ") + ", DENSE_RANK() OVER (PARTITION BY dp_unit ORDER BY " +
			strings.Join(append([]string{"dp_gr"}, keyCols...), ", ") + ") AS dp_group_rank FROM (" + picked + ") AS dp_picked"
		src = "(" + ranked + ") AS dp_ranked WHERE dp_group_rank <= " + strconv.Itoa(p.MaxGroupsPerUnit)
	}

	bounded := append([]string{"dp_unit"}, keyCols...)
	for _, c := range inCols {
		bounded = append(bounded, in(c))
	}
	var sets, level []string
	for i, k := range sa.Levels {
		bk := "dp_b" + strconv.Itoa(i)
		bounded = append(bounded, "dp_block % "+strconv.Itoa(k)+" AS "+bk)
		sets = append(sets, "("+strings.Join(append(append([]string{}, keyCols...), bk), ", ")+")")
		level = append(level, "WHEN GROUPING("+bk+") = 0 THEN "+strconv.Itoa(k))
	}
	boundedSQL := "SELECT " + strings.Join(bounded, ", ") + " FROM " + src

	blocks := append(append([]string{}, keyCols...), "CASE "+strings.Join(level, " ")+" END AS dp_level")
	for i, s := range calls {
		// ORDER BY inside the call fixes the order in which the float8
		// aggregate accumulates, so f_b is a function of the block's rows
		// (without it the last bits depend on the scan's row order).
		y, x := in(s.Y), in(s.X)
		blocks = append(blocks, s.Fn+"("+y+", "+x+" ORDER BY "+y+", "+x+") AS dp_f"+strconv.Itoa(i))
	}
	if sa.CountMeasure >= 0 {
		blocks = append(blocks, "COUNT(DISTINCT dp_unit) AS dp_units")
	}
	// dp_bounded is a CTE: Citus runs no GROUPING SETS over distributed
	// tables, and so runs the CTE (the per-unit ranks and hashes) in the
	// shards and the blocks on the coordinator over its rows; PostgreSQL
	// inlines it, with the same plan as a subquery.
	blocksSQL := "SELECT " + strings.Join(blocks, ", ") + " FROM dp_bounded GROUP BY GROUPING SETS (" +
		strings.Join(sets, ", ") + ")"

	var final []string
	for _, k := range keyCols {
		final = append(final, k+"::text")
	}
	final = append(final, "dp_level::text")
	for i, s := range calls {
		f := "dp_f" + strconv.Itoa(i)
		lo, hi := formatConst(s.Lower), formatConst(s.Upper)
		mid := formatConst(dpplan.SampleMid(s.Lower, s.Upper))
		final = append(final, "SUM(CASE WHEN "+f+" IS NULL THEN 0 ELSE LEAST(GREATEST("+f+"::numeric, "+lo+"), "+hi+") - "+mid+" END)::text")
	}
	if sa.CountMeasure >= 0 {
		final = append(final, "SUM(dp_units)::text")
	}
	order := strings.Join(append(append([]string{}, keyCols...), "dp_level"), ", ")
	return "WITH dp_bounded AS (" + boundedSQL + ") SELECT " + strings.Join(final, ", ") + " FROM (" + blocksSQL + ") AS dp_blocks GROUP BY " + order + " ORDER BY " + order
}

// formatConst writes a float64 as an exact numeric constant: every finite
// float64 is a dyadic rational m/2^e, whose decimal expansion has e digits
// after the point, so the SQL's numeric value equals the float64 exactly
// (the midpoint c in SQL is the same number release adds back).
func formatConst(x float64) string {
	r := new(big.Rat).SetFloat64(x)
	digits := r.Denom().BitLen() - 1 // the denominator is 2^digits
	return "(" + r.FloatString(digits) + ")::numeric"
}
