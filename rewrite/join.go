// Privacy-critical: needs DP review.

package rewrite

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// This file plans joins (issue 9). Three shapes are answered; everything
// else is refused with a hint.
//
// # Shapes and their sensitivity
//
// Neighbouring databases differ by all rows of one privacy unit x, in every
// protected table (the dataset has one privacy unit; each protected table
// names the column that holds it). Public tables hold no personal data and
// are the same in both databases.
//
//   - JoinPublic: one protected table P joined (JOIN or P LEFT JOIN T) to
//     public tables on any columns. Every joined row contains exactly one
//     row of P and is attributed to P's unit. The joined rows of x are
//     exactly the joined rows that contain a row of x, so removing x
//     removes them and changes no other joined row. Contribution bounding
//     (rows per unit and group, groups per unit, bounds.go) is applied to
//     the joined rows, so the guarantee of bounds.go holds unchanged,
//     whatever the multiplicity of the public join key: a public row that
//     matches many rows of x multiplies x's joined rows, and the bounding
//     cuts them back. No uniqueness declaration is needed for privacy (on
//     data where the key is not unique, answers are computed on the
//     multiplied rows and bounded like any other rows).
//   - JoinUnit: several protected tables, each joined to an earlier one by
//     an equality of their unit columns (ON a.unit = b.unit, or USING the
//     unit when the columns share a name), plus public tables. Every
//     protected row of a joined row belongs to the same unit (a LEFT JOIN
//     may leave the later rows absent), so again the joined rows of x are
//     exactly those containing a row of x, and bounding after the join
//     gives the guarantee of bounds.go. The contribution limits are the
//     largest of the joined tables' (the noise is calibrated to them).
//   - JoinKey: exactly two protected tables A and B inner-joined on
//     columns other than the units, A.k = B.k, where the
//     policy declares max_rows_per_value m_A for A.k and m_B for B.k
//     (elastic sensitivity: Johnson, Near, Song, "Towards Practical
//     Differential Privacy for SQL Queries", VLDB 2018, §3, whose
//     stability of a join is bounded by the maximum frequency of the join
//     key on each side; we enforce the frequencies instead of measuring
//     them). The emitted SQL keeps, before the join, at most C_T =
//     max_rows_per_unit rows of each unit in each table T (in hash order
//     per unit), then at most m_T rows per value of T.k (in hash order per
//     value). Adding unit x to the database, with the order of each row
//     fixed (each row's place is a hash of its own columns):
//     per-unit truncation keeps at most C_A new rows of x in A and changes
//     no other unit's rows; per-value truncation then admits at most C_A
//     new rows and pushes out at most C_A old ones, so the kept rows of A
//     change by at most 2·C_A (and of B by at most 2·C_B). A kept row of A
//     matches at most m_B kept rows of B and vice versa, so at most
//     E = 2·(C_A·m_B + C_B·m_A) joined rows change. Each joined row adds 1
//     to one group's count, a value clamped to [l, u] to one group's sum
//     and at most max(l², u²) to its sum of squares. Hence the L1 change of
//     a measure is at most E·M (M = 1, max(|l|, |u|), max(l², u²)), at
//     most E groups change, and no group changes by more than E·M. The
//     plan states Measure.LInf = E·M and MaxGroupsPerUnit = min(E, number
//     of releasable groups) (1 when ungrouped), and, since the E changed
//     joined rows fall into the groups together, the direct bound
//     Measure.L1 = E·M on the change summed over all groups (join_l1.go),
//     which the noise is calibrated to instead of L0·L∞.
//     Public tables may join in too when each is reached from A and B by
//     an equality on one of its columns with max_rows_per_value m_T (1 for
//     a unique key): the SQL keeps at most m_T rows per value of that
//     column (public tables are the same in both databases, so this cut
//     is the same in both), each joined row of A and B then extends to at
//     most Π m_T rows, and E is multiplied by Π m_T.
//     COUNT(DISTINCT unit) is refused in this shape (a joined row has two
//     units).
//
// Every choice is in the order of a hash of the row (or of the unit and
// keys, bounds.go), fixed per row, so the bounds hold whatever the data;
// no random() (which would keep PostgreSQL from parallel plans).

