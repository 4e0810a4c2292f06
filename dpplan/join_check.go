// Privacy-critical: needs DP review.

package dpplan

import (
	"errors"
	"slices"
	"sort"
	"strconv"

	"github.com/dpproxy/dpproxy/policy"
)

// The joined relation, recomputed from the policy.
//
// The planner (rewrite) classifies a FROM clause with joins into one of
// the shapes of join.go and names the joined relation's columns. None of
// that is trusted: VerifyJoin recomputes, from the policy and the plan's
// Join alone, every fact the argument of join.go rests on, and the table
// of the joined relation (JoinedTable) whose unit and limits the emitter
// bounds by (pgemit/bounds_sql.go) and the calibration reads. A planner
// bug can then make a join answer another query than the analyst asked,
// or be refused, but not be under-noised.

// JoinedTable is the table of a join's joined relation, as the emitter
// reads it, from the policy's tables of the join (tables[k] is the policy
// table of j.Tables[k]). Its columns are the readable columns (the unit
// and the visible declared ones) of every table, each named by its bare
// name when no other joined table has a column of that name, else
// table.column (table#k.column, k its 1-based position, when the table
// appears more than once: names never hold analyst text such as
// aliases). Its unit column is the first protected table's; its limits are
// the largest of the protected tables'. names[k][c] is the name of column
// c of table k.
func JoinedTable(tables []*policy.Table, j *Join) (syn *policy.Table, names []map[string]string) {
	count := map[string]int{}
	nameCount := map[string]int{}
	for _, t := range tables {
		nameCount[t.Name]++
		for _, c := range ReadableColumns(t) {
			count[c]++
		}
	}
	primary := 0
	for k, t := range tables {
		if !t.Public {
			primary = k
			break
		}
	}
	prim := tables[primary]
	syn = &policy.Table{Name: prim.Name, Schema: prim.Schema, Columns: map[string]*policy.Column{}}
	names = make([]map[string]string, len(tables))
	for k, t := range tables {
		q := t.Name
		if nameCount[t.Name] > 1 {
			q = t.Name + "#" + strconv.Itoa(k+1)
		}
		names[k] = map[string]string{}
		for _, c := range ReadableColumns(t) {
			n := c
			if count[c] > 1 {
				n = q + "." + c
			}
			names[k][c] = n
			col := t.Columns[c]
			if col == nil {
				col = &policy.Column{Name: c} // an undeclared unit column
			}
			cp := *col
			syn.Columns[n] = &cp
			syn.ColumnOrder = append(syn.ColumnOrder, n)
		}
		if !t.Public {
			syn.MaxRowsPerUnit = max(syn.MaxRowsPerUnit, t.MaxRowsPerUnit)
			syn.MaxGroupsPerUnit = max(syn.MaxGroupsPerUnit, t.MaxGroupsPerUnit)
		}
	}
	syn.UnitColumn = names[primary][prim.UnitColumn]
	// The unit's live type, which the emitter reads it by (pgemit unitSQL:
	// one text per unit; TestAttack62_JoinUnitTextDependsOnOthers).
	syn.UnitType, syn.UnitTypeName, syn.UnitPGType = prim.UnitType, prim.UnitTypeName, prim.UnitPGType
	if _, declared := prim.Columns[prim.UnitColumn]; !declared {
		// As for one table, an undeclared unit column has no
		// *policy.Column.
		delete(syn.Columns, syn.UnitColumn)
		for i, c := range syn.ColumnOrder {
			if c == syn.UnitColumn {
				syn.ColumnOrder = append(syn.ColumnOrder[:i:i], syn.ColumnOrder[i+1:]...)
				break
			}
		}
	}
	return syn, names
}

// ReadableColumns lists the columns of t a join reads: its unit column
// and its visible declared columns, in the policy's order.
func ReadableColumns(t *policy.Table) []string {
	var out []string
	if t.UnitColumn != "" {
		out = append(out, t.UnitColumn)
	}
	for _, c := range t.ColumnOrder {
		if !t.Columns[c].Hidden && c != t.UnitColumn {
			out = append(out, c)
		}
	}
	return out
}

