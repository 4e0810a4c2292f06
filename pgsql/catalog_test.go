package pgsql

import (
	"os"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

func checkCatalog(t *testing.T, sql string) error {
	t.Helper()
	toks, err := Lex(sql)
	if err != nil {
		t.Fatalf("Lex(%q): %v", sql, err)
	}
	return CheckCatalog(sql, toks)
}

// TestCheckCatalog_Clients: every catalog statement recorded from real
// clients (testdata/catalog_clients.sql says which) is accepted.
func TestCheckCatalog_Clients(t *testing.T) {
	b, err := os.ReadFile("testdata/catalog_clients.sql")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(b), "\n-- ----\n")
	if len(parts) < 300 {
		t.Fatalf("%d statements in testdata/catalog_clients.sql, want the recorded 351", len(parts)-1)
	}
	for _, sql := range parts[1:] {
		if err := checkCatalog(t, sql); err != nil {
			t.Errorf("refused: %v\n%s", err, sql)
		}
	}
}

// TestCheckCatalog_Accepted: forms clients and analysts write that the
// recorded corpus may lack.
func TestCheckCatalog_Accepted(t *testing.T) {
	for _, sql := range []string{
		"SELECT 1",
		"select version()",
		"SELECT pg_catalog.version()",
		`SELECT "pg_catalog"."version"()`,
		"SELECT current_schema(), session_user, current_user, current_database()",
		"(SELECT 1)",
		"((VALUES (1), (2)))",
		"TABLE information_schema.tables",
		"EXPLAIN SELECT * FROM pg_class",
		"EXPLAIN (VERBOSE, COSTS OFF, FORMAT JSON) SELECT relname FROM pg_catalog.pg_class",
		"EXPLAIN VERBOSE SELECT 1",
		// Keyword constructs before "(".
		"SELECT 1 WHERE 1 IN (1, 2) AND EXISTS (SELECT 1) AND 1 = ANY (ARRAY[1]) AND NOT (false)",
		"SELECT CAST(1.5 AS numeric(10,2)), 1.5::numeric(10, 2), 'x'::character varying(8), 'x'::varchar(3)[], CAST('a' AS pg_catalog.varchar(3)), '1'::bit varying(4)",
		"SELECT COALESCE(NULL, 1), NULLIF(1, 2), GREATEST(1, 2), LEAST(1, 2), ROW(1, 2), ARRAY(SELECT 1)",
		"SELECT EXTRACT(YEAR FROM now()), POSITION('a' IN 'ba'), SUBSTRING('abc' FROM 2 FOR 1), TRIM(BOTH ' ' FROM ' a '), OVERLAY('abc' PLACING 'x' FROM 2)",
		"SELECT count(*) FILTER (WHERE relkind = 'r'), row_number() OVER (PARTITION BY relnamespace ORDER BY relname), percentile_cont(0.5) WITHIN GROUP (ORDER BY relpages) FROM pg_class GROUP BY relkind, relnamespace, relname",
		"SELECT relkind, count(*) FROM pg_class GROUP BY GROUPING SETS ((relkind), ()), CUBE (relkind), ROLLUP (relkind)",
		"SELECT timestamp(3) with time zone '2024-01-01', numeric(10,2) '1.5', interval '1 day'",
		"SELECT 'a' COLLATE \"C\" < 'b', 1 OPERATOR(pg_catalog.+) 2",
		// Aliases with column lists, WITH column lists, LATERAL, ORDINALITY.
		"SELECT * FROM generate_series(1, 3) AS g(n)",
		"SELECT * FROM generate_series(1, 3) g(n)",
		"SELECT n FROM pg_catalog.generate_series(1, 32) pos(n), pg_catalog.pg_class c(a)",
		"SELECT * FROM unnest(ARRAY['a', 'b']) WITH ORDINALITY u(v, i)",
		// psql's \gdesc, subqueries and ROWS FROM with column aliases.
		"SELECT * FROM ROWS FROM (generate_series(1, 2)) g(n)",
		`SELECT name AS "Column", pg_catalog.format_type(tp, tpm) AS "Type" FROM (VALUES ('y', '23'::pg_catalog.oid, -1),('count', '20'::pg_catalog.oid, -1)) s(name, tp, tpm)`,
		"SELECT * FROM pg_class c, (SELECT 1) t(a) JOIN (VALUES (2)) u(b) ON true, LATERAL (SELECT c.oid) l(o), ((SELECT 3)) w(x)",
		"SELECT * FROM unnest(ARRAY['a']) WITH ORDINALITY AS u(v, i)",
		"SELECT * FROM pg_class c CROSS JOIN LATERAL unnest(c.relacl) AS a(item)",
		"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3), s (m) AS MATERIALIZED (SELECT 2) SELECT * FROM r, s",
		"WITH t(a, b) AS NOT MATERIALIZED (SELECT 1, 2) SELECT * FROM t",
		"WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) SEARCH DEPTH FIRST BY n SET ord, u(m) AS (SELECT 1) SELECT * FROM t, u",
		"SELECT * FROM pg_class TABLESAMPLE bernoulli(10) REPEATABLE (1)",
		// pgjdbc's field selections, and whole-row references.
		"SELECT (information_schema._pg_expandarray(i.indkey)).n, (i.keys).x FROM pg_index i",
		"SELECT c.*, row_to_json(c) FROM pg_class c",
		// Enum discovery as Metabase writes it; DBeaver's and Superset's probes.
		"SELECT t.typname, e.enumlabel FROM pg_catalog.pg_type t JOIN pg_catalog.pg_enum e ON e.enumtypid = t.oid JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = 'public' ORDER BY t.typname, e.enumsortorder",
		"SELECT current_schema(),session_user",
		"SELECT c.relname, pg_catalog.pg_total_relation_size(c.oid), pg_relation_size(c.oid), pg_size_pretty(pg_table_size(c.oid)), c.reltuples FROM pg_catalog.pg_class c",
		"SELECT datname FROM pg_database WHERE datallowconn AND has_database_privilege(datname, 'CONNECT')",
		// System relations that are allowed; pg_ names as qualifiers, types and aliases.
		"SELECT name, setting FROM pg_settings",
		"SELECT * FROM pg_catalog.pg_roles r JOIN pg_catalog.pg_auth_members m ON m.member = r.oid",
		"SELECT 'x'::pg_catalog.text, '0/0'::pg_lsn, c.relname AS pg_name FROM pg_class AS pg_c, pg_namespace AS pg_n WHERE pg_c.relnamespace = pg_n.oid",
		"SELECT * FROM pg_temp.x, pg_toast.x t",
		// Functions analysts use in outer SQL and BI tools in WHERE 1=0 probes.
		"SELECT date_trunc('month', now()), to_char(now(), 'YYYY'), round(1.5), floor(2.5) * 10, lower('A') || upper('b'), length('abc'), abs(-1), age(now()), make_date(2024, 1, 1)",
		"SELECT string_agg(relname, ',' ORDER BY relname), array_agg(oid), json_agg(relname), jsonb_build_object('a', 1) FROM pg_class",
		"SELECT * FROM regexp_split_to_table('a,b', ',') x",
	} {
		if err := checkCatalog(t, sql); err != nil {
			t.Errorf("%s\n  refused: %v", sql, err)
		}
	}
}

