package proxy

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// show runs SHOW name and returns the value.
func show(t *testing.T, pc *pgconn.PgConn, name string) string {
	t.Helper()
	res, err := execAll(t, pc, "SHOW "+name)
	if err != nil {
		t.Fatalf("SHOW %s: %v", name, err)
	}
	return rows(res[0])[0][0]
}

func TestSession_DPSettings(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	tests := []struct {
		sql      string
		wantCode string // "" for success
		show     string // setting to SHOW afterwards
		want     string
	}{
		{sql: "SHOW dp.epsilon", show: "dp.epsilon", want: "0.1"},
		{sql: "SET dp.epsilon = 0.5", show: "dp.epsilon", want: "0.5"},
		{sql: "SET dp.epsilon TO '0.25'", show: "dp.epsilon", want: "0.25"},
		{sql: "SET dp.epsilon = -1", wantCode: "22023", show: "dp.epsilon", want: "0.25"},
		{sql: "SET dp.epsilon = 0", wantCode: "22023"},
		{sql: "SET dp.epsilon = 'NaN'", wantCode: "22023"},
		{sql: "SET dp.epsilon = 'Infinity'", wantCode: "22023"},
		{sql: "SET dp.epsilon = 1e-16", wantCode: "22023", show: "dp.epsilon", want: "0.25"}, // below the floor
		{sql: "SET dp.epsilon = 0.000999", wantCode: "22023"},
		{sql: "SET dp.epsilon = 0.001", show: "dp.epsilon", want: "0.001"},
		{sql: "SET dp.delta = 'NaN'", wantCode: "22023"},
		{sql: "SET dp.delta = -1e-9", wantCode: "22023"},
		{sql: "SET dp.delta = 1", wantCode: "22023"},
		{sql: "SET dp.epsilon = 3.5", wantCode: "22023"}, // budget is 3
		{sql: "SET dp.epsilon = 3", show: "dp.epsilon", want: "3"},
		{sql: "RESET dp.epsilon", show: "dp.epsilon", want: "0.1"},
		{sql: "SET dp.delta = 1e-7", show: "dp.delta", want: "1e-07"},
		{sql: "SET dp.delta = 0.5", wantCode: "22023"},
		{sql: "SET dp.mechanism = gaussian", show: "dp.mechanism", want: "gaussian"},
		{sql: "SET dp.mechanism = 'LAPLACE'", show: "dp.mechanism", want: "laplace"},
		{sql: "SET dp.mechanism = exponential", wantCode: "22023"},
		{sql: "SET dp.cache = off", show: "dp.cache", want: "off"},
		{sql: "SET dp.cache = maybe", wantCode: "22023"},
		{sql: "SHOW dp.quantile_method", wantCode: "42704"}, // removed (issue 28): TestDP_RemovedSettings
		{sql: "SET dp.quantile_method = exponential", wantCode: "42704"},
		{sql: "SET dp.output_range = '-1,1'", wantCode: "42704"},
		{sql: "SET dp.contribution = sometimes", wantCode: "22023"},
		{sql: "SET dp.clipping = sometimes", wantCode: "22023"},
		{sql: "SET dp.clipping = AUTO", show: "dp.clipping", want: "auto"},
		{sql: "SET dp.cache = maybe", wantCode: "22023"},
		{sql: "SET dp.budget = 10", wantCode: "55P02"},
		{sql: "SET dp.nosuch = 1", wantCode: "42704"},
		{sql: "SHOW nosuch_setting", wantCode: "42704"},
		{sql: "SET nosuch_setting = 1", wantCode: "42704"},
		{sql: "SET myapp.flag = 'x'", show: "myapp.flag", want: "x"},
		{sql: "SET server_version = '99'", wantCode: "55P02"},
		{sql: "SET client_encoding = 'LATIN1'", wantCode: "22023"},
		{sql: "SET client_encoding = 'utf-8'", show: "client_encoding", want: "UTF8"},
		{sql: "SET extra_float_digits = 3", show: "extra_float_digits", want: "3"},
		{sql: "SET extra_float_digits = 7", wantCode: "22023"},
		{sql: "SET statement_timeout = '30s'", show: "statement_timeout", want: "30s"},
		{sql: "SET statement_timeout = 1500", show: "statement_timeout", want: "1500ms"},
		{sql: "SET statement_timeout = 0", show: "statement_timeout", want: "0"},
		{sql: "SET DateStyle = 'SQL, DMY'", show: "DateStyle", want: "SQL, DMY"},
		{sql: "SET datestyle TO ISO", show: "datestyle", want: "ISO, DMY"},
		{sql: "SET TIME ZONE 'Europe/Paris'", show: "TimeZone", want: "Europe/Paris"},
		{sql: "SET TimeZone = 'Not/AZone'", wantCode: "22023"},
		{sql: "SET search_path TO myschema, public", show: "search_path", want: "myschema, public"},
		{sql: "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", show: "default_transaction_read_only", want: "on"},
		{sql: "SHOW TRANSACTION ISOLATION LEVEL", show: "transaction_isolation", want: "read committed"},
		{sql: "SET standard_conforming_strings = off", wantCode: "22023"},
	}
	for _, tt := range tests {
		_, err := execAll(t, pc, tt.sql)
		if got := sqlstate(err); got != tt.wantCode {
			t.Errorf("%s: error %v, want SQLSTATE %q", tt.sql, err, tt.wantCode)
			continue
		}
		if tt.wantCode == "22023" {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Hint == "" && strings.HasPrefix(tt.sql, "SET dp.") {
				t.Errorf("%s: 22023 without a hint", tt.sql)
			}
			// The message names the parameter, as PostgreSQL's does.
			if errors.As(err, &pe) && strings.HasPrefix(tt.sql, "SET dp.") && !strings.HasPrefix(pe.Message, "invalid value for parameter ") && !strings.HasPrefix(pe.Message, "parameter \"dp.") {
				t.Errorf("%s: message %q does not name the parameter", tt.sql, pe.Message)
			}
		}
		if tt.show != "" {
			if got := show(t, pc, tt.show); got != tt.want {
				t.Errorf("after %s: SHOW %s = %q, want %q", tt.sql, tt.show, got, tt.want)
			}
		}
	}
}

