package pgsql

import (
	"reflect"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

const hospitalPolicy = "../internal/testdata/hospital.yaml"

func loadHospital(t testing.TB) *policy.Dataset {
	t.Helper()
	ds, err := policy.Load(hospitalPolicy)
	if err != nil {
		t.Fatalf("load %s: %v", hospitalPolicy, err)
	}
	return ds
}

func TestSplit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"one", "SELECT 1", []string{"SELECT 1"}},
		{"two", "SELECT 1; SELECT 2;", []string{"SELECT 1", " SELECT 2"}},
		{"empty", "", []string{""}},
		{"only comments", "-- x\n/* y */ ;;", []string{""}},
		{"empties dropped", ";;SELECT 1;;", []string{"SELECT 1"}},
		{"semicolon in string", "SELECT ';'; SELECT 2", []string{"SELECT ';'", " SELECT 2"}},
		{"semicolon in ident", `SELECT 1 AS ";"; SELECT 2`, []string{`SELECT 1 AS ";"`, " SELECT 2"}},
		{"semicolon in dollar", "SELECT $$;$$; SELECT 2", []string{"SELECT $$;$$", " SELECT 2"}},
		{"semicolon in comments", "SELECT 1 -- ;\n; /* ; */ SELECT 2", []string{"SELECT 1 -- ;\n", " /* ; */ SELECT 2"}},
		{"semicolon in parentheses still splits", "SELECT (1; DROP TABLE x; )", []string{"SELECT (1", " DROP TABLE x", " )"}},
		{"semicolon in E string", `SELECT E'\';'; SELECT 2`, []string{`SELECT E'\';'`, " SELECT 2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Split(tc.in)
			if err != nil {
				t.Fatalf("Split(%q) error %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Split(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	if _, err := Split("SELECT 'x; SELECT 2"); err == nil {
		t.Errorf("Split of an unterminated string succeeded")
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	tests := []struct {
		in   string
		want Route
		code string // for RouteRefuse
	}{
		{"", RouteEmpty, ""},
		{"  -- nothing\n /* at all */ ", RouteEmpty, ""},
		{"SET dp.epsilon = 0.5", RouteSession, ""},
		{"set application_name to 'psql'", RouteSession, ""},
		{"SHOW dp.budget", RouteSession, ""},
		{"RESET ALL", RouteSession, ""},
		{"BEGIN", RouteSession, ""},
		{"START TRANSACTION READ ONLY", RouteSession, ""},
		{"COMMIT", RouteSession, ""},
		{"END", RouteSession, ""},
		{"ROLLBACK", RouteSession, ""},
		{"ABORT", RouteSession, ""},
		{"DISCARD ALL", RouteSession, ""},
		{"DEALLOCATE PREPARE s1", RouteSession, ""},
		{"SET search_path = visits", RouteSession, ""},
		{"SET ROLE postgres", RouteRefuse, pgerr.InsufficientPrivilege},
		{"SET SESSION AUTHORIZATION postgres", RouteRefuse, pgerr.InsufficientPrivilege},
		{"SET LOCAL ROLE postgres", RouteRefuse, pgerr.InsufficientPrivilege},
		{"SAVEPOINT a", RouteSession, ""},
		{"RELEASE SAVEPOINT a", RouteSession, ""},
		{"ROLLBACK TO SAVEPOINT a", RouteSession, ""},
		{"COMMIT PREPARED 'x'", RouteRefuse, pgerr.FeatureNotSupported},
		{"SELECT department, COUNT(*) FROM visits GROUP BY department", RouteDP, ""},
		{`SELECT COUNT(*) FROM "visits"`, RouteDP, ""},
		{`SELECT COUNT(*) FROM public.VISITS`, RouteDP, ""},
		{`SELECT * FROM visits`, RouteDP, ""},
		{`(SELECT * FROM patients)`, RouteDP, ""},
		{`EXPLAIN SELECT COUNT(*) FROM visits`, RouteDP, ""},
		{`SELECT 'visits'`, RouteCatalog, ""},
		{`SELECT 1`, RouteCatalog, ""},
		{`SELECT version()`, RouteCatalog, ""},
		{`SELECT relname FROM pg_catalog.pg_class`, RouteCatalog, ""},
		{`EXPLAIN SELECT 1`, RouteCatalog, ""},
		{`INSERT INTO visits VALUES (1)`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`insert into other values (1)`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`UPDATE other SET a = 1`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`DELETE FROM other`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`COPY visits TO STDOUT`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`CREATE TABLE x (a int)`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`DROP TABLE x`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`GRANT ALL ON x TO y`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`DO $$BEGIN END$$`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`CALL p()`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`PREPARE s AS SELECT 1`, RouteSession, ""}, // proxy/session.go: DP statements only
		{`EXECUTE s`, RouteSession, ""},
		{`PREPARE TRANSACTION 'x'`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`VACUUM`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`LISTEN x`, RouteRefuse, pgerr.InsufficientPrivilege},
		// Cursors and COPY wrap a query classified on its own (cursor.go, copy.go).
		{`DECLARE c CURSOR FOR SELECT 1`, RouteSession, ""},
		{`DECLARE "c" BINARY NO SCROLL CURSOR WITH HOLD FOR SELECT COUNT(*) FROM visits`, RouteSession, ""},
		// A DP query is planned (and refused) when the DECLARE runs, before any charge.
		{`DECLARE c CURSOR FOR SELECT * FROM visits`, RouteSession, ""},
		{`DECLARE c CURSOR FOR DELETE FROM visits`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`DECLARE c CURSOR FOR SET x = 1`, RouteRefuse, pgerr.SyntaxError},
		{`DECLARE c CURSOR FOR DECLARE d CURSOR FOR SELECT 1`, RouteRefuse, pgerr.SyntaxError},
		{`COPY (COPY (SELECT 1) TO STDOUT) TO STDOUT`, RouteRefuse, pgerr.SyntaxError},
		{`DECLARE c SCROLL NO SCROLL CURSOR FOR SELECT 1`, RouteRefuse, "42P11"},
		{`DECLARE c CURSOR FOR`, RouteRefuse, pgerr.SyntaxError},
		{`FETCH ALL FROM c`, RouteSession, ""},
		{`MOVE 3 IN c`, RouteSession, ""},
		{`CLOSE ALL`, RouteSession, ""},
		{`UNLISTEN *`, RouteSession, ""},
		{`COPY (SELECT department, COUNT(*) FROM visits GROUP BY department) TO STDOUT WITH (FORMAT csv, HEADER)`, RouteSession, ""},
		{`COPY (SELECT 1) TO STDOUT csv header`, RouteSession, ""},
		{`COPY (SELECT * FROM visits) TO STDOUT`, RouteSession, ""},
		{`COPY (SELECT COUNT(*) FROM visits) TO '/tmp/x'`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`COPY (SELECT 1) TO PROGRAM 'id'`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`COPY visits FROM STDIN`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`COPY other TO STDOUT`, RouteRefuse, pgerr.FeatureNotSupported},
		{`COPY (SELECT 1) TO STDOUT (FORMAT binary)`, RouteRefuse, pgerr.FeatureNotSupported},
		{`COPY (SELECT 1) TO STDOUT (FORMAT csv, DELIMITER 'ab')`, RouteRefuse, pgerr.InvalidParameterValue},
		{`COPY (SELECT 1) TO STDOUT (BOGUS)`, RouteRefuse, pgerr.SyntaxError},
		{`EXPLAIN COPY (SELECT 1) TO STDOUT`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`EXPLAIN ANALYZE DELETE FROM other`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`EXPLAIN (ANALYZE, BUFFERS) INSERT INTO other VALUES (1)`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`WITH d AS (DELETE FROM other RETURNING *) SELECT 1`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`SELECT 1 INTO newtable`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`SELECT * FROM pg_class FOR UPDATE`, RouteRefuse, pgerr.FeatureNotSupported},
		{"SELECT `a`", RouteRefuse, pgerr.SyntaxError},
		{`SELECT pg_catalog.set_config('search_path', '', false)`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`SELECT pg_sleep(10)`, RouteRefuse, pgerr.InsufficientPrivilege},
		// State on the pooled shadow connection, which sessions share.
		{`SELECT pg_advisory_lock_shared(1)`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`SELECT pg_try_advisory_xact_lock_shared(1, 2)`, RouteRefuse, pgerr.InsufficientPrivilege},
		// …except the release of all advisory locks, which a session of
		// the proxy never holds (asyncpg's pool calls it): answered by the
		// proxy, never forwarded.
		{`SELECT pg_advisory_unlock_all()`, RouteSession, ""},
		{`select pg_catalog.pg_advisory_unlock_all() as x`, RouteSession, ""},
		{`SELECT pg_advisory_unlock_all(), 1`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`SELECT pg_advisory_unlock_all() FROM visits`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`SELECT setseed(0.5)`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`SELECT "nextval"('s')`, RouteRefuse, pgerr.InsufficientPrivilege},
		{`SELECT 'pg_sleep(1)'`, RouteCatalog, ""},
		{`SELECT COUNT(*) FROM visits WHERE pg_sleep(1) IS NULL`, RouteRefuse, pgerr.InsufficientPrivilege},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := Classify(ds, tc.in)
			if got != tc.want {
				t.Fatalf("Classify(%q) = %v (%v), want %v", tc.in, got, err, tc.want)
			}
			if tc.want == RouteRefuse {
				pe, ok := pgerr.As(err)
				if !ok || pe.Code != tc.code || pe.Hint == "" && pe.Code != pgerr.SyntaxError {
					t.Fatalf("Classify(%q) error = %v, want %s with a hint", tc.in, err, tc.code)
				}
			} else if err != nil {
				t.Fatalf("Classify(%q) error = %v", tc.in, err)
			}
		})
	}
}

func TestParseSession(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want SessionStmt
	}{
		{"SET dp.epsilon = 0.5", SessionStmt{Kind: SessionSet, Name: "dp.epsilon", Value: "0.5"}},
		{"SET dp.epsilon TO .5", SessionStmt{Kind: SessionSet, Name: "dp.epsilon", Value: ".5"}},
		{"set DP.Mechanism = Gaussian", SessionStmt{Kind: SessionSet, Name: "dp.mechanism", Value: "gaussian"}},
		{"SET dp.mechanism = 'Gaussian'", SessionStmt{Kind: SessionSet, Name: "dp.mechanism", Value: "Gaussian"}},
		{"SET SESSION application_name = 'psql'", SessionStmt{Kind: SessionSet, Name: "application_name", Value: "psql"}},
		{"SET LOCAL statement_timeout = 0", SessionStmt{Kind: SessionSet, Name: "statement_timeout", Value: "0", Local: true}},
		{"SET extra_float_digits = -3", SessionStmt{Kind: SessionSet, Name: "extra_float_digits", Value: "-3"}},
		{`SET search_path = "$user", public`, SessionStmt{Kind: SessionSet, Name: "search_path", Value: "$user, public"}},
		{"SET datestyle TO DEFAULT", SessionStmt{Kind: SessionSet, Name: "datestyle", Default: true}},
		{"SET TIME ZONE 'UTC'", SessionStmt{Kind: SessionSet, Name: "timezone", Value: "UTC"}},
		{"SET TIME ZONE LOCAL", SessionStmt{Kind: SessionSet, Name: "timezone", Default: true}},
		{"SET NAMES 'UTF8'", SessionStmt{Kind: SessionSet, Name: "client_encoding", Value: "UTF8"}},
		{"SET SCHEMA 'public'", SessionStmt{Kind: SessionSet, Name: "search_path", Value: "public"}},
		{"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED",
			SessionStmt{Kind: SessionCharacteristics, Name: "transaction", Value: "isolation level read committed"}},
		{"SET TRANSACTION READ ONLY, ISOLATION LEVEL REPEATABLE READ",
			SessionStmt{Kind: SessionSet, Name: "transaction", Value: "read only, isolation level repeatable read", Local: true}},
		{"RESET ALL", SessionStmt{Kind: SessionReset, Name: "all"}},
		{"RESET dp.epsilon", SessionStmt{Kind: SessionReset, Name: "dp.epsilon"}},
		{"RESET TIME ZONE", SessionStmt{Kind: SessionReset, Name: "timezone"}},
		{"SHOW dp.budget", SessionStmt{Kind: SessionShow, Name: "dp.budget"}},
		{"SHOW ALL", SessionStmt{Kind: SessionShow, Name: "all"}},
		{"show TimeZone", SessionStmt{Kind: SessionShow, Name: "timezone"}},
		{"SHOW TIME ZONE", SessionStmt{Kind: SessionShow, Name: "timezone"}},
		{"SHOW TRANSACTION ISOLATION LEVEL", SessionStmt{Kind: SessionShow, Name: "transaction_isolation"}},
		{"BEGIN", SessionStmt{Kind: SessionBegin}},
		{"BEGIN WORK", SessionStmt{Kind: SessionBegin}},
		{"BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY NOT DEFERRABLE",
			SessionStmt{Kind: SessionBegin, Value: "isolation level serializable, read only, not deferrable"}},
		{"START TRANSACTION READ WRITE", SessionStmt{Kind: SessionBegin, Value: "read write"}},
		{"COMMIT", SessionStmt{Kind: SessionCommit}},
		{"END TRANSACTION", SessionStmt{Kind: SessionCommit}},
		{"COMMIT AND NO CHAIN", SessionStmt{Kind: SessionCommit}},
		{"ROLLBACK WORK", SessionStmt{Kind: SessionRollback}},
		{"ABORT", SessionStmt{Kind: SessionRollback}},
		{"DISCARD ALL", SessionStmt{Kind: SessionDiscard, Name: "all"}},
		{"DISCARD TEMPORARY", SessionStmt{Kind: SessionDiscard, Name: "temp"}},
		{"DEALLOCATE PREPARE S1", SessionStmt{Kind: SessionDeallocate, Name: "s1"}},
		{"PREPARE q (int, numeric(10,2)) AS SELECT COUNT(*) FROM visits WHERE age > $1", SessionStmt{Kind: SessionPrepare, Name: "q", Value: "SELECT COUNT(*) FROM visits WHERE age > $1", Args: []string{"int", "numeric(10,2)"}}},
		{"EXECUTE q(-5, 'a''b', DATE '2024-01-01', '3'::int, NULL)", SessionStmt{Kind: SessionExecute, Name: "q", Args: []string{"-5", "'a''b'", "DATE '2024-01-01'", "'3'::int", "NULL"}}},
		{"EXECUTE q", SessionStmt{Kind: SessionExecute, Name: "q"}},
		{"DEALLOCATE ALL", SessionStmt{Kind: SessionDeallocate, Name: "all"}},
		{"/* c */ SET dp.epsilon = 1 -- x", SessionStmt{Kind: SessionSet, Name: "dp.epsilon", Value: "1"}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSession(tc.in)
			if err != nil {
				t.Fatalf("ParseSession(%q) error %v", tc.in, err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("ParseSession(%q) = %+v, want %+v", tc.in, *got, tc.want)
			}
		})
	}
}