// TestCheckCatalog_Refused: every way found to call a function that runs
// SQL text, signals, locks, writes, or shows other sessions, and to read
// their views, is refused with 42501 naming it.
func TestCheckCatalog_Refused(t *testing.T) {
	for _, c := range []struct{ sql, name string }{
		// The query_to_xml family and its spellings.
		{"SELECT query_to_xml('SELECT pg_terminate_backend(1)', true, true, '')", "query_to_xml"},
		{"SELECT QUERY_TO_XML('SELECT 1', true, true, '')", "query_to_xml"},
		{"select Query_To_Xml('SELECT 1', true, true, '')", "query_to_xml"},
		{`SELECT "query_to_xml"('SELECT 1', true, true, '')`, "query_to_xml"},
		{`SELECT "pg_catalog"."query_to_xml"('SELECT 1', true, true, '')`, "pg_catalog.query_to_xml"},
		{"SELECT pg_catalog.query_to_xml('SELECT 1', true, true, '')", "pg_catalog.query_to_xml"},
		{"SELECT pg_catalog . query_to_xml /* c */ ('SELECT 1', true, true, '')", "pg_catalog.query_to_xml"},
		{"SELECT hospital.pg_catalog.query_to_xml('SELECT 1', true, true, '')", "pg_catalog.query_to_xml"},
		{"SELECT query_to_xml_and_xmlschema('SELECT 1', true, true, '')", "query_to_xml_and_xmlschema"},
		{"SELECT query_to_xmlschema('SELECT 1', true, true, '')", "query_to_xmlschema"},
		{"SELECT cursor_to_xml('c', 1, true, true, '')", "cursor_to_xml"},
		{"SELECT table_to_xml('pg_class', true, true, '')", "table_to_xml"},
		{"SELECT schema_to_xml('public', true, true, '')", "schema_to_xml"},
		{"SELECT database_to_xml(true, true, '')", "database_to_xml"},
		{"SELECT xpath('/a', '<a/>'::xml)", "xpath"},
		{"SELECT xmlexists('/a' PASSING '<a/>'::xml)", "xmlexists"},
		{"SELECT ts_stat('SELECT to_tsvector(relname) FROM pg_class')", "ts_stat"},
		{"SELECT ts_rewrite('a'::tsquery, 'SELECT 1')", "ts_rewrite"},
		// Calls hidden in every clause.
		{"SELECT 1 FROM (SELECT query_to_xml('SELECT 1', true, true, '')) s", "query_to_xml"},
		{"WITH q AS (SELECT query_to_xml('SELECT 1', true, true, '')) SELECT * FROM q", "query_to_xml"},
		{"WITH r(n) AS (SELECT 1) SELECT * FROM r, query_to_xml('SELECT 1', true, true, '') x", "query_to_xml"},
		{"SELECT relname FROM pg_class ORDER BY query_to_xml('SELECT 1', true, true, '')::text", "query_to_xml"},
		{"SELECT * FROM pg_class c, LATERAL query_to_xml('SELECT 1', true, true, '') x", "query_to_xml"},
		{"VALUES (query_to_xml('SELECT 1', true, true, ''))", "query_to_xml"},
		{"SELECT 1 WHERE query_to_xml('SELECT 1', true, true, '') IS NOT NULL", "query_to_xml"},
		{"SELECT count(*) FROM pg_class GROUP BY relkind HAVING count(query_to_xml('SELECT 1', true, true, '')) > 0", "query_to_xml"},
		{"SELECT CASE WHEN true THEN query_to_xml('SELECT 1', true, true, '') END", "query_to_xml"},
		{"SELECT CAST(query_to_xml('SELECT 1', true, true, '') AS text)", "query_to_xml"},
		{"SELECT DISTINCT ON (relname) query_to_xml('SELECT 1', true, true, '') FROM pg_class", "query_to_xml"},
		{"SELECT 1, (1) query_to_xml('SELECT 1', true, true, '')", "query_to_xml"},
		{"SELECT 1 FROM pg_class GROUP BY 1, (2) pg_sleep(1)", "pg_sleep"},
		{"SELECT 'x' OPERATOR(pg_catalog.||) query_to_xml('SELECT 1', true, true, '')::text", "query_to_xml"},
		{"SELECT count(*) OVER (ROWS query_to_xml('SELECT 1', true, true, '')::text::int PRECEDING) FROM pg_class", "query_to_xml"},
		{"SELECT 1 FROM pg_class WHERE relname LIKE 'x' ESCAPE query_to_xml('SELECT 1', true, true, '')::text", "query_to_xml"},
		{"SELECT now() AT TIME ZONE query_to_xml('SELECT 1', true, true, '')::text", "query_to_xml"},
		{"SELECT concat('a', VARIADIC ARRAY[query_to_xml('SELECT 1', true, true, '')::text])", "query_to_xml"},
		{"SELECT (ARRAY[query_to_xml('SELECT 1', true, true, '')])[1]", "query_to_xml"},
		{"SELECT 1 FROM pg_class LIMIT length(query_to_xml('SELECT 1', true, true, '')::text)", "query_to_xml"},
		{"EXPLAIN SELECT query_to_xml('SELECT 1', true, true, '')", "query_to_xml"},
		{"SELECT * FROM pg_class AS c(a) JOIN query_to_xml('SELECT 1', true, true, '') q ON true", "query_to_xml"},
		{"SELECT * FROM ROWS FROM (query_to_xml('SELECT 1', true, true, '')) q", "query_to_xml"},
		// Attribute notation: (expr).f is f(expr).
		{"SELECT (1).pg_cancel_backend", "pg_cancel_backend"},
		{"SELECT (1).pg_terminate_backend", "pg_terminate_backend"},
		{"SELECT (1)  .  pg_advisory_lock", "pg_advisory_lock"},
		{`SELECT (1)."pg_cancel_backend"`, "pg_cancel_backend"},
		{"SELECT (ARRAY[1])[1].pg_cancel_backend", "pg_cancel_backend"},
		{"SELECT $1.pg_cancel_backend", "pg_cancel_backend"},
		{"SELECT (c).x.pg_cancel_backend FROM (SELECT 1 AS x) c", "pg_cancel_backend"},
		{"SELECT (pid).pg_stat_get_backend_activity FROM (SELECT 1 AS pid) s", "pg_stat_get_backend_activity"},
		// Settings, signals, locks, large objects, NOTIFY, sequences, time, files.
		{"SELECT set_config('TimeZone', 'Asia/Tokyo', false)", "set_config"},
		{"SELECT pg_catalog.set_config('statement_timeout', '1ms', false)", "pg_catalog.set_config"},
		{"SELECT pg_terminate_backend(pid) FROM pg_class", "pg_terminate_backend"},
		{"SELECT pg_cancel_backend(1)", "pg_cancel_backend"},
		{"SELECT pg_advisory_lock(1)", "pg_advisory_lock"},
		{"SELECT pg_try_advisory_lock_shared(1)", "pg_try_advisory_lock_shared"},
		{"SELECT pg_advisory_xact_lock(1)", "pg_advisory_xact_lock"},
		{"SELECT lo_creat(-1)", "lo_creat"},
		{"SELECT lo_create(0)", "lo_create"},
		{"SELECT lo_from_bytea(0, 'x')", "lo_from_bytea"},
		{"SELECT loread(lo_open(1, 262144), 10)", "loread"},
		{"SELECT lowrite(0, 'x')", "lowrite"},
		{"SELECT lo_get(1)", "lo_get"},
		{"SELECT pg_notify('c', 'x')", "pg_notify"},
		{"SELECT nextval('s')", "nextval"},
		{"SELECT setval('s', 1)", "setval"},
		{"SELECT currval('s')", "currval"},
		{"SELECT setseed(0.5)", "setseed"},
		{"SELECT random()", "random"},
		{"SELECT txid_current()", "txid_current"},
		{"SELECT pg_current_xact_id()", "pg_current_xact_id"},
		{"SELECT pg_export_snapshot()", "pg_export_snapshot"},
		{"SELECT pg_sleep(1)", "pg_sleep"},
		{"SELECT pg_read_file('postgresql.conf')", "pg_read_file"},
		{"SELECT pg_ls_dir('.')", "pg_ls_dir"},
		{"SELECT dblink('dbname=x', 'SELECT 1')", "dblink"},
		{"SELECT * FROM dblink('dbname=x', 'SELECT 1') AS t(x int)", "dblink"},
		{"SELECT pg_reload_conf()", "pg_reload_conf"},
		{"SELECT pg_backend_pid()", "pg_backend_pid"},
		{"SELECT inet_server_addr()", "inet_server_addr"},
		// Other sessions, through functions.
		{"SELECT * FROM pg_stat_get_activity(NULL)", "pg_stat_get_activity"},
		{"SELECT pg_stat_get_backend_activity(1)", "pg_stat_get_backend_activity"},
		{"SELECT * FROM pg_lock_status()", "pg_lock_status"},
		{"SELECT pg_blocking_pids(1)", "pg_blocking_pids"},
		{"SELECT * FROM pg_catalog.pg_get_backend_memory_contexts()", "pg_catalog.pg_get_backend_memory_contexts"},
		// Functions outside pg_catalog, whatever their name.
		{"SELECT public.version()", "public.version"},
		{"SELECT dpproxy.unavailable('a', 'b')", "dpproxy.unavailable"},
		{"SELECT information_schema.version()", "information_schema.version"},
		// A call refused inside DECLARE's and COPY's query goes through Classify.
	} {
		err := checkCatalog(t, c.sql)
		e, ok := pgerr.As(err)
		if !ok || e.Code != pgerr.InsufficientPrivilege {
			t.Errorf("%s: %v, want 42501", c.sql, err)
			continue
		}
		if !strings.Contains(e.Message, " "+c.name+" ") && !strings.Contains(e.Message, "."+c.name+" ") {
			t.Errorf("%s: message %q does not name %s", c.sql, e.Message, c.name)
		}
		if !strings.Contains(e.Hint, c.name) || !strings.Contains(e.Hint, "read-only catalog and scalar functions") {
			t.Errorf("%s: hint %q", c.sql, e.Hint)
		}
		if e.Position == 0 {
			t.Errorf("%s: no position", c.sql)
		}
	}
}

