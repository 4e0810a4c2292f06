package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgcluster"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// lookupPolicy is the policy of the dataset "lookup" of TestPublicTables:
// one protected table and two public tables. wards declares three of its
// columns (phone is undeclared, notes is access: none); postcodes has more
// rows than the config's public_max_rows.
const lookupPolicy = `dataset: lookup
privacy_unit: patient
budget: {epsilon: 5, delta: 1.0e-6, accountant: pure}
defaults: {epsilon: 0.5, mechanism: laplace}
tables:
  stays:
    unit_column: patient_id
    max_groups_per_unit: 1
    max_rows_per_unit: 3
    columns:
      ward_id: {type: int}
      cost: {type: int, lower: 0, upper: 1000}
  wards:
    public: true
    columns:
      ward_id: {type: int}
      wing: {type: text, public_values: [east, west]}
      beds: {type: int, lower: 0, upper: 100}
      notes: {access: none}
  postcodes:
    public: true
    columns:
      code: {type: text}
`

const lookupMaxRows = 50

// lookupDeployment starts a data cluster and a shadow cluster of the
// test's own with the lookup dataset (the demo's shared shadow catalog is
// left alone) and returns the data superuser DSN and the config path and
// address of a proxy serving it (the demo's ledger, analyst pubtab).
func lookupDeployment(t *testing.T, ctx context.Context) (dataAdmin, cfgPath, addr string) {
	t.Helper()
	start := func(name string) *pgcluster.Cluster {
		c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(t.TempDir(), name), NoFsync: true})
		if err != nil {
			t.Fatalf("start the %s cluster: %v", name, err)
		}
		t.Cleanup(func() { _ = c.Stop() })
		return c
	}
	data, sh := start("data"), start("shadow")
	for _, s := range [][2]string{
		{data.DSN("postgres"), "CREATE DATABASE lookup"},
		{data.DSN("postgres"), "CREATE ROLE lookup_reader LOGIN"},
		{data.DSN("postgres"), "ALTER ROLE lookup_reader SET default_transaction_read_only = on"},
		{data.DSN("lookup"), `CREATE TABLE stays (stay_id serial PRIMARY KEY, patient_id int, ward_id int, cost int)`},
		{data.DSN("lookup"), `INSERT INTO stays (patient_id, ward_id, cost) SELECT i % 300, i % 12 + 1, i % 900 FROM generate_series(1, 1200) i`},
		{data.DSN("lookup"), `CREATE TABLE wards (ward_id int PRIMARY KEY, wing text NOT NULL, beds int, phone text, notes text)`},
		// north is not among wing's public_values: SELECT DISTINCT wing
		// must answer from the rows, not the policy.
		{data.DSN("lookup"), `INSERT INTO wards SELECT i, (ARRAY['east', 'west', 'north'])[i % 3 + 1], 10 + i, '555-01' || i, 'note ' || i FROM generate_series(1, 12) i`},
		{data.DSN("lookup"), `CREATE TABLE postcodes (code text, secret text)`},
		{data.DSN("lookup"), fmt.Sprintf(`INSERT INTO postcodes SELECT 'P' || i, 's' FROM generate_series(1, %d) i`, lookupMaxRows+30)},
		{data.DSN("lookup"), `GRANT SELECT (patient_id, ward_id, cost) ON stays TO lookup_reader`},
		{data.DSN("lookup"), `GRANT SELECT (ward_id, wing, beds) ON wards TO lookup_reader`},
		{data.DSN("lookup"), `GRANT SELECT (code) ON postcodes TO lookup_reader`},
		{sh.DSN("postgres"), "CREATE ROLE lookup_shadow_owner LOGIN"},
		{sh.DSN("postgres"), "CREATE ROLE lookup_shadow LOGIN"},
		{sh.DSN("postgres"), "CREATE DATABASE lookup OWNER lookup_shadow_owner"},
		{sh.DSN("postgres"), "REVOKE ALL ON DATABASE lookup FROM PUBLIC"},
		{sh.DSN("postgres"), "GRANT CONNECT ON DATABASE lookup TO lookup_shadow"},
		{sh.DSN("lookup"), "REVOKE ALL ON SCHEMA public FROM PUBLIC"},
		{sh.DSN("lookup"), "ALTER SCHEMA public OWNER TO lookup_shadow_owner"},
	} {
		if err := pgtest.Exec(ctx, s[0], s[1]); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "lookup.yaml"), []byte(lookupPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath, addr = extraConfigWith(t, func(cfg map[string]any) {
		cfg["policies"] = dir
		cfg["datasets"] = map[string]any{"lookup": map[string]any{
			"upstream":        data.RoleDSN("lookup_reader", "", "lookup"),
			"shadow":          sh.RoleDSN("lookup_shadow", "", "lookup"),
			"shadow_admin":    sh.RoleDSN("lookup_shadow_owner", "", "lookup"),
			"public_max_rows": lookupMaxRows,
		}}
		cfg["analysts"] = map[string]any{"pubtab": map[string]any{"password": "plain:pubtab"}}
	})
	return data.DSN("lookup"), cfgPath, addr
}

