package proxy

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestAttack51_LaterSyntaxErrorStillCharges (attack round 51, severity
// low-medium: budget spent on a Query string PostgreSQL would not run at
// all; a stated guarantee of commit 48fa93e that does not hold).
//
// PostgreSQL parses a whole Query string before it runs any of it
// (exec_simple_query: pg_parse_query over the string first), so a syntax
// error in any statement runs nothing. Commit 48fa93e says the proxy now
// does the same — "a syntax error anywhere in a Query string runs (and
// charges) nothing" — by classifying every statement first and stopping at
// a 42601 (simpleQuery, proxy/query.go:235-254). But classification is
// only the routing lexer (pgsql.Classify): a DP statement's syntax is
// checked by the planner (rewrite/build.go:146, TiDB's parser, and the
// builder's own 42601s such as ASC/DESC in GROUP BY,
// rewrite/build_keys.go:27), and a catalog statement's by the shadow, both
// only when the statement runs. So in
//
//	SELECT COUNT(*) FROM visits; SELECT COUNT(*) FROM visits WHERE age = = 1
//
// the first statement is released and charged, then the second fails with
// 42601, where PostgreSQL answers 42601 and runs neither. The same holds
// for a trailing catalog statement with a syntax error (`SELECT 1 +`).
//
// The test sends each string to PostgreSQL 15 (the shadow catalog, which
// has the visits table) and to the proxy, and wants the proxy to release
// as many statements as PostgreSQL ran: none.
//
// Suggested fix: in simpleQuery's first pass, also parse (not plan) each
// DP statement — the normalize and TiDB parse steps of pipeline.Prepare,
// or checkDP, whose cost CheckText already bounds — and stop at its
// 42601; for catalog statements, have the shadow parse the string (or its
// catalog statements) before any DP statement of it is released, or
// state in SECURITY.md/docs/SQL.md that only the proxy's own syntax errors are
// found first.
func TestAttack51_LaterSyntaxErrorStillCharges(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	dsn := shadowDB(t)
	ts := startServer(t, serverOpts{shadowDSN: dsn})
	pgc, err := pgconn.Connect(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pgc.Close(context.Background())
	pc := ts.connect(t)
	for _, q := range []string{
		"SELECT COUNT(*) FROM visits; SELECT COUNT(*) FROM visits WHERE age = = 1",
		"SELECT SUM(cost) FROM visits; SELECT COUNT(*) FROM visits GROUP BY department DESC",
		"SELECT AVG(age) FROM visits; SELECT 1 +",
	} {
		pgRes, pgErr := execAll(t, pgc, q)
		if sqlstate(pgErr) != "42601" {
			t.Fatalf("PostgreSQL: %q: %v, want 42601", q, pgErr)
		}
		n0 := len(ts.releaser.requests())
		_, err := execAll(t, pc, q)
		charged := len(ts.releaser.requests()) - n0
		t.Logf("%q: PostgreSQL ran %d statements (%v); the proxy released %d DP statements (%v)", q, len(pgRes), pgErr, charged, err)
		if charged > 0 {
			t.Errorf("%q: the proxy released (charged) %d DP statements of a string PostgreSQL refuses whole with 42601: the syntax error of a later statement is found only when it runs", q, charged)
		}
	}
}