// TestCheckCatalog_RefusedRelations: the views of other sessions, of the
// server's statistics and of its files are refused, however named.
func TestCheckCatalog_RefusedRelations(t *testing.T) {
	for _, c := range []struct{ sql, name string }{
		{"SELECT query FROM pg_stat_activity", "pg_stat_activity"},
		{"SELECT * FROM pg_catalog.pg_stat_activity", "pg_stat_activity"},
		{`SELECT * FROM "pg_stat_activity"`, "pg_stat_activity"},
		{`SELECT * FROM "pg_catalog"."pg_stat_activity" a`, "pg_stat_activity"},
		{"SELECT * FROM PG_STAT_ACTIVITY", "pg_stat_activity"},
		{"TABLE pg_locks", "pg_locks"},
		{"SELECT 1 WHERE EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory')", "pg_locks"},
		{"WITH a AS (SELECT * FROM pg_stat_activity) SELECT count(*) FROM a", "pg_stat_activity"},
		{"SELECT * FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid", "pg_stat_user_tables"},
		{"SELECT * FROM pg_statio_user_tables", "pg_statio_user_tables"},
		{"SELECT * FROM pg_stat_database", "pg_stat_database"},
		{"SELECT * FROM pg_stat_statements", "pg_stat_statements"},
		{"SELECT * FROM public.pg_stat_statements", "pg_stat_statements"},
		{"SELECT * FROM pg_prepared_xacts", "pg_prepared_xacts"},
		{"SELECT * FROM pg_backend_memory_contexts", "pg_backend_memory_contexts"},
		{"SELECT * FROM pg_shmem_allocations", "pg_shmem_allocations"},
		{"SELECT * FROM pg_stats", "pg_stats"},
		{"SELECT * FROM pg_statistic", "pg_statistic"},
		{"SELECT * FROM pg_largeobject", "pg_largeobject"},
		{"SELECT * FROM pg_file_settings", "pg_file_settings"},
		{"SELECT * FROM pg_hba_file_rules", "pg_hba_file_rules"},
		{"SELECT * FROM pg_replication_slots", "pg_replication_slots"},
		{"SELECT * FROM pg_authid", "pg_authid"},
		{"EXPLAIN SELECT * FROM pg_stat_activity", "pg_stat_activity"},
	} {
		err := checkCatalog(t, c.sql)
		e, ok := pgerr.As(err)
		if !ok || e.Code != pgerr.InsufficientPrivilege || !strings.Contains(strings.ToLower(e.Message), "relation "+c.name+" ") {
			t.Errorf("%s: %v, want 42501 naming %s", c.sql, err, c.name)
		}
	}
}

