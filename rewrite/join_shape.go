package rewrite

import (
	"strconv"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// The classification of a join into its shape (JoinPublic or JoinUnit).
// See dpplan/join.go for the shapes and their sensitivity.

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
	// table on the units; a protected table joined on anything else is
	// refused (dpplan/join.go), and adding the unit equality makes a unit
	// join of the same tables.
	for _, k := range protected[1:] {
		linked := false
		for _, on := range st.plan.Tables[k].On {
			linked = linked || !st.tables[on.Table].Public && on.Column == st.tables[on.Table].UnitColumn && on.Other == st.tables[k].UnitColumn
		}
		if !linked {
			t := st.tables[k]
			return b.errAt(b.onNode(items[k]), pgerr.FeatureNotSupported, "%s is joined to another protected table without its %s column %s: a joined row could then hold rows of two %[2]ss",
				t.Name, b.privacyUnit(), t.UnitColumn).
				WithHint("add the equality of the %s columns to the join condition, e.g. ON a.x = b.x AND a.%s = b.%s; each %[1]s's rows then join only their own rows",
					b.privacyUnit(), st.tables[protected[0]].UnitColumn, t.UnitColumn)
		}
	}
	st.plan.Shape = JoinUnit
	return b.unitJoinWork(items, protected)
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

// finishJoin records the join in the plan.
func (b *builder) finishJoin(p *Plan) {
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
}