// Join limits the planner enforces for the work of a join (
// join.go, "Work of a unit join", states why); VerifyJoin checks the plan keeps to them.
const (
	// MaxUnitJoinInputs bounds the protected tables (self-join copies
	// included) of a unit join.
	MaxUnitJoinInputs = 3
	// MaxJoinFanout bounds F, the joined rows one row of the first
	// protected table of a unit join can make.
	MaxJoinFanout = 100
)

var errJoin = errors.New("the join does not verify against the policy")

// VerifyJoin checks p's join against the policy and returns the table of
// its joined relation (JoinedTable). It holds every fact the shapes'
// argument (join.go) uses:
//
//   - each table is the policy's table of that name and schema, public or
//     protected as the policy says, with the policy's unit column;
//   - the first protected table is never the optional side of a LEFT JOIN
//     (its rows, and so every joined row's unit, are never NULL-extended);
//   - JoinPublic: exactly one protected table;
//   - JoinUnit: at most MaxUnitJoinInputs protected tables, each after the
//     first joined to an earlier protected table by an equality of their
//     unit columns (so all protected rows of a joined row share the unit);
//     the per-unit cuts before the join are each table's whole allowance
//     and their product F at most MaxJoinFanout (the work bound).
//
// p.Join must be set.
func VerifyJoin(ds *policy.Dataset, p *Plan) (*policy.Table, error) {
	j := p.Join
	if j == nil || len(j.Tables) < 2 {
		return nil, errJoin
	}
	tables := make([]*policy.Table, len(j.Tables))
	var protected []int
	for k, jt := range j.Tables {
		t, ok := ds.Table(jt.Name)
		if !ok || t.Name != jt.Name || t.Schema != jt.Schema || t.Public != jt.Public || t.UnitColumn != jt.Unit ||
			!slices.Equal(jt.Texts, JoinTexts(t)) {
			return nil, errJoin
		}
		for _, on := range jt.On {
			if on.Table < 0 || on.Table >= k {
				return nil, errJoin
			}
		}
		if k == 0 && len(jt.On) > 0 {
			return nil, errJoin
		}
		tables[k] = t
		if !t.Public {
			protected = append(protected, k)
		}
	}
	if len(protected) == 0 || j.Tables[protected[0]].Left {
		return nil, errJoin
	}
	var err error
	switch j.Shape {
	case JoinPublic:
		if len(protected) != 1 {
			err = errJoin
		}
	case JoinUnit:
		err = verifyUnitJoin(j, tables, protected)
	default:
		err = errJoin
	}
	if err != nil {
		return nil, err
	}
	syn, names := JoinedTable(tables, j)
	for _, c := range j.Columns {
		if c.Table < 0 || c.Table >= len(tables) || names[c.Table][c.Column] != c.Name {
			return nil, errJoin
		}
	}
	return syn, nil
}

// JoinTexts is JoinTable.Texts of table t: its declared text columns,
// sorted, when it is protected (a public table's values are no person's:
// nil). The unit column is left out: its length is bounded already
// (MaxUnitBytes, pgemit unitKeptSQL).
func JoinTexts(t *policy.Table) []string {
	if t.Public {
		return nil
	}
	var out []string
	for name, c := range t.Columns {
		if c != nil && c.Type == policy.TypeText && name != t.UnitColumn {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// verifyUnitJoin checks a JoinUnit (see VerifyJoin).
func verifyUnitJoin(j *Join, tables []*policy.Table, protected []int) error {
	if len(protected) < 2 || len(protected) > MaxUnitJoinInputs || len(j.RowsPerUnit) != len(tables) {
		return errJoin
	}
	fanout := 1
	for k, t := range tables {
		want := 0
		if !t.Public && k != protected[0] {
			want = max(1, t.MaxGroupsPerUnit) * max(1, t.MaxRowsPerUnit)
			linked := false
			for _, on := range j.Tables[k].On {
				e := tables[on.Table]
				linked = linked || !e.Public && on.Column == e.UnitColumn && on.Other == t.UnitColumn
			}
			if !linked || fanout > MaxJoinFanout/want {
				return errJoin
			}
			fanout *= want
		}
		if j.RowsPerUnit[k] != want {
			return errJoin
		}
	}
	if j.Fanout != fanout {
		return errJoin
	}
	return nil
}
