package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Isolation of analysts on the shadow catalog (SECURITY.md, "The catalog
// route"): analysts share the proxy's pool of shadow connections, as one
// shadow role, so nothing one analyst's catalog statement does may reach
// another's: not a setting, a lock, a large object, a signal, a view of
// their statements, or the whole pool.

// isolationProxy starts an extra proxy with analysts iso_a and iso_b, a
// shadow pool of 4 connections of which each analyst may hold 2, a 2s
// catalog statement timeout and a 1s acquire timeout; it returns the proxy
// and the shadow database's owner DSN (to look at the shadow cluster).
func isolationProxy(t *testing.T) (*extraProxy, string) {
	t.Helper()
	var shadowAdmin string
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		shadowAdmin = cfg["datasets"].(map[string]any)["hospital"].(map[string]any)["shadow_admin"].(string)
		as := cfg["analysts"].(map[string]any)
		for _, n := range []string{"iso_a", "iso_b"} {
			as[n] = map[string]any{"password": "plain:" + n}
		}
		cfg["shadow_max_connections"] = 4
		cfg["shadow_max_connections_per_analyst"] = 2
		cfg["catalog_statement_timeout"] = "2s"
		cfg["shadow_acquire_timeout"] = "1s"
	})
	return startProxy(t, cfgPath, addr), shadowAdmin
}

