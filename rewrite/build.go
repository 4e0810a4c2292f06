package rewrite

import (
	"strings"
	"sync"
	"time"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
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
	// warnings become Plan.Warnings (pred.go noteUndeclared).
	warnings []string
	ds       *policy.Dataset
	src      string
	norm     *normalized
	table    *policy.Table
	alias    string // the FROM alias, or "" (then the table name qualifies)

	keys     []Key
	keyCols  []*policy.Column
	measures []Measure
	outputs  []Output
	aggs     []aggSpec // per output; fn "" for keys
	where    dpplan.Pred

	filters map[*ast.AggregateFuncExpr]ast.ExprNode // FILTER conditions (filter.go)
	// synthLits are constants of expressions the planner wrote itself
	// (regrstats.go), which have no place in the analyst's text.
	synthLits map[ast.ExprNode]literal
	// regrOutputs: the select-list position of each statistic call
	// regrFromSums rewrote, by regrKey.
	regrOutputs map[string]int
	rangeErr    *pgerr.Error // set by addMeasure for an unbounded measure
	rowOps      int          // units of work of the values inside aggregates (rowexpr.go maxRowOps)
	predOps     int          // per-row work of CASE key conditions (dpplan.PredWork), which the plan holds as SQL text
	// derived: the derived keys planned, by expression node, and the
	// values of their domains (keyexpr.go memoKey).
	derived       map[derivedID]derivedKey
	derivedValues int

	hidden     []Output  // aggregates used by expressions and HAVING
	hiddenAggs []aggSpec // per hidden output

	join *joinState // a FROM clause with joins (join.go), else nil
	opts Options    // session settings (SET dp.…)
	// tsCast: a cast of a column to timestamp[tz] was dropped (cast.go),
	// so an untyped literal may be compared as a timestamp (datefold.go).
	tsCast bool
	// intCasts are the casts to integer types and text dropped by
	// cast.go: the operand's byte offset → int2, int4, int8 or text.
	intCasts map[int]string
	sa       []dpplan.SampleCall // sample-and-aggregate calls of the select list (sampleagg.go)
}

// aggSpec is an aggregate call of the select list.
type aggSpec struct {
	fn     string        // "count", "sum", "avg"
	col    string        // "" for COUNT(*) and expressions
	expr   *dpplan.Value // an expression argument (rowexpr.go), or nil
	filter dpplan.Pred   // FILTER (WHERE …), or nil
}

