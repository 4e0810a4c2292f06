package rewrite

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// aggregateHint is the hint for queries that are not aggregates.
const aggregateHint = "use COUNT(*), SUM(col), AVG(col) … GROUP BY a column with public values, e.g. SELECT department, COUNT(*), AVG(cost) FROM visits GROUP BY department"

// shapeHint lists the supported query shape.
const shapeHint = "dpproxy answers SELECT [key,] COUNT(*)|COUNT(col)|COUNT(DISTINCT unit)|SUM(col)|AVG(col)|VAR_POP/VAR_SAMP/STDDEV…(col) FROM table [[LEFT] JOIN table ON a.col = b.col …] [WHERE col op literal …] [GROUP BY key] [ORDER BY …] [LIMIT n]"

// mysqlOperators are MySQL operator words that PostgreSQL reads as names,
// with what to write instead (the hint of the syntax error they cause).
var mysqlOperators = map[string]string{
	"div":    "/ (integer division: div(a, b))",
	"mod":    "% or mod(a, b)",
	"xor":    "(a OR b) AND NOT (a AND b)",
	"regexp": "LIKE or ILIKE with a pattern",
	"rlike":  "LIKE or ILIKE with a pattern",
}

// builder validates one parsed SELECT against the policy.
type builder struct {
	ds    *policy.Dataset
	src   string
	norm  *normalized
	table *policy.Table
	alias string // the FROM alias, or "" (then the table name qualifies)

	keys     []Key
	keyCols  []*policy.Column
	measures []Measure
	outputs  []Output
	aggs     []aggSpec // per output; fn "" for keys
	where    pred

	filters  map[*ast.AggregateFuncExpr]ast.ExprNode // FILTER conditions (filter.go)
	rangeErr *pgerr.Error                            // set by addMeasure for an unbounded measure
	rowOps   int                                     // arithmetic operations inside aggregates (rowexpr.go maxRowOps)

	hidden     []Output  // aggregates used by expressions and HAVING
	hiddenAggs []aggSpec // per hidden output

	join *joinState // a FROM clause with joins (join.go), else nil
	opts Options    // session settings (SET dp.…)
	// tsCast: a cast of a column to timestamp[tz] was dropped (cast.go),
	// so an untyped literal may be compared as a timestamp (datefold.go).
	tsCast bool
	sa     []saSpec // sample-and-aggregate calls of the select list (sampleagg.go)
}

// aggSpec is an aggregate call of the select list.
type aggSpec struct {
	fn     string // "count", "sum", "avg"
	col    string // "" for COUNT(*) and expressions
	expr   string // the emitted SQL of an expression argument
	filter string // the emitted SQL of FILTER (WHERE …), or ""
}

// parsers recycles TiDB parsers: building one allocates about 16 KB of
// tables, half of a whole Rewrite. A parser is used by one goroutine at a
// time (Get/Put) and carries nothing from one Parse to the next that could
// change a result (its SQL mode is fixed here), so the pool is a cache,
// not state. The parser reuses the memory of the AST it returned on its
// next Parse, so it goes back to the pool only when the plan is built
// (TestRewrite_Concurrent catches a violation under -race).
var parsers = sync.Pool{New: func() any {
	p := parser.New()
	p.SetSQLMode(mysql.ModeANSIQuotes)
	return p
}}

// plan parses and validates the statement and builds the plan.
func plan(ds *policy.Dataset, stmt string, opts Options) (*Plan, error) {
	orig := stmt
	stmt, tsCast := blankCasts(stmt) // cast.go: value-preserving casts of columns
	n, err := normalize(stmt)
	if err != nil {
		return nil, err
	}
	if len(n.pieces) == 0 {
		return nil, pgsql.SyntaxErr(stmt, 0, "empty query").WithHint("%s", shapeHint)
	}
	if n.pieces[0].text != "SELECT" {
		return nil, pgerr.New(pgerr.FeatureNotSupported, "only SELECT queries are answered on protected tables").
			WithPosition(pgsql.CharPos(stmt, n.pieces[0].pos)).WithHint("%s", shapeHint)
	}
	tp := parsers.Get().(*parser.Parser)
	defer parsers.Put(tp)
	nodes, _, err := tp.Parse(n.text, "", "")
	if err != nil {
		pos := n.parseErrPos(err.Error())
		near := ""
		if toks, lerr := pgsql.Lex(stmt[pos:]); lerr == nil && len(toks) > 0 {
			near = stmt[pos+toks[0].Pos : pos+toks[0].End]
		}
		hint := shapeHint
		if alt, ok := mysqlOperators[strings.ToLower(near)]; ok {
			hint = near + " is a MySQL operator; in PostgreSQL write " + alt
		}
		return nil, pgsql.SyntaxErr(stmt, pos, "syntax error at or near %q", near).WithHint("%s", hint).Wrap(err)
	}
	if len(nodes) != 1 {
		return nil, pgsql.SyntaxErr(stmt, 0, "expected one statement").WithHint("send one statement at a time")
	}
	sel, ok := nodes[0].(*ast.SelectStmt)
	if !ok {
		return nil, pgerr.New(pgerr.FeatureNotSupported, "only SELECT queries are answered on protected tables").WithHint("%s", shapeHint)
	}
	b := &builder{ds: ds, src: stmt, norm: n, opts: opts, tsCast: tsCast}
	if err := b.checkDepth(sel); err != nil { // depth.go
		return nil, err
	}
	p, err := b.build(sel)
	if err == nil {
		err = checkSQLSize(p)
	}
	if err != nil {
		return nil, err
	}
	if opts.AutoBounds && opts.MaxRowsPerUnit == 0 && autoEligible(p) {
		if err := addAutoBounds(ds, orig, opts, p); err != nil { // autobounds.go
			return nil, err
		}
		p.Fingerprint = fingerprint(p)
	}
	if opts.AutoClip {
		addAutoClip(ds, orig, opts, p) // autoclip.go
		p.Fingerprint = fingerprint(p)
	}
	return p, nil
}