func TestParseSession_Errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		code string
		pos  int
	}{
		{"SET", pgerr.SyntaxError, 4},
		{"SET dp.epsilon", pgerr.SyntaxError, 15},
		{"SET dp.epsilon = ", pgerr.SyntaxError, 18},
		{"SET dp.epsilon = 1 2", pgerr.SyntaxError, 20},
		{"SET dp.epsilon = (1)", pgerr.SyntaxError, 18},
		{"SHOW", pgerr.SyntaxError, 5},
		{"SHOW TRANSACTION LEVEL", pgerr.SyntaxError, 18},
		{"BEGIN ISOLATION LEVEL SOMETIMES", pgerr.SyntaxError, 23},
		{"COMMIT AND CHAIN", pgerr.FeatureNotSupported, 8},
		{"DISCARD EVERYTHING", pgerr.SyntaxError, 9},
		{"PREPARE q SELECT 1", pgerr.SyntaxError, 11},
		{"EXECUTE q(age)", pgerr.FeatureNotSupported, 11},
		{"EXECUTE q(1, now())", pgerr.FeatureNotSupported, 14},
		{"EXECUTE q(1", pgerr.SyntaxError, 12},
		{"SELECT 1", pgerr.SyntaxError, 1},
		{"SET x = 'a", pgerr.SyntaxError, 9},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			_, err := ParseSession(tc.in)
			pe, ok := pgerr.As(err)
			if !ok || pe.Code != tc.code || pe.Position != tc.pos {
				t.Errorf("ParseSession(%q) error = %v (pos %d), want %s at %d", tc.in, err, posOf(pe), tc.code, tc.pos)
			}
		})
	}
}

