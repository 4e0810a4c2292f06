package pgsql

import (
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

// Route is where the proxy sends a statement.
type Route int

// Routes.
const (
	RouteEmpty   Route = iota // only whitespace and comments
	RouteSession              // SET/SHOW/RESET/BEGIN/COMMIT/ROLLBACK…: answered by the proxy
	RouteCatalog              // names no protected table: the shadow catalog
	RouteDP                   // names a protected table: the DP path
	RouteRefuse               // never answered (writes, COPY, …); see the error
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
	toks, err := Lex(sql)
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
		if t.IsPunct(";") {
			if n > 0 {
				out = append(out, sql[start:t.Pos])
			}
			start, n = t.End, 0
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

// StatementKeyword reports whether word, a folded unquoted keyword, can
// start a PostgreSQL statement (its grammar's stmt rules): one the proxy
// answers, one it refuses, or a query. Any other first word is a syntax
// error.
func StatementKeyword(word string) bool {
	return sessionKeywords[word] || refusedKeywords[word] || queryKeywords[word]
}

// queryKeywords start the statements that are neither the session's nor
// refused: queries and EXPLAIN.
var queryKeywords = map[string]bool{"select": true, "with": true, "table": true, "values": true, "explain": true}

// RefusedKeyword reports whether word, a folded unquoted keyword, starts
// a statement that writes, executes or holds server-side state: such
// statements are refused on every route.
func RefusedKeyword(word string) bool { return refusedKeywords[word] }

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
// route, with a message that names the side effect's remedy; on the
// catalog route they are also absent from the allow-list (catalog.go),
// which is what refuses everything else there.
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
	// random's generator state is the shadow backend's, so it carries from
	// one analyst's statement to the next one's on a pooled connection: a
	// channel between sessions (issue 33's attack).
	"setseed": true, "random": true,
}

// RefuseWrite is the 42501 refusal of a statement that writes or
// executes, named by its keyword t and positioned at it.
func RefuseWrite(src string, t Token) *pgerr.Error {
	return pgerr.New(pgerr.InsufficientPrivilege, "%s statements are not allowed through dpproxy", strings.ToUpper(t.Val)).
		WithPosition(CharPos(src, t.Pos)).
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
//     DISCARD/DEALLOCATE, and PREPARE/EXECUTE (the proxy keeps prepared DP
//     statements: proxy/session.go): RouteSession (see ParseSession);
//   - statements that write or execute (INSERT, UPDATE, DELETE, COPY, DDL,
//     GRANT, CALL, DO, PREPARE TRANSACTION, cursors, SELECT … INTO, data-
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
//     with 42501 on every route (refusedFunctions);
//   - everything else is a catalog statement: RouteCatalog if CheckCatalog
//     accepts it (a SELECT, WITH, VALUES, TABLE or EXPLAIN that calls only
//     allowed functions and reads no statistics or activity view:
//     catalog.go), else refused with its error. The shadow catalog holds no
//     rows of protected tables, only those of public tables, so a
//     misrouted statement there can reveal nothing protected; the
//     allow-lists keep it from reaching or changing what other analysts'
//     statements share there.
func Classify(ds *policy.Dataset, stmt string) (Route, error) {
	toks, err := Lex(stmt)
	if err != nil {
		return RouteRefuse, err
	}
	if len(toks) == 0 {
		return RouteEmpty, nil
	}
	first := toks[0]
	// A leading parenthesis is a parenthesized query: classify what it holds.
	i := 0
	for i < len(toks) && toks[i].IsPunct("(") {
		i++
	}
	if i < len(toks) {
		first = toks[i]
	}
	if first.Kind == TokIdent && !first.Quoted {
		if i == 0 {
			switch first.Val {
			case "declare", "copy":
				route, _, err := classifyWrapper(ds, stmt, toks)
				return route, err
			case "fetch", "move", "close", "unlisten":
				return RouteSession, nil
			case "prepare", "execute":
				// SQL-level prepared statements: the proxy keeps the
				// text and binds EXECUTE's constants into it
				// (proxy/session.go); the statement itself is classified
				// when prepared. PREPARE TRANSACTION (two-phase commit)
				// stays refused below.
				if len(toks) < 2 || !toks[1].Is("transaction") {
					return RouteSession, nil
				}
			}
			if isUnlockAll(toks) {
				return RouteSession, nil
			}
		}
		if i == 0 && sessionKeywords[first.Val] {
			if err := refuseSession(stmt, toks); err != nil {
				return RouteRefuse, err
			}
			return RouteSession, nil
		}
		if err := RefuseWrites(stmt, toks[i:]); err != nil {
			return RouteRefuse, err
		}
	}
	if NamesProtected(ds, toks) && !provablyEmpty(toks) {
		return RouteDP, nil
	}
	if err := CheckCatalog(stmt, toks); err != nil {
		return RouteRefuse, err
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
func provablyEmpty(toks []Token) bool {
	i := 0
	for i < len(toks) && toks[i].IsPunct("(") {
		i++
	}
	if i == len(toks) || !(toks[i].Is("select") || toks[i].Is("with") || toks[i].Is("table") || toks[i].Is("values")) {
		return false
	}
	// depth[k] is the parenthesis depth of toks[k].
	depth := make([]int, len(toks))
	d := 0
	for k, t := range toks {
		if t.IsPunct(")") || t.IsPunct("]") {
			d--
			if d < 0 {
				return false
			}
		}
		depth[k] = d
		if t.IsPunct("(") || t.IsPunct("[") {
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
		if t.Is("limit") && k+1 < len(toks) && isZero(toks[k+1]) && offsetOnly(toks[k+2:]) {
			return true
		}
		if t.Is("fetch") && k+5 == len(toks) && (toks[k+1].Is("first") || toks[k+1].Is("next")) &&
			isZero(toks[k+2]) && (toks[k+3].Is("row") || toks[k+3].Is("rows")) && toks[k+4].Is("only") {
			return true
		}
	}
	return i == 0 && falseWhere(toks, depth)
}

// falseWhere is the WHERE-false form of provablyEmpty.
func falseWhere(toks []Token, depth []int) bool {
	if !toks[0].Is("select") {
		return false
	}
	where, tail := -1, len(toks)
	for k, t := range toks {
		if depth[k] != 0 {
			continue
		}
		switch {
		case t.Is("union"), t.Is("intersect"), t.Is("except"), t.Is("group"), t.Is("having"), t.Is("window"):
			return false
		case t.Is("where"):
			if where >= 0 {
				return false
			}
			where = k
		case t.Is("from"), t.Is("select"):
			if where >= 0 {
				return false // a FROM or SELECT after the WHERE: not a plain SELECT
			}
		case t.Is("order"), t.Is("limit"), t.Is("offset"), t.Is("fetch"):
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
		if toks[k].Is("from") && depth[k] == 0 {
			break
		}
		if toks[k].IsPunct("(") {
			return false
		}
	}
	for _, t := range toks[tail:] {
		if t.IsPunct("(") {
			return false
		}
	}
	pred := toks[where+1 : tail]
	for len(pred) >= 2 && pred[0].IsPunct("(") && pred[len(pred)-1].IsPunct(")") {
		pred = pred[1 : len(pred)-1]
	}
	switch {
	case len(pred) == 1:
		return pred[0].Is("false")
	case len(pred) == 3:
		a, b := IntLiteral(pred[0]), IntLiteral(pred[2])
		if a == "" || b == "" {
			return false
		}
		switch {
		case pred[1].IsOp("="):
			return a != b
		case pred[1].IsOp("<>"), pred[1].IsOp("!="):
			return a == b
		}
	}
	return false
}

// IntLiteral returns an unsigned integer literal's digits without leading
// zeros ("0" for zero), or "" if t is not one.
func IntLiteral(t Token) string {
	if t.Kind != TokNumber || t.Val == "" {
		return ""
	}
	for _, c := range t.Val {
		if c < '0' || c > '9' {
			return ""
		}
	}
	v := strings.TrimLeft(t.Val, "0")
	if v == "" {
		v = "0"
	}
	return v
}

func isZero(t Token) bool { return IntLiteral(t) == "0" }

// offsetOnly reports whether toks is empty or exactly OFFSET n [ROW|ROWS].
func offsetOnly(toks []Token) bool {
	switch {
	case len(toks) == 0:
		return true
	case len(toks) == 2:
		return toks[0].Is("offset") && IntLiteral(toks[1]) != ""
	case len(toks) == 3:
		return toks[0].Is("offset") && IntLiteral(toks[1]) != "" && (toks[2].Is("row") || toks[2].Is("rows"))
	}
	return false
}

// NamesProtected reports whether any identifier token names a protected
// table.
func NamesProtected(ds *policy.Dataset, toks []Token) bool {
	if ds == nil {
		return false
	}
	for _, t := range toks {
		if t.Kind != TokIdent {
			continue
		}
		if tb, ok := ds.Tables[strings.ToLower(t.Val)]; ok && !tb.Public {
			return true
		}
	}
	return false
}

// refuseSession refuses the session statements dpproxy does not emulate.
func refuseSession(src string, toks []Token) error {
	kw := toks[0].Val
	at := func(i int, w string) bool { return i < len(toks) && toks[i].Is(w) }
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
				WithPosition(CharPos(src, toks[0].Pos)).
				WithHint("connect as the analyst you want to be")
		}
		if at(j, "constraints") {
			return pgerr.New(pgerr.FeatureNotSupported, "SET CONSTRAINTS is not supported").
				WithPosition(CharPos(src, toks[0].Pos)).
				WithHint("dpproxy answers only aggregate SELECT queries; constraints are never checked")
		}
	case "rollback", "abort":
		for _, t := range toks[1:] {
			if t.Is("prepared") {
				return twoPhaseErr(src, toks[0])
			}
		}
	case "commit", "end":
		if len(toks) > 1 && toks[1].Is("prepared") {
			return twoPhaseErr(src, toks[0])
		}
	}
	return nil
}

func twoPhaseErr(src string, t Token) *pgerr.Error {
	return pgerr.New(pgerr.FeatureNotSupported, "two-phase commit is not supported by dpproxy").
		WithPosition(CharPos(src, t.Pos)).
		WithHint("use plain BEGIN/COMMIT")
}

// RefuseWrites refuses statements that write or execute, looking through
// EXPLAIN and WITH.
func RefuseWrites(src string, toks []Token) error {
	if len(toks) == 0 {
		return nil
	}
	first := toks[0]
	if refusedKeywords[first.Val] {
		return RefuseWrite(src, first)
	}
	if first.Val == "explain" {
		// EXPLAIN [ANALYZE] [VERBOSE] [( options )] statement
		j := 1
		for j < len(toks) {
			t := toks[j]
			if t.IsPunct("(") {
				for j < len(toks) && !toks[j].IsPunct(")") {
					j++
				}
				if j == len(toks) {
					// EXPLAIN ( without its ): PostgreSQL's syntax error,
					// not a slice past the end (issue 34's attack).
					return SyntaxErr(src, len(src), "syntax error at end of input")
				}
				j++
				continue
			}
			if t.Is("analyze") || t.Is("analyse") || t.Is("verbose") {
				j++
				continue
			}
			break
		}
		for j < len(toks) && toks[j].IsPunct("(") {
			j++
		}
		if j < len(toks) && toks[j].Is("explain") {
			return SyntaxErr(src, toks[j].Pos, "syntax error at or near \"explain\"")
		}
		return RefuseWrites(src, toks[j:])
	}
	// Anywhere in a query: functions with side effects, data-modifying
	// CTEs and SELECT … INTO.
	for k, t := range toks {
		if t.Kind != TokIdent {
			continue
		}
		if refusedFunctions[strings.ToLower(t.Val)] && k+1 < len(toks) && toks[k+1].IsPunct("(") {
			return pgerr.New(pgerr.InsufficientPrivilege, "function %s is not allowed through dpproxy", strings.ToLower(t.Val)).
				WithPosition(CharPos(src, t.Pos)).
				WithHint("dpproxy answers aggregate SELECT queries and catalog look-ups; session settings are changed with SET")
		}
		if t.Quoted {
			continue
		}
		switch t.Val {
		case "insert", "delete", "merge", "truncate":
			if first.Val == "with" {
				return RefuseWrite(src, t)
			}
		case "update":
			// FOR UPDATE / FOR NO KEY UPDATE lock rows; otherwise a
			// data-modifying CTE.
			if k > 0 && (toks[k-1].Is("for") || toks[k-1].Is("key")) {
				return pgerr.New(pgerr.FeatureNotSupported, "row locks (FOR UPDATE) are not supported").
					WithPosition(CharPos(src, t.Pos)).
					WithHint("remove the locking clause; dpproxy is read-only")
			}
			if first.Val == "with" {
				return RefuseWrite(src, t)
			}
		case "share":
			if k > 0 && (toks[k-1].Is("for") || toks[k-1].Is("key")) {
				return pgerr.New(pgerr.FeatureNotSupported, "row locks (FOR SHARE) are not supported").
					WithPosition(CharPos(src, t.Pos)).
					WithHint("remove the locking clause; dpproxy is read-only")
			}
		case "into":
			if first.Val == "select" || first.Val == "with" || first.Val == "table" || first.Val == "values" {
				return pgerr.New(pgerr.InsufficientPrivilege, "SELECT … INTO creates a table and is not allowed through dpproxy").
					WithPosition(CharPos(src, t.Pos)).
					WithHint("remove INTO …; dpproxy answers only aggregate SELECT queries")
			}
		}
	}
	return nil
}
