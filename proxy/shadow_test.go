package proxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

// shadowDB creates a shadow catalog database for the hospital policy by
// hand: the exposed columns and no rows.
func shadowDB(t testing.TB) string {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	err := pgtest.Exec(context.Background(), dsn,
		`CREATE TABLE visits (patient_id bigint, visit_date date, department text, diagnosis text,
			age int, cost numeric(10,2), length_of_stay int)`,
		`CREATE TABLE patients (patient_id bigint primary key, birth_year int, sex text, region text)`,
		`CREATE SCHEMA other`,
	)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

func startShadowServer(t *testing.T) *testServer {
	return startServer(t, serverOpts{shadowDSN: shadowDB(t)})
}

func TestCatalog_SimpleQuery(t *testing.T) {
	ts := startShadowServer(t)
	pc := ts.connect(t)

	res, err := execAll(t, pc, "SELECT 1 AS one; select pg_catalog.version(); SELECT relname FROM pg_class WHERE relname IN ('visits', 'patients') ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || res[0].FieldDescriptions[0].Name != "one" || rows(res[0])[0][0] != "1" || res[0].CommandTag.String() != "SELECT 1" {
		t.Fatalf("SELECT 1: %+v", res)
	}
	if v := rows(res[1])[0][0]; !strings.HasPrefix(v, "PostgreSQL 1") {
		t.Errorf("version() = %q", v)
	}
	if got := rows(res[2]); len(got) != 2 || got[0][0] != "patients" || got[1][0] != "visits" {
		t.Errorf("pg_class rows = %v", got)
	}
	// Shadow errors are forwarded as PostgreSQL wrote them (there is no
	// data in the shadow), with the position.
	_, err = execAll(t, pc, "SELECT nosuch FROM pg_class")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42703" || pe.Position != 8 {
		t.Fatalf("shadow error: %#v", err)
	}
	// A misspelt table gets a hint on listing the tables (a new user's
	// FROM vists had none).
	_, err = execAll(t, pc, "SELECT 1 FROM vists")
	if !errors.As(err, &pe) || pe.Code != "42P01" || !strings.Contains(pe.Hint, `\dt`) {
		t.Fatalf("misspelt table: %#v", err)
	}
	// Session settings reach the shadow session.
	res, err = execAll(t, pc, "SET TimeZone = 'Europe/Paris'; SET search_path = other, public; SELECT current_setting('TimeZone'), current_schema()")
	if err != nil {
		t.Fatal(err)
	}
	if got := rows(res[2])[0]; got[0] != "Europe/Paris" || got[1] != "other" {
		t.Errorf("shadow settings = %v", got)
	}
	// ROLLBACK of a SET brings the shadow back too.
	res, err = execAll(t, pc, "BEGIN; SET TimeZone = 'Asia/Tokyo'; ROLLBACK; SELECT current_setting('TimeZone')")
	if err != nil {
		t.Fatal(err)
	}
	if got := rows(res[3])[0][0]; got != "Europe/Paris" {
		t.Errorf("shadow TimeZone after ROLLBACK = %q", got)
	}
}