// joinHint lists the supported join shapes.
const joinHint = "dpproxy answers FROM protected [LEFT] JOIN public_table ON a.col = b.col, protected JOIN protected ON a.unit = b.unit (or USING (unit)), and two protected tables JOIN ON a.k = b.k when the policy declares max_rows_per_value for both columns (and for the join column of any public table joined to them)"

// Join shapes (Join.Shape).
const (
	JoinPublic = "public" // one protected table and public tables
	JoinUnit   = "unit"   // protected tables joined on the privacy unit
	JoinKey    = "key"    // two protected tables on another key (elastic)
)

// Join is the FROM clause of a join query. Immutable once planned.
type Join struct {
	Shape  string
	Tables []JoinTable
	// Columns are the columns of the joined relation that the plan reads,
	// in order; Plan columns (Key.Column, Measure.Column, the unit) are
	// their Names.
	Columns []JoinColumn
	// Elastic (JoinKey) parameters: per table, the per-unit row cap C_T,
	// the join column and its declared multiplicity m_T; Changed is
	// E = 2·(C_A·m_B + C_B·m_A), the most joined rows one unit can change.
	RowsPerUnit  []int    `json:",omitempty"`
	KeyColumn    []string `json:",omitempty"`
	RowsPerValue []int    `json:",omitempty"`
	Changed      int      `json:",omitempty"`
}

// JoinTable is one table of the FROM clause, in order.
type JoinTable struct {
	Name, Schema string
	Public       bool
	Unit         string // unit column ("" for public tables)
	Left         bool   // joined with LEFT JOIN
	On           []JoinOn
}

// JoinOn is an equality of the ON (or USING) clause of a table: the column
// Column of Tables[Table] (an earlier table) equals this table's Other.
type JoinOn struct {
	Table  int
	Column string
	Other  string
}

// JoinColumn is a column of the joined relation: Tables[Table].Column,
// named Name.
type JoinColumn struct {
	Name   string
	Table  int
	Column string
}

// joinState is the builder's view of a join FROM clause.
type joinState struct {
	tables  []*policy.Table
	aliases []string // alias or table name, as qualifiers resolve
	aliased []bool   // the table has an explicit alias
	plan    Join
	primary int
	// names maps (table, column) to the derived name; used marks the
	// derived names the plan reads.
	names map[[2]string]string
	used  map[string]bool
	// using maps an unqualified USING column to its left table.
	using map[string]int
}

// joinItem is one table of the flattened FROM clause.
type joinItem struct {
	ts    *ast.TableSource
	join  *ast.Join // the join that added it (nil for the first)
	left  bool
	using []*ast.ColumnName
}

