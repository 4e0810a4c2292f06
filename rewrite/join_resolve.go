package rewrite

import (
	"github.com/dpproxy/dpproxy/dpplan"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Column resolution in joins: qualified and unqualified names resolved to
// the joined relation's columns, as PostgreSQL resolves them. See join.go
// for the join shapes.

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

// columnsOf lists the readable columns of table k
// (dpplan.ReadableColumns).
func (st *joinState) columnsOf(k int) []string { return dpplan.ReadableColumns(st.tables[k]) }

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