func TestCatalog_StatementTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	ts := startShadowServer(t)
	pc := ts.connect(t)
	start := time.Now()
	_, err := execAll(t, pc, "SET statement_timeout = 200; SELECT count(*) FROM generate_series(1, 2000000000)")
	if sqlstate(err) != "57014" || !strings.Contains(err.Error(), "statement timeout") {
		t.Fatalf("statement timeout: %v", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("statement timeout took %v", time.Since(start))
	}
	if _, err := execAll(t, pc, "SET statement_timeout = 0"); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := pc.Exec(context.Background(), "SELECT count(*) FROM generate_series(1, 2000000000)").ReadAll()
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	cancelCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := pc.CancelRequest(cancelCtx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if sqlstate(err) != "57014" {
			t.Fatalf("cancelled catalog statement: %v", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("catalog statement not cancelled")
	}
	res, err := execAll(t, pc, "SELECT 2")
	if err != nil || rows(res[0])[0][0] != "2" {
		t.Fatalf("after cancel: %v %v", res, err)
	}
}

func pgxConnect(t *testing.T, ts *testServer) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctxT(t), ts.dsn("alice", "alice", "hospital"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestExtended_Pgx drives the extended protocol with pgx's default mode
// (cached named statements, binary results).
func TestExtended_Pgx(t *testing.T) {
	ts := startShadowServer(t)
	conn := pgxConnect(t, ts)
	ctx := ctxT(t)

	var n int32
	if err := conn.QueryRow(ctx, "SELECT 1::int4 + $1", 41).Scan(&n); err != nil || n != 42 {
		t.Fatalf("catalog with a parameter: %d %v", n, err)
	}
	var schema string
	if err := conn.QueryRow(ctx, "select current_schema()").Scan(&schema); err != nil || schema != "public" {
		t.Fatalf("current_schema: %q %v", schema, err)
	}

	// A DP statement with a parameter, more than 5 times (named statements).
	for i := 0; i < 7; i++ {
		var count int64
		if err := conn.QueryRow(ctx, "SELECT COUNT(*) FROM visits WHERE age > $1", 30+i).Scan(&count); err != nil || count != 42 {
			t.Fatalf("DP count #%d: %d %v", i, count, err)
		}
	}
	reqs := ts.releaser.requests()
	if len(reqs) != 7 {
		t.Fatalf("releaser called %d times for 7 executions (Describe must not release)", len(reqs))
	}
	if !strings.Contains(reqs[6].Plan.SQL, "36") {
		t.Errorf("bound parameter 36 not in the plan's SQL: %s", reqs[6].Plan.SQL)
	}

	// Grouped answer with text, int8 and numeric columns in binary.
	rs, err := conn.Query(ctx, "SELECT department, COUNT(*), AVG(cost) FROM visits WHERE department <> $1 GROUP BY department", "x'; DROP TABLE visits; --")
	if err != nil {
		t.Fatal(err)
	}
	var got int
	for rs.Next() {
		var dept string
		var cnt int64
		var avg pgtype.Numeric
		if err := rs.Scan(&dept, &cnt, &avg); err != nil {
			t.Fatal(err)
		}
		f, _ := avg.Float64Value()
		if dept == "" || cnt != 42 || f.Float64 != 12.5 {
			t.Errorf("row %q %d %v", dept, cnt, f)
		}
		got++
	}
	if err := rs.Err(); err != nil || got != 7 {
		t.Fatalf("grouped rows: %d %v", got, err)
	}

	// Session statements over the extended protocol.
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 0.3"); err != nil {
		t.Fatal(err)
	}
	var eps string
	if err := conn.QueryRow(ctx, "SHOW dp.epsilon").Scan(&eps); err != nil || eps != "0.3" {
		t.Fatalf("SHOW dp.epsilon: %q %v", eps, err)
	}
	// A refused query is an ordinary error; the connection stays usable.
	if _, err := conn.Exec(ctx, "SELECT * FROM visits"); sqlstate(err) == "" {
		t.Fatalf("raw select: %v", err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var count int64
	if err := tx.QueryRow(ctx, "SELECT COUNT(*) FROM visits").Scan(&count); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := conn.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestExtended_RowLimitsAndDescribe drives Parse/Bind/Describe/Execute by
// hand: Describe never releases, Execute with a row limit suspends, an
// error discards until Sync.
func TestExtended_RowLimitsAndDescribe(t *testing.T) {
	ts := startShadowServer(t)
	fe, _ := ts.rawSession(t)
	q := "SELECT department, COUNT(*) FROM visits WHERE age >= $1 GROUP BY department"
	fe.Send(&pgproto3.Parse{Name: "s1", Query: q})
	fe.Send(&pgproto3.Describe{ObjectType: 'S', Name: "s1"})
	fe.Send(&pgproto3.Bind{DestinationPortal: "c1", PreparedStatement: "s1", Parameters: [][]byte{[]byte("18")}, ResultFormatCodes: []int16{0, 1}})
	fe.Send(&pgproto3.Describe{ObjectType: 'P', Name: "c1"})
	fe.Send(&pgproto3.Sync{})
	fe.Flush()
	msgs := receiveUntilReady(t, fe)
	if len(ts.releaser.requests()) != 0 {
		t.Fatal("Describe released an answer")
	}
	wantTypes := []string{"*pgproto3.ParseComplete", "*pgproto3.ParameterDescription", "*pgproto3.RowDescription",
		"*pgproto3.BindComplete", "*pgproto3.RowDescription", "*pgproto3.ReadyForQuery"}
	if len(msgs) != len(wantTypes) {
		t.Fatalf("got %d messages %v", len(msgs), typeNames(msgs))
	}
	for i, m := range msgs {
		if typeName(m) != wantTypes[i] {
			t.Fatalf("message %d is %s, want %s (all: %v)", i, typeName(m), wantTypes[i], typeNames(msgs))
		}
	}
	if p := msgs[1].(*pgproto3.ParameterDescription); len(p.ParameterOIDs) != 1 || p.ParameterOIDs[0] != oidInt4 {
		t.Errorf("parameter types = %v, want [int4] (inferred by the shadow)", p.ParameterOIDs)
	}
	if rd := msgs[4].(*pgproto3.RowDescription); rd.Fields[1].DataTypeOID != oidInt8 || rd.Fields[1].Format != 1 || rd.Fields[0].Format != 0 {
		t.Errorf("portal description = %+v", rd.Fields)
	}
	// The portal was closed by Sync (no explicit transaction): in a
	// transaction, fetch 3 rows at a time.
	fe.Send(&pgproto3.Query{String: "BEGIN"})
	fe.Flush()
	receiveUntilReady(t, fe)
	fe.Send(&pgproto3.Bind{DestinationPortal: "c1", PreparedStatement: "s1", Parameters: [][]byte{[]byte("18")}, ResultFormatCodes: []int16{0, 1}})
	fe.Send(&pgproto3.Execute{Portal: "c1", MaxRows: 3})
	fe.Send(&pgproto3.Sync{})
	fe.Flush()
	msgs = receiveUntilReady(t, fe)
	if got := typeNames(msgs); strings.Count(got, "DataRow") != 3 || !strings.Contains(got, "PortalSuspended") || !strings.Contains(got, "NoticeResponse") {
		t.Fatalf("first fetch: %s", got)
	}
	for _, m := range msgs {
		if d, ok := m.(*pgproto3.DataRow); ok && len(d.Values[1]) != 8 {
			t.Errorf("binary int8 value has %d bytes", len(d.Values[1]))
		}
	}
	fe.Send(&pgproto3.Execute{Portal: "c1", MaxRows: 3})
	fe.Send(&pgproto3.Execute{Portal: "c1", MaxRows: 3})
	fe.Send(&pgproto3.Sync{})
	fe.Flush()
	msgs = receiveUntilReady(t, fe)
	got := typeNames(msgs)
	if strings.Count(got, "DataRow") != 4 || strings.Count(got, "PortalSuspended") != 1 || strings.Count(got, "NoticeResponse") != 0 {
		t.Fatalf("second fetch: %s", got)
	}
	var tag string
	for _, m := range msgs {
		if cc, ok := m.(*pgproto3.CommandComplete); ok {
			tag = string(cc.CommandTag)
		}
	}
	if tag != "SELECT 1" {
		t.Errorf("final tag %q, want SELECT 1 (rows of the last Execute)", tag)
	}
	if n := len(ts.releaser.requests()); n != 1 {
		t.Errorf("releaser called %d times for one portal", n)
	}

	// An error discards the rest of the batch until Sync.
	fe.Send(&pgproto3.Query{String: "ROLLBACK"})
	fe.Flush()
	receiveUntilReady(t, fe)
	fe.Send(&pgproto3.Parse{Query: "SELECT * FROM visits"})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	fe.Send(&pgproto3.Parse{Query: "SHOW dp.epsilon"})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	fe.Flush()
	msgs = receiveUntilReady(t, fe)
	if got := typeNames(msgs); got != "*pgproto3.ErrorResponse *pgproto3.ReadyForQuery" {
		t.Errorf("failed batch: %s", got)
	}
	msgs = receiveUntilReady(t, fe)
	if got := typeNames(msgs); got != "*pgproto3.ParseComplete *pgproto3.BindComplete *pgproto3.DataRow *pgproto3.CommandComplete *pgproto3.ReadyForQuery" {
		t.Errorf("batch after the failed one: %s", got)
	}
}

func typeName(m pgproto3.BackendMessage) string {
	return fmt.Sprintf("%T", m)
}

func typeNames(ms []pgproto3.BackendMessage) string {
	var s []string
	for _, m := range ms {
		s = append(s, typeName(m))
	}
	return strings.Join(s, " ")
}

// TestBinaryEncodings checks the binary encoders against a real
// PostgreSQL: values the proxy encodes are sent as binary parameters and
// read back as text, and binary values PostgreSQL sends are decoded.
func TestBinaryEncodings(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := ctxT(t)
	pc, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	roundTrip := func(sql string, oid uint32, text, want string) {
		t.Helper()
		b, err := encodeBinary(oid, text)
		if err != nil {
			t.Fatalf("encodeBinary(%d, %q): %v", oid, text, err)
		}
		res := pc.ExecParams(ctx, sql, [][]byte{b}, []uint32{oid}, []int16{1}, nil).Read()
		if res.Err != nil {
			t.Fatalf("%s with %q: %v", sql, text, res.Err)
		}
		if got := string(res.Rows[0][0]); got != want {
			t.Errorf("%s(%q) = %q, want %q", sql, text, got, want)
		}
	}
	for _, v := range []struct{ in, want string }{
		{"0", "0"}, {"12.5", "12.5"}, {"-12.5", "-12.5"}, {"0.0001", "0.0001"}, {"123456789.123456789", "123456789.123456789"},
		{"10000", "10000"}, {"-0.00012", "-0.00012"}, {"1e3", "1000"}, {"1.5e-3", "0.0015"}, {"99990000", "99990000"},
		{"12.50", "12.50"}, {"NaN", "NaN"}, {"Infinity", "Infinity"}, {"-Infinity", "-Infinity"},
	} {
		roundTrip("SELECT $1::numeric::text", oidNumeric, v.in, v.want)
	}
	roundTrip("SELECT $1::int8::text", oidInt8, "-9000000000", "-9000000000")
	roundTrip("SELECT $1::int4::text", oidInt4, "2147483647", "2147483647")
	roundTrip("SELECT $1::bool::text", oidBool, "t", "true")
	roundTrip("SELECT $1::date::text", oidDate, "2024-02-29", "2024-02-29")
	roundTrip("SELECT $1::date::text", oidDate, "1999-12-31", "1999-12-31")
	// A released date key can be any date the data holds (round 72: the
	// binary form of infinity and of BC dates failed after the charge,
	// and time.Duration's ±292 years misplaced dates before 1708).
	for _, d := range []string{"infinity", "-infinity", "0044-03-15 BC", "0001-01-01", "0001-12-31 BC", "1500-06-01", "1600-02-29", "2400-02-29", "12345-01-01"} {
		roundTrip("SELECT $1::date::text", oidDate, d, d)
	}
	for _, ts := range []string{"infinity", "-infinity", "1500-01-01 12:00:00", "0100-01-01 00:00:00.25 BC", "3000-07-04 23:59:59.999999"} {
		roundTrip("SELECT $1::timestamp::text", oidTimestamp, ts, ts)
	}
	roundTrip("SELECT ($1::timestamptz AT TIME ZONE 'UTC')::text", oidTimestamptz, "1200-01-01 00:00:00+01 BC", "1201-12-31 23:00:00 BC")
	roundTrip("SELECT ($1::timestamptz AT TIME ZONE 'UTC')::text", oidTimestamptz, "infinity", "infinity")
	roundTrip("SELECT $1::float8::text", oidFloat8, "0.1", "0.1")
	roundTrip("SELECT $1::int2::text", oidInt2, "-32768", "-32768")
	roundTrip("SELECT $1::float4::text", oidFloat4, "1.234567e+06", "1.234567e+06")
	roundTrip("SELECT $1::float4::text", oidFloat4, "0.1", "0.1")
	roundTrip("SELECT $1::timestamp::text", oidTimestamp, "2024-02-01 00:00:00", "2024-02-01 00:00:00")
	roundTrip("SELECT $1::timestamp::text", oidTimestamp, "1999-12-31 23:59:59.5", "1999-12-31 23:59:59.5")
	roundTrip("SELECT ($1::timestamptz AT TIME ZONE 'UTC')::text", oidTimestamptz, "2024-02-01 00:00:00+01", "2024-01-31 23:00:00")
	roundTrip("SELECT ($1::timestamptz AT TIME ZONE 'UTC')::text", oidTimestamptz, "2024-02-01 00:00:00+05:30", "2024-01-31 18:30:00")
	// A zone's local mean time before its standard time (Europe/Paris
	// before 1911): PostgreSQL writes the offset with seconds, and a
	// date_trunc key of a birth date carries it (rewrite/trunckey.go).
	roundTrip("SELECT ($1::timestamptz AT TIME ZONE 'UTC')::text", oidTimestamptz, "1900-01-01 00:00:00+00:09:21", "1899-12-31 23:50:39")
	roundTrip("SELECT ($1::timestamptz AT TIME ZONE 'UTC')::text", oidTimestamptz, "1900-01-01 00:00:00-04:56:02", "1900-01-01 04:56:02")

	// PostgreSQL's binary numerics decode to the same text.
	for _, v := range []string{"0", "12.5", "-12.5", "0.0001", "123456789.123456789", "10000", "-0.00012", "12.50", "1e-7"} {
		res := pc.ExecParams(ctx, "SELECT $1::numeric, $1::numeric::text", [][]byte{[]byte(v)}, nil, nil, []int16{1, 0}).Read()
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		got, err := decodeNumeric(res.Rows[0][0])
		if err != nil || got != string(res.Rows[0][1]) {
			t.Errorf("decodeNumeric(%s) = %q, %v; want %q", v, got, err, res.Rows[0][1])
		}
	}
}

// TestPsql runs the real psql binary against the in-process proxy with a
// real shadow catalog.
func TestPsql(t *testing.T) {
	t.Parallel()
	psql, err := exec.LookPath("psql")
	if err != nil {
		needClient(t, "psql", "postgresql-client")
	}
	ts := startShadowServer(t)
	run := func(args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, psql, append([]string{"-X", "-v", "ON_ERROR_STOP=1", ts.dsn("alice", "", "hospital")}, args...)...)
		cmd.Env = append(os.Environ(), "PGPASSWORD=alice", "PGCONNECT_TIMEOUT=5")
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	out, stderr, err := run("-At", "-c", "select 1")
	if err != nil || strings.TrimSpace(out) != "1" {
		t.Fatalf("psql -c 'select 1': %q %q %v", out, stderr, err)
	}
	out, stderr, err = run("-c", `\dt`)
	if err != nil || !strings.Contains(out, "visits") || !strings.Contains(out, "patients") {
		t.Fatalf(`\dt: %q %q %v`, out, stderr, err)
	}
	out, stderr, err = run("-c", `\d visits`)
	if err != nil || !strings.Contains(out, "length_of_stay") {
		t.Fatalf(`\d visits: %q %q %v`, out, stderr, err)
	}
	for _, meta := range []string{`\dt+`, `\l`, `\l+`, `\dn`, `\conninfo`} {
		if out, stderr, err := run("-c", meta); err != nil || out == "" {
			t.Errorf("%s: %q %q %v", meta, out, stderr, err)
		}
	}
	out, stderr, err = run("-c", "SELECT department, COUNT(*) FROM visits GROUP BY department")
	if err != nil || !strings.Contains(out, "cardiology") || !strings.Contains(out, "(7 rows)") ||
		!strings.Contains(stderr, "NOTICE:  dp: epsilon spent (fake)") {
		t.Fatalf("DP query: %q %q %v", out, stderr, err)
	}
	_, stderr, err = run("-c", "SELECT * FROM visits")
	if err == nil || !strings.Contains(stderr, "ERROR:") {
		t.Fatalf("raw select through psql: %q %v", stderr, err)
	}
	// In one session: the refusal is an ordinary ERROR and the session
	// goes on.
	out, stderr, err = run("-At", "-v", "ON_ERROR_STOP=0", "-c", "SELECT * FROM visits", "-c", "SELECT 'still' || 'usable'")
	if err != nil || !strings.Contains(stderr, "ERROR:") || strings.TrimSpace(out) != "stillusable" {
		t.Fatalf("refused query then another in one psql session: %q %q %v", out, stderr, err)
	}
	out, stderr, err = run("-At", "-c", "SET dp.epsilon = 0.2", "-c", "SHOW dp.epsilon", "-c", "SHOW dp.budget")
	if err != nil || !strings.Contains(out, "0.2") || !strings.Contains(out, "hospital|pure|0.5|2.5") {
		t.Fatalf("settings through psql: %q %q %v", out, stderr, err)
	}
	// Sessions one after another share one pooled shadow connection: a
	// session's SET reaches it, and does not outlive the session; psql's
	// start-up application_name is replayed for each.
	const shown = "SELECT current_setting('TimeZone') || ' ' || current_setting('application_name')"
	out, stderr, err = run("-At", "-c", "SET TimeZone = 'Asia/Tokyo'", "-c", shown)
	if err != nil || strings.TrimSpace(out) != "SET\nAsia/Tokyo psql" {
		t.Fatalf("SET TimeZone then the shadow's: %q %q %v", out, stderr, err)
	}
	out, stderr, err = run("-At", "-c", shown)
	if err != nil || strings.TrimSpace(out) != "UTC psql" {
		t.Fatalf("next session: %q %q %v, want UTC psql", out, stderr, err)
	}
	if st := ts.srv.shadowPool(ts.srv.cfg.Datasets["hospital"]).Stats(); st.Opened != 1 {
		t.Errorf("%d shadow connections opened for sequential psql sessions, want 1 (reused)", st.Opened)
	}
}

// TestJDBC runs pgjdbc (Debian's libpostgresql-jdbc-java) against the
// in-process proxy: sslmode=prefer (SSLRequest answered N), SCRAM,
// extended protocol with named statements and portals, metadata queries on
// the shadow.
func TestJDBC(t *testing.T) {
	t.Parallel()
	javac, err1 := exec.LookPath("javac")
	java, err2 := exec.LookPath("java")
	jar := "/usr/share/java/postgresql.jar"
	if _, err := os.Stat(jar); err1 != nil || err2 != nil || err != nil {
		needClient(t, "a JDK and pgjdbc", "default-jdk-headless libpostgresql-jdbc-java")
	}
	// One shadow connection, left by another session with other settings:
	// pgjdbc's start-up parameters must be replayed on it.
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.ShadowMaxConns = 1 }})
	if _, err := execAll(t, ts.connect(t), "SET extra_float_digits = 0; SET application_name = 'other'; SELECT 1"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, javac, "-d", dir, "testdata/JDBCClient.java").CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	// Plaintext (sslmode=prefer: the SSLRequest is answered N), then TLS
	// on a server that requires it.
	tlsTS := startServer(t, serverOpts{shadowDSN: ts.srv.cfg.Datasets["hospital"].ShadowDSN, mutate: func(c *Config) {
		c.TLS, c.RequireTLS = selfSigned(t), true
	}})
	for _, url := range []string{
		"jdbc:postgresql://" + ts.addr + "/hospital",
		"jdbc:postgresql://" + tlsTS.addr + "/hospital?sslmode=require",
	} {
		out, err := exec.CommandContext(ctx, java, "-cp", dir+":"+jar, "JDBCClient", url).CombinedOutput()
		if err != nil {
			t.Fatalf("java %s: %v\n%s", url, err, out)
		}
		checkJDBCOutput(t, string(out))
	}
	// 7 prepared counts and the grouped query; the empty query and the
	// public DISTINCT did not reach the DP path.
	if n := len(ts.releaser.requests()); n != 8 {
		t.Errorf("%d DP requests from the JDBC session, want 8", n)
	}
}

func checkJDBCOutput(t *testing.T, got string) {
	t.Helper()
	for _, want := range []string{
		"table patients", "table visits", "column age int4", "column cost numeric", "pk patient_id",
		"count 42", "rows 7", "refused 42501", "epsilon 0.25", "isolation read committed", "valid true",
		"shadow settings 3 PostgreSQL JDBC Driver", "empty 7 age int4 false", "distinct cardiology,emergency,neurology,oncology,orthopedics,pediatrics,surgery",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("JDBC output lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "count 42\n"); n != 7 {
		t.Errorf("%d prepared executions, want 7", n)
	}
}

// TestSQLAlchemy runs SQLAlchemy over psycopg2 (Debian's python3 packages):
// version and isolation-level checks at connect, inspection of the shadow
// catalog, a grouped DP query with a bound parameter, pandas.read_sql of a
// grouped DP query into a DataFrame, and refused queries (an ordinary
// DBAPI error, the connection usable afterwards).
func TestSQLAlchemy(t *testing.T) {
	t.Parallel()
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import sqlalchemy, psycopg2, pandas").CombinedOutput(); err != nil {
		t.Logf("%s: %v\n%s", py, err, out)
		needClient(t, "psycopg2, SQLAlchemy and pandas", "python3-psycopg2 python3-sqlalchemy python3-pandas")
	}
	ts := startShadowServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := "postgresql+psycopg2://alice:alice@" + ts.addr + "/hospital"
	out, err := exec.CommandContext(ctx, py, "testdata/sqlalchemy_client.py", url).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{
		"one 1", "tables patients,visits", "columns patient_id,visit_date,department,diagnosis,age,cost,length_of_stay",
		"rows 7 42", "refused 42501", "after 0.1",
		"frame 7 department,n,avg_cost cardiology,42,12.5 int64,float64",
		"pandas refused 42501", "pandas after 1", "pandas empty 0 7", "pandas distinct F,M",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("SQLAlchemy output lacks %q:\n%s", want, got)
		}
	}
}

// needClient stops a test whose real client is not installed: a failure
// under CI=true (CI must run every client), a skip with the install
// command otherwise. scripts/ensure-deps.sh installs them all.
func needClient(t *testing.T, what, debPackages string) {
	t.Helper()
	msg := fmt.Sprintf("%s not installed; install with: apt-get install %s (or run scripts/ensure-deps.sh as root)", what, debPackages)
	if pgtest.InCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