// joinFrom plans a FROM clause with more than one table.
func (b *builder) joinFrom(j *ast.Join) error {
	var items []joinItem
	if err := b.flattenJoin(j, &items); err != nil {
		return err
	}
	st := &joinState{names: map[[2]string]string{}, used: map[string]bool{}, using: map[string]int{}}
	b.join = st
	for i, it := range items {
		tn, ok := it.ts.Source.(*ast.TableName)
		if !ok {
			return b.errAt(it.ts, pgerr.FeatureNotSupported, "subqueries are not supported").WithHint("%s", joinHint)
		}
		if tn.AsOf != nil || len(tn.IndexHints) > 0 || len(tn.PartitionNames) > 0 || tn.TableSample != nil {
			return b.errAt(tn, pgerr.FeatureNotSupported, "table options are not supported").WithHint("write FROM table [AS alias]")
		}
		name := tn.Name.O
		t, ok := b.ds.Tables[name]
		if !ok {
			return b.errAt(tn, pgerr.UndefinedTable, "relation %q does not exist in dataset %s", name, b.ds.Name).
				WithHint("tables: %s", strings.Join(b.ds.TableOrder, ", "))
		}
		if tn.Schema.O != "" && tn.Schema.O != t.Schema {
			return b.errAt(tn, pgerr.UndefinedTable, "relation %s.%s does not exist in dataset %s", tn.Schema.O, name, b.ds.Name).
				WithHint("the table is in schema %s", t.Schema)
		}
		alias := strings.Clone(it.ts.AsName.O)
		st.aliased = append(st.aliased, alias != "")
		if alias == "" {
			alias = t.Name
		}
		for _, a := range st.aliases {
			if a == alias {
				return b.errAt(tn, "42712", "table name %q specified more than once", alias).
					WithHint("give each table its own alias, e.g. FROM visits v1 JOIN visits v2 ON …")
			}
		}
		st.tables = append(st.tables, t)
		st.aliases = append(st.aliases, alias)
		st.plan.Tables = append(st.plan.Tables, JoinTable{Name: t.Name, Schema: t.Schema, Public: t.Public, Unit: t.UnitColumn, Left: it.left})
		if i == 0 {
			continue
		}
		if err := b.joinCond(it, i); err != nil {
			return err
		}
	}
	if err := b.joinShape(items); err != nil {
		return err
	}
	b.joinTable()
	return nil
}

// flattenJoin lists the tables of a left-deep join tree in order.
func (b *builder) flattenJoin(j *ast.Join, out *[]joinItem) error {
	switch l := j.Left.(type) {
	case *ast.Join:
		if err := b.flattenJoin(l, out); err != nil {
			return err
		}
	case *ast.TableSource:
		if inner, ok := l.Source.(*ast.Join); ok {
			// FROM (a JOIN b ON …): parentheses around the whole join.
			if err := b.flattenJoin(inner, out); err != nil {
				return err
			}
			break
		}
		*out = append(*out, joinItem{ts: l})
	default:
		return b.errAt(j, pgerr.FeatureNotSupported, "this FROM clause is not supported").WithHint("%s", joinHint)
	}
	if j.Right == nil {
		return nil
	}
	rs, ok := j.Right.(*ast.TableSource)
	if !ok {
		return b.errAt(j.Right, pgerr.FeatureNotSupported, "parenthesized joins are not supported").
			WithHint("write the joins one after the other: FROM a JOIN b ON … JOIN c ON …")
	}
	if _, ok := rs.Source.(*ast.TableName); !ok {
		return b.errAt(rs, pgerr.FeatureNotSupported, "joins of subqueries are not supported").WithHint("%s", joinHint)
	}
	switch {
	case j.NaturalJoin:
		return b.errAt(nil, pgerr.FeatureNotSupported, "NATURAL joins are not supported").WithHint("%s", joinHint)
	case j.StraightJoin:
		return b.errAt(nil, pgerr.FeatureNotSupported, "STRAIGHT_JOIN is not supported").WithHint("%s", joinHint)
	case j.Tp == ast.RightJoin:
		return b.errAt(nil, pgerr.FeatureNotSupported, "RIGHT JOIN is not supported").
			WithHint("write it as a LEFT JOIN with the tables swapped, the protected table first")
	case j.On == nil && len(j.Using) == 0:
		return b.errAt(nil, pgerr.FeatureNotSupported, "joins without a join condition (comma or CROSS joins) are not supported").
			WithHint("write JOIN … ON a.col = b.col; %s", joinHint)
	}
	*out = append(*out, joinItem{ts: rs, join: j, left: j.Tp == ast.LeftJoin, using: j.Using})
	return nil
}

