package rewrite

import (
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
	"discard": true, "deallocate": true,
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
	"move": true, "close": true, "savepoint": true, "release": true,
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
//   - SET ROLE, SET SESSION AUTHORIZATION, SET CONSTRAINTS, savepoints
//     (SAVEPOINT, RELEASE, ROLLBACK TO) and two-phase commit are refused;
//   - SET/SHOW/RESET/BEGIN/START TRANSACTION/COMMIT/END/ROLLBACK/ABORT/
//     DISCARD/DEALLOCATE: RouteSession (see ParseSession);
//   - statements that write or execute (INSERT, UPDATE, DELETE, COPY, DDL,
//     GRANT, CALL, DO, PREPARE, EXECUTE, cursors, SELECT … INTO, data-
//     modifying WITH, EXPLAIN of any of these…): RouteRefuse with 42501;
//   - any identifier (quoted or not, compared case-insensitively) equal to
//     the name of a protected table: RouteDP. This is deliberately
//     conservative: a column or alias that happens to share the name also
//     routes to the DP path, which then refuses what it cannot answer;
//   - calls of functions with side effects (set_config, pg_sleep,
//     pg_read_file, lo_import, nextval, dblink, advisory locks…): refused
//     with 42501;
//   - everything else: RouteCatalog (the shadow catalog has no rows, so a
//     misrouted statement there can reveal nothing).
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
	if namesProtected(ds, toks) {
		return RouteDP, nil
	}
	return RouteCatalog, nil
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
			if t.is("to") {
				return savepointErr(src, toks[0])
			}
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

func savepointErr(src string, t token) *pgerr.Error {
	return pgerr.New(pgerr.FeatureNotSupported, "savepoints are not supported by dpproxy").
		WithPosition(charPos(src, t.pos)).
		WithHint("dpproxy statements never change data; use plain BEGIN/COMMIT, or turn off automatic savepoints (psql: \\set ON_ERROR_ROLLBACK off)")
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
	if first.val == "savepoint" || first.val == "release" {
		return savepointErr(src, first)
	}
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