// TestCheckCatalog_Forms: only SELECT, WITH, VALUES, TABLE and EXPLAIN
// without ANALYZE; other text is a syntax error, as PostgreSQL says.
func TestCheckCatalog_Forms(t *testing.T) {
	for _, c := range []struct{ sql, code string }{
		{"EXPLAIN ANALYZE SELECT 1", pgerr.InsufficientPrivilege},
		{"EXPLAIN ANALYSE SELECT 1", pgerr.InsufficientPrivilege},
		{"EXPLAIN (ANALYZE) SELECT 1", pgerr.InsufficientPrivilege},
		{"EXPLAIN (FORMAT JSON, ANALYZE true) SELECT 1", pgerr.InsufficientPrivilege},
		{"EXPLAIN VERBOSE ANALYZE SELECT 1", pgerr.InsufficientPrivilege},
		{"SELEC 1", pgerr.SyntaxError},
		{`"select" 1`, pgerr.SyntaxError},
		{"42", pgerr.SyntaxError},
		{"(", pgerr.SyntaxError},
		{"EXPLAIN", pgerr.SyntaxError},
	} {
		err := checkCatalog(t, c.sql)
		if e, ok := pgerr.As(err); !ok || e.Code != c.code {
			t.Errorf("%s: %v, want %s", c.sql, err, c.code)
		}
	}
	if e, _ := pgerr.As(checkCatalog(t, "SELEC 1")); e == nil || e.Message != `syntax error at or near "SELEC"` || e.Position != 1 {
		t.Errorf("SELEC 1: %+v", e)
	}
}