func posOf(e *pgerr.Error) int {
	if e == nil {
		return -1
	}
	return e.Position
}

// TestClassify_ProvablyEmpty: statements that name protected tables but
// certainly return no rows go to the shadow catalog; everything that might
// return a row keeps the DP route.
func TestClassify_ProvablyEmpty(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	catalog := []string{
		`SELECT * FROM "public"."visits" WHERE 1 <> 1 LIMIT 0`,
		"SELECT * FROM visits LIMIT 0",
		"select department, age from visits limit 0 offset 10",
		"SELECT * FROM visits LIMIT 00 OFFSET 5 ROWS",
		"SELECT count(*) FROM visits LIMIT 0",
		"SELECT department, count(*) FROM visits GROUP BY department LIMIT 0",
		"SELECT * FROM visits FETCH FIRST 0 ROWS ONLY",
		"(SELECT * FROM visits) LIMIT 0",
		"SELECT * FROM visits UNION ALL SELECT * FROM visits LIMIT 0",
		"WITH v AS (SELECT * FROM visits) SELECT * FROM v LIMIT 0",
		"TABLE visits LIMIT 0",
		"SELECT * FROM visits WHERE 1 = 0",
		"SELECT * FROM visits WHERE false",
		"SELECT * FROM visits WHERE (0 = 1)",
		"SELECT * FROM visits WHERE ((1 != 1))",
		"SELECT v.age, p.sex FROM visits v JOIN patients p ON p.patient_id = v.patient_id WHERE 1 = 2 ORDER BY v.age",
		`SELECT * FROM (SELECT age FROM visits WHERE age > 3) "TableauSQL" WHERE (0 = 1)`,
		"SELECT age::text AS a FROM visits WHERE 1 = 0 LIMIT 5",
	}
	for _, q := range catalog {
		if got, err := Classify(ds, q); err != nil || got != RouteCatalog {
			t.Errorf("Classify(%q) = %v, %v; want RouteCatalog (provably empty)", q, got, err)
		}
	}
	dp := []string{
		"SELECT * FROM visits",
		"SELECT * FROM visits LIMIT 1",
		"SELECT * FROM visits LIMIT 0 + 1",
		"SELECT * FROM visits LIMIT ALL",
		"SELECT * FROM visits LIMIT $1",
		"SELECT * FROM visits LIMIT 0.5",
		"SELECT * FROM (SELECT * FROM visits LIMIT 0) s",
		"(SELECT * FROM visits LIMIT 0) UNION SELECT * FROM visits",
		"WITH v AS (SELECT * FROM visits LIMIT 0) SELECT * FROM visits",
		"SELECT * FROM visits FETCH FIRST 1 ROWS ONLY",
		// An aggregate over no rows still makes one row.
		"SELECT count(*) FROM visits WHERE 1 = 0",
		"SELECT 1 FROM visits WHERE false ORDER BY count(*)",
		"SELECT department FROM visits WHERE false GROUP BY department",
		"SELECT 1 FROM visits WHERE false HAVING true",
		"SELECT (SELECT count(*) FROM patients) FROM visits WHERE 1 = 0",
		// Not constant false, or not only false.
		"SELECT * FROM visits WHERE 1 = 1",
		"SELECT * FROM visits WHERE 1 <> 0",
		"SELECT * FROM visits WHERE 1 = 0 OR age > 3",
		"SELECT * FROM visits WHERE 1 = 0 + 1",
		"SELECT * FROM visits WHERE age = 0",
		"SELECT * FROM visits WHERE 1.0 = 0",
		`SELECT * FROM visits WHERE "false"`,
		"SELECT * FROM visits WHERE (1 = 0) IS NOT TRUE",
		"SELECT * FROM visits WHERE 1 = 0 UNION SELECT * FROM visits",
		"SELECT * FROM visits WHERE 1 = 0 LIMIT (SELECT count(*) FROM patients)",
		"WITH v AS (SELECT 1) SELECT * FROM visits WHERE 1 = 0",
		"EXPLAIN SELECT * FROM visits LIMIT 0",
		"SELECT * FROM visits LIMIT 0 (",
	}
	for _, q := range dp {
		if got, err := Classify(ds, q); err == nil && got == RouteCatalog {
			t.Errorf("Classify(%q) = RouteCatalog; it may return rows", q)
		}
	}
	// Writes are refused before, whatever LIMIT they carry.
	if got, err := Classify(ds, "DELETE FROM visits WHERE 1 = 0"); got != RouteRefuse || err == nil {
		t.Errorf("DELETE … WHERE 1 = 0: %v, %v", got, err)
	}
}
