package rewrite

import (
	"slices"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

// Split splits a simple-query string into statements at top-level
// semicolons, honouring PostgreSQL quoting and comments. Empty statements
// (only whitespace/comments) between semicolons are dropped, except that a
// string with no statement at all yields one empty statement.
//
// Each returned statement is the exact source text between two semicolons
// (comments included, semicolons excluded), so positions in later errors
// are relative to the statement.
func Split(sql string) ([]string, error) {
	toks, err := lex(sql)
	if err != nil {
		return nil, err
	}
	var out []string
	// Every ';' token ends a statement, even inside parentheses: no
	// PostgreSQL statement has one there, so for valid SQL this is the
	// split PostgreSQL makes, and for invalid SQL no statement can hide
	// inside another one's parentheses from Classify.
	start, n := 0, 0 // start of the current statement; tokens in it
	for _, t := range toks {
		if t.isPunct(";") {
			if n > 0 {
				out = append(out, sql[start:t.pos])
			}
			start, n = t.end, 0
			continue
		}
		n++
	}
	if n > 0 {
		out = append(out, sql[start:])
	}
	if len(out) == 0 {
		out = []string{""}
	}
	return out, nil
}

// sessionKeywords start statements the proxy answers itself.
var sessionKeywords = map[string]bool{
	"set": true, "show": true, "reset": true, "begin": true, "start": true,
	"commit": true, "end": true, "rollback": true, "abort": true,
	"discard": true, "deallocate": true, "savepoint": true, "release": true,
}

// refusedKeywords start statements that write, execute or hold server-side
// state. They are refused on every route.
var refusedKeywords = map[string]bool{
	"insert": true, "update": true, "delete": true, "merge": true, "truncate": true,
	"copy": true, "create": true, "drop": true, "alter": true, "grant": true,
	"revoke": true, "call": true, "do": true, "listen": true, "notify": true,
	"unlisten": true, "vacuum": true, "analyze": true, "analyse": true, "lock": true,
	"prepare": true, "execute": true, "load": true, "cluster": true, "reindex": true,
	"refresh": true, "security": true, "comment": true, "import": true,
	"reassign": true, "checkpoint": true, "declare": true, "fetch": true,
	"move": true, "close": true,
}

// refusedFunctions have side effects beyond reading (session or server
// state, files, sleeping, other connections). They are refused on every
// route, even though the shadow catalog's role could not do much with
// most of them: set_config would desynchronize the session settings the
// proxy tracks, and pg_sleep holds a shadow connection.
var refusedFunctions = map[string]bool{
	"set_config": true, "pg_sleep": true, "pg_sleep_for": true, "pg_sleep_until": true,
	"pg_terminate_backend": true, "pg_cancel_backend": true, "pg_reload_conf": true,
	"pg_rotate_logfile": true, "pg_read_file": true, "pg_read_binary_file": true,
	"pg_ls_dir": true, "pg_stat_file": true, "lo_import": true, "lo_export": true,
	"lo_create": true, "lo_unlink": true, "lo_from_bytea": true, "lo_put": true,
	"nextval": true, "setval": true, "pg_notify": true, "dblink": true, "dblink_exec": true,
	"dblink_connect": true, "pg_advisory_lock": true, "pg_advisory_xact_lock": true,
	"pg_try_advisory_lock": true, "pg_try_advisory_xact_lock": true, "pg_switch_wal": true,
	"pg_create_restore_point": true, "pg_promote": true, "pg_logical_emit_message": true,
	// Session state on the shadow connection, which sessions share
	// (internal/shadow, "Connection pooling").
	"pg_advisory_lock_shared": true, "pg_try_advisory_lock_shared": true,
	"pg_advisory_xact_lock_shared": true, "pg_try_advisory_xact_lock_shared": true,
	"pg_advisory_unlock": true, "pg_advisory_unlock_shared": true, "pg_advisory_unlock_all": true,
	"setseed": true,
}

func refuseWrite(src string, t token) *pgerr.Error {
	return pgerr.New(pgerr.InsufficientPrivilege, "%s statements are not allowed through dpproxy", strings.ToUpper(t.val)).
		WithPosition(charPos(src, t.pos)).
		WithHint("dpproxy answers only aggregate SELECT queries, e.g. SELECT department, COUNT(*) FROM visits GROUP BY department")
}

// Classify decides the route of one statement (as returned by Split). For
// RouteRefuse the error says why and what to do instead.
//
// The rules, in order:
//   - nothing but whitespace and comments: RouteEmpty;
//   - SET ROLE, SET SESSION AUTHORIZATION, SET CONSTRAINTS and two-phase
//     commit are refused (savepoints are emulated: proxy/session.go);
//   - SET/SHOW/RESET/BEGIN/START TRANSACTION/COMMIT/END/ROLLBACK/ABORT/
//     DISCARD/DEALLOCATE: RouteSession (see ParseSession);
//   - statements that write or execute (INSERT, UPDATE, DELETE, COPY, DDL,
//     GRANT, CALL, DO, PREPARE, EXECUTE, cursors, SELECT … INTO, data-
//     modifying WITH, EXPLAIN of any of these…): RouteRefuse with 42501;
//   - a SELECT (or WITH, TABLE, VALUES) that provably returns no rows
//     whatever the data (see provablyEmpty: a top-level LIMIT 0, or a
//     plain SELECT with no aggregate filtered by WHERE 1 = 0, as BI tools
//     send to learn a query's result types): RouteCatalog, because the
//     shadow, with the same columns and no rows, gives the same (empty)
//     answer with the same column types;
//   - any identifier (quoted or not, compared case-insensitively) equal to
//     the name of a protected table: RouteDP. This is deliberately
//     conservative: a column or alias that happens to share the name also
//     routes to the DP path, which then refuses what it cannot answer;
//   - calls of functions with side effects (set_config, pg_sleep,
//     pg_read_file, lo_import, nextval, dblink, advisory locks…): refused
//     with 42501;
//   - everything else: RouteCatalog (the shadow catalog holds no rows of
//     protected tables, only those of public tables, so a misrouted
//     statement there can reveal nothing protected).
func Classify(ds *policy.Dataset, stmt string) (Route, error) {
	toks, err := lex(stmt)
	if err != nil {
		return RouteRefuse, err
	}
	if len(toks) == 0 {
		return RouteEmpty, nil
	}
	first := toks[0]
	// A leading parenthesis is a parenthesized query: classify what it holds.
	i := 0
	for i < len(toks) && toks[i].isPunct("(") {
		i++
	}
	if i < len(toks) {
		first = toks[i]
	}
	if first.kind == tokIdent && !first.quoted {
		if i == 0 {
			switch first.val {
			case "declare", "copy":
				route, _, err := classifyWrapper(ds, stmt, toks)
				return route, err
			case "fetch", "move", "close", "unlisten":
				return RouteSession, nil
			}
			if isUnlockAll(toks) {
				return RouteSession, nil
			}
		}
		if i == 0 && sessionKeywords[first.val] {
			if err := refuseSession(stmt, toks); err != nil {
				return RouteRefuse, err
			}
			return RouteSession, nil
		}
		if err := refuseWrites(stmt, toks[i:]); err != nil {
			return RouteRefuse, err
		}
	}
	if namesProtected(ds, toks) && !provablyEmpty(toks) {
		return RouteDP, nil
	}
	return RouteCatalog, nil
}

// provablyEmpty reports whether a query returns no rows on every database
// with its schema, by its syntax alone. It is the reason a statement that
// names protected tables may go to the shadow catalog (same columns, no
// rows): the shadow's answer then equals the real one, so nothing about
// the data is shown or misrepresented. Only two certain forms qualify:
//
//   - a LIMIT 0 (or FETCH FIRST 0 ROWS ONLY) at the top level of a query
//     (parenthesis depth 0, so not in a subquery, CTE or one branch of a
//     set operation), optionally followed by OFFSET n: the result is cut to
//     no rows whatever the query computes;
//   - a plain SELECT (no WITH, no set operation, no GROUP BY, HAVING or
//     WINDOW) whose top-level WHERE is exactly a constant false predicate
//     (FALSE, or n = m, n <> m, n != m on integer literals that make it
//     false, in optional parentheses), followed only by ORDER BY, LIMIT,
//     OFFSET or FETCH, with no parenthesis in the select list or after the
//     WHERE. The WHERE leaves no input row; without an aggregate (which
//     needs a parenthesis: count(*), and would make one row of an empty
//     input) no output row is made either.
//
// Anything else, including equivalent forms this does not recognise,
// returns false (and keeps its usual route).
func provablyEmpty(toks []token) bool {
	i := 0
	for i < len(toks) && toks[i].isPunct("(") {
		i++
	}
	if i == len(toks) || !(toks[i].is("select") || toks[i].is("with") || toks[i].is("table") || toks[i].is("values")) {
		return false
	}
	// depth[k] is the parenthesis depth of toks[k].
	depth := make([]int, len(toks))
	d := 0
	for k, t := range toks {
		if t.isPunct(")") || t.isPunct("]") {
			d--
			if d < 0 {
				return false
			}
		}
		depth[k] = d
		if t.isPunct("(") || t.isPunct("[") {
			d++
		}
	}
	if d != 0 {
		return false
	}
	for k, t := range toks {
		if depth[k] != 0 {
			continue
		}
		if t.is("limit") && k+1 < len(toks) && isZero(toks[k+1]) && offsetOnly(toks[k+2:]) {
			return true
		}
		if t.is("fetch") && k+5 == len(toks) && (toks[k+1].is("first") || toks[k+1].is("next")) &&
			isZero(toks[k+2]) && (toks[k+3].is("row") || toks[k+3].is("rows")) && toks[k+4].is("only") {
			return true
		}
	}
	return i == 0 && falseWhere(toks, depth)
}

// falseWhere is the WHERE-false form of provablyEmpty.
func falseWhere(toks []token, depth []int) bool {
	if !toks[0].is("select") {
		return false
	}
	where, tail := -1, len(toks)
	for k, t := range toks {
		if depth[k] != 0 {
			continue
		}
		switch {
		case t.is("union"), t.is("intersect"), t.is("except"), t.is("group"), t.is("having"), t.is("window"):
			return false
		case t.is("where"):
			if where >= 0 {
				return false
			}
			where = k
		case t.is("from"), t.is("select"):
			if where >= 0 {
				return false // a FROM or SELECT after the WHERE: not a plain SELECT
			}
		case t.is("order"), t.is("limit"), t.is("offset"), t.is("fetch"):
			if where >= 0 && tail == len(toks) {
				tail = k
			}
		}
	}
	if where < 0 {
		return false
	}
	// No parenthesis in the select list or after the WHERE: no aggregate,
	// window function or subquery there.
	for k := 1; k < len(toks); k++ {
		if toks[k].is("from") && depth[k] == 0 {
			break
		}
		if toks[k].isPunct("(") {
			return false
		}
	}
	for _, t := range toks[tail:] {
		if t.isPunct("(") {
			return false
		}
	}
	pred := toks[where+1 : tail]
	for len(pred) >= 2 && pred[0].isPunct("(") && pred[len(pred)-1].isPunct(")") {
		pred = pred[1 : len(pred)-1]
	}
	switch {
	case len(pred) == 1:
		return pred[0].is("false")
	case len(pred) == 3:
		a, b := intLiteral(pred[0]), intLiteral(pred[2])
		if a == "" || b == "" {
			return false
		}
		switch {
		case pred[1].isOp("="):
			return a != b
		case pred[1].isOp("<>"), pred[1].isOp("!="):
			return a == b
		}
	}
	return false
}

// intLiteral returns an unsigned integer literal's digits without leading
// zeros ("0" for zero), or "" if t is not one.
func intLiteral(t token) string {
	if t.kind != tokNumber || t.val == "" {
		return ""
	}
	for _, c := range t.val {
		if c < '0' || c > '9' {
			return ""
		}
	}
	v := strings.TrimLeft(t.val, "0")
	if v == "" {
		v = "0"
	}
	return v
}

func isZero(t token) bool { return intLiteral(t) == "0" }

// offsetOnly reports whether toks is empty or exactly OFFSET n [ROW|ROWS].
func offsetOnly(toks []token) bool {
	switch {
	case len(toks) == 0:
		return true
	case len(toks) == 2:
		return toks[0].is("offset") && intLiteral(toks[1]) != ""
	case len(toks) == 3:
		return toks[0].is("offset") && intLiteral(toks[1]) != "" && (toks[2].is("row") || toks[2].is("rows"))
	}
	return false
}

// namesProtected reports whether any identifier token names a protected
// table.
func namesProtected(ds *policy.Dataset, toks []token) bool {
	if ds == nil {
		return false
	}
	for _, t := range toks {
		if t.kind != tokIdent {
			continue
		}
		if tb, ok := ds.Tables[strings.ToLower(t.val)]; ok && !tb.Public {
			return true
		}
	}
	return false
}

// refuseSession refuses the session statements dpproxy does not emulate.
func refuseSession(src string, toks []token) error {
	kw := toks[0].val
	at := func(i int, w string) bool { return i < len(toks) && toks[i].is(w) }
	switch kw {
	case "set":
		j := 1
		if at(j, "session") || at(j, "local") {
			if at(j, "session") && at(j+1, "characteristics") {
				return nil
			}
			j++
		}
		if at(j, "role") || at(j, "session") && at(j+1, "authorization") || at(j, "authorization") {
			return pgerr.New(pgerr.InsufficientPrivilege, "changing the role is not allowed through dpproxy").
				WithPosition(charPos(src, toks[0].pos)).
				WithHint("connect as the analyst you want to be")
		}
		if at(j, "constraints") {
			return pgerr.New(pgerr.FeatureNotSupported, "SET CONSTRAINTS is not supported").
				WithPosition(charPos(src, toks[0].pos)).
				WithHint("dpproxy answers only aggregate SELECT queries; constraints are never checked")
		}
	case "rollback", "abort":
		for _, t := range toks[1:] {
			if t.is("prepared") {
				return twoPhaseErr(src, toks[0])
			}
		}
	case "commit", "end":
		if len(toks) > 1 && toks[1].is("prepared") {
			return twoPhaseErr(src, toks[0])
		}
	}
	return nil
}

func twoPhaseErr(src string, t token) *pgerr.Error {
	return pgerr.New(pgerr.FeatureNotSupported, "two-phase commit is not supported by dpproxy").
		WithPosition(charPos(src, t.pos)).
		WithHint("use plain BEGIN/COMMIT")
}

// refuseWrites refuses statements that write or execute, looking through
// EXPLAIN and WITH.
func refuseWrites(src string, toks []token) error {
	if len(toks) == 0 {
		return nil
	}
	first := toks[0]
	if refusedKeywords[first.val] {
		return refuseWrite(src, first)
	}
	if first.val == "explain" {
		// EXPLAIN [ANALYZE] [VERBOSE] [( options )] statement
		j := 1
		for j < len(toks) {
			t := toks[j]
			if t.isPunct("(") {
				for j < len(toks) && !toks[j].isPunct(")") {
					j++
				}
				j++
				continue
			}
			if t.is("analyze") || t.is("analyse") || t.is("verbose") {
				j++
				continue
			}
			break
		}
		for j < len(toks) && toks[j].isPunct("(") {
			j++
		}
		if j < len(toks) && toks[j].is("explain") {
			return syntaxErr(src, toks[j].pos, "syntax error at or near \"explain\"")
		}
		return refuseWrites(src, toks[j:])
	}
	// Anywhere in a query: functions with side effects, data-modifying
	// CTEs and SELECT … INTO.
	for k, t := range toks {
		if t.kind != tokIdent {
			continue
		}
		if refusedFunctions[strings.ToLower(t.val)] && k+1 < len(toks) && toks[k+1].isPunct("(") {
			return pgerr.New(pgerr.InsufficientPrivilege, "function %s is not allowed through dpproxy", strings.ToLower(t.val)).
				WithPosition(charPos(src, t.pos)).
				WithHint("dpproxy answers aggregate SELECT queries and catalog look-ups; session settings are changed with SET")
		}
		if t.quoted {
			continue
		}
		switch t.val {
		case "insert", "delete", "merge", "truncate":
			if first.val == "with" {
				return refuseWrite(src, t)
			}
		case "update":
			// FOR UPDATE / FOR NO KEY UPDATE lock rows; otherwise a
			// data-modifying CTE.
			if k > 0 && (toks[k-1].is("for") || toks[k-1].is("key")) {
				return pgerr.New(pgerr.FeatureNotSupported, "row locks (FOR UPDATE) are not supported").
					WithPosition(charPos(src, t.pos)).
					WithHint("remove the locking clause; dpproxy is read-only")
			}
			if first.val == "with" {
				return refuseWrite(src, t)
			}
		case "share":
			if k > 0 && (toks[k-1].is("for") || toks[k-1].is("key")) {
				return pgerr.New(pgerr.FeatureNotSupported, "row locks (FOR SHARE) are not supported").
					WithPosition(charPos(src, t.pos)).
					WithHint("remove the locking clause; dpproxy is read-only")
			}
		case "into":
			if first.val == "select" || first.val == "with" || first.val == "table" || first.val == "values" {
				return pgerr.New(pgerr.InsufficientPrivilege, "SELECT … INTO creates a table and is not allowed through dpproxy").
					WithPosition(charPos(src, t.pos)).
					WithHint("remove INTO …; dpproxy answers only aggregate SELECT queries")
			}
		}
	}
	return nil
}

// DistinctValues is the answer to a SELECT DISTINCT of a column whose
// values the policy declares public (public_values): the declared list is
// public, so the proxy answers from the policy without reading data or
// spending budget. Like a DP GROUP BY on the column, it returns exactly the
// declared keys, whatever the data holds.
type DistinctValues struct {
	Table  string // lower-case table name
	Column string // lower-case column name
	Name   string // the result column's name (the alias, or the column)
	PGType string // the result type, as for a key column of a plan
	Values []string
}

// PublicDistinct recognises
//
//	SELECT DISTINCT col [[AS] alias] FROM [schema.]table [[AS] alias]
//	  [GROUP BY col | alias | 1]
//	  [ORDER BY col | alias | 1 [ASC | DESC] [NULLS FIRST | LAST]] [LIMIT n]
//
// or the same without DISTINCT and with the GROUP BY (the filter
// drop-downs of BI tools: SELECT department FROM visits GROUP BY
// department ORDER BY department)
// (col optionally qualified by the table, its alias or schema.table) on a
// visible column with public values of a protected table of ds, and returns its
// answer: the declared values, sorted when ORDER BY asks (numbers by value,
// booleans false first, text and dates by bytes, i.e. as COLLATE "C"),
// cut to LIMIT. It returns nil for any other statement.
func PublicDistinct(ds *policy.Dataset, stmt string) *DistinctValues {
	if ds == nil {
		return nil
	}
	toks, err := lex(stmt)
	if err != nil {
		return nil
	}
	p := &distinctParser{toks: toks}
	if !p.kw("select") {
		return nil
	}
	distinct := p.kw("distinct")
	colRef := p.name()
	if colRef == nil || len(colRef) > 3 {
		return nil
	}
	outAlias := p.alias("from")
	if !p.kw("from") {
		return nil
	}
	tblRef := p.name()
	if tblRef == nil || len(tblRef) > 2 {
		return nil
	}
	tb, ok := ds.Table(tblRef[len(tblRef)-1])
	// A public table's rows are in the shadow catalog (internal/shadow,
	// mirror.go): its real distinct values answer, not the declared ones.
	if !ok || tb.Name != tblRef[len(tblRef)-1] || tb.Public {
		return nil
	}
	schema := tb.Schema
	if schema == "" {
		schema = "public"
	}
	if len(tblRef) == 2 && tblRef[0] != schema {
		return nil
	}
	tblAlias := p.alias("group", "order", "limit", "fetch")
	col, ok := tb.Column(colRef[len(colRef)-1])
	if !ok || col.Hidden || col.Name != colRef[len(colRef)-1] || len(col.PublicValues) == 0 {
		return nil
	}
	// resolves reports whether a column reference names the column.
	resolves := func(ref []string) bool {
		if ref[len(ref)-1] != col.Name {
			return false
		}
		switch len(ref) {
		case 1:
			return true
		case 2:
			if tblAlias != "" {
				return ref[0] == tblAlias
			}
			return ref[0] == tb.Name
		case 3:
			return tblAlias == "" && ref[0] == schema && ref[1] == tb.Name
		}
		return false
	}
	if !resolves(colRef) {
		return nil
	}
	name := col.Name
	if outAlias != "" {
		name = outAlias
	}
	values := append([]string(nil), col.PublicValues...)
	// byOutput reads the one key of GROUP BY or ORDER BY: 1, the column
	// or its output alias.
	byOutput := func() bool {
		if t, ok := p.peek(); ok && t.kind == tokNumber {
			p.i++
			return t.val == "1"
		}
		ref := p.name()
		return ref != nil && (resolves(ref) || len(ref) == 1 && outAlias != "" && ref[0] == outAlias)
	}
	grouped := false
	if p.kw("group") {
		if !p.kw("by") || !byOutput() {
			return nil
		}
		grouped = true
	}
	if !distinct && !grouped {
		return nil
	}
	if p.kw("order") {
		if !p.kw("by") || !byOutput() {
			return nil
		}
		desc := false
		if p.kw("desc") {
			desc = true
		} else {
			p.kw("asc")
		}
		if p.kw("nulls") && !p.kw("first") && !p.kw("last") {
			return nil
		}
		sortValues(values, col.Type, desc)
	}
	if p.kw("limit") {
		t, ok := p.peek()
		if !ok || intLiteral(t) == "" {
			return nil
		}
		p.i++
		n, err := strconv.Atoi(intLiteral(t))
		if err != nil {
			return nil
		}
		if n < len(values) {
			values = values[:n]
		}
	}
	if p.i != len(toks) {
		return nil
	}
	return &DistinctValues{
		Table: tb.Name, Column: col.Name, Name: name,
		PGType: keyPGType(Key{Column: col.Name, Type: col.Type, Domain: col.PublicValues}),
		Values: values,
	}
}

// distinctParser walks the tokens of PublicDistinct's statement form.
type distinctParser struct {
	toks []token
	i    int
}

func (p *distinctParser) peek() (token, bool) {
	if p.i < len(p.toks) {
		return p.toks[p.i], true
	}
	return token{}, false
}

// kw consumes the unquoted keyword w if it comes next.
func (p *distinctParser) kw(w string) bool {
	if t, ok := p.peek(); ok && t.is(w) {
		p.i++
		return true
	}
	return false
}

// name consumes a dotted name (ident {. ident}) and returns its parts
// (unquoted parts folded to lower case, quoted ones exact), or nil.
func (p *distinctParser) name() []string {
	var parts []string
	for {
		t, ok := p.peek()
		if !ok || t.kind != tokIdent {
			return nil
		}
		parts = append(parts, t.val)
		p.i++
		if t, ok := p.peek(); !ok || !t.isPunct(".") {
			return parts
		}
		p.i++
	}
}

// alias consumes "AS ident" or a bare identifier that is not one of the
// given keywords, and returns it ("" if none).
func (p *distinctParser) alias(stop ...string) string {
	if p.kw("as") {
		if t, ok := p.peek(); ok && t.kind == tokIdent {
			p.i++
			return t.val
		}
		p.i = len(p.toks) + 1 // malformed: make the statement fail to match
		return ""
	}
	t, ok := p.peek()
	if !ok || t.kind != tokIdent {
		return ""
	}
	for _, s := range stop {
		if t.is(s) {
			return ""
		}
	}
	p.i++
	return t.val
}

// sortValues sorts public values as PostgreSQL orders the column's type
// (text and dates by bytes, as COLLATE "C"; YYYY-MM-DD dates sort so).
func sortValues(vs []string, typ policy.Type, desc bool) {
	less := func(a, b string) int { return strings.Compare(a, b) }
	switch typ {
	case policy.TypeInt, policy.TypeNumeric, policy.TypeFloat:
		less = func(a, b string) int {
			x, errA := strconv.ParseFloat(a, 64)
			y, errB := strconv.ParseFloat(b, 64)
			if errA != nil || errB != nil || x == y {
				return strings.Compare(a, b)
			}
			if x < y {
				return -1
			}
			return 1
		}
	case policy.TypeBool:
		rank := func(v string) int {
			if strings.EqualFold(v, "true") {
				return 1
			}
			return 0
		}
		less = func(a, b string) int { return rank(a) - rank(b) }
	}
	slices.SortStableFunc(vs, func(a, b string) int {
		if desc {
			return less(b, a)
		}
		return less(a, b)
	})
}
