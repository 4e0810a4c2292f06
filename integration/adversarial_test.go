package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.yaml.in/yaml/v3"
)

// The adversarial corpus of SECURITY.md: statements an untrusted analyst
// may send to extract private data. Each runs through a real `dpproxy
// serve` (on the demo's clusters and ledger) as the dedicated analyst
// mallory, in the simple and in the extended protocol, each case on a
// fresh session. A case must be refused with an expected SQLSTATE (and no
// data value in the message, detail or hint, and no charge), or answered
// only with DP aggregates (a NOTICE "dp: …" and exactly one charge), or —
// for catalog statements — answered by the shadow catalog with nothing of
// the data (no charge). Afterwards the session must still answer SELECT 1.

// expect is what a case may do.
type expect int

const (
	refuse          expect = iota // an error with a SQLSTATE of refusalCodes (or the case's codes)
	dpAnswer                      // rows with a "dp: " NOTICE and one charge
	catalogAnswer                 // rows from the shadow: no NOTICE, no charge, no data values
	dpOrRefuse                    // either of the first two (shape support may grow)
	catalogOrRefuse               // either catalogAnswer or refuse
)

func (e expect) String() string {
	return [...]string{"refuse", "dp", "catalog", "dp|refuse", "catalog|refuse"}[e]
}

// refusalCodes are the SQLSTATEs of a refusal: no privilege, unsupported,
// syntax, unknown name, bad parameter. Never XX000 (an internal error),
// 53400 (budget) or 25P02 (a broken transaction).
var refusalCodes = map[string]bool{
	"42501": true, "0A000": true, "42601": true, "42P01": true, "42703": true,
	"42883": true, "42P02": true, "22023": true, "22P02": true, "42804": true,
	"42P18": true, "3F000": true, "42704": true, "22007": true, "22008": true,
	"42803": true, "22003": true,
	"34000": true, // FETCH of a cursor that does not exist
}

type advCase struct {
	cat    string
	sql    string
	want   expect
	codes  []string // if set, the only SQLSTATEs a refusal may have
	params []string // extended protocol only, as text parameters
	simple bool     // simple protocol only (multi-statement strings)
	fatal  bool     // a protocol violation: the proxy may end the session (08P01)
	zero   bool     // catalog answer: every numeric cell must be ≤ 16384 (an empty table's pages)
}