// TestPublicTables: a statement naming only public tables answers their
// real rows through the shadow catalog — psql, pgx (simple and extended
// protocol), pgjdbc and psycopg2 read exactly the upstream rows of the
// declared columns, and nothing of undeclared or access: none columns; a
// table over public_max_rows is refused with 0A000 and a hint naming the
// setting; a protected table still refuses non-DP SQL, and a join of it
// with a public table is a DP query; SIGHUP re-copies the public tables;
// dpproxy doctor reports the copies.
func TestPublicTables(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dataAdmin, cfgPath, addr := lookupDeployment(t, ctx)
	p := startProxy(t, cfgPath, addr)
	dsn := fmt.Sprintf("postgres://pubtab:pubtab@%s/lookup?sslmode=disable", addr)
	up := connect(t, ctx, dataAdmin)

	const declared = "SELECT ward_id, wing, beds FROM wards ORDER BY ward_id"
	upstreamRows := func() string {
		out, stderr, code := psql(t, dataAdmin, "-At", "-F", "|", "-c", declared)
		if code != 0 {
			t.Fatalf("psql upstream: %s", stderr)
		}
		return out
	}
	want := upstreamRows()
	if strings.Count(want, "\n") != 12 {
		t.Fatalf("upstream wards = %q", want)
	}

	// psql: SELECT * and count(*) match upstream; \d shows only the
	// declared columns.
	out, stderr, code := psql(t, dsn, "-At", "-F", "|", "-c", "SELECT * FROM wards ORDER BY ward_id")
	if code != 0 || out != want {
		t.Errorf("psql SELECT * FROM wards = %q (%s), want the upstream rows of the declared columns %q", out, stderr, want)
	}
	out, stderr, code = psql(t, dsn, "-At", "-c", "SELECT count(*) FROM wards")
	if code != 0 || out != "12\n" {
		t.Errorf("psql SELECT count(*) FROM wards = %q (%s), want 12", out, stderr)
	}
	out, _, _ = psql(t, dsn, "-c", `\d wards`)
	if !strings.Contains(out, "ward_id") || !strings.Contains(out, "beds") || strings.Contains(out, "phone") || strings.Contains(out, "notes") {
		t.Errorf("\\d wards:\n%s\nwant ward_id, wing, beds and neither phone nor notes", out)
	}
	for _, col := range []string{"phone", "notes"} {
		_, stderr, code = psql(t, dsn, "-c", "SELECT "+col+" FROM wards")
		if code == 0 || !strings.Contains(stderr, "42703") {
			t.Errorf("SELECT %s FROM wards: exit %d, %s; want 42703 (no such column)", col, code, stderr)
		}
	}
	// Over the cap: a clear refusal, not an empty answer.
	for _, q := range []string{"SELECT * FROM postcodes", "SELECT count(*) FROM postcodes"} {
		_, stderr, code = psql(t, dsn, "-c", q)
		if code == 0 || !strings.Contains(stderr, "0A000") || !strings.Contains(stderr, "datasets.lookup.public_max_rows") {
			t.Errorf("%s: exit %d, %s; want 0A000 with a hint naming datasets.lookup.public_max_rows", q, code, stderr)
		}
	}
	if !strings.Contains(p.stderrSoFar(), "public table not copied") {
		t.Errorf("no start-up warning about postcodes in the proxy log:\n%s", p.stderrSoFar())
	}

	// pgx: simple and extended protocol, a bound parameter, DISTINCT from
	// the rows (north is not a declared public value), a join of public
	// tables.
	c := connect(t, ctx, dsn)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
		var wing string
		var beds int
		if err := c.QueryRow(ctx, "SELECT wing, beds FROM wards WHERE ward_id = $1", mode, 3).Scan(&wing, &beds); err != nil || wing != "east" || beds != 13 {
			t.Errorf("pgx %v: ward 3 = %q %d, %v; want east 13", mode, wing, beds, err)
		}
	}
	var wings string
	if err := c.QueryRow(ctx, "SELECT string_agg(wing, ',' ORDER BY wing) FROM (SELECT DISTINCT wing FROM wards) w").Scan(&wings); err != nil || wings != "east,north,west" {
		t.Errorf("distinct wings = %q, %v; want east,north,west", wings, err)
	}
	rows, err := c.Query(ctx, "SELECT DISTINCT wing FROM wards ORDER BY wing")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || strings.Join(got, ",") != "east,north,west" {
		t.Errorf("SELECT DISTINCT wing FROM wards = %v, %v; want the rows' values east,north,west", got, err)
	}
	var pairs int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM wards a JOIN wards b ON a.wing = b.wing").Scan(&pairs); err != nil || pairs != 48 {
		t.Errorf("public self-join = %d, %v; want 48", pairs, err)
	}

	// A protected table still refuses raw rows, also joined to a public
	// table; an aggregate over the join is a DP query (charged).
	for _, q := range []string{"SELECT * FROM stays", "SELECT s.cost, w.wing FROM stays s JOIN wards w ON s.ward_id = w.ward_id"} {
		_, err := c.Exec(ctx, q)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || (pe.Code != "42501" && pe.Code != "0A000") {
			t.Errorf("%s: %v, want a refusal (42501 or 0A000)", q, err)
		}
	}
	dc, notices := connectWithNotices(t, ctx, dsn)
	var n int64
	if err := dc.QueryRow(ctx, "SELECT COUNT(*) FROM stays s JOIN wards w ON s.ward_id = w.ward_id WHERE w.wing = 'north'").Scan(&n); err != nil {
		t.Fatalf("DP join of stays and wards: %v", err)
	}
	if ns := notices(); len(ns) == 0 || !strings.Contains(strings.Join(ns, " "), "epsilon 0.5 spent") {
		t.Errorf("DP join answered without a cost NOTICE: %v", ns)
	}
	// Writes through the proxy are refused.
	if _, err := c.Exec(ctx, "DELETE FROM wards"); err == nil {
		t.Error("DELETE FROM wards through the proxy succeeded")
	}

	// pgjdbc: prepared (named after 5 executions), metadata, fetch size.
	if javac, java, jar := lookPath("javac"), lookPath("java"), "/usr/share/java/postgresql.jar"; javac == "" || java == "" || !exists(jar) {
		missingClient(t, "a JDK and pgjdbc", "default-jdk-headless libpostgresql-jdbc-java")
	} else {
		dir := t.TempDir()
		if out, err := exec.CommandContext(ctx, javac, "-d", dir, "testdata/PublicTable.java").CombinedOutput(); err != nil {
			t.Fatalf("javac: %v\n%s", err, out)
		}
		out, err := exec.CommandContext(ctx, java, "-cp", dir+":"+jar, "PublicTable", "jdbc:postgresql://"+addr+"/lookup", "pubtab").CombinedOutput()
		if err != nil {
			t.Fatalf("java: %v\n%s", err, out)
		}
		wantJDBC := strings.ReplaceAll("row "+strings.ReplaceAll(strings.TrimSuffix(want, "\n"), "\n", "\nrow "), "|", " ") + "\n" +
			"column ward_id int4\ncolumn wing text\ncolumn beds int4\nfetched 12\n"
		if string(out) != wantJDBC {
			t.Errorf("pgjdbc output:\n%s\nwant:\n%s", out, wantJDBC)
		}
	}

	// psycopg2 (libpq, client-side parameters).
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import psycopg2").Run(); err != nil {
		missingClient(t, "psycopg2", "python3-psycopg2")
	} else {
		script := `import sys, psycopg2
c = psycopg2.connect(sys.argv[1])
cur = c.cursor()
cur.execute("SELECT * FROM wards WHERE beds >= %s ORDER BY ward_id", (0,))
for r in cur.fetchall():
    print("|".join(str(v) for v in r))
`
		out, err := exec.CommandContext(ctx, py, "-c", script, dsn).CombinedOutput()
		if err != nil || string(out) != want {
			t.Errorf("psycopg2 rows = %q, %v; want %q", out, err, want)
		}
	}

	// SIGHUP re-copies the public tables.
	if _, err := up.Exec(ctx, "INSERT INTO wards VALUES (13, 'west', 99, 'x', 'y'); UPDATE wards SET beds = 0 WHERE ward_id = 1"); err != nil {
		t.Fatal(err)
	}
	want = upstreamRows()
	// Before the refresh, doctor sees the stale copy.
	out, _, code = dpproxyCLI(t, "doctor", "--config", cfgPath)
	if code != 1 || !strings.Contains(out, "WARNING: lookup: public table public.wards: the shadow copy has 12 rows, upstream 13") {
		t.Errorf("doctor before the refresh (exit %d) does not warn about the stale copy:\n%s", code, out)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _, _ := psql(t, dsn, "-At", "-F", "|", "-c", "SELECT * FROM wards ORDER BY ward_id")
		if out == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("60s after SIGHUP the proxy answers %q, want the new upstream rows %q\n%s", out, want, p.stderrSoFar())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The proxy kept serving: a session opened before the refresh still
	// reads the table.
	if err := c.QueryRow(ctx, "SELECT count(*) FROM wards").Scan(&n); err != nil || n != 13 {
		t.Errorf("count after SIGHUP on an old session = %d, %v; want 13", n, err)
	}

	// doctor reports the copies: wards copied and current, postcodes over
	// the cap; the data role reads only declared columns.
	out, _, _ = dpproxyCLI(t, "doctor", "--config", cfgPath)
	if !strings.Contains(out, "ok: lookup: public table public.wards: the shadow copy has the 13 rows of upstream") ||
		!strings.Contains(out, "ok: lookup: data role lookup_reader can SELECT only the 3 exposed columns of the protected tables and the 4 declared columns of the public tables") ||
		!strings.Contains(out, "WARNING: lookup: public table public.postcodes is not copied") {
		t.Errorf("doctor output lacks the public table checks:\n%s", out)
	}
}

func lookPath(name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	return p
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// missingClient fails under CI and skips otherwise.
func missingClient(t *testing.T, what, debPackages string) {
	t.Helper()
	msg := fmt.Sprintf("%s not installed; install with: apt-get install %s (or run scripts/ensure-deps.sh as root)", what, debPackages)
	if pgtest.InCI() {
		t.Fatal(msg)
	}
	t.Log("skipping this part: " + msg)
}
