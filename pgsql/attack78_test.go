package pgsql

import "testing"

// TestAttack78_AliasOfScalarFunctionCallsFunction: attack round 78.
// CheckCatalog lets alias.f through as a column reference when f is not a
// pg_ name, on the premise (catalog.go) that PostgreSQL reads alias.f as
// f(row) only for functions that take a row. But when the alias names a
// function in FROM that returns a scalar (generate_series, unnest, both
// allowed), its whole-row value IS that scalar, so alias.f calls any
// one-argument function f on it. ts_stat(text) runs its argument as SQL,
// so
//
//	SELECT t.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(''simple'',
//	    set_config(''statement_timeout'', ''1'', false))']) t
//
// runs set_config (or pg_terminate_backend, pg_advisory_lock, a read of
// pg_stat_activity, anything the allow-lists refuse) on the shared shadow
// connection. Measured against `dpproxy demo` with psql: accepted and run
// ("(1ms,1,1)"); afterwards analyst bob's own catalog statements on the
// pooled connections saw statement_timeout = 1ms and `SELECT count(*) FROM
// pg_class a, pg_class b, pg_class c` failed with 57014; the same route
// with pg_terminate_backend ended bob's running catalog statement
// ("terminating connection due to administrator command"). The end-to-end
// test is integration TestAttack78_TsStatThroughAliasPoisonsOtherAnalyst.
func TestAttack78_AliasOfScalarFunctionCallsFunction(t *testing.T) {
	for _, sql := range []string{
		// ts_stat runs SQL text: every check of the allow-lists is bypassed.
		"SELECT t.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(''simple'', set_config(''statement_timeout'', ''1'', false))']) t",
		"SELECT s.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(relname) FROM pg_class']) AS s",
		`SELECT "t"."ts_stat" FROM unnest('{"SELECT to_tsvector(relname) FROM pg_class"}'::text[]) t`,
		"SELECT 1 FROM pg_class WHERE EXISTS (SELECT t.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(relname) FROM pg_class']) t)",
		// Other one-argument functions with state that are not pg_ names.
		"SELECT t.setseed FROM generate_series(0, 0) t",
		"SELECT t.txid_status FROM generate_series(1, 1) t",
		// Found after the fix's first cut: every way FROM names a
		// function's scalar result.
		"SELECT unnest.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(relname) FROM pg_class'])",
		"SELECT t.ts_stat FROM pg_catalog.unnest(ARRAY['SELECT 1']) AS t",
		"SELECT t.ts_stat FROM COALESCE('SELECT to_tsvector(relname) FROM pg_class'::text) t",
		"SELECT t.ts_stat FROM ROWS FROM (unnest(ARRAY['SELECT 1'])) t",
		"SELECT t.ts_stat FROM pg_class c JOIN LATERAL unnest(ARRAY[c.relname::text]) t ON true",
		"SELECT t.ts_stat FROM pg_class c, unnest(ARRAY['SELECT 1']) WITH ORDINALITY AS t",
		"SELECT x.setseed FROM (SELECT 1) s, generate_series(0, 0) AS x",
	} {
		if err := checkCatalog(t, sql); err == nil {
			t.Errorf("accepted, but PostgreSQL calls the function on the alias's scalar value:\n%s", sql)
		}
	}
}

// TestAttack78_FunctionColumnsAccepted: what clients select from a
// function's alias still passes: its column list, the alias itself (a
// scalar result's column), the columns of allowed functions that return
// rows, an allowed function, and aliases of tables and subqueries.
func TestAttack78_FunctionColumnsAccepted(t *testing.T) {
	for _, sql := range []string{
		"SELECT t.c1, t.c2 FROM unnest(ARRAY['a'], ARRAY[1]) AS t(c1, c2)",
		"SELECT t.t, t.upper FROM unnest(ARRAY['a']) t",
		"SELECT unnest.unnest FROM unnest(ARRAY[1])",
		"SELECT s.r FROM generate_series(1, 3) AS s(r)",
		"SELECT t.n, t.ordinality FROM unnest(ARRAY[1]) WITH ORDINALITY AS t(n)",
		"SELECT ppt.relid, ppt.isleaf, ppt.level FROM pg_catalog.pg_partition_tree('pg_class'::regclass) ppt",
		"SELECT k.word, k.catcode FROM pg_get_keywords() k",
		"SELECT c.relname FROM pg_class c JOIN (SELECT unnest(ARRAY[1]) AS attnum) k ON k.attnum > 0",
	} {
		if err := checkCatalog(t, sql); err != nil {
			t.Errorf("refused: %v\n%s", err, sql)
		}
	}
}
