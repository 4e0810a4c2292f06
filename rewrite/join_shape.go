package rewrite

import (
	"math"
	"math/big"
	"strconv"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// The classification of a join into its shape (JoinPublic, JoinUnit,
// JoinKey) and, for elastic joins, its sensitivity E·M. See dpplan/join.go
// for the shapes and their sensitivity.

// joinShape classifies the join (see join.go's file comment) or refuses it.
func (b *builder) joinShape(items []joinItem) error {
	st := b.join
	var protected []int
	for k, t := range st.tables {
		if !t.Public {
			protected = append(protected, k)
		}
	}
	if len(protected) == 0 {
		return b.errAt(nil, pgerr.FeatureNotSupported, "a DP query needs a protected table; these tables are public").
			WithHint("query public tables without naming a protected table")
	}
	st.primary = protected[0]
	if st.plan.Tables[st.primary].Left {
		return b.errAt(b.onNode(items[st.primary]), pgerr.FeatureNotSupported, "a protected table cannot be the optional side of a LEFT JOIN with public tables").
			WithHint("put the protected table first: FROM %s LEFT JOIN …, or use JOIN", st.tables[st.primary].Name)
	}
	if len(protected) == 1 {
		st.plan.Shape = JoinPublic
		return nil
	}
	// Every later protected table must be joined to an earlier protected
	// table on the units.
	linked := true
	for _, k := range protected[1:] {
		ok := false
		for _, on := range st.plan.Tables[k].On {
			if !st.tables[on.Table].Public && on.Column == st.tables[on.Table].UnitColumn && on.Other == st.tables[k].UnitColumn {
				ok = true
			}
		}
		linked = linked && ok
	}
	if linked {
		st.plan.Shape = JoinUnit
		return b.unitJoinWork(items, protected)
	}
	a, bi := protected[0], protected[1]
	if len(protected) > 2 {
		return b.errAt(b.onNode(items[protected[2]]), pgerr.FeatureNotSupported, "protected tables joined on columns other than the unit: only two protected tables are supported").
			WithHint("join protected tables on the unit column (%s), or join exactly two protected tables on a key with max_rows_per_value", st.tables[a].UnitColumn)
	}
	if st.plan.Tables[bi].Left {
		return b.errAt(b.onNode(items[bi]), pgerr.FeatureNotSupported, "LEFT JOIN of protected tables on columns other than the unit is not supported").
			WithHint("use JOIN, or join on the unit column %s", st.tables[a].UnitColumn)
	}
	n := len(st.tables)
	st.plan.KeyColumn = make([]string, n)
	st.plan.RowsPerValue = make([]int, n)
	st.plan.RowsPerUnit = make([]int, n)
	for _, on := range st.plan.Tables[bi].On {
		ca, cb := st.tables[a].Columns[on.Column], st.tables[bi].Columns[on.Other]
		if on.Table == a && ca != nil && cb != nil && ca.MaxRowsPerValue > 0 && cb.MaxRowsPerValue > 0 {
			st.plan.KeyColumn[a], st.plan.KeyColumn[bi] = on.Column, on.Other
			st.plan.RowsPerValue[a], st.plan.RowsPerValue[bi] = ca.MaxRowsPerValue, cb.MaxRowsPerValue
			break
		}
	}
	if st.plan.KeyColumn[a] == "" {
		on := st.plan.Tables[bi].On[0]
		left := st.tables[on.Table]
		return b.errAt(b.onNode(items[bi]), pgerr.FeatureNotSupported, "joining %s and %s on %s needs a declared join multiplicity", left.Name, st.tables[bi].Name, on.Other).
			WithHint("ask the data steward to declare max_rows_per_value (the most rows sharing one value) for %s.%s and %s.%s in the policy, or join on the unit column %s",
				left.Name, on.Column, st.tables[bi].Name, on.Other, st.tables[a].UnitColumn)
	}
	st.plan.RowsPerUnit[a], st.plan.RowsPerUnit[bi] = st.tables[a].MaxRowsPerUnit, st.tables[bi].MaxRowsPerUnit
	// Public tables: each must be reached from the protected pair by an
	// equality on one of its columns with max_rows_per_value, so that a
	// joined row of the pair extends to at most the product of their
	// multiplicities (a tree of bounded fan-outs).
	bounded := map[int]bool{a: true, bi: true}
	for progress := true; progress; {
		progress = false
		for k := range st.tables {
			if bounded[k] {
				continue
			}
			for _, e := range st.equalities() {
				if e.t1 == k && bounded[e.t2] || e.t2 == k && bounded[e.t1] {
					col := e.c1
					if e.t2 == k {
						col = e.c2
					}
					if c := st.tables[k].Columns[col]; c != nil && c.MaxRowsPerValue > 0 {
						bounded[k], progress = true, true
						st.plan.KeyColumn[k], st.plan.RowsPerValue[k] = col, c.MaxRowsPerValue
						break
					}
				}
			}
		}
	}
	e := 2 * (st.plan.RowsPerUnit[a]*st.plan.RowsPerValue[bi] + st.plan.RowsPerUnit[bi]*st.plan.RowsPerValue[a])
	for k, t := range st.tables {
		if !t.Public {
			continue
		}
		if !bounded[k] {
			return b.errAt(b.onNode(items[max(k, 1)]), pgerr.FeatureNotSupported, "public table %s in a join of protected tables on another key needs a declared join multiplicity", t.Name).
				WithHint("ask the data steward to declare max_rows_per_value (1 for a unique column) for the column of %s it is joined on, or join the protected tables on the unit column %s", t.Name, st.tables[a].UnitColumn)
		}
		e *= st.plan.RowsPerValue[k]
		if e > maxChangedRows {
			break
		}
	}
	if e > maxChangedRows {
		return b.errAt(b.onNode(items[bi]), pgerr.FeatureNotSupported, "this join could change more than %d joined rows per unit", maxChangedRows).
			WithHint("ask the data steward for smaller max_rows_per_value or max_rows_per_unit")
	}
	st.plan.Shape = JoinKey
	st.plan.Changed = e
	return nil
}

// joinEq is an equality of a join condition: tables[t1].c1 = tables[t2].c2.
type joinEq struct {
	t1, t2 int
	c1, c2 string
}

func (st *joinState) equalities() []joinEq {
	var out []joinEq
	for k, jt := range st.plan.Tables {
		for _, on := range jt.On {
			out = append(out, joinEq{t1: on.Table, c1: on.Column, t2: k, c2: on.Other})
		}
	}
	return out
}

// Work of a unit join: dpplan/join.go.
const (
	maxUnitJoinInputs = dpplan.MaxUnitJoinInputs
	maxJoinFanout     = dpplan.MaxJoinFanout
)

// unitJoinWork records the per-unit cut C_T of every protected input but
// the first and their product F, or refuses the join when they exceed the
// limits.
func (b *builder) unitJoinWork(items []joinItem, protected []int) error {
	st := b.join
	if len(protected) > maxUnitJoinInputs {
		return b.errAt(b.onNode(items[protected[maxUnitJoinInputs]]), pgerr.ProgramLimitExceeded,
			"a join on the unit may have at most %d protected tables (this one has %d)", maxUnitJoinInputs, len(protected)).
			WithHint("join fewer copies of protected tables; each copy multiplies the rows every person makes upstream")
	}
	st.plan.RowsPerUnit = make([]int, len(st.tables))
	fanout := 1
	for _, k := range protected[1:] {
		t := st.tables[k]
		c := max(1, t.MaxGroupsPerUnit) * max(1, t.MaxRowsPerUnit)
		st.plan.RowsPerUnit[k] = c
		if fanout > maxJoinFanout/c {
			return b.errAt(b.onNode(items[k]), pgerr.ProgramLimitExceeded,
				"in this join one row of %s could meet more than %d rows of the same person", st.tables[protected[0]].Name, maxJoinFanout).
				WithHint("join fewer copies of protected tables, or ask the data steward for smaller max_rows_per_unit or max_groups_per_unit (each joined protected table is cut to its own allowance per person before the join)")
		}
		fanout *= c
	}
	st.plan.Fanout = fanout
	return nil
}

const maxChangedRows = dpplan.MaxChangedRows

// joinTable builds the builder's table: the joined relation
// (dpplan.JoinedTable, which release recomputes from the policy to verify
// the plan).
func (b *builder) joinTable() {
	st := b.join
	syn, names := dpplan.JoinedTable(st.tables, &st.plan)
	for k, m := range names {
		for c, n := range m {
			st.names[[2]string{strconv.Itoa(k), c}] = n
		}
	}
	st.used[syn.UnitColumn] = true
	b.table = syn
}

// finishJoin records the join in the plan and, for an elastic join, states
// its sensitivity (see join.go's file comment).
func (b *builder) finishJoin(p *Plan) error {
	st := b.join
	j := st.plan
	for k := range st.tables {
		for _, c := range st.columnsOf(k) {
			n := st.names[[2]string{strconv.Itoa(k), c}]
			if st.used[n] {
				j.Columns = append(j.Columns, JoinColumn{Name: n, Table: k, Column: c})
			}
		}
	}
	p.Join = &j
	if j.Shape != JoinKey {
		return nil
	}
	for _, m := range p.Measures {
		if m.Kind == MeasureUnits {
			return pgerr.New(pgerr.FeatureNotSupported, "COUNT(DISTINCT %s) is not supported in a join on %s: a joined row belongs to two units", b.table.UnitColumn, j.KeyColumn[st.primary]).
				WithHint("count rows with COUNT(*), or join on the unit column")
		}
		// Cross-check the bounds computed with E rows per unit against
		// the direct formula E·M (a relative slack of 1e-12 allows for a
		// different order of float operations).
		if want := elasticLInf(m, j.Changed); m.LInf < want*(1-1e-12) {
			return pgerr.New(pgerr.InternalError, "internal error: elastic join sensitivity below E·M")
		}
	}
	dpplan.SetElasticL1(p) // dpplan/join_l1.go
	if want := min(j.Changed, dpplan.DomainProduct(p.Keys, j.Changed)); p.MaxGroupsPerUnit < want {
		return pgerr.New(pgerr.InternalError, "internal error: elastic join group bound below min(E, groups)")
	}
	return nil
}

// elasticLInf is E·M for a measure of an elastic join: E joined rows can
// change, each adding at most M to one group (1 for counts, max(|l|, |u|)
// for sums of a column clamped to [l, u], max(l², u²) for sums of squares).
func elasticLInf(m Measure, changed int) float64 {
	e := float64(changed)
	if c, ok := new(big.Rat).SetString(m.Centre); ok {
		// A normalized sum: each joined row adds x − c, or (x − c)².
		switch m.Kind {
		case MeasureSum:
			return sensitivity.CentredSumLInf(changed, m.Lower, m.Upper, c)
		case MeasureSumSq:
			return sensitivity.CentredSumSqLInf(changed, m.Lower, m.Upper, c)
		}
	}
	switch m.Kind {
	case MeasureSum:
		return e * math.Max(math.Abs(m.Lower), math.Abs(m.Upper))
	case MeasureSumSq:
		return e * math.Max(m.Lower*m.Lower, m.Upper*m.Upper)
	}
	return e
}