func (b *builder) errAt(node ast.Node, code, format string, args ...any) *pgerr.Error {
	e := pgerr.New(code, format, args...)
	if node != nil {
		e = e.WithPosition(pgsql.CharPos(b.src, b.norm.srcPos(node.OriginTextPosition())))
	}
	return e
}

func (b *builder) build(sel *ast.SelectStmt) (*Plan, error) {
	switch {
	case sel.With != nil:
		return nil, b.errAt(sel, pgerr.FeatureNotSupported, "WITH queries (CTEs) are not supported").WithHint("%s", shapeHint)
	case sel.Kind != ast.SelectStmtKindSelect:
		return nil, b.errAt(sel, pgerr.FeatureNotSupported, "only plain SELECT queries are supported").WithHint("%s", shapeHint)
	case sel.Distinct:
		return nil, b.errAt(sel, pgerr.FeatureNotSupported, "SELECT DISTINCT is not supported").
			WithHint("GROUP BY already returns one row per group; remove DISTINCT")
	case sel.LockInfo != nil && sel.LockInfo.LockType != ast.SelectLockNone:
		return nil, b.errAt(sel, pgerr.FeatureNotSupported, "locking clauses are not supported").WithHint("remove FOR UPDATE/SHARE")
	case sel.SelectIntoOpt != nil:
		return nil, b.errAt(sel, pgerr.InsufficientPrivilege, "SELECT … INTO is not allowed").WithHint("remove INTO")
	case len(sel.WindowSpecs) > 0:
		return nil, b.errAt(sel, pgerr.FeatureNotSupported, "window functions are not supported").WithHint("use plain aggregates with GROUP BY")
	case len(sel.TableHints) > 0:
		return nil, b.errAt(sel, pgerr.FeatureNotSupported, "optimizer hints are not supported").WithHint("remove the hint comment")
	case sel.Limit != nil:
		return nil, b.errAt(sel, pgerr.FeatureNotSupported, "LIMIT inside parentheses is not supported").
			WithHint("write LIMIT and OFFSET at the end of the query, without parentheses around it")
	}
	if err := b.from(sel); err != nil {
		return nil, err
	}
	if err := b.liftFilters(sel); err != nil {
		return nil, err
	}
	if sel.Where != nil {
		w, err := b.pred(sel.Where)
		if err != nil {
			return nil, err
		}
		b.where = w
	}
	if err := b.groupBy(sel); err != nil {
		return nil, err
	}
	b.narrowKeys()                             // narrow.go
	if err := b.queryBounds(sel); err != nil { // bounds.go
		return nil, err
	}
	if err := b.selectList(sel); err != nil {
		return nil, err
	}
	var having *Cond
	if sel.Having != nil {
		c, err := b.having(sel.Having.Expr)
		if err != nil {
			return nil, err
		}
		having = c
	}
	for i := range b.outputs {
		fixRefs(b.outputs[i].Expr, len(b.outputs))
	}
	fixCondRefs(having, len(b.outputs))
	p := &Plan{
		Dataset:  b.ds.Name,
		Table:    b.table.Name,
		Keys:     b.keys,
		Measures: b.measures,
		Outputs:  b.outputs,
		Hidden:   b.hidden,
		Having:   having,
		Limit:    -1,
	}
	if err := b.orderBy(sel, p); err != nil {
		return nil, err
	}
	if err := b.limit(p); err != nil {
		return nil, err
	}
	p.MaxGroupsPerUnit = maxGroupsPerUnit(b.table, b.keys)
	if b.join == nil {
		p.RowsPerUnit = b.table.MaxRowsPerUnit
	}
	if len(b.sa) > 0 {
		if err := b.sampleAggPlan(sel, p); err != nil { // sampleagg.go
			return nil, err
		}
		p.Fingerprint = fingerprint(p)
		return p, nil
	}
	shareSums(p) // centre.go
	if b.join != nil {
		if err := b.finishJoin(p); err != nil {
			return nil, err
		}
	}
	if p.Join == nil || p.Join.Shape != JoinKey {
		scaledMeasures(p) // bounds.go
	}
	if !b.opts.NoBias {
		addRemoved(b.table, p) // bias.go
	}
	p.SQL = emitSQL(b.table, p, b.where)
	p.table, p.where = b.table, b.where
	p.Fingerprint = fingerprint(p)
	return p, nil
}

// from checks the FROM clause: exactly one protected table.
func (b *builder) from(sel *ast.SelectStmt) error {
	if sel.From == nil || sel.From.TableRefs == nil {
		return b.errAt(sel, pgerr.FeatureNotSupported, "a DP query needs FROM with one protected table").WithHint("%s", shapeHint)
	}
	j := sel.From.TableRefs
	if j.Right != nil || isJoinSource(j.Left) {
		return b.joinFrom(j)
	}
	if j.Right != nil {
		return b.errAt(j.Right, pgerr.FeatureNotSupported, "joins are not supported").
			WithHint("query one protected table; filter with WHERE on its own columns")
	}
	ts, ok := j.Left.(*ast.TableSource)
	if !ok {
		return b.errAt(j.Left, pgerr.FeatureNotSupported, "joins are not supported").
			WithHint("query one protected table; filter with WHERE on its own columns")
	}
	tn, ok := ts.Source.(*ast.TableName)
	if !ok {
		return b.errAt(ts, pgerr.FeatureNotSupported, "subqueries are not supported").WithHint("%s", shapeHint)
	}
	if tn.AsOf != nil || len(tn.IndexHints) > 0 || len(tn.PartitionNames) > 0 || tn.TableSample != nil {
		return b.errAt(tn, pgerr.FeatureNotSupported, "table options are not supported").WithHint("write FROM table [AS alias]")
	}
	name := tn.Name.O
	t, ok := b.ds.Tables[name]
	if !ok {
		return b.errAt(tn, pgerr.UndefinedTable, "relation %q does not exist in dataset %s", name, b.ds.Name).
			WithHint("protected tables: %s", strings.Join(b.ds.ProtectedTables(), ", "))
	}
	if t.Public {
		return b.errAt(tn, pgerr.FeatureNotSupported, "a DP query reads one protected table; %q is public", name).
			WithHint("query the public table without naming a protected table, or aggregate over one protected table")
	}
	if tn.Schema.O != "" && tn.Schema.O != t.Schema {
		return b.errAt(tn, pgerr.UndefinedTable, "relation %s.%s does not exist in dataset %s", tn.Schema.O, name, b.ds.Name).
			WithHint("the table is in schema %s", t.Schema)
	}
	b.table = t
	b.alias = ts.AsName.O
	return nil
}