func adversarialCorpus() []advCase {
	var cs []advCase
	add := func(cat string, want expect, sqls ...string) {
		for _, s := range sqls {
			cs = append(cs, advCase{cat: cat, sql: s, want: want})
		}
	}
	// Raw rows in every disguise.
	add("raw", refuse,
		"SELECT * FROM visits",
		"select * from VISITS",
		`SELECT * FROM "visits"`,
		`SELECT * FROM public.visits`,
		`SELECT * FROM "public"."visits"`,
		`SELECT * FROM hospital.public.visits`,
		"SELECT patient_id, cost FROM visits",
		"SELECT diagnosis FROM visits",
		"SELECT cost FROM visits LIMIT 5",
		"SELECT cost FROM visits ORDER BY cost DESC LIMIT 1",
		"SELECT cost FROM visits OFFSET 10 FETCH FIRST 1 ROWS ONLY",
		"SELECT DISTINCT diagnosis FROM visits",
		"SELECT DISTINCT patient_id FROM visits",
		"SELECT DISTINCT ON (patient_id) patient_id, cost FROM visits",
		"SELECT DISTINCT birth_year FROM patients",
		"TABLE visits",
		"TABLE patients",
		"table public.patients",
		"SELECT * FROM (SELECT * FROM visits) AS v",
		"SELECT c FROM (SELECT cost AS c FROM visits) s LIMIT 3",
		"SELECT COUNT(*) FROM (SELECT * FROM visits) v",
		"SELECT (SELECT cost FROM visits LIMIT 1)",
		"SELECT 1 WHERE EXISTS (SELECT 1 FROM visits WHERE patient_id = 42 AND cost > 1000)",
		"SELECT COUNT(*) FROM visits WHERE cost > (SELECT AVG(cost) FROM visits)",
		"SELECT COUNT(*) FROM patients WHERE patient_id IN (SELECT patient_id FROM visits WHERE diagnosis = 'J45')",
		"WITH v AS (SELECT * FROM visits) SELECT * FROM v",
		"WITH v AS (SELECT cost FROM visits) SELECT COUNT(*) FROM v",
		"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r WHERE n < 3) SELECT * FROM visits, r",
		"SELECT cost FROM visits UNION SELECT 1",
		"SELECT 1 UNION ALL SELECT patient_id FROM visits",
		"SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM patients",
		"SELECT cost FROM visits INTERSECT SELECT cost FROM visits",
		"SELECT cost FROM visits EXCEPT SELECT 0",
		"SELECT cost, ROW_NUMBER() OVER () FROM visits",
		"SELECT COUNT(*) OVER () FROM visits",
		"SELECT SUM(cost) OVER (PARTITION BY patient_id) FROM visits",
		"SELECT department, COUNT(*) OVER (PARTITION BY department) FROM visits",
		"SELECT MAX(cost) FROM visits",
		"SELECT MIN(birth_year) FROM patients",
		"SELECT string_agg(diagnosis, ',') FROM visits",
		"SELECT array_agg(patient_id) FROM visits",
		"SELECT json_agg(v) FROM visits v",
		"SELECT row_to_json(v) FROM visits v",
		"SELECT v FROM visits v",
		"SELECT visits FROM visits",
		"SELECT COUNT(*), diagnosis FROM visits GROUP BY diagnosis",
		"SELECT patient_id, COUNT(*) FROM visits GROUP BY patient_id",
		"SELECT birth_year, COUNT(*) FROM patients GROUP BY birth_year",
		"SELECT COUNT(*) FROM visits GROUP BY patient_id",
		"SELECT cost FROM visits GROUP BY cost",
		"SELECT COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id",
		"SELECT COUNT(*) FROM visits, patients",
		"SELECT COUNT(*) FROM visits NATURAL JOIN patients",
		"SELECT COUNT(*) FROM visits LEFT JOIN LATERAL (SELECT cost) x ON true",
		"SELECT visit_id FROM visits",
		"SELECT COUNT(visit_id) FROM visits",
		"SELECT SUM(visit_id) FROM visits",
		"SELECT COUNT(*) FROM visits WHERE visit_id = 1",
		"SELECT * FROM ONLY visits",
		"SELECT * FROM visits TABLESAMPLE SYSTEM (1)",
		"SELECT ctid, xmin FROM visits",
		"SELECT COUNT(*) FROM visits WHERE ctid = '(0,1)'",
		"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits",
		"SELECT mode() WITHIN GROUP (ORDER BY diagnosis) FROM visits",
		"SELECT COUNT(*) FILTER (WHERE cost > 100) FROM visits",
		"SELECT COUNT(DISTINCT diagnosis) FROM visits",
		"SELECT COUNT(*) FROM visits HAVING COUNT(*) > 10",
		"SELECT COUNT(*) * 0 + MAX(cost) FROM visits",
		"SELECT SUM(cost * 1000000) FROM visits",
		"SELECT SUM(cost) / COUNT(*) FROM visits",
		"SELECT COUNT(*) FROM visits WHERE cost = age",
		"SELECT COUNT(*) FROM visits WHERE lower(diagnosis) = 'j45'",
		"SELECT * FROM visits WHERE 1 = 1 OR patient_id = 1",
		"VALUES ((SELECT cost FROM visits LIMIT 1))",
		"SELECT * FROM pg_catalog.pg_class, visits",
		"SELECT /**/ * /**/ FROM /* visits */ visits",
		"SEL/**/ECT * FROM visits",
		"SELECT * FR/* x */OM visits",
		"SELECT * FROM vis/**/its",
		"SELECT * -- comment\nFROM visits",
		"SELECT * FROM\tvisits\n",
		`SELECT * FROM "Visits"`,
		`SELECT * FROM "VISITS"`,
		`SELECT * FROM U&"vi\0073its"`,
		`SELECT * FROM U&"!0076isits" UESCAPE '!'`,
		"SELECT * FROM visits\u200b",
		"SELECT * FROM vis\u200bits",
		"SELECT * FROM ｖｉｓｉｔｓ",
		"SELECT $$visits$$, * FROM visits",
		"SELECT E'\\'' AS x, cost FROM visits",
		"SELECT 'a'';' AS x, cost FROM visits",
		"SELECT /* /* nested */ visits */ cost FROM visits",
		"SELECT cost FROM visits /* unterminated",
	)
	// Tiny groups and differencing: answered, but only with noise and a charge.
	add("difference", dpAnswer,
		"SELECT COUNT(*) FROM visits WHERE patient_id = 42",
		"SELECT COUNT(*) FROM visits WHERE patient_id <> 42",
		"SELECT COUNT(*) FROM visits WHERE NOT (patient_id = 42)",
		"SELECT COUNT(*) FROM visits",
		"SELECT SUM(cost) FROM visits WHERE patient_id = 42",
		"SELECT SUM(cost) FROM visits WHERE patient_id <> 42",
		"SELECT AVG(age) FROM visits WHERE patient_id = 42",
		"SELECT COUNT(*) FROM patients WHERE patient_id = 42",
		"SELECT COUNT(*) FROM patients WHERE patient_id = 42 AND birth_year = 1970",
		"SELECT COUNT(*) FROM patients WHERE patient_id = 42 AND birth_year < 1970",
		"SELECT SUM(birth_year) FROM patients WHERE patient_id = 42",
		"SELECT sex, COUNT(*) FROM patients WHERE patient_id = 42 GROUP BY sex",
		"SELECT department, COUNT(*), SUM(cost) FROM visits WHERE patient_id = 42 GROUP BY department",
		"SELECT COUNT(*) FROM visits WHERE patient_id IN (42, 43)",
		"SELECT COUNT(*) FROM visits WHERE patient_id BETWEEN 42 AND 42",
		"SELECT COUNT(*) FROM visits WHERE patient_id >= 42 AND patient_id <= 42",
		"SELECT COUNT(*) FROM visits WHERE patient_id < 43 AND patient_id > 41",
		"SELECT COUNT(*) FROM visits WHERE age > 100 AND department = 'pediatrics'",
		"SELECT COUNT(*) FROM visits WHERE cost >= 19999",
		"SELECT COUNT(*) FROM visits WHERE patient_id = 42 OR patient_id = 43",
		"SELECT COUNT(*) FROM visits WHERE visit_date = '2023-03-14' AND patient_id = 42",
		"SELECT SUM(length_of_stay) FROM visits WHERE patient_id = 42",
	)
	add("difference", dpOrRefuse,
		"SELECT COUNT(*) FROM visits WHERE diagnosis = 'J45' AND patient_id = 42",
		"SELECT COUNT(*) FROM visits WHERE diagnosis LIKE 'J%' AND patient_id = 42",
		"SELECT COUNT(*) FROM visits WHERE patient_id IS NULL",
		"SELECT COUNT(*) FROM visits WHERE patient_id IS NOT NULL",
	)
	// Catalog and statistics paths: the shadow cluster has the schema, no rows.
	for _, s := range []string{
		"SELECT COALESCE(SUM(reltuples), 0)::bigint FROM pg_class WHERE relname IN ('visits', 'patients')",
		"SELECT relpages FROM pg_class WHERE relname = 'visits'",
		"SELECT COUNT(*) FROM pg_stats WHERE tablename = 'visits'",
		"SELECT COALESCE(SUM(n_live_tup + n_tup_ins), 0) FROM pg_stat_user_tables",
		"SELECT COALESCE(SUM(seq_tup_read), 0) FROM pg_stat_all_tables WHERE relname = 'visits'",
		"SELECT COALESCE(SUM(tup_inserted + tup_returned), 0) - COALESCE(SUM(tup_inserted + tup_returned), 0) FROM pg_stat_database",
		"SELECT pg_relation_size('visits')",
		"SELECT pg_total_relation_size('public.visits')",
		"SELECT pg_table_size('patients')",
		"SELECT pg_indexes_size('patients')",
		"SELECT COALESCE(SUM(n_distinct), 0) FROM pg_stats WHERE tablename = 'patients'",
	} {
		cs = append(cs, advCase{cat: "catalog", sql: s, want: catalogOrRefuse, zero: true})
	}
	add("catalog", catalogOrRefuse,
		"SELECT most_common_vals::text FROM pg_stats WHERE tablename = 'visits'",
		"SELECT histogram_bounds::text FROM pg_stats WHERE tablename = 'patients'",
		"SELECT stanullfrac FROM pg_statistic",
		"SELECT relname, reltuples FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace",
		"SELECT datname, numbackends, xact_commit FROM pg_stat_database",
		"SELECT pg_database_size(current_database())",
		"SELECT query FROM pg_stat_activity",
		"SELECT * FROM pg_stat_statements",
		"SELECT current_user, session_user",
		"SELECT version()",
		"SELECT 1",
		"SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'",
		"SELECT attname FROM pg_attribute WHERE attrelid = 'visits'::regclass AND attnum > 0",
		"SELECT has_table_privilege('visits', 'INSERT')",
		"SELECT rolname FROM pg_roles",
		"SHOW data_directory",
		"SHOW hba_file",
		"SELECT name, setting FROM pg_settings WHERE name = 'port'",
		"SELECT * FROM pg_ls_waldir()",
		"SELECT inet_server_addr()",
	)
	add("catalog", refuse,
		"EXPLAIN SELECT * FROM visits",
		"EXPLAIN ANALYZE SELECT * FROM visits",
		"EXPLAIN ANALYZE SELECT COUNT(*) FROM visits WHERE patient_id = 42",
		"EXPLAIN (ANALYZE, BUFFERS) SELECT cost FROM visits",
		"EXPLAIN (FORMAT JSON) SELECT COUNT(*) FROM patients",
		"ANALYZE visits",
		"VACUUM visits",
	)
	// The shadow connections all analysts share (SECURITY.md, "The catalog
	// route"): functions that run SQL text, signal other backends, lock,
	// write or show other sessions never reach them.
	// The outer SQL of a post-processing statement runs on the same
	// shadow connections, after its DP leaves: it is checked against the
	// same allow-lists before any leaf is charged.
	add("catalog", refuse,
		"SELECT n, query_to_xml('SELECT pg_advisory_lock(1)', true, true, '') FROM (SELECT COUNT(*) AS n FROM visits) s",
		"SELECT n FROM (SELECT COUNT(*) AS n FROM visits) s, pg_stat_activity a",
	)
	add("catalog", refuse,
		"SELECT query_to_xml('SELECT set_config(''TimeZone'', ''Asia/Tokyo'', false)', true, true, '')",
		"SELECT QUERY_TO_XML('SELECT 1', true, true, '')",
		`SELECT "pg_catalog"."query_to_xml"('SELECT 1', true, true, '')`,
		"SELECT query_to_xml_and_xmlschema('SELECT 1', true, true, '')",
		"SELECT query_to_xmlschema('SELECT 1', true, true, '')",
		"SELECT * FROM pg_class c, LATERAL query_to_xml('SELECT pg_advisory_lock(1)', true, true, '') x",
		"WITH q AS (SELECT query_to_xml('SELECT lo_creat(-1)', true, true, '')) SELECT * FROM q",
		"SELECT relname FROM pg_class ORDER BY query_to_xml('SELECT 1', true, true, '')::text",
		"SELECT cursor_to_xml('c', 1, true, true, '')",
		"SELECT table_to_xml('pg_class', true, true, '')",
		"SELECT schema_to_xml('public', true, true, '')",
		"SELECT database_to_xml(true, true, '')",
		"SELECT xpath('/a', '<a/>'::xml)",
		"SELECT ts_stat('SELECT to_tsvector(relname) FROM pg_class')",
		"SELECT (1).pg_cancel_backend",
		"SELECT (1).pg_terminate_backend",
		"SELECT (42).pg_advisory_lock",
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity",
		"SELECT pg_try_advisory_lock_shared(1)",
		"SELECT lo_creat(-1)",
		"SELECT lo_from_bytea(0, 'x')",
		"SELECT loread(lo_open(1, 262144), 10)",
		"SELECT * FROM pg_stat_get_activity(NULL)",
		"SELECT pg_stat_get_backend_activity(1)",
		"SELECT * FROM pg_locks",
		"SELECT * FROM pg_prepared_xacts",
		"SELECT * FROM pg_backend_memory_contexts",
		"EXPLAIN ANALYZE SELECT 1",
	)
	// Error channels: an error raised on only some rows would reveal them.
	add("error", refuse,
		"SELECT COUNT(*) FROM visits WHERE 1/(patient_id - 42) = 0",
		"SELECT COUNT(*) FROM visits WHERE cost / 0 > 1",
		"SELECT SUM(1 / (age - 30)) FROM visits",
		"SELECT COUNT(*) FROM visits WHERE CASE WHEN patient_id = 42 THEN 1/0 ELSE 1 END = 1",
		"SELECT COUNT(*) FROM visits WHERE diagnosis::int > 0",
		"SELECT COUNT(*) FROM visits WHERE CAST(diagnosis AS date) > '2020-01-01'",
		"SELECT COUNT(*) FROM visits WHERE cost::int2 > 0",
		"SELECT SUM(cost * 1e300 * 1e300) FROM visits",
		// Issue 14: a dangling LIKE escape (an exact-row oracle), an
		// intermediate numeric overflow on the rows a CASE selects, and
		// per-row work hidden in a long ILIKE pattern — each refused at
		// plan time, before the charge.
		`SELECT COUNT(*) FROM visits WHERE patient_id = 42 AND diagnosis LIKE 'A81\'`,
		`SELECT COUNT(*) FILTER (WHERE diagnosis LIKE 'A81%\') FROM visits`,
		"SELECT SUM(CASE WHEN diagnosis = 'C18' THEN (age + 1)"+strings.Repeat(" * 1e999", 140)+strings.Repeat(" * 1e-999", 140)+" ELSE 0 END) FROM visits",
		"SELECT SUM(CASE WHEN patient_id = 42 THEN CASE WHEN diagnosis ILIKE '%"+strings.Repeat("é", 400)+"%' THEN cost ELSE 0 END ELSE 0 END) FROM visits",
		"SELECT COUNT(*) FROM visits WHERE age * 2147483647 > 0",
		"SELECT COUNT(*) FROM visits WHERE diagnosis ~ '('",
		"SELECT COUNT(*) FROM visits WHERE diagnosis ~ CASE WHEN patient_id = 42 THEN '(' ELSE 'a' END",
		"SELECT COUNT(*) FROM visits WHERE diagnosis SIMILAR TO 'J%'",
		"SELECT COUNT(*) FROM visits WHERE sqrt(age - 50) > 1",
		"SELECT COUNT(*) FROM visits WHERE ln(cost) > 1",
		"SELECT COUNT(*) FROM visits WHERE to_date(diagnosis, 'YYYY') > '2020-01-01'",
		"SELECT COUNT(*) FROM patients WHERE (birth_year - 1970)::text::int / (birth_year - 1970) = 1",
		"SELECT COUNT(*) FROM visits WHERE substr(diagnosis, 1, 1) = 'J'",
		"SELECT COUNT(*) FROM visits WHERE age = 'abc'",
		"SELECT COUNT(*) FROM visits WHERE visit_date = '2023-02-30'",
	)
	// Provably empty (BI tools send these to learn result types): the shadow
	// answers them with no rows; literals the column cannot hold compare as
	// numbers and are answered with noise.
	add("raw", catalogAnswer, "SELECT * FROM visits WHERE false", "SELECT cost FROM visits LIMIT 0", "SELECT * FROM visits WHERE 1 = 0")
	add("error", dpOrRefuse,
		"SELECT COUNT(*) FROM visits WHERE age = 99999999999999999999",
		"SELECT COUNT(*) FROM visits WHERE cost > 1e400",
		"SELECT COUNT(*) FROM visits WHERE age > -99999999999999999999",
	)
	// Time channels.
	add("time", refuse,
		"SELECT pg_sleep(1)",
		"SELECT COUNT(*) FROM visits WHERE patient_id = 42 AND pg_sleep(1) IS NULL",
		"SELECT CASE WHEN (SELECT COUNT(*) FROM visits WHERE patient_id = 42) > 2 THEN pg_sleep(1) END",
		"SELECT pg_sleep_for('1 second')",
		"SELECT pg_sleep_until(now() + interval '1 second')",
		"SELECT COUNT(*) FROM visits WHERE md5(repeat(diagnosis, 100000)) = 'x'",
		"SELECT COUNT(*) FROM visits WHERE diagnosis ~ '(a+)+$'",
		"SELECT COUNT(*) FROM visits, generate_series(1, 1000000)",
	)
	// Writes and server functions.
	add("write", refuse,
		"INSERT INTO visits (patient_id) VALUES (1)",
		"UPDATE visits SET cost = 0",
		"DELETE FROM visits WHERE patient_id = 42",
		"DELETE FROM patients",
		"TRUNCATE visits",
		"MERGE INTO visits v USING patients p ON v.patient_id = p.patient_id WHEN MATCHED THEN DELETE",
		"CREATE TABLE t AS SELECT * FROM visits",
		"CREATE TEMP TABLE t (x int)",
		"CREATE VIEW v AS SELECT * FROM visits",
		"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
		"DROP TABLE visits",
		"ALTER TABLE visits ADD COLUMN x int",
		"GRANT SELECT ON visits TO PUBLIC",
		"SELECT * INTO t FROM visits",
		"SELECT COUNT(*) INTO t FROM visits",
		"WITH d AS (DELETE FROM visits RETURNING *) SELECT COUNT(*) FROM d",
		"COPY visits TO STDOUT",
		"COPY (SELECT * FROM visits) TO STDOUT",
		"COPY patients FROM STDIN",
		"COPY visits TO '/tmp/x'",
		"COPY (SELECT 1) TO PROGRAM 'id'",
		"DO $$BEGIN PERFORM 1; END$$",
		"CALL p()",
		"PREPARE p AS SELECT * FROM visits",
		"EXECUTE p",
		"DECLARE c CURSOR FOR SELECT * FROM visits",
		"LOCK visits",
		"LISTEN ch",
		"NOTIFY ch, 'x'",
		"SELECT pg_notify('ch', 'x')",
		"SELECT dblink('dbname=hospital', 'SELECT cost FROM visits')",
		"SELECT * FROM dblink('host=127.0.0.1', 'SELECT 1') AS t(x int)",
		"SELECT dblink_exec('dbname=hospital', 'DELETE FROM visits')",
		"SELECT lo_import('/etc/passwd')",
		"SELECT lo_export(1, '/tmp/x')",
		"SELECT pg_read_file('/etc/passwd')",
		"SELECT pg_read_binary_file('postgresql.conf')",
		"SELECT pg_ls_dir('.')",
		"SELECT pg_stat_file('postgresql.conf')",
		"SELECT set_config('search_path', 'evil', false)",
		"SELECT set_config('role', 'postgres', false)",
		"SELECT pg_terminate_backend(1)",
		"SELECT pg_cancel_backend(1)",
		"SELECT pg_reload_conf()",
		"SELECT nextval('s')",
		"SELECT pg_advisory_lock(1)",
		"SET ROLE postgres",
		"SET SESSION AUTHORIZATION postgres",
		"set role = 'dpproxy_reader'",
		"RESET ROLE",
		"SET LOCAL ROLE postgres",
		"SAVEPOINT a",
		"PREPARE TRANSACTION 'x'",
		"LOAD 'plpgsql'",
		"CHECKPOINT",
		"REINDEX TABLE visits",
		"CLUSTER visits",
		"COMMENT ON TABLE visits IS 'x'",
		"SECURITY LABEL ON TABLE visits IS 'x'",
		"REFRESH MATERIALIZED VIEW v",
		"IMPORT FOREIGN SCHEMA public FROM SERVER s INTO public",
		"EXPLAIN ANALYZE DELETE FROM visits",
	)
	// What drivers send when a pooled connection is released (asyncpg):
	// answered by the proxy, nothing reaches a database.
	add("write", catalogAnswer, "UNLISTEN *", "SELECT pg_advisory_unlock_all()", "CLOSE ALL")
	// FETCH of a cursor never declared: 34000, as in PostgreSQL.
	cs = append(cs, advCase{cat: "write", sql: "FETCH ALL FROM c", want: refuse, codes: []string{"34000"}})
	// A cursor over a DP query: released (charged) once at DECLARE.
	cs = append(cs, advCase{cat: "write", want: dpAnswer, simple: true,
		sql: "BEGIN; DECLARE c CURSOR FOR SELECT department, COUNT(*) FROM visits GROUP BY department; FETCH 2 FROM c; FETCH ALL FROM c"})
	// search_path hijacks: the DP path names "public"."visits" itself, so
	// these are answered from the real table (with noise) or refused.
	for _, s := range []string{
		"SET search_path = pg_temp, public; SELECT COUNT(*) FROM visits",
		"SET search_path TO evil; SELECT COUNT(*) FROM visits",
		"SET search_path = ''; SELECT COUNT(*) FROM visits",
	} {
		cs = append(cs, advCase{cat: "write", sql: s, want: dpOrRefuse, simple: true})
	}
	// Multi-statement strings: each statement is routed on its own.
	for _, s := range []string{
		"SELECT 1; SELECT * FROM visits",
		"SELECT COUNT(*) FROM visits; DELETE FROM visits",
		"SELECT 1; SET ROLE postgres",
		"SELECT 1;/* ; */SELECT cost FROM visits",
		"SELECT ';' ; SELECT cost FROM visits",
		"SELECT $$;$$; SELECT cost FROM visits",
		"SELECT E'\\';'; SELECT cost FROM visits",
		"BEGIN; SELECT cost FROM visits; COMMIT",
		"BEGIN; SET LOCAL search_path = evil; SELECT * FROM visits",
		"SELECT 1; COPY visits TO STDOUT",
	} {
		cs = append(cs, advCase{cat: "tricks", sql: s, want: refuse, simple: true})
	}
	add("tricks", refuse,
		"SELECT 'x' /* ; DELETE FROM visits */ FROM visits",
		`SELECT "cost" FROM "public"."visits"`,
		`SELECT U&"\0063ost" FROM visits`,
		"SELECT $tag$ ' $tag$, cost FROM visits",
		"SELECT e'\\x41', cost FROM visits",
		"SELECT cost FROM visits -- ; SELECT COUNT(*) FROM visits",
		"SELECT cost FROM\u00a0visits",
		"SELECT `cost` FROM visits",
		"SELECT cost FROM visits # comment",
		"/*! SELECT cost FROM visits */",
	)
	// A NUL byte inside a Query message is malformed: the proxy may close
	// the session, as long as nothing is charged and a new one works.
	cs = append(cs, advCase{cat: "tricks", sql: "SELECT cost FROM visits\x00", want: refuse, simple: true, fatal: true},
		advCase{cat: "tricks", sql: "SELECT COUNT(*) FROM visits\x00; DELETE FROM visits", want: refuse, simple: true, fatal: true})
	// Work that one person multiplies (issue 27): unit self-joins with more
	// copies or a larger fan-out than the planner accepts are refused
	// before any charge (54000), wherever the predicate on the person
	// sits; one self-join is answered (each later copy cut to the
	// person's allowance before the join).
	add("work", refuse,
		"SELECT COUNT(*) FROM visits a JOIN visits b ON a.patient_id = b.patient_id JOIN visits c ON c.patient_id = a.patient_id WHERE a.patient_id = 42",
		"SELECT COUNT(*) FROM visits a JOIN visits b ON a.patient_id = b.patient_id JOIN visits c ON c.patient_id = b.patient_id WHERE c.diagnosis = 'x' AND c.patient_id = 42",
		"SELECT COUNT(*) FROM visits a JOIN visits b ON b.patient_id = a.patient_id JOIN visits c ON c.patient_id = a.patient_id JOIN visits d ON d.patient_id = a.patient_id",
		"SELECT COUNT(*) FROM patients p JOIN visits a ON a.patient_id = p.patient_id JOIN visits b ON b.patient_id = p.patient_id JOIN visits c ON c.patient_id = p.patient_id",
	)
	add("work", dpAnswer,
		"SELECT COUNT(*) FROM visits a JOIN visits b ON a.patient_id = b.patient_id WHERE b.diagnosis = 'x' AND a.patient_id = 42",
		"SELECT COUNT(*) FROM visits v JOIN patients p ON p.patient_id = v.patient_id WHERE v.patient_id = 42",
	)
	// Extended protocol: parameters are bound as checked literals.
	ext := func(want expect, sql string, params ...string) {
		cs = append(cs, advCase{cat: "extended", sql: sql, want: want, params: params})
	}
	ext(refuse, "SELECT COUNT(*) FROM $1", "visits")
	ext(refuse, "SELECT * FROM visits WHERE patient_id = $1", "42")
	ext(refuse, "SELECT $1::text FROM visits", "x")
	ext(refuse, "SELECT COUNT(*) FROM visits WHERE age > $1", "1 OR 1=1")
	ext(refuse, "SELECT COUNT(*) FROM visits WHERE age > $1", "1; DELETE FROM visits")
	ext(refuse, "SELECT COUNT(*) FROM visits WHERE visit_date > $1", "not a date")
	ext(refuse, "SELECT COUNT(*) FROM visits WHERE age > $1", "99999999999999999999999")
	ext(dpAnswer, "SELECT COUNT(*) FROM visits WHERE $1", "true")
	ext(refuse, "SELECT COUNT(*) FROM visits WHERE $1", "patient_id = 42")
	ext(refuse, "SELECT pg_sleep($1)", "1")
	ext(refuse, "SELECT pg_read_file($1)", "/etc/passwd")
	ext(refuse, "SELECT set_config($1, $2, false)", "search_path", "evil")
	ext(dpAnswer, "SELECT COUNT(*) FROM visits WHERE patient_id = $1", "42")
	ext(dpAnswer, "SELECT COUNT(*) FROM visits WHERE department = $1", "oncology' OR '1'='1")
	ext(dpAnswer, "SELECT SUM(cost) FROM visits WHERE age BETWEEN $1 AND $2", "0", "110")
	ext(dpAnswer, "SELECT COUNT(*) FROM visits WHERE diagnosis = $1", "x'); DELETE FROM visits; --")
	ext(catalogOrRefuse, "SELECT $1::text", "it's")

	// The SQLSTATEs each category's refusals may have (observed and
	// reviewed): writes and side effects are 42501; unsupported shapes
	// 0A000; names that are not the protected table, or columns it does not
	// expose, 42P01/42703; a literal the column cannot hold 22007/22P02 (the
	// analyst's own literal, checked before any data is read).
	catCodes := map[string][]string{
		"raw":     {"0A000", "42501", "42601", "42703", "42P01"},
		"error":   {"0A000", "22007", "22P02", "22003", "22025", "54000", "54001"},
		"time":    {"0A000", "42501", "42601"},
		"write":   {"42501"},
		"tricks":  {"0A000", "42501", "42601", "42703"},
		"catalog": {"0A000", "42501", "42704", "42P01"},
		"work":    {"54000"},
	}
	// Aggregate-shaped statements that rewrite may learn to answer (SQL
	// coverage grows): they must be refused or answered with DP, never
	// with raw values. Raw-row shapes, hidden columns and side effects stay
	// "refuse".
	for _, q := range []string{
		"SELECT COUNT(*) FROM (SELECT * FROM visits) v",
		"SELECT COUNT(*) FROM visits WHERE cost > (SELECT AVG(cost) FROM visits)",
		"SELECT COUNT(*) FROM patients WHERE patient_id IN (SELECT patient_id FROM visits WHERE diagnosis = 'J45')",
		"WITH v AS (SELECT cost FROM visits) SELECT COUNT(*) FROM v",
		"SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM patients",
		"SELECT MAX(cost) FROM visits",
		"SELECT MIN(birth_year) FROM patients",
		"SELECT COUNT(*), diagnosis FROM visits GROUP BY diagnosis",
		"SELECT COUNT(*) FROM visits GROUP BY patient_id",
		"SELECT COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id",
		"SELECT COUNT(*) FROM visits, patients",
		"SELECT COUNT(*) FROM visits NATURAL JOIN patients",
		"SELECT COUNT(*) FROM visits LEFT JOIN LATERAL (SELECT cost) x ON true",
		"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits",
		"SELECT mode() WITHIN GROUP (ORDER BY diagnosis) FROM visits",
		"SELECT COUNT(*) FILTER (WHERE cost > 100) FROM visits",
		"SELECT COUNT(DISTINCT diagnosis) FROM visits",
		"SELECT COUNT(*) FROM visits HAVING COUNT(*) > 10",
		"SELECT COUNT(*) * 0 + MAX(cost) FROM visits",
		"SELECT SUM(cost * 1000000) FROM visits",
		"SELECT SUM(cost) / COUNT(*) FROM visits",
		"SELECT COUNT(*) FROM visits WHERE cost = age",
		"SELECT COUNT(*) FROM visits WHERE lower(diagnosis) = 'j45'",
		"SELECT COUNT(*) FROM visits WHERE md5(repeat(diagnosis, 100000)) = 'x'",
		"SELECT COUNT(*) FROM visits WHERE diagnosis ~ '(a+)+$'",
		"SELECT COUNT(*) FROM visits, generate_series(1, 1000000)",
	} {
		found := false
		for i := range cs {
			if cs[i].sql == q && cs[i].want == refuse {
				cs[i].want, found = dpOrRefuse, true
			}
		}
		if !found {
			panic("adversarialCorpus: no refused case " + q)
		}
	}
	for i := range cs {
		// Error-channel statements are aggregates too: if answered, only
		// with DP and without an error (an upstream error would be XX000,
		// which no category accepts).
		if cs[i].cat == "error" && cs[i].want == refuse {
			cs[i].want = dpOrRefuse
		}
	}
	writeExceptions := map[string][]string{"SAVEPOINT a": {"25P01"}, "RESET ROLE": {"42704"},
		// SQL-level EXECUTE runs prepared DP statements only (issue 31):
		// of a name never prepared, 26000 as in PostgreSQL; in the
		// extended protocol it is refused at Parse (0A000).
		"EXECUTE p": {"26000", "0A000"}}
	for i := range cs {
		if cs[i].codes != nil || cs[i].fatal {
			continue
		}
		if c, ok := writeExceptions[cs[i].sql]; ok {
			cs[i].codes = c
			continue
		}
		cs[i].codes = catCodes[cs[i].cat]
	}
	return cs
}

