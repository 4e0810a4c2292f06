package proxy

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestAttack52_WrappedDPBeforeSyntaxError (attack round 52, severity
// low-medium: budget spent on a Query string PostgreSQL would not run at
// all; attack round 51's fix, commit 45ca197, covers only half of the
// shapes that release).
//
// simpleQuery's first pass (proxy/query.go:253-263) plans DP statements and
// has the shadow parse catalog statements only when hasDP, i.e. when some
// statement of the string is routed RouteDP, and only for statements
// routed RouteDP or RouteCatalog. A DP answer is also released by
// statements routed RouteSession: DECLARE … CURSOR FOR, COPY (…) TO
// STDOUT and EXECUTE of a prepared DP statement (the very set
// mayRelease names, proxy/extended.go:717). So
//
//	DECLARE c CURSOR WITH HOLD FOR SELECT COUNT(*) FROM visits; SELECT 1 +
//	EXECUTE p; SELECT 1 +                         (p a prepared DP count)
//	SELECT COUNT(*) FROM visits; DECLARE c CURSOR WITH HOLD FOR SELECT COUNT(*) FROM visits WHERE age = = 1
//
// each release (charge) a DP answer and then fail with 42601, where
// PostgreSQL answers 42601 and runs nothing. In the first and third the
// charged answer is also lost: the implicit transaction aborts and the
// cursor with it.
//
// The test runs each string on PostgreSQL 15 (the shadow catalog, which
// has the visits table) and through the proxy, and wants the proxy to
// release nothing where PostgreSQL runs nothing.
//
// Suggested fix: in the first pass treat a statement as releasing when
// mayRelease says so (DECLARE, COPY and EXECUTE included), and check the
// query such a statement wraps as its route requires (checkDP for a DP
// query, describeShadow for a catalog one; for EXECUTE the prepared
// statement is already checked).
func TestAttack52_WrappedDPBeforeSyntaxError(t *testing.T) {
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
	const prep = "PREPARE p AS SELECT COUNT(*) FROM visits"
	if _, err := execAll(t, pgc, prep); err != nil {
		t.Fatalf("PostgreSQL: %s: %v", prep, err)
	}
	if _, err := execAll(t, pc, prep); err != nil {
		t.Fatalf("proxy: %s: %v", prep, err)
	}
	for _, q := range []string{
		"DECLARE c CURSOR WITH HOLD FOR SELECT COUNT(*) FROM visits; SELECT 1 +",
		"EXECUTE p; SELECT 1 +",
		"SELECT COUNT(*) FROM visits; DECLARE c CURSOR WITH HOLD FOR SELECT COUNT(*) FROM visits WHERE age = = 1",
	} {
		pgRes, pgErr := execAll(t, pgc, q)
		if sqlstate(pgErr) != "42601" || len(pgRes) != 0 {
			t.Fatalf("PostgreSQL: %q: %d results, %v; want 42601 and nothing run", q, len(pgRes), pgErr)
		}
		n0 := len(ts.releaser.requests())
		_, err := execAll(t, pc, q)
		charged := len(ts.releaser.requests()) - n0
		t.Logf("%q: PostgreSQL ran nothing (%v); the proxy released %d DP answers (%v)", q, pgErr, charged, err)
		if charged > 0 {
			t.Errorf("%q: the proxy released (charged) %d DP answers of a string PostgreSQL refuses whole with 42601", q, charged)
		}
		if _, err := execAll(t, pc, "CLOSE ALL"); err != nil {
			t.Fatal(err)
		}
	}
}
