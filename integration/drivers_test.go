package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// Real drivers against the real proxy and PostgreSQL (issue 17): each test
// runs one client as its users call it, through an extra `dpproxy serve`
// with an analyst of its own, and checks what the client printed and how
// many charges the ledger holds (one per DP query, DECLARE or COPY; none
// for refusals, FETCHes or pool resets). Clients come from Debian packages
// (scripts/ensure-deps.sh) and node-postgres from npm; under CI=true a
// missing client fails the test.

const python3 = "/usr/bin/python3"

// driverProxy starts an extra proxy with a new analyst named analyst.
func driverProxy(t *testing.T, analyst string) *extraProxy {
	t.Helper()
	cfgPath, addr := extraConfig(t)
	withAnalyst(t, cfgPath, analyst)
	return startProxy(t, cfgPath, addr)
}

// chargeCount is the number of ledger charges of analyst.
func chargeCount(t *testing.T, ctx context.Context, analyst string) int {
	t.Helper()
	var n int
	if err := connect(t, ctx, ledgerDSN()).QueryRow(ctx, "SELECT count(*) FROM dpproxy_ledger.charge WHERE analyst = $1", analyst).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// needPython skips (fails under CI) unless /usr/bin/python3 imports every
// module.
func needPython(t *testing.T, debPackages string, modules ...string) {
	t.Helper()
	for _, m := range modules {
		if err := exec.Command(python3, "-c", "import "+m).Run(); err != nil {
			missingClient(t, "python module "+m, debPackages)
			t.SkipNow()
		}
	}
}

// runClient runs a client program and returns its output; it fails the
// test when the program fails.
func runClient(t *testing.T, ctx context.Context, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// wantLines checks that out has each line.
func wantLines(t *testing.T, client, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains("\n"+out, "\n"+l+"\n") {
			t.Errorf("%s output lacks %q:\n%s", client, l, out)
		}
	}
}

func wantCharges(t *testing.T, ctx context.Context, analyst string, want int) {
	t.Helper()
	if got := chargeCount(t, ctx, analyst); got != want {
		t.Errorf("%s has %d ledger charges, want %d (one per DP query, DECLARE or COPY)", analyst, got, want)
	}
}

// TestDrivers_Asyncpg: asyncpg connects, gets a DP answer, gets a refusal
// as an error (not a hang), and its pool releases and reuses a connection
// through its reset query (pg_advisory_unlock_all, CLOSE ALL, UNLISTEN *,
// RESET ALL; with ROLLBACK first when a transaction was left open).
func TestDrivers_Asyncpg(t *testing.T) {
	requireDemo(t)
	needPython(t, "python3-asyncpg", "asyncpg")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := driverProxy(t, "apg")
	out := runClient(t, ctx, nil, python3, "testdata/drivers/asyncpg_client.py", p.dsn("apg"))
	wantLines(t, "asyncpg", out, "groups 7 department,n", "refused 42501", "after 1", "pool groups 7",
		"pool same True", "pool reset True", "pool after open transaction 0.1", "pool idle True")
	wantCharges(t, ctx, "apg", 2)
}

// TestDrivers_Psycopg3: psycopg 3 (Debian's 3.1) with a named cursor over
// a DP query (DECLARE with a server-side parameter, Describe of the
// cursor's portal, FETCH FORWARD, MOVE ABSOLUTE), a binary named cursor,
// nested transactions (savepoints) and a refusal. SQLAlchemy is tested
// with psycopg2 (TestDrivers_Psycopg2NamedCursors): Debian bookworm's
// SQLAlchemy 1.4 has no psycopg 3 dialect (postgresql+psycopg is 2.0's).
func TestDrivers_Psycopg3(t *testing.T) {
	requireDemo(t)
	needPython(t, "python3-psycopg", "psycopg")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := driverProxy(t, "pg3")
	out := runClient(t, ctx, nil, python3, "testdata/drivers/psycopg_client.py", p.dsn("pg3"))
	wantLines(t, "psycopg 3", out, "groups 7", "cursor columns department,n", "cursor rows 3 4", "cursor again 7",
		"binary rows 7 int", "nested refused 42501", "outer usable 0.2", "refused 42501", "after 1")
	wantCharges(t, ctx, "pg3", 3)
}

// TestDrivers_Psycopg2NamedCursors: psycopg2's named cursors (DECLARE
// "name" CURSOR WITHOUT HOLD FOR …, FETCH FORWARD itersize, MOVE, CLOSE),
// a WITH HOLD cursor read after COMMIT, a refused named cursor, and
// SQLAlchemy over psycopg2: stream_results (a named cursor) and
// begin_nested (a savepoint).
func TestDrivers_Psycopg2NamedCursors(t *testing.T) {
	requireDemo(t)
	needPython(t, "python3-psycopg2 python3-sqlalchemy", "psycopg2", "sqlalchemy")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := driverProxy(t, "pg2")
	url := strings.Replace(p.dsn("pg2"), "postgres://", "postgresql+psycopg2://", 1)
	out := runClient(t, ctx, nil, python3, "testdata/drivers/psycopg2_client.py", p.dsn("pg2"), url)
	wantLines(t, "psycopg2", out, "named rows 7 department,n", "named again 7", "held after commit 4 3",
		"named refused 42501", "stream rows 2", "nested refused 42501", "after nested 0.3")
	wantCharges(t, ctx, "pg2", 3)
}

// TestDrivers_PandasErrorColumns: pandas over SQLAlchemy, with
// dp.error_columns set by a startup option (as BI tools and notebooks
// pass settings): each released column but the key is followed by its
// 95% margin of error in the DataFrame (one value for counts, one per
// group for averages), and SHOW dp.last_answer reads as a DataFrame.
func TestDrivers_PandasErrorColumns(t *testing.T) {
	requireDemo(t)
	needPython(t, "python3-psycopg2 python3-sqlalchemy python3-pandas", "psycopg2", "sqlalchemy", "pandas")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := driverProxy(t, "pds")
	url := strings.Replace(p.dsn("pds"), "postgres://", "postgresql+psycopg2://", 1)
	out := runClient(t, ctx, nil, python3, "testdata/drivers/pandas_client.py", url)
	wantLines(t, "pandas", out, "columns department,n,n_moe95,mean_cost,mean_cost_moe95", "rows 7",
		"n_moe95 positive True one value True", "mean_cost_moe95 positive True per group True",
		"last epsilon 0.5 cached off", "last intervals has n True balanced True per group True", "last cost 0.5")
	wantCharges(t, ctx, "pds", 1)
}

// TestDrivers_JDBC: pgjdbc's date and timestamp parameters (setDate,
// setTimestamp, LocalDate, LocalDateTime) of DP queries, a LocalDateTime
// with a time of day answered (compared with the date column as
// PostgreSQL compares a timestamp; TestPgx_TimeParameters checks the rows
// against PostgreSQL), and setSavepoint()/rollback(sp) around a refused
// statement.
func TestDrivers_JDBC(t *testing.T) {
	requireDemo(t)
	javac, java, jar := lookPath("javac"), lookPath("java"), "/usr/share/java/postgresql.jar"
	if javac == "" || java == "" || !exists(jar) {
		missingClient(t, "a JDK and pgjdbc", "default-jdk-headless libpostgresql-jdbc-java")
		t.SkipNow()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := driverProxy(t, "jdbc")
	dir := t.TempDir()
	runClient(t, ctx, nil, javac, "-d", dir, "testdata/drivers/Drivers.java")
	out := runClient(t, ctx, nil, java, "-cp", dir+":"+jar, "Drivers", "jdbc:postgresql://"+p.addr+"/hospital?sslmode=disable", "jdbc")
	wantLines(t, "pgjdbc", out, "setDate true", "setTimestamp true", "LocalDate true", "LocalDateTime true",
		"refused 42501", "after rollback(sp) groups 7", "committed")
	if !strings.Contains(out, "time of day accepted") {
		t.Errorf("pgjdbc: a LocalDateTime with a time of day was not answered:\n%s", out)
	}
	wantCharges(t, ctx, "jdbc", 6)
}

// TestDrivers_NodePostgres: node-postgres (pg from npm) binds a JavaScript
// Date as a DP query's parameter; with a time of day it is read as its
// date, as PostgreSQL reads text for a date parameter.
func TestDrivers_NodePostgres(t *testing.T) {
	requireDemo(t)
	node, modules := pgtest.NodePG(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := driverProxy(t, "nodepg")
	out := runClient(t, ctx, []string{"NODE_PATH=" + modules, "TZ=UTC"}, node, "testdata/drivers/node_pg_dates.js", p.dsn("nodepg"))
	wantLines(t, "node-postgres", out, "date true", "groups 7", "after 1")
	if !strings.Contains(out, "time of day accepted") {
		t.Errorf("node-postgres: a Date with a time of day was not answered:\n%s", out)
	}
	// 10:30 on 2023-01-01 read as its date is the first query again:
	// answered from the cache, at no charge.
	wantCharges(t, ctx, "nodepg", 2)
}

// TestPsql_CopyDPQuery: psql's \copy (SELECT … GROUP BY …) TO 'file' (psql
// sends COPY (…) TO STDOUT and writes the file itself): one charge, the
// groups in csv with a header; \copy of a table and COPY to a server file
// refused without a charge.
func TestPsql_CopyDPQuery(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := driverProxy(t, "copier")
	file := filepath.Join(t.TempDir(), "by_department.csv")
	out, stderr, code := psql(t, p.dsn("copier"), "-c", "SET dp.epsilon = 0.05",
		"-c", `\copy (SELECT department, COUNT(*) AS n FROM visits GROUP BY department) TO '`+file+`' WITH (FORMAT csv, HEADER)`)
	if code != 0 {
		t.Fatalf("psql \\copy: exit %d\n%s\n%s", code, out, stderr)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 8 || lines[0] != "department,n" || !strings.HasPrefix(lines[1], "cardiology,") {
		t.Fatalf("\\copy wrote %q, want a header and the 7 departments", b)
	}
	if !strings.Contains(stderr, "dp: ") || !strings.Contains(out, "COPY 7") {
		t.Errorf("\\copy: no dp NOTICE or COPY 7:\n%s\n%s", out, stderr)
	}
	for _, cmd := range []string{`\copy visits TO '` + file + `.2'`, `COPY (SELECT department, COUNT(*) FROM visits GROUP BY department) TO '/tmp/dpproxy-copy-test'`} {
		_, stderr, code := psql(t, p.dsn("copier"), "-c", cmd)
		if code == 0 || !strings.Contains(stderr, "42501") {
			t.Errorf("%s: exit %d, want a 42501 refusal:\n%s", cmd, code, stderr)
		}
	}
	wantCharges(t, ctx, "copier", 1)
}

// TestBI_LabelsFetchFirstDropDowns: statements BI tools write, through
// pgx in the simple and extended protocols: a keyword as a label after AS,
// FETCH FIRST n ROWS ONLY as LIMIT, and the filter drop-down of a column
// with public values (GROUP BY or DISTINCT without an aggregate), which is
// answered from the policy's declared values at no cost, with a NOTICE
// saying so.
func TestBI_LabelsFetchFirstDropDowns(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := driverProxy(t, "bi")
	c, notices := connectWithNotices(t, ctx, p.dsn("bi"))
	if _, err := c.Exec(ctx, "SET dp.epsilon = 0.05"); err != nil {
		t.Fatal(err)
	}
	for i, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		rows, err := c.Query(ctx, fmt.Sprintf("SELECT sex, AVG(birth_year) AS by FROM patients WHERE birth_year > %d GROUP BY sex", 1900+i), mode)
		if err != nil {
			t.Fatalf("%v: AS by: %v", mode, err)
		}
		if f := rows.FieldDescriptions(); len(f) != 2 || f[1].Name != "by" {
			t.Fatalf("%v: AS by: columns %+v", mode, f)
		}
		n := 0
		for rows.Next() {
			n++
		}
		if rows.Err() != nil || n != 2 {
			t.Fatalf("%v: AS by: %d rows, %v", mode, n, rows.Err())
		}
		rows, err = c.Query(ctx, fmt.Sprintf("SELECT department, COUNT(*) AS n FROM visits WHERE age > %d GROUP BY department ORDER BY n DESC FETCH FIRST 3 ROWS ONLY", i), mode)
		if err != nil {
			t.Fatalf("%v: FETCH FIRST: %v", mode, err)
		}
		n = 0
		for rows.Next() {
			n++
		}
		if rows.Err() != nil || n != 3 {
			t.Fatalf("%v: FETCH FIRST 3 ROWS ONLY: %d rows, %v", mode, n, rows.Err())
		}
	}
	charges := chargeCount(t, ctx, "bi")
	before := len(notices())
	for _, q := range []string{
		"SELECT department FROM visits GROUP BY department ORDER BY department",
		`SELECT "department" AS "Department" FROM "public"."visits" GROUP BY 1 ORDER BY 1 DESC`,
		"SELECT DISTINCT department FROM visits",
	} {
		var got []string
		rows, err := c.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		if rows.Err() != nil || len(got) != 7 || !slices.Contains(got, "cardiology") || !slices.Contains(got, "surgery") {
			t.Fatalf("%s = %v, %v; want the 7 declared departments", q, got, rows.Err())
		}
	}
	if chargeCount(t, ctx, "bi") != charges {
		t.Fatalf("drop-down queries were charged")
	}
	ns := notices()[before:]
	if len(ns) < 3 || !strings.Contains(ns[0], "public values") || !strings.Contains(ns[0], "no budget spent") {
		t.Fatalf("drop-down NOTICEs %q, want the public values and no budget spent", ns)
	}
	wantCharges(t, ctx, "bi", 4)
}