// mallory is the analyst of these tests, only on their own proxy; the
// corpus runs in adversarialWorkers parallel workers, each as its own
// analyst (mallory0, …) so that budget checks do not see each other.
const (
	mallory            = "mallory"
	adversarialWorkers = 4
)

func corpusAnalysts() []string {
	var out []string
	for i := range adversarialWorkers {
		out = append(out, mallory+strconv.Itoa(i))
	}
	return out
}

// adversarialProxy starts an extra `dpproxy serve` whose config also has
// mallory.
func adversarialProxy(t *testing.T) *extraProxy {
	t.Helper()
	cfgPath, addr := extraConfig(t)
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, a := range append([]string{mallory}, corpusAnalysts()...) {
		cfg["analysts"].(map[string]any)[a] = map[string]any{"password": "plain:" + a}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return startProxy(t, cfgPath, addr)
}

// secrets are values of the data an answer or an error must never contain
// (exact totals and per-group counts, and diagnosis values), from the
// data cluster.
func adversarialSecrets(t *testing.T, ctx context.Context) []string {
	t.Helper()
	up := connect(t, ctx, env.upstreamDSN)
	var out []string
	for _, q := range []string{
		"SELECT count(*)::text FROM visits",
		"SELECT count(*)::text FROM patients",
		"SELECT count(DISTINCT patient_id)::text FROM visits",
		"SELECT sum(length_of_stay)::text FROM visits",
		"SELECT sum(cost)::bigint::text FROM visits",
		"SELECT sum(age)::text FROM visits",
		"SELECT count(*)::text FROM visits GROUP BY department",
		"SELECT count(*)::text FROM patients GROUP BY region",
		"SELECT DISTINCT diagnosis FROM visits WHERE length(diagnosis) >= 5 LIMIT 30",
		"SELECT pg_relation_size('visits')::text",
	} {
		rows, err := up.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for rows.Next() {
			var s *string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			if s != nil && len(*s) >= 4 {
				out = append(out, *s)
			}
		}
		rows.Close()
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d secrets from the data: %q", len(out), out)
	}
	return out
}

// budgetState is mallory's budget as the proxy shows it and as the ledger
// has it.
func budgetState(t *testing.T, ctx context.Context, c *pgconn.PgConn, ledger *pgx.Conn) (string, int) {
	return analystBudgetState(t, ctx, c, ledger, mallory)
}

func analystBudgetState(t *testing.T, ctx context.Context, c *pgconn.PgConn, ledger *pgx.Conn, analyst string) (string, int) {
	t.Helper()
	rs, err := c.Exec(ctx, "SHOW dp.budget").ReadAll()
	if err != nil || len(rs) != 1 || len(rs[0].Rows) != 1 {
		t.Fatalf("SHOW dp.budget: %v %v", rs, err)
	}
	var cells []string
	for _, v := range rs[0].Rows[0] {
		cells = append(cells, string(v))
	}
	var n int
	if err := ledger.QueryRow(ctx, "SELECT count(*) FROM dpproxy_ledger.charge WHERE analyst = $1", analyst).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return strings.Join(cells, "|"), n
}

var numericCell = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?$`)

func TestAdversarial_Corpus(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := adversarialProxy(t)
	secrets := adversarialSecrets(t, ctx)
	corpus := adversarialCorpus()
	if len(corpus) < 150 {
		t.Fatalf("corpus has %d cases, want at least 150", len(corpus))
	}
	counts := map[string]int{}
	runs := 0
	for _, tc := range corpus {
		counts[tc.cat]++
		switch {
		case tc.params != nil, tc.simple:
			runs++
		default:
			runs += 2
		}
	}
	t.Run("workers", func(t *testing.T) {
		for w, analyst := range corpusAnalysts() {
			t.Run(analyst, func(t *testing.T) {
				t.Parallel()
				ledger := connect(t, ctx, ledgerDSN())
				for i := w; i < len(corpus); i += adversarialWorkers {
					tc := corpus[i]
					modes := []string{"simple", "extended"}
					if tc.params != nil {
						modes = []string{"extended"}
					} else if tc.simple {
						modes = []string{"simple"}
					}
					for _, mode := range modes {
						name := fmt.Sprintf("%03d %s %s: %q", i, tc.cat, mode, tc.sql)
						runAdversarialCase(t, ctx, p.dsn(analyst), analyst, ledger, secrets, tc, mode, name)
					}
				}
			})
		}
	})
	t.Logf("adversarial corpus: %d cases (%v), %d runs", len(corpus), counts, runs)
	// The ledger has no charge of these analysts beyond the budget.
	ledger := connect(t, ctx, ledgerDSN())
	var spent float64
	if err := ledger.QueryRow(ctx, "SELECT COALESCE(max(s), 0) FROM (SELECT sum(cost_epsilon)::float8 AS s FROM dpproxy_ledger.charge WHERE analyst LIKE 'mallory_' GROUP BY analyst) x").Scan(&spent); err != nil {
		t.Fatal(err)
	}
	if spent > 3 || spent == 0 {
		t.Fatalf("corpus analysts spent at most ε = %v each, want > 0 (DP answers charge) and ≤ 3", spent)
	}
}

const adversarialEpsilon = "0.005"

func runAdversarialCase(t *testing.T, ctx context.Context, dsn, analyst string, ledger *pgx.Conn, secrets []string, tc advCase, mode, name string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Message) }
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("%s: connect: %v", name, err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "SET dp.epsilon = "+adversarialEpsilon+"; SET dp.cache = off").ReadAll(); err != nil {
		t.Fatalf("%s: settings: %v", name, err)
	}
	budget0, charges0 := analystBudgetState(t, ctx, c, ledger, analyst)
	notices = nil

	var results []*pgconn.Result
	if mode == "simple" {
		results, err = c.Exec(ctx, tc.sql).ReadAll()
	} else {
		params := make([][]byte, len(tc.params))
		for i, p := range tc.params {
			params[i] = []byte(p)
		}
		r := c.ExecParams(ctx, tc.sql, params, nil, nil, nil).Read()
		results, err = []*pgconn.Result{r}, r.Err
	}
	// dp NOTICEs and the charges they mean: one per DP statement, so a
	// post-processing statement over n DP answers (n NOTICEs) is one
	// charge (release.RunBatch).
	dpNotices, dpCharges := 0, 0
	for _, n := range notices {
		if strings.HasPrefix(n, "dp: ") {
			dpNotices++
			dpCharges++
		}
		var leaves int
		if _, err := fmt.Sscanf(n, "post-processing over %d DP answers", &leaves); err == nil && leaves > 1 {
			dpCharges -= leaves - 1
		}
	}
	if tc.fatal {
		var pe *pgconn.PgError
		if err == nil || (errors.As(err, &pe) && pe.Code != "08P01") {
			t.Errorf("%s: malformed message got %v, want 08P01 or a closed session", name, err)
		}
		c2, err := pgconn.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatalf("%s: reconnect: %v", name, err)
		}
		defer c2.Close(context.Background())
		if _, err := c2.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
			t.Errorf("%s: SELECT 1 on a new session: %v", name, err)
		}
		if budget1, charges1 := analystBudgetState(t, ctx, c2, ledger, analyst); budget1 != budget0 || charges1 != charges0 {
			t.Errorf("%s: malformed message changed the budget: %s → %s, %d new charges", name, budget0, budget1, charges1-charges0)
		}
		return
	}
	if c.TxStatus() != 'I' {
		if _, err := c.Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
			t.Errorf("%s: ROLLBACK after the case: %v", name, err)
		}
	}
	// The session still works.
	if rs, err := c.Exec(ctx, "SELECT 1").ReadAll(); err != nil || len(rs) != 1 || len(rs[0].Rows) != 1 || string(rs[0].Rows[0][0]) != "1" {
		t.Errorf("%s: SELECT 1 afterwards: %v %v", name, rs, err)
		return
	}
	budget1, charges1 := analystBudgetState(t, ctx, c, ledger, analyst)

	var pgErr *pgconn.PgError
	if err != nil {
		if !errors.As(err, &pgErr) {
			t.Errorf("%s: error without SQLSTATE: %v", name, err)
			return
		}
		if tc.want == dpAnswer || tc.want == catalogAnswer {
			t.Errorf("%s: want %s, got %s %s", name, tc.want, pgErr.Code, pgErr.Message)
			return
		}
		allowed := refusalCodes[pgErr.Code]
		if tc.codes != nil {
			allowed = false
			for _, c := range tc.codes {
				allowed = allowed || c == pgErr.Code
			}
		}
		if !allowed {
			t.Errorf("%s: refused with SQLSTATE %s (%s), not a refusal code", name, pgErr.Code, pgErr.Message)
		}
		text := pgErr.Message + "\n" + pgErr.Detail + "\n" + pgErr.Hint
		for _, s := range secrets {
			if strings.Contains(text, s) && !strings.Contains(tc.sql, s) {
				t.Errorf("%s: error text contains the data value %q: %s", name, s, text)
			}
		}
		// A refusal may follow DP answers of earlier statements of the
		// same string; each of those has its NOTICEs and one charge.
		if charges1-charges0 != dpCharges {
			t.Errorf("%s: %d charges and %d dp NOTICEs (%d charges) for a refused statement", name, charges1-charges0, dpNotices, dpCharges)
		}
		if dpNotices == 0 && budget1 != budget0 {
			t.Errorf("%s: refusal changed SHOW dp.budget from %s to %s", name, budget0, budget1)
		}
		return
	}
	switch tc.want {
	case refuse:
		t.Errorf("%s: answered (%d results, notices %q), want a refusal", name, len(results), notices)
		return
	case dpAnswer, dpOrRefuse:
		if dpNotices == 0 || charges1-charges0 != dpCharges || budget1 == budget0 {
			t.Errorf("%s: answered with notices %q, %d new charges, budget %s → %s; want a dp: NOTICE per answer and one charge per statement",
				name, notices, charges1-charges0, budget0, budget1)
		}
	case catalogAnswer, catalogOrRefuse:
		if dpNotices != 0 || charges1 != charges0 || budget1 != budget0 {
			t.Errorf("%s: catalog answer with notices %q, %d new charges, budget %s → %s", name, notices, charges1-charges0, budget0, budget1)
		}
	}
	for _, r := range results {
		for _, row := range r.Rows {
			for _, v := range row {
				cell := string(v)
				for _, s := range secrets {
					if tc.want != dpAnswer && tc.want != dpOrRefuse && strings.Contains(cell, s) && !strings.Contains(tc.sql, s) {
						t.Errorf("%s: answer contains the data value %q", name, s)
					}
				}
				if tc.zero && numericCell.MatchString(cell) {
					if f, err := strconv.ParseFloat(cell, 64); err != nil || f > 16384 {
						t.Errorf("%s: statistic %q from the catalog, want ≤ 16384 (the shadow has no rows)", name, cell)
					}
				}
			}
		}
	}
}

// TestAdversarial_NamedStatements: the extended protocol with named
// statements. Preparing (Parse + Describe) a DP statement plans it without
// reading data or charging; each execution charges once (cache off); a
// statement refused at Parse stays refused at every later step; the
// session stays usable.
func TestAdversarial_NamedStatements(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := adversarialProxy(t)
	ledger := connect(t, ctx, ledgerDSN())
	cfg, err := pgconn.ParseConfig(p.dsn(mallory))
	if err != nil {
		t.Fatal(err)
	}
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Message) }
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "SET dp.epsilon = "+adversarialEpsilon+"; SET dp.cache = off").ReadAll(); err != nil {
		t.Fatal(err)
	}
	budget0, charges0 := budgetState(t, ctx, c, ledger)
	sd, err := c.Prepare(ctx, "dp_by_unit", "SELECT department, COUNT(*) FROM visits WHERE patient_id = $1 GROUP BY department", nil)
	if err != nil {
		t.Fatalf("prepare a DP statement: %v", err)
	}
	if len(sd.Fields) != 2 || len(sd.ParamOIDs) != 1 {
		t.Fatalf("described %d fields and %d parameters, want 2 and 1", len(sd.Fields), len(sd.ParamOIDs))
	}
	if b, n := budgetState(t, ctx, c, ledger); b != budget0 || n != charges0 {
		t.Fatalf("Parse/Describe of a DP statement charged: %s → %s, %d charges", budget0, b, n-charges0)
	}
	for i, id := range []string{"42", "43"} {
		r := c.ExecPrepared(ctx, "dp_by_unit", [][]byte{[]byte(id)}, nil, nil).Read()
		if r.Err != nil {
			t.Fatalf("execute with %s: %v", id, r.Err)
		}
		if len(r.Rows) != 7 {
			t.Fatalf("execute with %s: %d rows, want one per public department (7)", id, len(r.Rows))
		}
		if _, n := budgetState(t, ctx, c, ledger); n != charges0+i+1 || len(notices) != i+1 || !strings.HasPrefix(notices[i], "dp: ") {
			t.Fatalf("after execution %d: %d charges, notices %q; want one charge and one dp: NOTICE per execution", i+1, n-charges0, notices)
		}
	}
	budget1, charges1 := budgetState(t, ctx, c, ledger)
	for _, q := range []string{
		"SELECT cost FROM visits WHERE patient_id = $1",
		"SELECT COUNT(*) FROM $1",
		"SELECT pg_read_file($1)",
		"SELECT 1; SELECT cost FROM visits",
	} {
		// The refusal may come at Parse/Describe or, for a statement whose
		// parameters must be bound before it can be planned, at Execute;
		// either way with a refusal code, and nothing runs.
		var pe *pgconn.PgError
		sd, err := c.Prepare(ctx, "", q, nil)
		if err == nil {
			params := make([][]byte, len(sd.ParamOIDs))
			for i := range params {
				params[i] = []byte("42")
			}
			r := c.ExecPrepared(ctx, "", params, nil, nil).Read()
			if len(r.Rows) != 0 {
				t.Errorf("execute %q returned %d rows", q, len(r.Rows))
			}
			err = r.Err
		} else if r := c.ExecPrepared(ctx, "", [][]byte{[]byte("42")}, nil, nil).Read(); r.Err == nil {
			t.Errorf("execute of the refused unnamed statement %q succeeded", q)
		}
		if !errors.As(err, &pe) || !refusalCodes[pe.Code] {
			t.Errorf("%q in the extended protocol: %v, want a refusal", q, err)
		}
	}
	if rs, err := c.Exec(ctx, "SELECT 1").ReadAll(); err != nil || string(rs[0].Rows[0][0]) != "1" {
		t.Fatalf("SELECT 1 after refusals: %v", err)
	}
	if b, n := budgetState(t, ctx, c, ledger); b != budget1 || n != charges1 {
		t.Fatalf("refused statements charged: %s → %s, %d charges", budget1, b, n-charges1)
	}
}

// TestAdversarial_PsqlMetaCommands: psql meta-commands that read or write
// through other protocol paths (\copy uses COPY, \lo_import and \lo_export
// use large-object functions over the fastpath FunctionCall message, \gexec
// runs the results of a query as statements). Each is refused and the
// session goes on (ON_ERROR_STOP off), and nothing is charged.
func TestAdversarial_PsqlMetaCommands(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := adversarialProxy(t)
	ledger := connect(t, ctx, ledgerDSN())
	count := func() int {
		var n int
		if err := ledger.QueryRow(ctx, "SELECT count(*) FROM dpproxy_ledger.charge WHERE analyst = $1", mallory).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	out := t.TempDir() + "/out"
	cmds := []string{
		`\copy visits TO STDOUT`,
		`\copy (SELECT cost FROM visits) TO '` + out + `'`,
		// psql 15.20 and later read the script's next lines as COPY data
		// until \. even when the server refuses the COPY (as PostgreSQL
		// itself would); older ones say "invalid command \." and go on.
		`\copy patients FROM STDIN` + "\n" + `\.`,
		`\lo_import /etc/hostname`,
		`\lo_export 1 '` + out + `'`,
		`\lo_list`,
		`SELECT 'SELECT cost FROM visits' \gexec`,
		`SELECT 'DELETE FROM visits' \gexec`,
		`\set q 'SELECT * FROM visits'` + "\n" + `:q;`,
	}
	var script strings.Builder
	for _, c := range cmds {
		script.WriteString(c + "\n")
		script.WriteString("SELECT 'alive' AS a;\n")
	}
	cmd := []string{"-v", "ON_ERROR_STOP=0", "-A", "-t"}
	f := t.TempDir() + "/script.sql"
	if err := os.WriteFile(f, []byte(script.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, _ := psql(t, p.dsn(mallory), append(cmd, "-f", f)...)
	if n := strings.Count(stdout, "alive"); n != len(cmds) {
		t.Fatalf("the session answered SELECT 'alive' %d times after %d meta-commands, want every time\nstdout:\n%s\nstderr:\n%s", n, len(cmds), stdout, stderr)
	}
	if strings.Contains(stdout, "\t") || regexp.MustCompile(`(?m)^[0-9]+(\.[0-9]+)?$`).MatchString(stdout) {
		t.Fatalf("a meta-command returned rows:\n%s", stdout)
	}
	if b, err := os.ReadFile(out); err == nil && len(b) > 0 {
		t.Fatalf("a meta-command wrote %d bytes to %s", len(b), out)
	}
	if n := strings.Count(stderr, "ERROR:"); n < len(cmds)-1 {
		t.Fatalf("%d errors for %d meta-commands (\\lo_list may answer from the shadow), want a refusal each:\n%s", n, len(cmds), stderr)
	}
	for _, code := range regexp.MustCompile(`ERROR:  ([0-9A-Z]{5}):`).FindAllStringSubmatch(stderr, -1) {
		if !refusalCodes[code[1]] && code[1] != "08P01" && code[1] != "26000" {
			t.Errorf("meta-command refused with SQLSTATE %s, not a refusal code:\n%s", code[1], stderr)
		}
	}
	if after := count(); after != before {
		t.Fatalf("meta-commands charged %d times", after-before)
	}
}