// TestClassify_CatalogAllowList: Classify applies the allow-list to what
// it routes to the shadow catalog, including the query of a DECLARE or a
// COPY and a provably empty query of a protected table, and not to DP
// statements (which run upstream, planned by rewrite).
func TestClassify_CatalogAllowList(t *testing.T) {
	ds := loadHospital(t)
	for _, c := range []struct {
		sql   string
		route Route
	}{
		{"SELECT query_to_xml('SELECT 1', true, true, '')", RouteRefuse},
		{"DECLARE c CURSOR FOR SELECT query_to_xml('SELECT 1', true, true, '')", RouteRefuse},
		{"COPY (SELECT * FROM pg_stat_activity) TO STDOUT", RouteRefuse},
		{"SELECT query_to_xml('SELECT 1', true, true, '') FROM visits LIMIT 0", RouteRefuse},
		{"SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef", RouteCatalog},
		{"DECLARE c CURSOR FOR SELECT relname FROM pg_class", RouteSession},
		{"SELECT date_trunc('month', visit_date) FROM visits LIMIT 0", RouteCatalog},
		{"SELECT COUNT(*) FROM visits", RouteDP},
	} {
		got, err := Classify(ds, c.sql)
		if got != c.route {
			t.Errorf("Classify(%q) = %v, %v; want route %v", c.sql, got, err, c.route)
		}
		if c.route == RouteRefuse {
			if e, ok := pgerr.As(err); !ok || e.Code != pgerr.InsufficientPrivilege {
				t.Errorf("Classify(%q): %v, want 42501", c.sql, err)
			}
		}
	}
}

// TestCatalogAllowLists_Syntax: the functions the allow-list exists to
// refuse are on none of its lists, and every syntax word is a keyword of
// PostgreSQL 15 (whose 460 keywords postgresKeywords holds).
func TestCatalogAllowLists_Syntax(t *testing.T) {
	if len(postgresKeywords) != 460 {
		t.Errorf("%d keywords, want PostgreSQL 15's 460", len(postgresKeywords))
	}
	for _, name := range []string{"query_to_xml", "set_config", "pg_terminate_backend", "pg_cancel_backend",
		"pg_advisory_lock", "lo_import", "pg_notify", "dblink", "pg_sleep", "nextval", "ts_stat", "ts_rewrite",
		"xpath", "pg_stat_get_activity", "pg_lock_status"} {
		if catalogFunctions[name] || syntaxBeforeParen[name] || selectableFields[name] {
			t.Errorf("%s is allowed", name)
		}
	}
	for name := range syntaxBeforeParen {
		if !postgresKeywords[name] {
			t.Errorf("syntax word %q is not a PostgreSQL keyword", name)
		}
	}
}