func TestSession_GaussianNeedsDeltaBudget(t *testing.T) {
	ts := startServer(t, serverOpts{mutate: func(c *Config) {
		p := *c.Datasets["hospital"].Policy
		p.Budget.Delta = 0
		p.Analysts = map[string]policy.Budget{}
		c.Datasets["hospital"].Policy = &p
	}})
	pc := ts.connect(t)
	_, err := execAll(t, pc, "SET dp.mechanism = gaussian")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22023" || !strings.Contains(pe.Hint, "laplace") {
		t.Fatalf("SET dp.mechanism = gaussian without δ budget: %v", err)
	}
}

func TestSession_ParameterStatusReported(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	if _, err := execAll(t, pc, "SET application_name = 'dbeaver'; SET TimeZone = 'America/New_York'"); err != nil {
		t.Fatal(err)
	}
	if got := pc.ParameterStatus("application_name"); got != "dbeaver" {
		t.Errorf("application_name reported %q, want dbeaver", got)
	}
	if got := pc.ParameterStatus("TimeZone"); got != "America/New_York" {
		t.Errorf("TimeZone reported %q", got)
	}
	// ROLLBACK undoes a SET made in the transaction, and reports it.
	if _, err := execAll(t, pc, "BEGIN; SET application_name = 'inside'"); err != nil {
		t.Fatal(err)
	}
	if got := pc.ParameterStatus("application_name"); got != "inside" {
		t.Errorf("application_name reported %q, want inside", got)
	}
	if _, err := execAll(t, pc, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if got := pc.ParameterStatus("application_name"); got != "dbeaver" {
		t.Errorf("after ROLLBACK application_name reported %q, want dbeaver", got)
	}
	// SET LOCAL ends with the transaction; SET survives COMMIT.
	if _, err := execAll(t, pc, "BEGIN; SET LOCAL dp.epsilon = 0.7; SET dp.delta = 1e-7; COMMIT"); err != nil {
		t.Fatal(err)
	}
	if got := show(t, pc, "dp.epsilon"); got != "0.1" {
		t.Errorf("SET LOCAL survived COMMIT: %s", got)
	}
	if got := show(t, pc, "dp.delta"); got != "1e-07" {
		t.Errorf("SET lost at COMMIT: %s", got)
	}
}

func TestSession_TransactionStatus(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	step := func(sql, wantCode string, wantTx byte, wantTags ...string) {
		t.Helper()
		res, err := execAll(t, pc, sql)
		if got := sqlstate(err); got != wantCode {
			t.Fatalf("%s: %v, want SQLSTATE %q", sql, err, wantCode)
		}
		if got := pc.TxStatus(); got != wantTx {
			t.Fatalf("%s: TxStatus %c, want %c", sql, got, wantTx)
		}
		for i, tag := range wantTags {
			if i >= len(res) || res[i].CommandTag.String() != tag {
				t.Fatalf("%s: result %d tag, want %q (results %d)", sql, i, tag, len(res))
			}
		}
	}
	step("BEGIN", "", 'T', "BEGIN")
	step("SET dp.epsilon = 0.2", "", 'T', "SET")
	step("SHOW nosuch", "42704", 'E')
	step("SHOW dp.epsilon", "25P02", 'E')
	step("SELECT COUNT(*) FROM visits", "25P02", 'E')
	step("COMMIT", "", 'I', "ROLLBACK")
	if got := show(t, pc, "dp.epsilon"); got != "0.1" {
		t.Errorf("failed transaction's SET kept: %s", got)
	}
	step("START TRANSACTION ISOLATION LEVEL SERIALIZABLE", "", 'T', "BEGIN")
	if got := show(t, pc, "transaction_isolation"); got != "serializable" {
		t.Errorf("transaction_isolation = %q", got)
	}
	step("ROLLBACK", "", 'I', "ROLLBACK")
	step("COMMIT", "", 'I', "COMMIT") // warning, no transaction
	step("ROLLBACK", "", 'I', "ROLLBACK")
	step("BEGIN; SHOW dp.epsilon; COMMIT", "", 'I', "BEGIN", "SHOW", "COMMIT")
	step("DISCARD ALL", "", 'I', "DISCARD ALL")
	step("BEGIN", "", 'T')
	step("DISCARD ALL", "25001", 'E')
	step("ROLLBACK", "", 'I')
	step("DEALLOCATE nosuch", "26000", 'I')
	step("DEALLOCATE ALL", "", 'I', "DEALLOCATE ALL")
	step("RESET ALL", "", 'I', "RESET")
}

func TestSimpleQuery_MultiStatement(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	res, err := execAll(t, pc, "SET dp.epsilon = 0.2; SHOW dp.epsilon; SHOW nosuch; SET dp.epsilon = 0.3")
	if sqlstate(err) != "42704" {
		t.Fatalf("error = %v, want 42704", err)
	}
	if len(res) < 2 || res[0].CommandTag.String() != "SET" || rows(res[1])[0][0] != "0.2" {
		t.Fatalf("results before the error: %+v", res)
	}
	// The statement after the error was skipped, and the implicit
	// transaction of the string was rolled back (PostgreSQL's behaviour).
	if got := show(t, pc, "dp.epsilon"); got != "0.1" {
		t.Errorf("after a failed multi-statement string dp.epsilon = %s, want 0.1", got)
	}
	// With explicit transaction control the earlier part stays.
	if _, err := execAll(t, pc, "BEGIN; SET dp.epsilon = 0.4; COMMIT; SHOW nosuch"); sqlstate(err) != "42704" {
		t.Fatal(err)
	}
	if got := show(t, pc, "dp.epsilon"); got != "0.4" {
		t.Errorf("committed SET lost: dp.epsilon = %s", got)
	}
}

func TestSimpleQuery_ErrorPositionInString(t *testing.T) {
	ts := startServer(t, serverOpts{})
	fe, _ := ts.rawSession(t)
	fe.Send(&pgproto3.Query{String: "SHOW dp.epsilon; SELECT nosuch_column, COUNT(*) FROM visits"})
	fe.Flush()
	msgs := receiveUntilReady(t, fe)
	var e *pgproto3.ErrorResponse
	for _, m := range msgs {
		if x, ok := m.(*pgproto3.ErrorResponse); ok {
			e = x
		}
	}
	if e == nil {
		t.Fatalf("no error in %v", msgs)
	}
	// rewrite reports position 8 within the statement; the client must
	// get it within the whole string (the statement starts after 17
	// characters).
	if e.Code != "42703" || e.Position != 25 {
		t.Errorf("got %s at position %d, want 42703 at 25", e.Code, e.Position)
	}
}

func TestSimpleQuery_EmptyQuery(t *testing.T) {
	ts := startServer(t, serverOpts{})
	fe, _ := ts.rawSession(t)
	for _, q := range []string{"", "  ", "-- ping", ";"} {
		fe.Send(&pgproto3.Query{String: q})
		fe.Flush()
		msgs := receiveUntilReady(t, fe)
		if len(msgs) != 2 {
			t.Fatalf("%q: got %d messages %#v, want EmptyQueryResponse + ReadyForQuery", q, len(msgs), msgs)
		}
		if _, ok := msgs[0].(*pgproto3.EmptyQueryResponse); !ok {
			t.Errorf("%q: got %T, want EmptyQueryResponse", q, msgs[0])
		}
	}
}

func TestSHOWBudget(t *testing.T) {
	ts := startServer(t, serverOpts{})
	// 16 charges of 0.1 sum to 1.6000000000000003 in float64; SHOW says
	// 1.6 and 1.4 remaining (internal/numfmt), not float artefacts.
	spent := 0.0
	for range 16 {
		spent += 0.1
	}
	ts.store.spent["clinic"] = accountant.Spent{Epsilon: spent}
	pc := ts.connect(t) // alice may query both datasets
	res, err := execAll(t, pc, "SHOW dp.budget")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range res[0].FieldDescriptions {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, ","); got != "dataset,accountant,epsilon_spent,epsilon_remaining,delta_spent,delta_remaining,window_renews" {
		t.Errorf("columns = %s", got)
	}
	got := rows(res[0])
	want := [][]string{
		{"clinic", "pure", "1.6", "1.4", "0", "1e-06", "<null>"},
		{"hospital", "pure", "0.5", "2.5", "0", "1e-06", "<null>"},
	}
	if len(got) != len(want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}
	for i := range want {
		if strings.Join(got[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("row %d = %v, want %v", i, got[i], want[i])
		}
	}

	bob := ts.connectAs(t, "bob", "bob-secret", "hospital") // hospital only
	res, err = execAll(t, bob, "SHOW dp.budget")
	if err != nil || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != "hospital" {
		t.Fatalf("bob's budget rows: %v %v", res, err)
	}

	// A ledger failure is a clear error, and the session survives it.
	ts.store.err = errors.New("connection refused to 10.0.0.1")
	_, err = execAll(t, pc, "SHOW dp.budget")
	if sqlstate(err) != "58000" || strings.Contains(err.Error(), "10.0.0.1") {
		t.Errorf("ledger down: %v, want 58000 without the cause", err)
	}
	ts.store.err = nil
	if got := show(t, pc, "dp.epsilon"); got != "0.1" {
		t.Errorf("session after ledger error: %s", got)
	}
}

func TestDP_Route(t *testing.T) {
	ts := startServer(t, serverOpts{})
	fe, _ := ts.rawSession(t)
	fe.Send(&pgproto3.Query{String: "SET dp.epsilon = 0.5; SELECT department, COUNT(*) AS n, AVG(cost) FROM visits GROUP BY department"})
	fe.Flush()
	msgs := receiveUntilReady(t, fe)
	var notice *pgproto3.NoticeResponse
	var desc *pgproto3.RowDescription
	var data int
	var tag string
	for _, m := range msgs {
		switch x := m.(type) {
		case *pgproto3.NoticeResponse:
			notice = x
		case *pgproto3.RowDescription:
			desc = x
		case *pgproto3.DataRow:
			data++
		case *pgproto3.CommandComplete:
			tag = string(x.CommandTag)
		case *pgproto3.ErrorResponse:
			t.Fatalf("error: %s %s", x.Code, x.Message)
		}
	}
	if notice == nil || notice.Severity != "NOTICE" || notice.Code != "00000" || notice.Message != "dp: epsilon spent (fake)" {
		t.Errorf("notice = %#v", notice)
	}
	if desc == nil || len(desc.Fields) != 3 {
		t.Fatalf("row description = %#v", desc)
	}
	wantOIDs := []uint32{oidText, oidInt8, oidNumeric}
	for i, f := range desc.Fields {
		if f.DataTypeOID != wantOIDs[i] || f.Format != 0 {
			t.Errorf("column %d %s: oid %d format %d, want oid %d text", i, f.Name, f.DataTypeOID, f.Format, wantOIDs[i])
		}
	}
	if data != 7 || tag != "SELECT 7" {
		t.Errorf("got %d rows, tag %q; want 7 rows, SELECT 7", data, tag)
	}
	reqs := ts.releaser.requests()
	if len(reqs) != 1 {
		t.Fatalf("releaser called %d times", len(reqs))
	}
	r := reqs[0]
	if r.Analyst != "alice" || r.Dataset.Name != "hospital" || r.Epsilon != 0.5 || r.Delta != 0 || r.Mechanism != "laplace" || r.Plan == nil || r.NoCache {
		t.Errorf("request = %+v", r)
	}
}

func TestDP_CacheSetting(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	for _, sql := range []string{"SELECT COUNT(*) FROM visits", "SET dp.cache = off", "SELECT COUNT(*) FROM visits", "RESET dp.cache", "SELECT COUNT(*) FROM visits"} {
		if _, err := execAll(t, pc, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	reqs := ts.releaser.requests()
	if len(reqs) != 3 || reqs[0].NoCache || !reqs[1].NoCache || reqs[2].NoCache {
		t.Fatalf("NoCache per request = %v, want false, true, false", func() []bool {
			var out []bool
			for _, r := range reqs {
				out = append(out, r.NoCache)
			}
			return out
		}())
	}
}

// TestDP_RemovedSettings: dp.quantile_method and dp.output_range were
// removed (issue 28): SET (any value, any spelling), SHOW and RESET of
// them, and a start-up option setting them, fail with 42704 as unknown
// parameters, with a hint that says what became of them; the session
// survives, and its quantiles are the exponential mechanism's quantile
// measures.
func TestDP_RemovedSettings(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	removed := []struct {
		name string
		hint []string
	}{
		{"dp.quantile_method", []string{"removed", "exponential mechanism", "more accurate", "BENCHMARKS.md", "Quantiles of expressions"}},
		{"dp.output_range", []string{"removed", "corr and regr_r2", "natural ranges", "noisy sums"}},
	}
	for _, r := range removed {
		check := func(what string, err error) {
			t.Helper()
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "42704" || !strings.Contains(pe.Message, `"`+r.name+`"`) {
				t.Fatalf("%s: %v, want 42704 naming %s", what, err, r.name)
			}
			for _, want := range r.hint {
				if !strings.Contains(pe.Hint, want) {
					t.Errorf("%s: hint %q lacks %q", what, pe.Hint, want)
				}
			}
		}
		upper := strings.ToUpper(r.name)
		for _, sql := range []string{"SET " + r.name + " = sample", "SET " + r.name + " = exponential", "SET " + upper + " TO 'x'",
			"SET SESSION " + r.name + " = 1", "SET LOCAL " + r.name + " = 1", "SHOW " + r.name, "RESET " + r.name, "SET " + r.name + " TO DEFAULT"} {
			_, err := execAll(t, pc, sql)
			check(sql, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := pgconn.Connect(ctx, ts.dsn("alice", "alice", "hospital")+"&options=-c%20"+url.QueryEscape(r.name+"=1"))
		cancel()
		if err == nil {
			c.Close(context.Background())
		}
		check("start-up option -c "+r.name, err)
	}
	const q = "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost / 2) FROM visits"
	if _, err := execAll(t, pc, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	reqs := ts.releaser.requests()
	if len(reqs) != 1 || !reqs[0].Plan.HasQuantile() || reqs[0].Plan.SampleAgg != nil {
		t.Fatalf("releaser requests %d; want one plan with quantile measures", len(reqs))
	}
}

func TestDP_ErrorsAreCleanAndSessionSurvives(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)

	// A non-pgerr error from the DP path may quote upstream values: the
	// client gets XX000 without its text.
	ts.releaser.err = errors.New(`invalid input syntax for type integer: "4711"`)
	_, err := execAll(t, pc, "SELECT COUNT(*) FROM visits")
	if sqlstate(err) != "XX000" || strings.Contains(err.Error(), "4711") {
		t.Errorf("got %v, want XX000 without the upstream text", err)
	}
	// A client-facing error passes as it is.
	ts.releaser.err = pgerr.New(pgerr.ConfigurationLimit, "privacy budget exhausted").WithHint("ask for more")
	_, err = execAll(t, pc, "SELECT COUNT(*) FROM visits")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53400" || pe.Hint != "ask for more" {
		t.Errorf("got %v, want 53400 with its hint", err)
	}
	ts.releaser.err = nil
	// Refused statements.
	for _, q := range []string{"SELECT * FROM visits", "DELETE FROM visits", "COPY visits TO STDOUT"} {
		_, err := execAll(t, pc, q)
		if c := sqlstate(err); c == "" || c == "XX000" {
			t.Errorf("%s: %v, want a specific SQLSTATE", q, err)
		}
	}
	res, err := execAll(t, pc, "SELECT COUNT(*) FROM visits")
	if err != nil || len(res) != 1 || rows(res[0])[0][0] != "42" {
		t.Fatalf("session not usable after errors: %v %v", res, err)
	}
}

func TestCatalog_ShadowDownIsClearError(t *testing.T) {
	ts := startServer(t, serverOpts{shadowDSN: "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"})
	pc := ts.connect(t)
	_, err := execAll(t, pc, "SELECT 1")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "58000" || pe.Hint == "" {
		t.Fatalf("shadow down: %v, want 58000 with a hint", err)
	}
	if got := show(t, pc, "dp.epsilon"); got != "0.1" {
		t.Errorf("session after shadow error: %s", got)
	}
}

// rawSession connects and authenticates with a pgproto3.Frontend, for
// tests that look at individual messages.
func (ts *testServer) rawSession(t *testing.T) (*pgproto3.Frontend, *pgconn.PgConn) {
	t.Helper()
	return ts.hijack(t).Frontend, nil
}

// hijack connects and authenticates as alice, and takes the connection
// from pgconn.
func (ts *testServer) hijack(t *testing.T) *pgconn.HijackedConn {
	t.Helper()
	return ts.hijackAs(t, "alice", "alice")
}

// hijackAs is hijack as another analyst.
func (ts *testServer) hijackAs(t *testing.T, user, password string) *pgconn.HijackedConn {
	t.Helper()
	pc := ts.connectAs(t, user, password, "hospital")
	hj, err := pc.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hj.Conn.Close() })
	return hj
}

func receiveUntilReady(t *testing.T, fe *pgproto3.Frontend) []pgproto3.BackendMessage {
	t.Helper()
	var out []pgproto3.BackendMessage
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		out = append(out, copyMessage(msg))
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			return out
		}
	}
}

// copyMessage copies the messages tests inspect (pgproto3 reuses them).
func copyMessage(m pgproto3.BackendMessage) pgproto3.BackendMessage {
	switch x := m.(type) {
	case *pgproto3.RowDescription:
		c := *x
		c.Fields = append([]pgproto3.FieldDescription(nil), x.Fields...)
		return &c
	case *pgproto3.DataRow:
		c := &pgproto3.DataRow{}
		for _, v := range x.Values {
			if v == nil {
				c.Values = append(c.Values, nil)
			} else {
				c.Values = append(c.Values, append([]byte{}, v...))
			}
		}
		return c
	case *pgproto3.CommandComplete:
		return &pgproto3.CommandComplete{CommandTag: append([]byte(nil), x.CommandTag...)}
	case *pgproto3.ErrorResponse:
		c := *x
		return &c
	case *pgproto3.NoticeResponse:
		c := *x
		return &c
	case *pgproto3.ParameterDescription:
		return &pgproto3.ParameterDescription{ParameterOIDs: append([]uint32(nil), x.ParameterOIDs...)}
	case *pgproto3.ReadyForQuery:
		c := *x
		return &c
	case *pgproto3.ParameterStatus:
		c := *x
		return &c
	}
	return m
}

func TestExtended_ProtocolErrors(t *testing.T) {
	ts := startServer(t, serverOpts{})
	fe, _ := ts.rawSession(t)
	batch := func(msgs ...pgproto3.FrontendMessage) string {
		t.Helper()
		for _, m := range msgs {
			fe.Send(m)
		}
		fe.Send(&pgproto3.Sync{})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		var codes []string
		for _, m := range receiveUntilReady(t, fe) {
			if e, ok := m.(*pgproto3.ErrorResponse); ok {
				codes = append(codes, e.Code)
			}
		}
		return strings.Join(codes, ",")
	}
	if got := batch(&pgproto3.Parse{Name: "a", Query: "SHOW dp.epsilon"}); got != "" {
		t.Fatalf("parse: %s", got)
	}
	tests := []struct {
		name string
		msgs []pgproto3.FrontendMessage
		want string
	}{
		{"duplicate statement", []pgproto3.FrontendMessage{&pgproto3.Parse{Name: "a", Query: "SHOW dp.delta"}}, "42P05"},
		{"unknown statement", []pgproto3.FrontendMessage{&pgproto3.Bind{PreparedStatement: "nope"}}, "26000"},
		{"unknown portal", []pgproto3.FrontendMessage{&pgproto3.Execute{Portal: "nope"}}, "34000"},
		{"parameter count", []pgproto3.FrontendMessage{&pgproto3.Bind{PreparedStatement: "a", Parameters: [][]byte{[]byte("1")}}}, "08P01"},
		{"two statements", []pgproto3.FrontendMessage{&pgproto3.Parse{Query: "SHOW dp.delta; SHOW dp.epsilon"}}, "42601"},
		{"parameters in SET", []pgproto3.FrontendMessage{&pgproto3.Parse{Query: "SET dp.epsilon = $1"}}, "42601"},
		{"only the first error", []pgproto3.FrontendMessage{&pgproto3.Bind{PreparedStatement: "nope"}, &pgproto3.Execute{Portal: "nope"}}, "26000"},
		{"close then use", []pgproto3.FrontendMessage{&pgproto3.Close{ObjectType: 'S', Name: "a"}, &pgproto3.Bind{PreparedStatement: "a"}}, "26000"},
	}
	for _, tt := range tests {
		if got := batch(tt.msgs...); got != tt.want {
			t.Errorf("%s: errors %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestSession_EpsilonAfterGrant: SET dp.epsilon above the policy's budget
// is refused, and accepted once a steward's grant (`dpproxy budget grant`)
// raised the analyst's limit in the ledger; a ledger that cannot be read
// leaves the policy's limit.
func TestSession_EpsilonAfterGrant(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	limit := ts.srv.cfg.Datasets["hospital"].Policy.AnalystBudget("alice").Epsilon
	above := strconv.FormatFloat(limit+0.5, 'f', -1, 64)
	if _, err := execAll(t, pc, "SET dp.epsilon = "+above); sqlstate(err) != "22023" {
		t.Fatalf("SET dp.epsilon = %s above the policy's %v: %v, want 22023", above, limit, err)
	}
	ts.store.granted = accountant.Spent{Epsilon: 1}
	if _, err := execAll(t, pc, "SET dp.epsilon = "+above); err != nil {
		t.Fatalf("SET dp.epsilon = %s after a grant of 1: %v", above, err)
	}
	if got := show(t, pc, "dp.epsilon"); got != above {
		t.Fatalf("SHOW dp.epsilon = %q, want %q", got, above)
	}
	ts.store.err = errors.New("ledger down")
	if _, err := execAll(t, pc, "SET dp.epsilon = "+above); sqlstate(err) != "22023" {
		t.Fatalf("SET dp.epsilon = %s with the ledger down: %v, want 22023 (the policy's limit)", above, err)
	}
}

// TestSession_UnknownDPSettingHint: SET of an unknown dp.* name is 42704
// with a hint that lists dpproxy's settings.
func TestSession_UnknownDPSettingHint(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	_, err := execAll(t, pc, "SET dp.epsilom = 1")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42704" || !strings.Contains(pe.Hint, "dp.epsilon") || !strings.Contains(pe.Hint, "dp.clipping") {
		t.Fatalf("SET dp.epsilom = 1: %v (hint %q), want 42704 with a hint listing dp.epsilon and dp.clipping", err, hintOf(pe))
	}
}

func hintOf(pe *pgconn.PgError) string {
	if pe == nil {
		return ""
	}
	return pe.Hint
}