// colInfo is a resolved column reference.
type colInfo struct {
	name string
	col  *policy.Column // nil for an undeclared unit column
	unit bool
	// utype and utypeName: the unit column's type from the live catalog
	// (policy.Table.UnitType), for an undeclared unit column.
	utype     policy.Type
	utypeName string
}

func (c colInfo) typ() policy.Type {
	if c.col == nil {
		return c.utype
	}
	return c.col.Type
}

// column resolves a column reference of the FROM table.
func (b *builder) column(e *ast.ColumnNameExpr) (colInfo, error) {
	if b.join != nil {
		return b.joinColumn(e)
	}
	cn := e.Name
	if cn.Table.O != "" {
		qual := cn.Table.O
		ok := qual == b.alias || b.alias == "" && qual == b.table.Name &&
			(cn.Schema.O == "" || cn.Schema.O == b.table.Schema)
		if !ok || b.alias != "" && cn.Schema.O != "" {
			return colInfo{}, b.errAt(e, pgerr.UndefinedTable, "missing FROM-clause entry for table %q", qual).
				WithHint("qualify columns with %q or leave them unqualified", b.fromName())
		}
	}
	// Names are cloned: the plan must not share memory with the AST,
	// which the pooled parser reuses.
	name := strings.Clone(cn.Name.O)
	if name == b.table.UnitColumn {
		c := b.table.Columns[name]
		return colInfo{name: name, col: c, unit: true, utype: b.table.UnitType, utypeName: b.table.UnitTypeName}, nil
	}
	c, ok := b.table.Columns[name]
	if !ok {
		return colInfo{}, b.errAt(e, pgerr.UndefinedColumn, "column %q does not exist in %s", name, b.table.Name).
			WithHint("visible columns: %s", strings.Join(b.table.VisibleColumns(), ", "))
	}
	if c.Hidden {
		return colInfo{}, b.errAt(e, pgerr.InsufficientPrivilege, "column %q of %s is not accessible (access: none)", name, b.table.Name).
			WithHint("visible columns: %s", strings.Join(b.table.VisibleColumns(), ", "))
	}
	return colInfo{name: name, col: c}, nil
}

func (b *builder) fromName() string {
	if b.alias != "" {
		return b.alias
	}
	return b.table.Name
}

// lit returns the literal behind a ? marker, folding a unary minus.
func (b *builder) lit(e ast.ExprNode) (literal, bool) {
	switch x := e.(type) {
	case *test_driver.ParamMarkerExpr:
		i, ok := b.norm.litAt[x.Offset]
		if !ok {
			return literal{}, false
		}
		return b.norm.lits[i], true
	case *ast.ParenthesesExpr:
		return b.lit(x.Expr)
	case *ast.UnaryOperationExpr:
		if x.Op != opcode.Minus && x.Op != opcode.Plus {
			return literal{}, false
		}
		l, ok := b.lit(x.V)
		if !ok || l.kind != litNumber || l.typ != "" && !l.typ.Numeric() {
			return literal{}, false
		}
		if x.Op == opcode.Minus {
			if strings.HasPrefix(l.val, "-") {
				l.val = l.val[1:]
			} else {
				l.val = "-" + l.val
			}
		}
		return l, true
	}
	return literal{}, false
}

// groupBy resolves GROUP BY items to public-domain keys.
func (b *builder) groupBy(sel *ast.SelectStmt) error {
	if sel.GroupBy == nil {
		return nil
	}
	if sel.GroupBy.Rollup {
		return b.errAt(sel, pgerr.FeatureNotSupported, "GROUP BY … WITH ROLLUP is not supported").WithHint("GROUP BY plain columns")
	}
	fields := sel.Fields.Fields
	for _, item := range sel.GroupBy.Items {
		e := item.Expr
		if item.Desc {
			return b.errAt(e, pgerr.SyntaxError, "syntax error: ASC/DESC in GROUP BY").WithHint("order with ORDER BY")
		}
		if p, ok := e.(*ast.ParenthesesExpr); ok {
			e = p.Expr
		}
		var ref *ast.ColumnNameExpr
		switch x := e.(type) {
		case *ast.ColumnNameExpr:
			ref = x
			// PostgreSQL resolves GROUP BY names as input columns first,
			// then as output column names.
			// Only names that are no column of the policy fall back to
			// aliases (a hidden column keeps its PostgreSQL meaning and
			// is refused).
			if _, err := b.column(x); err != nil && x.Name.Table.O == "" && isUndefinedColumn(err) {
				for _, f := range fields {
					if f.AsName.O == x.Name.Name.O {
						if c, ok := f.Expr.(*ast.ColumnNameExpr); ok {
							ref = c
						} else if fc, ok := f.Expr.(*ast.FuncCallExpr); ok {
							if err := b.addExprKey(fc); err != nil {
								return err
							}
							ref = nil
						} else if ce, ok := f.Expr.(*ast.CaseExpr); ok {
							if err := b.addCaseKey(ce); err != nil {
								return err
							}
							ref = nil
						} else if ok, err := b.addBucketKey(f.Expr); ok || err != nil {
							if err != nil {
								return err
							}
							ref = nil
						} else {
							return b.errAt(x, pgerr.FeatureNotSupported, "GROUP BY %q refers to an expression", x.Name.Name.O).
								WithHint("GROUP BY a column with public values")
						}
					}
				}
			}
		case *ast.FuncCallExpr:
			if err := b.addExprKey(x); err != nil {
				return err
			}
			continue
		case *ast.CaseExpr:
			if err := b.addCaseKey(x); err != nil {
				return err
			}
			continue
		default:
			if ok, err := b.addBucketKey(e); ok || err != nil {
				if err != nil {
					return err
				}
				continue
			}
			l, ok := b.lit(e)
			if !ok {
				return b.errAt(e, pgerr.FeatureNotSupported, "GROUP BY expressions are not supported yet").
					WithHint("%s", keyExprHint)
			}
			pos, err := b.position(e, l, len(fields), "GROUP BY")
			if err != nil {
				return err
			}
			if fc, ok := fields[pos].Expr.(*ast.FuncCallExpr); ok {
				if err := b.addExprKey(fc); err != nil {
					return err
				}
				continue
			}
			if ce, ok := fields[pos].Expr.(*ast.CaseExpr); ok {
				if err := b.addCaseKey(ce); err != nil {
					return err
				}
				continue
			}
			if ok, err := b.addBucketKey(fields[pos].Expr); ok || err != nil {
				if err != nil {
					return err
				}
				continue
			}
			c, ok := fields[pos].Expr.(*ast.ColumnNameExpr)
			if !ok {
				if _, agg := fields[pos].Expr.(*ast.AggregateFuncExpr); agg {
					return b.errAt(e, "42803", "aggregate functions are not allowed in GROUP BY").
						WithHint("GROUP BY a column with public values")
				}
				return b.errAt(e, pgerr.FeatureNotSupported, "GROUP BY position %d refers to an expression", pos+1).
					WithHint("GROUP BY a column with public values")
			}
			ref = c
		}
		if ref == nil {
			continue // an alias of a key expression, added above
		}
		ci, err := b.column(ref)
		if err != nil {
			return err
		}
		if err := b.addKey(ref, ci); err != nil {
			return err
		}
	}
	return nil
}