// joinCond reads the ON or USING clause that joins table i: a conjunction
// of equalities between a column of table i and a column of an earlier
// table.
func (b *builder) joinCond(it joinItem, i int) error {
	st := b.join
	jt := &st.plan.Tables[i]
	// USING columns carry no position in the TiDB AST: errors have none.
	for _, c := range it.using {
		name := strings.Clone(c.Name.O)
		if _, err := st.tableColumn(b, nil, i, name); err != nil {
			return err
		}
		left := -1
		for k := 0; k < i; k++ {
			if st.hasColumn(k, name) {
				if left >= 0 {
					return b.errAt(nil, "42702", "common column name %q appears more than once in left table", name).
						WithHint("use ON with qualified columns instead of USING")
				}
				left = k
			}
		}
		if left < 0 {
			return b.errAt(nil, pgerr.UndefinedColumn, "column %q specified in USING clause does not exist in left table", name).
				WithHint("use ON with qualified columns instead of USING")
		}
		if _, err := st.tableColumn(b, nil, left, name); err != nil {
			return err
		}
		if err := b.joinTypes(nil, left, name, i, name); err != nil {
			return err
		}
		jt.On = append(jt.On, JoinOn{Table: left, Column: name, Other: name})
		st.using[name] = left
	}
	if it.join.On == nil {
		return nil
	}
	return b.onExpr(it.join.On.Expr, i)
}

func (b *builder) onExpr(e ast.ExprNode, i int) error {
	e = unparen(e)
	x, ok := e.(*ast.BinaryOperationExpr)
	if ok && x.Op == opcode.LogicAnd {
		if err := b.onExpr(x.L, i); err != nil {
			return err
		}
		return b.onExpr(x.R, i)
	}
	const onHint = "write ON a.col = b.col [AND c.col = d.col …], each equality between a column of the joined table and a column of an earlier table; filter rows with WHERE"
	if !ok || x.Op != opcode.EQ {
		return b.errAt(e, pgerr.FeatureNotSupported, "this join condition is not supported").WithHint("%s", onHint)
	}
	l, lok := unparen(x.L).(*ast.ColumnNameExpr)
	r, rok := unparen(x.R).(*ast.ColumnNameExpr)
	if !lok || !rok {
		return b.errAt(e, pgerr.FeatureNotSupported, "a join condition must compare two columns").WithHint("%s", onHint)
	}
	lt, lname, err := b.join.resolve(b, l, i+1)
	if err != nil {
		return err
	}
	rt, rname, err := b.join.resolve(b, r, i+1)
	if err != nil {
		return err
	}
	if lt == i {
		lt, lname, rt, rname = rt, rname, lt, lname
	}
	if rt != i || lt == i {
		return b.errAt(e, pgerr.FeatureNotSupported, "a join condition must compare a column of %s with a column of an earlier table", b.join.aliases[i]).
			WithHint("%s", onHint)
	}
	if err := b.joinTypes(e, lt, lname, rt, rname); err != nil {
		return err
	}
	jt := &b.join.plan.Tables[i]
	jt.On = append(jt.On, JoinOn{Table: lt, Column: lname, Other: rname})
	return nil
}

// joinTypes refuses equalities between columns of different declared
// types (PostgreSQL would raise 42883 or compare after an implicit cast).
func (b *builder) joinTypes(at ast.Node, t1 int, c1 string, t2 int, c2 string) error {
	a, b2 := b.join.tables[t1].Columns[c1], b.join.tables[t2].Columns[c2]
	if a == nil || b2 == nil || a.Type == b2.Type || a.Type.Numeric() && b2.Type.Numeric() {
		return nil
	}
	return b.errAt(at, "42883", "cannot join %s column %s with %s column %s", a.Type, c1, b2.Type, c2).
		WithHint("join columns of the same type")
}

// hasColumn reports whether table k has a column name (declared or its
// unit column).
func (st *joinState) hasColumn(k int, name string) bool {
	t := st.tables[k]
	_, ok := t.Columns[name]
	return ok || name == t.UnitColumn
}

