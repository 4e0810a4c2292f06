package pgsql

import "testing"

// Attack round 80.

// TestAttack80_ExplainQuotedAnalyze: catalogForm (and RefuseWrites)
// refuse EXPLAIN ANALYZE by the unquoted keyword only (Token.Is), but
// PostgreSQL's EXPLAIN option list takes any NonReservedWord, a quoted
// identifier too, and ExplainQuery compares the option's name as a
// string: ("analyze") is ANALYZE. So the catalog route runs the statement
// under EXPLAIN ANALYZE, which catalog.go says it never does ("EXPLAIN
// without ANALYZE shows the plan of a catalog statement without running
// it"), and with BUFFERS the plan shows the shadow's shared buffer cache,
// which every session of the shadow server fills: whether another session
// (another analyst's catalog statement) read a relation's pages shows as
// "read" (not cached) or "hit". PostgreSQL 15.x, role with
// default_transaction_read_only=on, each line a new session (psql -c):
//
//	=> EXPLAIN ("analyze", "buffers", "timing" off, "costs" off, "summary" off)
//	   SELECT count(*) FROM information_schema.sql_sizing;
//	  Buffers: shared read=1
//	=> (the same, in a second session)
//	  Buffers: shared hit=1
//	=> EXPLAIN ("analyze", "buffers") SELECT count(*) FROM pg_catalog.pg_class;
//	 Aggregate (cost=15.32..15.33 rows=1 width=8) (actual rows=1 loops=1)
//	   Buffers: shared read=2 …
//	 Execution Time: 0.124 ms
//
// Expected once fixed: refused with 42501, as EXPLAIN ANALYZE is.
func TestAttack80_ExplainQuotedAnalyze(t *testing.T) {
	ds := loadHospital(t)
	for _, sql := range []string{
		`EXPLAIN ("analyze") SELECT 1`,
		`EXPLAIN ("analyze", "buffers", "timing" off, "costs" off, "summary" off) SELECT count(*) FROM information_schema.sql_sizing`,
		`EXPLAIN (VERBOSE, "analyze" on, "buffers", "wal") SELECT count(*) FROM pg_catalog.pg_class`,
		`EXPLAIN (FORMAT json, "analyze" true) SELECT relname FROM pg_catalog.pg_class`,
	} {
		if err := checkCatalog(t, sql); err == nil {
			t.Errorf("CheckCatalog accepted, but PostgreSQL reads the quoted option \"analyze\" as ANALYZE and runs the statement:\n%s", sql)
		}
		if route, err := Classify(ds, sql); route != RouteRefuse {
			t.Errorf("Classify = %v (%v), want RouteRefuse (EXPLAIN ANALYZE):\n%s", route, err, sql)
		}
	}
}