// position reads a 1-based output position.
func (b *builder) position(e ast.Node, l literal, n int, clause string) (int, error) {
	if l.kind != litNumber || l.typ != "" {
		return 0, b.errAt(e, pgerr.SyntaxError, "non-integer constant in %s", clause).
			WithHint("%s a column name, an output alias or an output position", clause)
	}
	p, err := strconv.Atoi(l.val)
	if err != nil || p < 1 || p > n {
		return 0, b.errAt(e, "42P10", "%s position %s is not in select list", clause, l.val).
			WithHint("positions count output columns from 1 to %d", n)
	}
	return p - 1, nil
}

func (b *builder) addKey(at ast.Node, ci colInfo) error {
	for _, k := range b.keys {
		if k.Column == ci.name && k.Func == "" {
			return nil // GROUP BY a, a
		}
	}
	if ci.col == nil || ci.unit || len(ci.col.PublicValues) == 0 {
		// No public domain: partition selection (partition.go).
		k, err := b.privateKey(at, ci)
		if err != nil {
			return err
		}
		b.keys = append(b.keys, k)
		b.keyCols = append(b.keyCols, ci.col)
		return nil
	}
	b.keys = append(b.keys, Key{Column: ci.name, Type: ci.col.Type, Domain: append([]string(nil), ci.col.PublicValues...)})
	b.keyCols = append(b.keyCols, ci.col)
	return nil
}

func (b *builder) publicKeys() []string {
	var out []string
	for _, n := range b.table.ColumnOrder {
		if c := b.table.Columns[n]; !c.Hidden && len(c.PublicValues) > 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		out = []string{"none in this table"}
	}
	return out
}

// addBucketKey adds floor(X/W)*W as a key (datekey.go); ok is false when
// e has another shape.
func (b *builder) addBucketKey(e ast.ExprNode) (bool, error) {
	k, col, ok, err := b.bucketKey(e)
	if !ok || err != nil {
		return ok, err
	}
	b.appendKey(k, col)
	return true, nil
}

// keyOutput returns the index of a planned key equal to k, or -1.
func (b *builder) keyOutput(k Key) int {
	for i, have := range b.keys {
		if sameKey(have, k) {
			return i
		}
	}
	return -1
}

func (b *builder) appendKey(k Key, col *policy.Column) {
	if b.keyOutput(k) >= 0 {
		return
	}
	b.keys = append(b.keys, k)
	b.keyCols = append(b.keyCols, col)
}

// addExprKey adds a GROUP BY expression key (see exprKey).
func (b *builder) addExprKey(fc *ast.FuncCallExpr) error {
	k, col, err := b.exprKey(fc)
	if err != nil {
		return err
	}
	for _, have := range b.keys {
		if sameKey(have, k) {
			return nil
		}
	}
	b.keys = append(b.keys, k)
	b.keyCols = append(b.keyCols, col)
	return nil
}

func (b *builder) keyIndex(name string) int {
	for i, k := range b.keys {
		if k.Column == name && k.Func == "" {
			return i
		}
	}
	return -1
}