// same reports whether two aggregates are the same call (their
// expressions and conditions compared by value: a Pred may hold slices,
// which == cannot compare).
func (a aggSpec) same(b aggSpec) bool {
	return a.fn == b.fn && a.col == b.col && sameValue(a.expr, b.expr) && samePred(a.filter, b.filter)
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

// maxWhereWork bounds a WHERE clause's per-row work (dpplan.PredWork), and
// that of all of a query's conditions together (WHERE, FILTER, CASE keys):
// a chain of 900 comparisons (a BI tool's selection) fits; the work bound
// then weighs every row by it (dpplan.WorkOf), so on a large table such a
// plan may still be refused for its time.
const maxWhereWork = 1024

// plan parses and validates the statement and builds the plan.
func plan(ds *policy.Dataset, stmt string, opts Options) (*Plan, error) {
	orig := stmt
	if opts.Now.IsZero() {
		// The one clock read of this statement (reldate.go); the
		// automatic bounds and clipping plan it again at the same instant.
		opts.Now = time.Now()
	}
	stmt, tsCast, intCasts := blankCastsTyped(stmt) // cast.go: value-preserving casts of columns
	n, err := normalizeAt(stmt, clockOf(opts))
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
		if toks, lerr := pgsql.LexN(stmt[pos:], 1); lerr == nil && len(toks) > 0 {
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
	b := &builder{ds: ds, src: stmt, norm: n, opts: opts, tsCast: tsCast, intCasts: intCasts}
	if err := b.checkDepth(sel); err != nil { // depth.go
		return nil, err
	}
	if sel.Fields != nil && len(sel.Fields.Fields) > maxTargetList {
		// PostgreSQL's own limit and error; checked before the select list
		// is planned, whose cost grows faster than its length.
		return nil, pgerr.New("54011", "target lists can have at most %d entries", maxTargetList).
			WithHint("select fewer columns, or split the query")
	}
	p, err := b.build(sel)
	if err == nil {
		err = checkSQLSize(p)
	}
	if err != nil {
		return nil, err
	}
	if opts.AutoBounds && opts.MaxRowsPerUnit == 0 && opts.MaxGroupsPerUnit == 0 && ratioOnly(p) {
		return oneWeight(ds, orig, opts) // autobounds.go
	}
	if opts.AutoBounds && opts.MaxRowsPerUnit == 0 && autoEligible(p) {
		if err := addAutoBounds(ds, orig, opts, p); err != nil { // autobounds.go
			return nil, err
		}
		p.Fingerprint = dpplan.Fingerprint(p)
	}
	p.OneWeight = opts.OneWeight // autobounds.go
	if opts.AutoClip {
		addAutoClip(ds, orig, opts, p) // autoclip.go
	}
	p.Work = dpplan.WorkOf(ds, p) // dpplan/work.go
	p.Fingerprint = dpplan.Fingerprint(p)
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
			WithHint("%s", distinctHint)
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
		// Every row pays for the WHERE clause: bound its work (issue 27:
		// 900 ILIKEs of 248 characters cost 0.46 ms per row, seconds per
		// query that no row count showed).
		if n := dpplan.PredWork(w); n > maxWhereWork {
			return nil, b.errAt(sel.Where, "54001", "the WHERE clause is too complex: %d units of work per row, over %d", n, maxWhereWork).
				WithHint("use fewer conditions or shorter LIKE patterns (each condition is 1 unit, a LIKE 1 more per 16 characters of its pattern and, with a %% before more of the pattern, its scans of up to 256 bytes: EXPLAIN shows the work; an IN list 1 more per 1000 values)")
		}
	}
	if err := b.groupBy(sel); err != nil {
		return nil, err
	}
	b.narrowKeys()                             // narrow.go
	if err := b.queryBounds(sel); err != nil { // dpplan/bounds.go
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
		Warnings: b.warnings,
	}
	if err := b.orderBy(sel, p); err != nil {
		return nil, err
	}
	if err := b.limit(p); err != nil {
		return nil, err
	}
	p.MaxGroupsPerUnit = dpplan.MaxGroupsPerUnit(b.table, b.keys)
	// The dataset's minimum of units per cell: release checks that the
	// plan carries it (release/minunits.go).
	p.MinUnits = b.ds.MinUnitsPerCell
	// Every row pays for the WHERE clause, for each aggregate's FILTER and
	// for a CASE key's conditions alike (attack round 57: 200 ILIKEs in a
	// FILTER or a CASE key planned as a plain count, their work 27–52× its
	// time slot): their total is bounded as the WHERE clause's is, and
	// the work bound weighs every row by it. A FILTER counts once for each
	// measure that carries it, as the emitter evaluates it (a CASE per
	// measure: a variance's three).
	if n := dpplan.CondWork(p, b.where) + b.predOps; n > maxWhereWork {
		return nil, b.errAt(sel, "54001", "the query's conditions are too complex: %d units of work per row (WHERE, FILTER and CASE conditions together), over %d", n, maxWhereWork).
			WithHint("use fewer conditions or shorter LIKE patterns (each condition is 1 unit, a LIKE 1 more per 16 characters of its pattern and, with a %% before more of the pattern, its scans of up to 256 bytes: EXPLAIN shows the work; an IN list 1 more per 1000 values)")
	}
	if b.join == nil {
		p.RowsPerUnit = b.table.MaxRowsPerUnit
	}
	if len(b.sa) > 0 {
		if err := b.sampleAggPlan(sel, p); err != nil { // sampleagg.go
			return nil, err
		}
		p.RowOps = dpplan.RowOpsOf(p, b.where) + b.predOps
		p.Fingerprint = dpplan.Fingerprint(p)
		return p, nil
	}
	shareSums(p) // centre.go
	if b.join != nil {
		b.finishJoin(p)
	}
	dpplan.ScaledMeasures(p) // dpplan/bounds.go
	if !b.opts.NoBias {
		addRemoved(b.table, p) // bias.go
	}
	fitQuantileGrids(p) // quantile.go
	// The per-row work of the plan's conditions and values as the emitted
	// SQL evaluates them (dpplan.RowOpsOf, which release checks), and of
	// the CASE keys' conditions, which the plan holds as SQL text.
	p.RowOps = dpplan.RowOpsOf(p, b.where) + b.predOps
	p.SQL = pgemit.SQL(b.table, p, b.where)
	dpplan.SetSource(p, b.table, b.where)
	p.Fingerprint = dpplan.Fingerprint(p)
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
	if l, ok := b.synthLits[e]; ok {
		return l, true // a constant the planner wrote (regrstats.go)
	}
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
	case *ast.FuncCallExpr:
		// date('2023-01-01') (SQLAlchemy's func.date): the date literal,
		// as PostgreSQL reads it (a cast of the constant to date).
		if strings.EqualFold(x.FnName.O, "date") && len(x.Args) == 1 {
			if l, ok := b.lit(x.Args[0]); ok && l.kind == litString && (l.typ == "" || l.typ == policy.TypeDate || l.typ == policy.TypeText) {
				l.typ = policy.TypeDate
				return l, true
			}
		}
	}
	return literal{}, false
}

func checkSQLSize(p *Plan) error { return pgemit.CheckSize(p.SQL) }

func isUndefinedColumn(err error) bool {
	pe, ok := pgerr.As(err)
	return ok && pe.Code == pgerr.UndefinedColumn
}