func pgConnect(t *testing.T, ctx context.Context, dsn string) *pgconn.PgConn {
	t.Helper()
	c, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// bSettings is what iso_b's session set for itself, as its catalog
// statements must see it.
const (
	bShow = "SELECT current_setting('TimeZone') || '|' || current_setting('DateStyle') || '|' || current_setting('search_path') || '|' || current_setting('IntervalStyle') || '|' || current_setting('extra_float_digits')"
	bWant = "America/New_York|SQL, DMY|public, pg_catalog|sql_standard|2"
)

// TestIsolation_TwoAnalysts: analyst iso_a tries, through catalog
// statements in the simple and the extended protocol, every known way to
// act on the shadow connections the analysts share; each is refused or
// changes nothing iso_b can see, and iso_b's catalog statements keep
// answering with iso_b's own settings. Then iso_a fills their share of
// the pool with slow catalog statements: theirs wait and fail with 53300,
// the slow ones end at the catalog statement timeout, and iso_b's
// statements are answered meanwhile.
func TestIsolation_TwoAnalysts(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, shadowAdmin := isolationProxy(t)
	admin := connect(t, ctx, shadowAdmin)
	b := pgConnect(t, ctx, p.dsn("iso_b"))
	if _, err := b.Exec(ctx, "SET TimeZone = 'America/New_York'; SET DateStyle = 'SQL, DMY'; SET search_path = public, pg_catalog; SET IntervalStyle = sql_standard; SET extra_float_digits = 2").ReadAll(); err != nil {
		t.Fatal(err)
	}
	bSees := func(when string) {
		t.Helper()
		res, err := b.Exec(ctx, bShow).ReadAll()
		if err != nil {
			t.Fatalf("%s: iso_b's catalog statement: %v", when, err)
		}
		if got := string(res[0].Rows[0][0]); got != bWant {
			t.Fatalf("%s: iso_b's catalog statement saw %q, want its own %q", when, got, bWant)
		}
	}
	bSees("before")
	// iso_b's shadow backends, which iso_a will try to signal.
	var bPIDs []int32
	rows, err := admin.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE usename = 'dpproxy_shadow' AND datname = 'hospital'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		bPIDs = append(bPIDs, pid)
	}
	if rows.Err() != nil || len(bPIDs) == 0 {
		t.Fatalf("no shadow backend of the proxy: %v", rows.Err())
	}
	pid := bPIDs[0]

	a := pgConnect(t, ctx, p.dsn("iso_a"))
	q := "'SELECT set_config(''TimeZone'', ''Asia/Tokyo'', false)'"
	vectors := []string{
		// Settings: directly, and through functions that run SQL text.
		"SELECT set_config('TimeZone', 'Asia/Tokyo', false)",
		"SELECT set_config('DateStyle', 'German', false)",
		"SELECT set_config('search_path', 'pg_temp', false)",
		"SELECT set_config('statement_timeout', '1ms', false)",
		"SELECT set_config('default_transaction_read_only', 'off', false)",
		"SELECT pg_catalog.set_config('IntervalStyle', 'iso_8601', false)",
		"SELECT query_to_xml(" + q + ", true, true, '')",
		"SELECT QUERY_TO_XML(" + q + ", true, true, '')",
		`SELECT "pg_catalog"."query_to_xml"(` + q + `, true, true, '')`,
		"SELECT query_to_xml_and_xmlschema(" + q + ", true, true, '')",
		"SELECT query_to_xmlschema(" + q + ", true, true, '')",
		"SELECT * FROM (SELECT query_to_xml(" + q + ", true, true, '')) s",
		"WITH x AS (SELECT 1) SELECT query_to_xml(" + q + ", true, true, '') FROM x",
		"SELECT relname FROM pg_class ORDER BY query_to_xml(" + q + ", true, true, '')::text LIMIT 1",
		"SELECT 1 FROM pg_class, LATERAL query_to_xml(" + q + ", true, true, '') x LIMIT 1",
		"VALUES (query_to_xml(" + q + ", true, true, ''))",
		"SELECT table_to_xml('pg_class', true, true, '')",
		"SELECT schema_to_xml('public', true, true, '')",
		"SELECT database_to_xml(true, true, '')",
		"SELECT cursor_to_xml('c', 1, true, true, '')",
		"SELECT ts_stat('SELECT to_tsvector(relname) FROM pg_class')",
		// Signals to iso_b's shadow backend.
		fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid),
		fmt.Sprintf("SELECT pg_cancel_backend(%d)", pid),
		fmt.Sprintf("SELECT (%d).pg_terminate_backend", pid),
		fmt.Sprintf("SELECT (%d).pg_cancel_backend", pid),
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity",
		// Advisory locks, large objects, notifications, sequences.
		"SELECT pg_advisory_lock(42)",
		"SELECT pg_try_advisory_lock(42)",
		"SELECT pg_advisory_lock_shared(42)",
		"SELECT (42).pg_advisory_lock",
		"SELECT lo_creat(-1)",
		"SELECT lo_from_bytea(0, 'x')",
		"SELECT lo_import('/etc/hostname')",
		"SELECT pg_notify('c', 'x')",
		"LISTEN c",
		"SELECT nextval('x')",
		// Time.
		"SELECT pg_sleep(5)",
		// Other sessions' activity.
		"SELECT query FROM pg_stat_activity",
		"SELECT * FROM pg_catalog.pg_locks",
		"SELECT * FROM pg_stat_get_activity(NULL)",
		fmt.Sprintf("SELECT pg_stat_get_backend_activity(%d)", 1),
		"SELECT * FROM pg_stat_statements",
		"SELECT * FROM pg_statio_user_tables",
		"SELECT * FROM pg_stat_database",
		"TABLE pg_prepared_xacts",
		"SELECT * FROM pg_backend_memory_contexts",
		"EXPLAIN ANALYZE SELECT 1",
	}
	for _, v := range vectors {
		for _, mode := range []string{"simple", "extended"} {
			var err error
			if mode == "simple" {
				_, err = a.Exec(ctx, v).ReadAll()
			} else {
				err = a.ExecParams(ctx, v, nil, nil, nil, nil).Read().Err
			}
			if code := sqlState(err); code != "42501" {
				t.Errorf("iso_a %s %q: %v, want 42501", mode, v, err)
			}
		}
	}
	// The signals did not reach iso_b's backend. (Checked here: later,
	// the pool may close a connection itself when iso_a's sessions change
	// its settings, which is the pool's hygiene, not an attack.)
	var alive bool
	if err := admin.QueryRow(ctx, "SELECT count(*) > 0 FROM pg_stat_activity WHERE pid = $1", pid).Scan(&alive); err != nil || !alive {
		t.Errorf("iso_b's shadow backend %d is gone: %v", pid, err)
	}
	// iso_a's own session settings stay in iso_a's session.
	if _, err := a.Exec(ctx, "SET TimeZone = 'Asia/Tokyo'; SET statement_timeout = 1; SET search_path = pg_temp; SET DateStyle = German; SET application_name = 'mallory'").ReadAll(); err != nil {
		t.Fatal(err)
	}
	if res, err := a.Exec(ctx, "SELECT 1").ReadAll(); err != nil && sqlState(err) != "57014" {
		t.Fatalf("iso_a's catalog statement with its own settings: %v %v", res, err)
	}
	bSees("after iso_a's attempts")
	// iso_b's settings hold on every shadow connection: more statements
	// than the pool has, concurrently with iso_a's.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pgconn.Connect(ctx, p.dsn("iso_a"))
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close(context.Background())
			_, _ = c.Exec(ctx, "SET TimeZone = 'Asia/Tokyo'; SET DateStyle = German; SELECT relname FROM pg_class").ReadAll()
		}()
	}
	for i := 0; i < 8; i++ {
		bSees(fmt.Sprintf("statement %d next to iso_a's sessions", i))
	}
	wg.Wait()
	// Nothing was left on the shadow cluster.
	var locks, objects int
	if err := admin.QueryRow(ctx, "SELECT (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'), (SELECT count(*) FROM pg_largeobject_metadata)").Scan(&locks, &objects); err != nil {
		t.Fatal(err)
	}
	if locks != 0 || objects != 0 {
		t.Errorf("the shadow cluster holds %d advisory locks and %d large objects", locks, objects)
	}

	// iso_a fills their share with slow catalog statements (a join of
	// catalogs that would run for minutes): each ends at the 2s catalog
	// statement timeout, iso_a's further ones fail with 53300 meanwhile,
	// and iso_b's are answered.
	const slow = "SELECT count(*) FROM pg_attribute x, pg_attribute y, pg_attribute z"
	type result struct {
		err error
		d   time.Duration
	}
	results := make(chan result, 2)
	for i := 0; i < 2; i++ {
		c := pgConnect(t, ctx, p.dsn("iso_a"))
		go func() {
			start := time.Now()
			_, err := c.Exec(ctx, slow).ReadAll()
			results <- result{err, time.Since(start)}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	third := pgConnect(t, ctx, p.dsn("iso_a"))
	_, err = third.Exec(ctx, "SELECT 1").ReadAll()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53300" || !strings.Contains(pe.Hint, "2 of the 4") {
		t.Errorf("iso_a's third concurrent catalog statement: %v, want 53300 naming the share", err)
	}
	for i := 0; i < 5; i++ {
		start := time.Now()
		bSees(fmt.Sprintf("iso_b's statement %d while iso_a holds their share", i))
		if d := time.Since(start); d > time.Second {
			t.Errorf("iso_b's catalog statement took %v while iso_a held their share", d)
		}
	}
	for i := 0; i < 2; i++ {
		r := <-results
		if sqlState(r.err) != "57014" || r.d > 10*time.Second {
			t.Errorf("iso_a's slow catalog statement: %v after %v, want 57014 at the 2s catalog timeout", r.err, r.d)
		}
	}
	if res, err := third.Exec(ctx, "SELECT 1").ReadAll(); err != nil || string(res[0].Rows[0][0]) != "1" {
		t.Errorf("iso_a's SELECT 1 once the slow statements ended: %v %v", res, err)
	}
	bSees("at the end")
}