// selectList builds outputs and measures.
func (b *builder) selectList(sel *ast.SelectStmt) error {
	for _, f := range sel.Fields.Fields {
		if f.WildCard != nil {
			return b.errAt(sel, pgerr.InsufficientPrivilege, "only aggregate queries are answered; SELECT * returns private rows").
				WithHint("%s", aggregateHint)
		}
		out := Output{}
		var spec aggSpec
		switch x := f.Expr.(type) {
		case *ast.ColumnNameExpr:
			ci, err := b.column(x)
			if err != nil {
				return err
			}
			k := b.keyIndex(ci.name)
			if k < 0 {
				return b.errAt(x, pgerr.InsufficientPrivilege, "only aggregate queries are answered; column %q is not aggregated", ci.name).
					WithHint("%s", aggregateHint)
			}
			out = Output{Name: b.outputName(ci), Kind: OutputKey, Key: k, PGType: keyPGType(b.keys[k])}
		case *ast.AggregateFuncExpr:
			s, o, err := b.aggregate(x)
			if err != nil {
				return err
			}
			spec, out = s, o
		default:
			if _, ok := b.lit(f.Expr); ok {
				return b.errAt(f.Expr, pgerr.FeatureNotSupported, "constants in the select list of a DP query are not supported").
					WithHint("%s", aggregateHint)
			}
			if fc, ok := f.Expr.(*ast.FuncCallExpr); ok && isOrderedSetName(fc.FnName.O) {
				s, o, err := b.orderedSet(fc, strings.ToLower(fc.FnName.O))
				if err != nil {
					return err
				}
				spec, out = s, o
				break
			}
			if fc, ok := f.Expr.(*ast.FuncCallExpr); ok && isSampleAggFunc(fc.FnName.O) {
				o, err := b.sampleAggCall(fc)
				if err != nil {
					return err
				}
				out = o
				break
			}
			if ce, ok := f.Expr.(*ast.CaseExpr); ok {
				o, isKey, err := b.caseOutput(ce)
				if err != nil {
					return err
				}
				if isKey {
					out = o
					break
				}
			}
			if k, _, ok, err := b.bucketKey(f.Expr); ok {
				if err != nil {
					return err
				}
				idx := b.keyOutput(k)
				if idx < 0 {
					return b.errAt(f.Expr, "42803", "the bucket expression must appear in the GROUP BY clause").
						WithHint("add it to GROUP BY, e.g. GROUP BY 1")
				}
				out = Output{Name: "?column?", Kind: OutputKey, Key: idx, PGType: keyPGType(b.keys[idx])}
				break
			}
			if fc, ok := f.Expr.(*ast.FuncCallExpr); ok {
				name := strings.ToLower(fc.FnName.O)
				if name != "width_bucket" && name != "date_trunc" && name != "extract" && name != "date_part" {
					return b.errAt(f.Expr, pgerr.FeatureNotSupported, "function %s is not supported in DP queries", fc.FnName.O).
						WithHint("%s", aggregateHint)
				}
				k, _, err := b.exprKey(fc)
				if err != nil {
					return err
				}
				idx := -1
				for i, have := range b.keys {
					if sameKey(have, k) {
						idx = i
					}
				}
				if idx < 0 {
					return b.errAt(f.Expr, "42803", "%s(…) must appear in the GROUP BY clause", name).
						WithHint("add it to GROUP BY, e.g. GROUP BY 1")
				}
				out = Output{Name: name, Kind: OutputKey, Key: idx, PGType: keyPGType(b.keys[idx])}
				break
			}
			e, info, err := b.arith(f.Expr)
			if err != nil {
				return err
			}
			if !info.agg {
				return b.errAt(f.Expr, pgerr.FeatureNotSupported, "constants in the select list of a DP query are not supported").
					WithHint("%s", aggregateHint)
			}
			typ := "numeric"
			if info.maybeInt && intExpr(e, b.hidden) {
				typ = "int8"
			}
			out = Output{Name: exprName, Kind: OutputExpr, Expr: e, PGType: typ}
		}
		if f.AsName.O != "" {
			out.Name = strings.Clone(f.AsName.O)
		}
		b.outputs = append(b.outputs, out)
		b.aggs = append(b.aggs, spec)
	}
	if len(b.measures) == 0 && len(b.sa) == 0 {
		return b.errAt(sel, pgerr.InsufficientPrivilege, "only aggregate queries are answered").WithHint("%s", aggregateHint)
	}
	return nil
}

// aggregate checks an aggregate call and adds its measures.
func (b *builder) aggregate(x *ast.AggregateFuncExpr) (aggSpec, Output, error) {
	spec, o, err := b.planAggregate(x)
	if err == nil && b.rangeErr != nil {
		err = b.rangeErr.WithPosition(pgsql.CharPos(b.src, b.norm.srcPos(x.OriginTextPosition())))
	}
	return spec, o, err
}

func (b *builder) planAggregate(x *ast.AggregateFuncExpr) (aggSpec, Output, error) {
	fn := strings.ToLower(x.F)
	if x.Order != nil {
		return aggSpec{}, Output{}, b.errAt(x, pgerr.FeatureNotSupported, "ORDER BY inside an aggregate is not supported").WithHint("remove it")
	}
	if x.Distinct {
		return b.countDistinct(x, fn)
	}
	switch fn {
	case "count", "sum", "avg", "var_pop", "var_samp", "stddev_pop", "stddev_samp":
	case "min", "max":
		return b.minMax(x, fn)
	default:
		return aggSpec{}, Output{}, b.errAt(x, pgerr.FeatureNotSupported, "aggregate %s is not supported yet", fn).
			WithHint("use COUNT(*), COUNT(col), SUM(col) or AVG(col)")
	}
	if len(x.Args) != 1 {
		return aggSpec{}, Output{}, b.errAt(x, "42883", "function %s with %d arguments does not exist", fn, len(x.Args)).
			WithHint("%s takes one column", strings.ToUpper(fn))
	}
	arg := x.Args[0]
	if p, ok := arg.(*ast.ParenthesesExpr); ok {
		arg = p.Expr
	}
	filter, err := b.aggFilter(x)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	if fn == "count" {
		if _, star := arg.(*test_driver.ValueExpr); star {
			return aggSpec{fn: "count", filter: filter}, Output{Name: "count", Kind: OutputCount, Measure: b.addMeasure(Measure{Kind: MeasureCount, Filter: filter}, nil, nil), PGType: "int8"}, nil
		}
		if l, ok := b.lit(arg); ok {
			if l.kind == litNull {
				return aggSpec{}, Output{}, b.errAt(arg, pgerr.FeatureNotSupported, "COUNT(NULL) is always 0").WithHint("use COUNT(*)")
			}
			// COUNT(constant) counts every row, like COUNT(*).
			return aggSpec{fn: "count", filter: filter}, Output{Name: "count", Kind: OutputCount, Measure: b.addMeasure(Measure{Kind: MeasureCount, Filter: filter}, nil, nil), PGType: "int8"}, nil
		}
	}
	c, ok := arg.(*ast.ColumnNameExpr)
	if !ok {
		// An expression inside the aggregate (rowexpr.go).
		v, err := b.rowValue(arg)
		if err != nil {
			return aggSpec{}, Output{}, err
		}
		if v.iv.Empty() {
			return aggSpec{}, Output{}, b.errAt(arg, pgerr.FeatureNotSupported, "the expression inside %s is always NULL", strings.ToUpper(fn)).
				WithHint("%s", rowExprHint)
		}
		spec := aggSpec{fn: fn, expr: v.sql, filter: filter}
		if fn == "count" {
			// COUNT(expr) counts the rows where expr is not NULL.
			m := b.addMeasure(Measure{Kind: MeasureCount, Expr: v.sql, Filter: filter}, nil, &v.iv)
			return spec, Output{Name: "count", Kind: OutputCount, Measure: m, PGType: "int8"}, nil
		}
		return b.valueAggregate(x, fn, spec, v.iv)
	}
	ci, err := b.column(c)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	if fn == "count" {
		m := b.addMeasure(Measure{Kind: MeasureCount, Column: ci.name, Filter: filter}, ci.col, nil)
		return aggSpec{fn: "count", col: ci.name, filter: filter}, Output{Name: "count", Kind: OutputCount, Measure: m, PGType: "int8"}, nil
	}
	if ci.unit {
		shown := strings.ToUpper(fn)
		if n := b.callName(x); n != "" {
			shown = strings.ToUpper(n)
		}
		return aggSpec{}, Output{}, b.errAt(c, pgerr.FeatureNotSupported, "%s of the unit column %s is not supported", shown, ci.name).
			WithHint("count units with COUNT(DISTINCT %s); apply %s to a numeric column with bounds in the policy", ci.name, shown)
	}
	if !ci.col.Type.Numeric() {
		return aggSpec{}, Output{}, b.errAt(c, pgerr.FeatureNotSupported, "%s(%s) needs a numeric column; %s is %s", strings.ToUpper(fn), ci.name, ci.name, ci.col.Type).
			WithHint("sum or average a numeric column with bounds in the policy, or use COUNT(%s)", ci.name)
	}
	if !ci.col.HasBounds {
		return aggSpec{}, Output{}, b.errAt(c, pgerr.FeatureNotSupported, "%s(%s) needs bounds: the policy declares no lower/upper for %s", strings.ToUpper(fn), ci.name, ci.name).
			WithHint("ask the data steward to declare lower and upper for %s", ci.name)
	}
	if ci.col.LowerNum == 0 && ci.col.UpperNum == 0 {
		return aggSpec{}, Output{}, b.errAt(c, pgerr.FeatureNotSupported, "%s(%s) is constant: the policy bounds are [0, 0]", strings.ToUpper(fn), ci.name).
			WithHint("ask the data steward to declare real bounds for %s", ci.name)
	}
	v, err := b.rowColumn(c)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	return b.valueAggregate(x, fn, aggSpec{fn: fn, col: ci.name, filter: filter}, v.iv)
}

