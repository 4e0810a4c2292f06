package rewrite

import (
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// This file parses a FROM clause with joins (issue 9) into a dpplan.Join:
// its tables, their ON/USING equalities and the columns the plan reads.
// The shapes (JoinPublic, JoinUnit), their sensitivity and the
// checks that make this translation untrusted are in dpplan/join.go and
// dpplan/join_check.go; join_shape.go classifies, join_resolve.go resolves
// columns.

// joinHint lists the supported join shapes.
const joinHint = "dpproxy answers FROM protected [LEFT] JOIN public_table ON a.col = b.col, and protected JOIN protected ON a.unit = b.unit (or USING (unit)), with any further equalities"

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
		st.plan.Tables = append(st.plan.Tables, JoinTable{Name: t.Name, Schema: t.Schema, Public: t.Public, Unit: t.UnitColumn, UnitPGType: t.UnitPGType, Left: it.left, Texts: dpplan.JoinTexts(t)})
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
