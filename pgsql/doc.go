// Package pgsql is dpproxy's PostgreSQL front end: it lexes PostgreSQL
// statements, splits a simple query into statements, decides each
// statement's route (the DP path, the shadow catalog, the proxy itself, or
// a refusal) and parses the session statements the proxy answers itself
// (SET/SHOW/RESET, transactions, cursors, COPY … TO STDOUT).
//
// It holds no privacy logic: no plan, no bound, no sensitivity, no noise.
// What it decides is where a statement goes; what a DP statement may
// release is decided by rewrite, which imports this package for its lexer
// ([Lex], [Token]) and a few refusal helpers. The arrow runs one way:
// pgsql never imports rewrite.
//
// It imports only policy (which tables are protected, for [Classify] and
// the query a COPY wraps) and internal/pgerr. It does no
// I/O and no logging, holds no global mutable state, and is safe for
// concurrent use.
//
// # Files
//
//	lex.go        PostgreSQL lexer (faithful to scan.l: nested comments, E'',
//	              dollar quotes, operators, $n); 42601 errors with 1-based
//	              character positions; MySQL-only syntax (backquotes, # and
//	              /*! comments) refused.
//	classify.go   Split (top-level ';'), Route and Classify (the route of a
//	              statement), and the refusal of statements that write or
//	              execute.
//	catalog.go    CheckCatalog: the allow-lists a catalog statement must
//	              pass (statement forms, functions, system relations),
//	              and why they are allow-lists; catalog_funcs.go holds the
//	              lists, keywords.go PostgreSQL's keywords.
//	session.go    ParseSession (SET/SHOW/RESET/BEGIN/COMMIT/…).
//	cursor.go     DECLARE, FETCH, MOVE, CLOSE and the statements drivers
//	              send when a pooled connection is released: session
//	              statements whose wrapped query is classified on its own
//	              (classifyWrapper, shared with COPY).
//	copy.go       COPY ( query ) TO STDOUT [WITH] [options].
//
// # Routing decisions
//
// [Classify]'s doc comment lists its rules in order. In short: session
// statements (with SQL-level PREPARE/EXECUTE of DP statements) are
// answered by the proxy; statements that write or execute
// (including EXPLAIN ANALYZE of them, data-modifying WITH, SELECT … INTO,
// PREPARE TRANSACTION) and SET ROLE / SET SESSION AUTHORIZATION are refused
// with 42501, whatever they name; any identifier equal (case-insensitively,
// quoted or not) to a protected table's name routes to the DP path, which
// refuses what it cannot answer: deliberately conservative; everything
// else goes to the shadow catalog (no protected rows there; public tables'
// declared columns are copied there, internal/shadow) if it passes
// CheckCatalog's allow-lists, and is refused with 42501 otherwise: the
// shadow's connections are shared by all analysts, so a catalog statement
// may call only read-only catalog and scalar functions and may not read
// the views of other sessions.
//
// # Verification
//
// TestLex, TestSplit, TestClassify, TestParseSession and their error
// tests; TestCheckCatalog_* (the statements recorded from real clients in
// testdata/catalog_clients.sql are accepted, every known vector refused); FuzzLex (make fuzz): no panics, token spans are ordered, Split
// succeeds where Lex does, and every error of Lex, Classify and
// ParseSession is a *pgerr.Error.
package pgsql