// valueAggregate plans SUM, AVG and the variance family over a bounded
// column (spec.col) or an expression (spec.expr) whose values lie in iv.
//
// SUM is one sum measure. AVG and the variance family use normalized
// (centred) sums: with m the midpoint of iv, the sum of x − m and the sum
// of (x − m)² have L∞ max_rows·(hi − lo)/2 and max_rows·((hi − lo)/2)²
// instead of max_rows·max(|lo|, |hi|) and max_rows·max(lo², hi²) (half
// and a quarter for ranges such as cost 0..20000); the average is m + S̃/C̃
// and the variance, being shift-invariant, is computed from the centred
// sums unchanged (release/post.go). See PRIVACY.md, "AVG and variance".
func (b *builder) valueAggregate(x *ast.AggregateFuncExpr, fn string, spec aggSpec, iv sensitivity.Interval) (aggSpec, Output, error) {
	base := Measure{Column: spec.col, Expr: spec.expr, Filter: spec.filter}
	var col *policy.Column
	lower, upper := sensitivity.RatDown(iv.Lo), sensitivity.RatUp(iv.Hi)
	if spec.col != "" {
		col = b.table.Columns[spec.col]
		lower, upper = col.LowerNum, col.UpperNum
	}
	if iv.MaxAbs().Sign() == 0 {
		// Every value is 0 (or NULL): nothing to measure, and L∞ would be 0.
		return aggSpec{}, Output{}, b.errAt(x, pgerr.FeatureNotSupported, "the argument of %s is always 0 or NULL", strings.ToUpper(fn)).
			WithHint("%s", rowExprHint)
	}
	if fn == "sum" {
		m := base
		m.Kind = MeasureSum
		return spec, Output{Name: "sum", Kind: OutputSum, Measure: b.addMeasure(m, col, &iv), PGType: "numeric"}, nil
	}
	// Centre at the midpoint, unless the value is constant (the centred
	// sums would then be identically 0, with L∞ 0).
	centre := ""
	if mid := iv.Midpoint(); mid.Sign() != 0 && iv.Lo.Cmp(iv.Hi) != 0 {
		centre = decimalText(mid)
	}
	sum, cnt := base, base
	sum.Kind, sum.Centre = MeasureSum, centre
	cnt.Kind = MeasureCount
	si, ci := b.addMeasure(sum, col, &iv), b.addMeasure(cnt, col, &iv)
	if fn == "avg" {
		return spec, Output{Name: "avg", Kind: OutputAvg, Measure: si, CountMeasure: ci, PGType: "numeric",
			Lower: lower, Upper: upper}, nil
	}
	// The variance family: PostgreSQL names its output column after the
	// function it was called as; the normalizer has already mapped
	// variance/stddev to their sample forms, which PostgreSQL also names
	// variance/stddev.
	name := fn
	if n := b.callName(x); n != "" {
		name = n
	}
	sq := base
	sq.Kind, sq.Centre = MeasureSumSq, centre
	qi := b.addMeasure(sq, col, &iv)
	return spec, Output{Name: name, Kind: OutputVariance, Measure: si, CountMeasure: ci, SumSqMeasure: qi,
		Sample: strings.HasSuffix(fn, "_samp"), Sqrt: strings.HasPrefix(fn, "stddev"), PGType: "numeric",
		Lower: lower, Upper: upper}, nil
}

// callName is the function name as the analyst wrote it (lower case), so
// that VARIANCE(x) is named "variance" like in PostgreSQL even though the
// normalizer passes it on as VAR_SAMP.
func (b *builder) callName(x *ast.AggregateFuncExpr) string {
	pos := b.norm.srcPos(x.OriginTextPosition())
	toks, err := pgsql.Lex(b.src[pos:])
	if err != nil || len(toks) == 0 {
		return ""
	}
	return strings.ToLower(b.src[pos+toks[0].Pos : pos+toks[0].End])
}

