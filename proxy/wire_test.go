package proxy

import (
	"context"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// TestExtended_ErrorSentWithoutSync: after a failing Parse, a client that
// sends Describe and Flush (asyncpg's prepare) and waits must get the
// ErrorResponse at once, as from PostgreSQL, not after a Sync it never
// sends; the messages after the error are skipped until Sync.
func TestExtended_ErrorSentWithoutSync(t *testing.T) {
	ts := startServer(t, serverOpts{})
	fe, _ := ts.rawSession(t)
	fe.Send(&pgproto3.Parse{Name: "s1", Query: "DELETE FROM visits"})
	fe.Send(&pgproto3.Describe{ObjectType: 'S', Name: "s1"})
	fe.Send(&pgproto3.Flush{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	got := make(chan pgproto3.BackendMessage, 1)
	go func() {
		msg, err := fe.Receive()
		if err != nil {
			got <- nil
			return
		}
		got <- copyMessage(msg)
	}()
	select {
	case msg := <-got:
		if _, ok := msg.(*pgproto3.ErrorResponse); !ok {
			t.Fatalf("first reply %T, want ErrorResponse", msg)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no ErrorResponse without Sync: the client would wait forever")
	}
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	msgs := receiveUntilReady(t, fe)
	if len(msgs) != 1 {
		t.Fatalf("after Sync: %d messages (%T…), want only ReadyForQuery", len(msgs), msgs[0])
	}
}

// TestStartup_EncodingNames: client_encoding is read as PostgreSQL reads
// encoding names (letters and digits, any case): asyncpg sends 'utf-8'
// with the quotes.
func TestStartup_EncodingNames(t *testing.T) {
	ts := startServer(t, serverOpts{})
	for _, enc := range []string{"'utf-8'", "utf-8", "Unicode", "UTF_8", "sql_ascii"} {
		cfg, err := pgconn.ParseConfig(ts.dsn("alice", "alice", "hospital") + "&client_encoding=" + url.QueryEscape(enc))
		if err != nil {
			t.Fatal(err)
		}
		cfg.DialFunc = (&net.Dialer{Timeout: 5 * time.Second}).DialContext
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pc, err := pgconn.ConnectConfig(ctx, cfg)
		cancel()
		if err != nil {
			t.Errorf("client_encoding=%s: %v", enc, err)
			continue
		}
		if got := pc.ParameterStatus("client_encoding"); got != "UTF8" {
			t.Errorf("client_encoding=%s: reported %q, want UTF8", enc, got)
		}
		pc.Close(context.Background())
	}
}

// TestSession_ContributionBounds: SET dp.max_rows_per_unit and
// dp.max_groups_per_unit tighten the plan's contribution bounds, never
// loosen them (refused with 22023 naming the policy's bound, before any
// charge: at SET when no table allows the value, else by the query); without them an ungrouped query keeps the unit's whole
// allowance (4·5 rows) and a grouped one the policy's 5 per group.
func TestSession_ContributionBounds(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	last := func() (rows, groups int) {
		reqs := ts.releaser.requests()
		p := reqs[len(reqs)-1].Plan
		return p.RowsPerUnit, p.MaxGroupsPerUnit
	}
	steps := []struct {
		sql          string
		code         string
		rows, groups int
	}{
		{sql: "SELECT COUNT(*) FROM visits", rows: 20, groups: 1},
		{sql: "SELECT department, COUNT(*) FROM visits GROUP BY department", rows: 5, groups: 4},
		{sql: "SET dp.max_rows_per_unit = 0", code: "22023"},
		{sql: "SET dp.max_rows_per_unit = 3"},
		{sql: "SELECT COUNT(*) FROM visits WHERE age > 1", rows: 3, groups: 1},
		{sql: "SELECT department, COUNT(*) FROM visits WHERE age > 1 GROUP BY department", rows: 3, groups: 4},
		{sql: "SET dp.max_rows_per_unit = 12"},
		{sql: "SELECT COUNT(*) FROM visits WHERE age > 2", rows: 12, groups: 1},
		{sql: "SELECT department, COUNT(*) FROM visits WHERE age > 2 GROUP BY department", code: "22023"},
		{sql: "RESET dp.max_rows_per_unit"},
		{sql: "SET dp.max_groups_per_unit = 2"},
		{sql: "SELECT department, COUNT(*) FROM visits WHERE age > 3 GROUP BY department", rows: 5, groups: 2},
		{sql: "SELECT COUNT(*) FROM visits WHERE age > 3", rows: 10, groups: 1},
		// No table of the dataset allows 5 groups (or 100 rows): refused
		// at SET, not taken and then refused by every query.
		{sql: "SET dp.max_groups_per_unit = 5", code: "22023"},
		{sql: "SET dp.max_rows_per_unit = 100", code: "22023"},
		{sql: "SELECT department, COUNT(*) FROM visits WHERE age > 4 GROUP BY department", rows: 5, groups: 2},
	}
	for _, s := range steps {
		before := len(ts.releaser.requests())
		_, err := execAll(t, pc, s.sql)
		if s.code != "" {
			if sqlstate(err) != s.code {
				t.Fatalf("%s: %v, want %s", s.sql, err, s.code)
			}
			if len(ts.releaser.requests()) != before {
				t.Fatalf("%s: refused, but released", s.sql)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", s.sql, err)
		}
		if s.rows == 0 {
			continue
		}
		if rows, groups := last(); rows != s.rows || groups != s.groups {
			t.Fatalf("%s: plan keeps %d rows in %d groups per unit, want %d in %d", s.sql, rows, groups, s.rows, s.groups)
		}
	}
}

// TestSession_Savepoints: SAVEPOINT, RELEASE and ROLLBACK TO are emulated
// with PostgreSQL's SQLSTATEs: outside a transaction 25P01, an unknown name
// 3B001; ROLLBACK TO undoes the settings made since and makes a failed
// transaction usable again (psql's ON_ERROR_ROLLBACK, psycopg 3,
// SQLAlchemy's begin_nested, JDBC setSavepoint).
func TestSession_Savepoints(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	show := func() string {
		res, err := execAll(t, pc, "SHOW dp.epsilon")
		if err != nil {
			t.Fatal(err)
		}
		return rows(res[0])[0][0]
	}
	for _, s := range []struct{ sql, code string }{
		{"SAVEPOINT a", "25P01"},
		{"BEGIN", ""},
		{"SAVEPOINT a", ""},
		{"SET dp.epsilon = 0.5", ""},
		{"SAVEPOINT \"B\"", ""},
		{"SET dp.epsilon = 0.7", ""},
		{"DELETE FROM visits", "42501"},
		{"SELECT COUNT(*) FROM visits", "25P02"},
		{"RELEASE SAVEPOINT a", "25P02"},
		{"ROLLBACK TO SAVEPOINT nope", "3B001"},
		{"ROLLBACK TO \"B\"", ""},
		{"SELECT COUNT(*) FROM visits", ""},
	} {
		_, err := execAll(t, pc, s.sql)
		if got := sqlstate(err); got != s.code {
			t.Fatalf("%s: %v (SQLSTATE %q), want %q", s.sql, err, got, s.code)
		}
	}
	if got := show(); got != "0.5" {
		t.Fatalf("after ROLLBACK TO B: dp.epsilon = %s, want 0.5", got)
	}
	for _, s := range []struct{ sql, code string }{
		{"ROLLBACK TO SAVEPOINT a", ""},
		{"RELEASE SAVEPOINT \"B\"", "3B001"}, // B went with ROLLBACK TO a; the error aborts
		{"SELECT COUNT(*) FROM visits", "25P02"},
		{"ROLLBACK TO a", ""},
		{"RELEASE a", ""},
	} {
		_, err := execAll(t, pc, s.sql)
		if got := sqlstate(err); got != s.code {
			t.Fatalf("%s: %v, want %q", s.sql, err, s.code)
		}
	}
	if got := show(); got != "0.1" {
		t.Fatalf("after ROLLBACK TO a: dp.epsilon = %s, want 0.1", got)
	}
	if _, err := execAll(t, pc, "ROLLBACK TO a"); sqlstate(err) != "3B001" {
		t.Fatalf("ROLLBACK TO a released savepoint: %v, want 3B001", err)
	}
	if _, err := execAll(t, pc, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
}