// resolve finds the table (among the first n) and column of a reference.
func (st *joinState) resolve(b *builder, e *ast.ColumnNameExpr, n int) (int, string, error) {
	cn := e.Name
	name := strings.Clone(cn.Name.O)
	if q := cn.Table.O; q != "" {
		for k := 0; k < n; k++ {
			if st.aliases[k] != q || cn.Schema.O != "" && (st.aliased[k] || cn.Schema.O != st.tables[k].Schema) {
				continue
			}
			_, err := st.tableColumn(b, e, k, name)
			return k, name, err
		}
		return 0, "", b.errAt(e, pgerr.UndefinedTable, "missing FROM-clause entry for table %q", q).
			WithHint("qualify columns with one of: %s", strings.Join(st.aliases[:n], ", "))
	}
	if k, ok := st.using[name]; ok && k < n {
		_, err := st.tableColumn(b, e, k, name)
		return k, name, err
	}
	found := -1
	for k := 0; k < n; k++ {
		if st.hasColumn(k, name) {
			if found >= 0 {
				return 0, "", b.errAt(e, "42702", "column reference %q is ambiguous", name).
					WithHint("qualify it: %s.%s or %s.%s", st.aliases[found], name, st.aliases[k], name)
			}
			found = k
		}
	}
	if found < 0 {
		return 0, "", b.errAt(e, pgerr.UndefinedColumn, "column %q does not exist", name).
			WithHint("visible columns: %s", strings.Join(st.visible(n), ", "))
	}
	_, err := st.tableColumn(b, e, found, name)
	return found, name, err
}

// tableColumn checks that column name of table k may be read.
func (st *joinState) tableColumn(b *builder, at ast.Node, k int, name string) (*policy.Column, error) {
	t := st.tables[k]
	c, ok := t.Columns[name]
	if name == t.UnitColumn && !t.Public {
		return c, nil
	}
	if !ok {
		if t.Public {
			return nil, b.errAt(at, pgerr.FeatureNotSupported, "column %q of public table %s is not declared in the policy", name, t.Name).
				WithHint("ask the data steward to declare %s with its type under tables.%s.columns", name, t.Name)
		}
		return nil, b.errAt(at, pgerr.UndefinedColumn, "column %q does not exist in %s", name, t.Name).
			WithHint("visible columns: %s", strings.Join(t.VisibleColumns(), ", "))
	}
	if c.Hidden {
		return nil, b.errAt(at, pgerr.InsufficientPrivilege, "column %q of %s is not accessible (access: none)", name, t.Name).
			WithHint("visible columns: %s", strings.Join(t.VisibleColumns(), ", "))
	}
	return c, nil
}

// visible lists the visible columns of the first n tables, qualified.
func (st *joinState) visible(n int) []string {
	var out []string
	for k := 0; k < n; k++ {
		for _, c := range st.tables[k].VisibleColumns() {
			out = append(out, st.aliases[k]+"."+c)
		}
	}
	return out
}

// joinShape classifies the join (see the file comment) or refuses it.
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
		return nil
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

// maxChangedRows bounds E of an elastic join, so that E·M stays far below
// 2⁵³ with the policy's limits on bounds (1e15 would overflow; policy
// bounds are at most 1e15, so sensitivities stay finite in float64).
const maxChangedRows = 1_000_000