// countDistinct plans COUNT(DISTINCT unit_column): the number of distinct
// units in each group. Only the unit column is supported: after bounding,
// every unit adds exactly 1 to each group it contributes to (L∞ = 1),
// whereas distinct values of another column have no such bound.
func (b *builder) countDistinct(x *ast.AggregateFuncExpr, fn string) (aggSpec, Output, error) {
	hint := fmt.Sprintf("COUNT(DISTINCT %s) counts the privacy units; otherwise use COUNT(*), COUNT(col), SUM(col) or AVG(col)", b.table.UnitColumn)
	if fn != "count" || len(x.Args) != 1 {
		return aggSpec{}, Output{}, b.errAt(x, pgerr.FeatureNotSupported, "%s(DISTINCT …) is not supported", strings.ToUpper(fn)).WithHint("%s", hint)
	}
	arg := x.Args[0]
	if p, ok := arg.(*ast.ParenthesesExpr); ok {
		arg = p.Expr
	}
	c, ok := arg.(*ast.ColumnNameExpr)
	if !ok {
		return aggSpec{}, Output{}, b.errAt(arg, pgerr.FeatureNotSupported, "COUNT(DISTINCT …) of an expression is not supported").WithHint("%s", hint)
	}
	ci, err := b.column(c)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	if !ci.unit {
		return aggSpec{}, Output{}, b.errAt(c, pgerr.FeatureNotSupported, "COUNT(DISTINCT %s) is not supported: only the unit column %s can be counted distinctly", ci.name, b.table.UnitColumn).
			WithHint("%s", hint)
	}
	filter, err := b.aggFilter(x)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	m := b.addMeasure(Measure{Kind: MeasureUnits, Column: ci.name, Filter: filter}, ci.col, nil)
	return aggSpec{fn: "count_distinct", col: ci.name, filter: filter}, Output{Name: "count", Kind: OutputCount, Measure: m, PGType: "int8"}, nil
}

// maxEmittedSQL bounds the emitted SQL: PostgreSQL's work per row grows
// with the expressions and conditions in it, and an 800 KB statement
// became 6.4 MB of SQL doing 20× the work on the rows one person's CASE
// selected (issue 14). 256 KiB is 50 times the largest golden plan.
const maxEmittedSQL = 256 << 10

func checkSQLSize(p *Plan) error {
	if len(p.SQL) > maxEmittedSQL {
		return pgerr.New("54000", "the query is too large to answer: its SQL would be %d bytes, more than %d", len(p.SQL), maxEmittedSQL).
			WithHint("simplify the expressions and conditions, or shorten IN lists")
	}
	return nil
}

// maxMagnitude bounds the values, clamping bounds and L∞ of a measure:
// beyond it (e.g. SUM(cost * 1e300)) the noise would swamp any answer, and
// float64 bounds could overflow to infinity.
const maxMagnitude = 1e100

// addMeasure returns the index of the measure, adding it when new
// (measures are de-duplicated: SUM(cost) and COUNT(*) of two outputs share
// one). col is the measure's column (nil for COUNT(*), expressions and an
// undeclared unit column); iv, when not nil, is the interval of the
// per-row values of an expression or a centred sum, whose bounds are then
// computed from it (exprBounds).
func (b *builder) addMeasure(m Measure, col *policy.Column, iv *sensitivity.Interval) int {
	for i, have := range b.measures {
		if have.Kind == m.Kind && have.Column == m.Column && have.Expr == m.Expr && have.Filter == m.Filter && have.Centre == m.Centre {
			return i
		}
	}
	if iv != nil && (m.Expr != "" || m.Centre != "") {
		m = exprBounds(b.table, m, *iv)
	} else {
		m = measureBounds(b.table, m, col)
	}
	if !(math.Abs(m.Lower) <= maxMagnitude && math.Abs(m.Upper) <= maxMagnitude && m.LInf <= maxMagnitude) && b.rangeErr == nil {
		b.rangeErr = pgerr.New(pgerr.FeatureNotSupported, "the values of an aggregated expression can be too large to answer with useful noise").
			WithHint("rescale the expression so that its values stay below %g, e.g. SUM(cost / 1000.0)", maxMagnitude)
	}
	b.measures = append(b.measures, m)
	return len(b.measures) - 1
}

// keyPGType is the PostgreSQL type reported for a key column.
func keyPGType(k Key) string {
	if k.Private {
		return privateKeyPGType(k.Type)
	}
	if t := dateKeyPGType(k); t != "" {
		return t // PostgreSQL 14+: EXTRACT returns numeric, date_part float8
	}
	switch k.Type {
	case policy.TypeInt:
		for _, v := range k.Domain {
			if x, err := strconv.ParseInt(v, 10, 64); err != nil || x > 1<<31-1 || x < -1<<31 {
				return "int8"
			}
		}
		return "int4"
	case policy.TypeNumeric:
		return "numeric"
	case policy.TypeFloat:
		return "float8"
	case policy.TypeDate:
		return "date"
	case policy.TypeBool:
		return "bool"
	}
	return "text"
}