// TestIsolation_RealClientsThroughProxy: the catalog statements of psql's
// backslash commands, every catalog method of pgjdbc's DatabaseMetaData
// (what sqlline's metadata commands call) and SQLAlchemy's inspector pass
// the catalog allow-lists and are answered through the proxy.
func TestIsolation_RealClientsThroughProxy(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := driverProxy(t, "catalogclient")

	// \db+ is left out: PostgreSQL itself refuses the shadow role the size
	// of pg_global.
	cmds := []string{`\d`, `\d+`, `\dt`, `\dt+`, `\di+`, `\dv+`, `\ds+`, `\dm`, `\dE`, `\d visits`, `\d+ visits`,
		`\d patients`, `\d+ patients`, `\df`, `\df+`, `\dT+`, `\dD+`, `\dn+`, `\du+`, `\dg`, `\dp`, `\z visits`,
		`\ddp`, `\dx+`, `\dy`, `\dL`, `\dc`, `\dC+`, `\dd`, `\dF+`, `\dFd`, `\dFp+`, `\dFt`, `\dA+`, `\dAc`, `\dAf`,
		`\dAo`, `\dAp`, `\db`, `\des`, `\dew`, `\det`, `\deu`, `\dl`, `\dP+`, `\drds`, `\dRp`, `\dRs`, `\dX`,
		`\dconfig`, `\l`, `\l+`, `\do+`, `\dO`}
	var script strings.Builder
	for _, c := range cmds {
		script.WriteString(c + "\n")
	}
	f := t.TempDir() + "/meta.sql"
	if err := os.WriteFile(f, []byte(script.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// Errors of the shadow's own privileges (a size of a tablespace the
	// shadow role may not see) are PostgreSQL's; none may be a refusal.
	out, stderr, _ := psql(t, p.dsn("catalogclient"), "-v", "ON_ERROR_STOP=0", "-f", f)
	if strings.Contains(stderr, "42501") || strings.Contains(stderr, "not allowed") || strings.Contains(stderr, "42601") {
		t.Errorf("psql backslash commands refused:\n%s", stderr)
	}
	if !strings.Contains(out, "visits") {
		t.Errorf("psql backslash commands do not list visits:\n%s", out)
	}

	javac, java, jar := lookPath("javac"), lookPath("java"), "/usr/share/java/postgresql.jar"
	if javac == "" || java == "" || !exists(jar) {
		missingClient(t, "a JDK and pgjdbc", "default-jdk-headless libpostgresql-jdbc-java")
	} else {
		dir := t.TempDir()
		runClient(t, ctx, nil, javac, "-d", dir, "testdata/drivers/MetaData.java")
		out := runClient(t, ctx, nil, java, "-cp", dir+":"+jar, "MetaData", "jdbc:postgresql://"+p.addr+"/hospital?sslmode=disable", "catalogclient", "catalogclient")
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			// pgjdbc implements neither getSuperTypes, getSuperTables,
			// getAttributes nor getPseudoColumns (0A000, its own).
			if strings.HasPrefix(line, "fail ") && !strings.Contains(line, " 0A000 ") {
				t.Errorf("pgjdbc DatabaseMetaData: %s", line)
			}
		}
		for _, m := range []string{"getTables", "getColumns", "getPrimaryKeys", "getImportedKeys", "getExportedKeys", "getIndexInfo", "getTypeInfo", "getFunctions"} {
			if !strings.Contains(out, "ok "+m+" ") {
				t.Errorf("pgjdbc DatabaseMetaData: no ok %s:\n%s", m, out)
			}
		}
	}

	needPython(t, "python3-sqlalchemy python3-psycopg2", "sqlalchemy", "psycopg2")
	out = runClient(t, ctx, nil, python3, "testdata/drivers/inspector.py", "postgresql+psycopg2://catalogclient:catalogclient@"+p.addr+"/hospital?sslmode=disable")
	if strings.Contains(out, "fail ") || strings.Count(out, "ok ") != 13 {
		t.Errorf("SQLAlchemy inspector:\n%s", out)
	}
}