// joinTable builds the builder's table: the joined relation, whose columns
// are named by their bare name when no other joined table has a column of
// that name, else table.column (table#position.column when a table
// appears twice).
func (b *builder) joinTable() {
	st := b.join
	count := map[string]int{}
	nameCount := map[string]int{}
	for k, t := range st.tables {
		nameCount[t.Name]++
		for _, c := range st.columnsOf(k) {
			count[c]++
		}
	}
	prim := st.tables[st.primary]
	syn := &policy.Table{Name: prim.Name, Schema: prim.Schema, Columns: map[string]*policy.Column{}}
	for k, t := range st.tables {
		// Names never hold analyst text (aliases): a table that appears
		// twice is told apart by its position in FROM.
		q := t.Name
		if nameCount[t.Name] > 1 {
			q = t.Name + "#" + strconv.Itoa(k+1)
		}
		for _, c := range st.columnsOf(k) {
			n := c
			if count[c] > 1 {
				n = q + "." + c
			}
			st.names[[2]string{strconv.Itoa(k), c}] = n
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
	if st.plan.Shape == JoinKey {
		// An elastic join changes at most E joined rows, each adding one
		// row's value to one group: the single-table bounds with E rows
		// per unit (measureBounds, exprBounds: LInf = E·M) and at most E
		// groups. The emitted SQL (elasticSQL) does not use these as
		// limits; it enforces C_T and m_T instead.
		syn.MaxRowsPerUnit = st.plan.Changed
		syn.MaxGroupsPerUnit = st.plan.Changed
	}
	syn.UnitColumn = st.names[[2]string{strconv.Itoa(st.primary), prim.UnitColumn}]
	if _, declared := prim.Columns[prim.UnitColumn]; !declared {
		// Keep the undeclared-unit convention of single tables: the unit
		// column has no *policy.Column.
		delete(syn.Columns, syn.UnitColumn)
		syn.ColumnOrder = removeString(syn.ColumnOrder, syn.UnitColumn)
	}
	st.used[syn.UnitColumn] = true
	b.table = syn
}

// columnsOf lists the readable columns of table k: its unit column and its
// visible declared columns.
func (st *joinState) columnsOf(k int) []string {
	t := st.tables[k]
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

func removeString(s []string, x string) []string {
	var out []string
	for _, v := range s {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

// joinColumn resolves a column reference of a join query to a column of
// the joined relation (the hook of builder.column).
func (b *builder) joinColumn(e *ast.ColumnNameExpr) (colInfo, error) {
	st := b.join
	k, name, err := st.resolve(b, e, len(st.tables))
	if err != nil {
		return colInfo{}, err
	}
	n := st.names[[2]string{strconv.Itoa(k), name}]
	st.used[n] = true
	ci := colInfo{name: n, col: b.table.Columns[n], unit: n == b.table.UnitColumn}
	if ci.unit {
		ci.utype, ci.utypeName = b.table.UnitType, b.table.UnitTypeName
	}
	return ci, nil
}

// outputName is the name PostgreSQL gives an output column that is a plain
// column reference: the column's own name, also when the joined relation
// qualifies it.
func (b *builder) outputName(ci colInfo) string {
	if b.join != nil && ci.col != nil && ci.col.Name != "" {
		return ci.col.Name
	}
	if b.join != nil {
		if i := strings.LastIndexByte(ci.name, '.'); i >= 0 {
			return ci.name[i+1:]
		}
	}
	return ci.name
}

// finishJoin records the join in the plan and, for an elastic join, states
// its sensitivity (see the file comment).
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
	setElasticL1(p) // join_l1.go
	if want := min(j.Changed, domainProduct(p.Keys, j.Changed)); p.MaxGroupsPerUnit < want {
		return pgerr.New(pgerr.InternalError, "internal error: elastic join group bound below min(E, groups)")
	}
	return nil
}

// domainProduct is the number of releasable groups of keys, capped at
// limit (1 when ungrouped).
func domainProduct(keys []Key, limit int) int {
	n := 1
	for _, k := range keys {
		n = min(n*len(k.Domain), limit)
	}
	return n
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

// fromSQL is the joined relation of a JoinPublic or JoinUnit plan, as a
// derived table whose columns are the plan's column names.
func (j *Join) fromSQL() string {
	var cols []string
	for _, c := range j.Columns {
		cols = append(cols, "dp_t"+strconv.Itoa(c.Table)+"."+quoteIdent(c.Column)+" AS "+quoteIdent(c.Name))
	}
	var from strings.Builder
	for k, t := range j.Tables {
		src := quoteIdent(t.Schema) + "." + quoteIdent(t.Name) + " AS dp_t" + strconv.Itoa(k)
		if k == 0 {
			from.WriteString(src)
			continue
		}
		if t.Left {
			from.WriteString(" LEFT JOIN ")
		} else {
			from.WriteString(" JOIN ")
		}
		from.WriteString(src + " ON " + j.onSQL(k, nil))
	}
	return "(SELECT " + strings.Join(cols, ", ") + " FROM " + from.String() + ") AS dp_join"
}

// onSQL is table k's join condition; alias names the tables (dp_t<i> when
// nil).
func (j *Join) onSQL(k int, alias func(int) string) string {
	if alias == nil {
		alias = func(i int) string { return "dp_t" + strconv.Itoa(i) }
	}
	var conds []string
	for _, on := range j.Tables[k].On {
		conds = append(conds, alias(on.Table)+"."+quoteIdent(on.Column)+" = "+alias(k)+"."+quoteIdent(on.Other))
	}
	return strings.Join(conds, " AND ")
}

// elasticSQL is the emitted SQL of a JoinKey plan: each table truncated to
// C_T rows per unit, then to m_T rows per value of its join column, then
// joined; the measures are summed per group over the joined rows (no
// per-unit bounding after the join: see the file comment).
func elasticSQL(t *policy.Table, p *Plan, where pred) string {
	j := p.Join
	var from strings.Builder
	for k, jt := range j.Tables {
		need := map[string]bool{j.KeyColumn[k]: true}
		if !jt.Public {
			need[jt.Unit] = true
		}
		for _, c := range j.Columns {
			if c.Table == k {
				need[c.Column] = true
			}
		}
		for _, tk := range j.Tables {
			for _, on := range tk.On {
				if on.Table == k {
					need[on.Column] = true
				}
			}
		}
		for _, on := range jt.On {
			need[on.Other] = true
		}
		var names []string
		for c := range need {
			names = append(names, c)
		}
		sort.Strings(names)
		var quoted []string
		for _, n := range names {
			quoted = append(quoted, quoteIdent(n))
		}
		cols := strings.Join(quoted, ", ")
		// Each row's place in both orders is fixed per row, like the
		// random number of the coupling above: one copy of each distinct
		// row first, then second copies, … (dp_dup, so that a unit's or a
		// value's kept rows spread over its distinct rows), each round in
		// the order of a hash of the kept columns, ties broken by the
		// columns (rows equal in all of them are interchangeable).
		// Parallel-safe, unlike random().
		order := "dp_dup, hashtextextended(ROW(" + cols + ")::text, " + selectSalt + "), " + cols
		key := quoteIdent(j.KeyColumn[k])
		// Protected tables: at most C_T rows per unit first. Public
		// tables are the same in neighbouring databases: only their
		// multiplicity is bounded.
		src := quoteIdent(jt.Schema) + "." + quoteIdent(jt.Name)
		if !jt.Public {
			unit := quoteIdent(jt.Unit)
			src = "(SELECT " + cols + ", ROW_NUMBER() OVER (PARTITION BY dp_ju ORDER BY " + order + ") AS dp_unit_rank FROM (SELECT " + cols + ", " + unit +
				" AS dp_ju, ROW_NUMBER() OVER (PARTITION BY " + unit + ", " + cols + ") AS dp_dup FROM " + src + " WHERE " + unit +
				" IS NOT NULL) AS dp_unit_dups) AS dp_per_unit WHERE dp_unit_rank <= " + strconv.Itoa(j.RowsPerUnit[k])
		}
		src = "(SELECT " + cols + ", ROW_NUMBER() OVER (PARTITION BY " + key + ", " + cols + ") AS dp_dup FROM " + src + ") AS dp_value_dups"
		perValue := "SELECT " + cols + ", ROW_NUMBER() OVER (PARTITION BY " + key + " ORDER BY " + order + ") AS dp_value_rank FROM " + src
		side := "(SELECT " + cols + " FROM (" + perValue + ") AS dp_per_value WHERE dp_value_rank <= " + strconv.Itoa(j.RowsPerValue[k]) +
			") AS dp_t" + strconv.Itoa(k)
		switch {
		case k == 0:
			from.WriteString(side)
		case jt.Left:
			from.WriteString(" LEFT JOIN " + side + " ON " + j.onSQL(k, nil))
		default:
			from.WriteString(" JOIN " + side + " ON " + j.onSQL(k, nil))
		}
	}
	var cols []string
	for _, c := range j.Columns {
		cols = append(cols, "dp_t"+strconv.Itoa(c.Table)+"."+quoteIdent(c.Column)+" AS "+quoteIdent(c.Name))
	}
	joined := "(SELECT " + strings.Join(cols, ", ") + " FROM " + from.String() + ") AS dp_join"

	var rowCols, keyCols, final []string
	for i, k := range p.Keys {
		kc := "dp_k" + strconv.Itoa(i)
		keyCols = append(keyCols, kc)
		rowCols = append(rowCols, keySQL(k)+" AS "+kc)
		final = append(final, kc+"::text")
	}
	for i, m := range p.Measures {
		// The per-row value (clamped column or expression, centred, under
		// FILTER) is the one of bounds.go.
		x := "dp_x" + strconv.Itoa(i)
		v := rowValueSQL(t, m)
		if v != "" {
			rowCols = append(rowCols, v+" AS "+x)
		}
		switch {
		case m.Kind == MeasureQuantile:
			// The group's joined rows' values (join_quantile.go).
			final = append(final, elasticQuantileSQL(t, m, x))
		case m.Kind == MeasureSum || m.Kind == MeasureSumSq:
			final = append(final, "SUM("+x+")::text")
		case v != "":
			final = append(final, "COUNT("+x+")::text")
		default:
			final = append(final, "COUNT(*)::text")
		}
	}
	if len(rowCols) == 0 {
		rowCols = []string{"1 AS dp_one"}
	}
	var conds []string
	if where != nil {
		conds = append(conds, where.sql())
	}
	for _, k := range p.Keys {
		conds = append(conds, keySQL(k)+" IN ("+strings.Join(domainConsts(k), ", ")+")")
	}
	rows := "SELECT " + strings.Join(rowCols, ", ") + " FROM " + joined
	if len(conds) > 0 {
		rows += " WHERE " + strings.Join(conds, " AND ")
	}
	sql := "SELECT " + strings.Join(final, ", ") + " FROM (" + rows + ") AS dp_rows"
	if len(keyCols) > 0 {
		sql += " GROUP BY " + strings.Join(keyCols, ", ")
	}
	return sql
}

// String describes a join for EXPLAIN and goldens.
func (j *Join) String() string {
	var parts []string
	for _, t := range j.Tables {
		s := t.Name
		if t.Public {
			s += " (public)"
		}
		if t.Left {
			s = "left " + s
		}
		parts = append(parts, s)
	}
	s := fmt.Sprintf("%s join of %s", j.Shape, strings.Join(parts, ", "))
	if j.Shape == JoinKey {
		s += fmt.Sprintf("; rows per unit %v, rows per value %v of %v; changed rows E = %d", j.RowsPerUnit, j.RowsPerValue, j.KeyColumn, j.Changed)
	}
	return s
}

// onNode is the node of a table's join condition, for error positions
// (nil when the table was joined with USING).
func (b *builder) onNode(it joinItem) ast.Node {
	if it.join != nil && it.join.On != nil {
		return it.join.On.Expr
	}
	return nil
}

// isJoinSource reports whether a FROM item is a parenthesized join.
func isJoinSource(n ast.ResultSetNode) bool {
	ts, ok := n.(*ast.TableSource)
	if !ok {
		_, isJoin := n.(*ast.Join)
		return isJoin
	}
	_, isJoin := ts.Source.(*ast.Join)
	return isJoin
}