// orderBy resolves ORDER BY items to outputs (PostgreSQL resolves ORDER BY
// names as output names first, then as input columns).
func (b *builder) orderBy(sel *ast.SelectStmt, p *Plan) error {
	if sel.OrderBy == nil {
		return nil
	}
	for _, item := range sel.OrderBy.Items {
		e := item.Expr
		if pe, ok := e.(*ast.ParenthesesExpr); ok {
			e = pe.Expr
		}
		idx := -1
		switch x := e.(type) {
		case *ast.ColumnNameExpr:
			if x.Name.Table.O == "" {
				for i, o := range p.Outputs {
					if o.Name == x.Name.Name.O {
						if idx >= 0 {
							return b.errAt(x, "42702", "ORDER BY %q is ambiguous", o.Name).WithHint("order by output position instead")
						}
						idx = i
					}
				}
			}
			if idx < 0 {
				ci, err := b.column(x)
				if err != nil {
					return err
				}
				for i, o := range p.Outputs {
					if o.Kind == OutputKey && b.keys[o.Key].Column == ci.name && b.keys[o.Key].Func == "" {
						idx = i
						break
					}
				}
				if idx < 0 {
					return b.errAt(x, pgerr.FeatureNotSupported, "ORDER BY %s: only output columns can be ordered", ci.name).
						WithHint("add %s to the select list or order by an output column", ci.name)
				}
			}
		case *ast.FuncCallExpr:
			// A group key written again (Metabase, Superset: ORDER BY
			// date_trunc('month', d) after GROUP BY date_trunc('month', d)).
			k, _, err := b.exprKey(x)
			if err != nil {
				return err
			}
			idx = b.outputOfKey(p, k)
			if idx < 0 {
				return b.errAt(x, pgerr.FeatureNotSupported, "ORDER BY a group key that is not in the select list is not supported").
					WithHint("add the expression to the select list, or order by an output column name, alias or position")
			}
		case *ast.BinaryOperationExpr:
			k, _, ok, err := b.bucketKey(x)
			if err != nil {
				return err
			}
			if ok {
				idx = b.outputOfKey(p, k)
			}
			if idx < 0 {
				return b.errAt(x, pgerr.FeatureNotSupported, "ORDER BY expressions are not supported").
					WithHint("order by an output column name, alias or position")
			}
		case *ast.AggregateFuncExpr:
			saved := len(b.measures)
			spec, _, err := b.aggregate(x)
			if err != nil {
				return err
			}
			for i, s := range b.aggs {
				if s == spec {
					idx = i
					break
				}
			}
			if idx < 0 || len(b.measures) != saved {
				return b.errAt(x, pgerr.FeatureNotSupported, "ORDER BY an aggregate that is not in the select list is not supported").
					WithHint("add the aggregate to the select list, or order by its output position")
			}
		default:
			l, ok := b.lit(e)
			if !ok {
				return b.errAt(e, pgerr.FeatureNotSupported, "ORDER BY expressions are not supported").
					WithHint("order by an output column name, alias or position")
			}
			pos, err := b.position(e, l, len(p.Outputs), "ORDER BY")
			if err != nil {
				return err
			}
			idx = pos
		}
		p.OrderBy = append(p.OrderBy, OrderItem{Output: idx, Desc: item.Desc})
	}
	return nil
}

// outputOfKey is the position of the output that is group key k, or -1.
func (b *builder) outputOfKey(p *Plan, k Key) int {
	for i, o := range p.Outputs {
		if o.Kind == OutputKey && sameKey(b.keys[o.Key], k) {
			return i
		}
	}
	return -1
}

// limit reads LIMIT and OFFSET (non-negative integer literals; LIMIT ALL
// and LIMIT NULL mean no limit, OFFSET NULL means 0).
func (b *builder) limit(p *Plan) error {
	read := func(l *literal, what string) (int64, bool, error) {
		if l == nil || l.kind == litNull {
			return 0, false, nil
		}
		at := pgsql.CharPos(b.src, l.pos)
		v, err := strconv.ParseInt(l.val, 10, 64)
		if err != nil {
			return 0, false, pgerr.New("22P02", "invalid %s %s", what, l.val).WithPosition(at).
				WithHint("write a non-negative integer")
		}
		if v < 0 {
			code := "2201W"
			if what == "OFFSET" {
				code = "2201X"
			}
			return 0, false, pgerr.New(code, "%s must not be negative", what).WithPosition(at).
				WithHint("write a non-negative integer")
		}
		return v, true, nil
	}
	v, ok, err := read(b.norm.limit, "LIMIT")
	if err != nil {
		return err
	}
	if ok {
		p.Limit = v
	}
	v, _, err = read(b.norm.offset, "OFFSET")
	if err != nil {
		return err
	}
	p.Offset = v
	return nil
}

func isUndefinedColumn(err error) bool {
	pe, ok := pgerr.As(err)
	return ok && pe.Code == pgerr.UndefinedColumn
}

// queryBounds sets the contribution bounds of this query (see "Bounds per
// query"): b.table becomes a copy of the policy table with this query's
// max_rows_per_unit and max_groups_per_unit. Joins keep the policy's.
func (b *builder) queryBounds(sel *ast.SelectStmt) error {
	t := b.table
	rows, groups := t.MaxRowsPerUnit, t.MaxGroupsPerUnit
	if r := b.opts.MaxRowsPerUnit; r > 0 {
		if r > rows*max(groups, 1) || len(b.keys) > 0 && r > rows {
			return b.errAt(sel, pgerr.InvalidParameterValue, "dp.max_rows_per_unit = %d is looser than the policy of %s allows (%d per group, %d in all)", r, t.Name, rows, rows*groups).
				WithHint("a session may only tighten contribution bounds: SET dp.max_rows_per_unit to at most %d, or RESET it", rows)
		}
	}
	if g := b.opts.MaxGroupsPerUnit; g > 0 {
		if g > groups {
			return b.errAt(sel, pgerr.InvalidParameterValue, "dp.max_groups_per_unit = %d is looser than the policy of %s allows (%d)", g, t.Name, groups).
				WithHint("a session may only tighten contribution bounds: SET dp.max_groups_per_unit to at most %d, or RESET it", groups)
		}
		groups = g
	}
	if b.join != nil {
		if b.opts.MaxRowsPerUnit > 0 || b.opts.MaxGroupsPerUnit > 0 {
			return b.errAt(sel, pgerr.FeatureNotSupported, "dp.max_rows_per_unit and dp.max_groups_per_unit do not apply to joins yet").
				WithHint("RESET dp.max_rows_per_unit; RESET dp.max_groups_per_unit")
		}
		return nil
	}
	if len(b.keys) == 0 {
		rows *= groups // the unit's whole allowance in the one group
	}
	if r := b.opts.MaxRowsPerUnit; r > 0 {
		rows = min(rows, r)
	}
	if rows == t.MaxRowsPerUnit && groups == t.MaxGroupsPerUnit {
		return nil
	}
	view := *t
	view.MaxRowsPerUnit, view.MaxGroupsPerUnit = rows, groups
	b.table = &view
	return nil
}
