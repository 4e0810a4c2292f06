package proxy

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestRelay_Results: forwarded results are relayed byte for byte (relay.go)
// in both protocols: values larger than the relay's buffer, results larger
// than its flush size, an error after some rows (its SQLSTATE kept, the
// rows before it delivered in the simple protocol as PostgreSQL does), and
// the pooled connections stay usable after each.
func TestRelay_Results(t *testing.T) {
	ts := startShadowServer(t)
	pc := ts.connect(t)
	ctx := ctxT(t)
	for round := 0; round < 3; round++ {
		// A value of 300 kB (over the 8 kB buffer and the 64 kB flush).
		res, err := execAll(t, pc, "SELECT repeat('x', 300000) AS big, g FROM generate_series(1, 3) g")
		if err != nil {
			t.Fatal(err)
		}
		if got := rows(res[0]); len(got) != 3 || len(got[2][0]) != 300000 || got[2][1] != "3" {
			t.Fatalf("simple big values: %d rows", len(got))
		}
		rr := pc.ExecParams(ctx, "SELECT repeat('y', $1::int) AS big", [][]byte{[]byte("300000")}, nil, nil, nil).Read()
		if rr.Err != nil || len(rr.Rows) != 1 || len(rr.Rows[0][0]) != 300000 || string(rr.FieldDescriptions[0].Name) != "big" {
			t.Fatalf("extended big value: %v", rr.Err)
		}
		// Many rows (several flushes to the client).
		res, err = execAll(t, pc, "SELECT g, 'row ' || g FROM generate_series(1, 20000) g")
		if err != nil || len(res[0].Rows) != 20000 || string(res[0].Rows[19999][1]) != "row 20000" || res[0].CommandTag.String() != "SELECT 20000" {
			t.Fatalf("simple 20000 rows: %v", err)
		}
		rr = pc.ExecParams(ctx, "SELECT g FROM generate_series(1, $1::int) g", [][]byte{[]byte("20000")}, nil, nil, []int16{1}).Read()
		if rr.Err != nil || len(rr.Rows) != 20000 || len(rr.Rows[0][0]) != 4 || rr.CommandTag.String() != "SELECT 20000" {
			t.Fatalf("extended 20000 binary rows: %v", rr.Err)
		}
		// An error after two rows: 22012, and the session and pool go on.
		_, err = execAll(t, pc, "SELECT 1 / (3 - g) FROM generate_series(1, 5) g")
		if sqlstate(err) != "22012" {
			t.Fatalf("division by zero (simple) = %v, want 22012", err)
		}
		rr = pc.ExecParams(ctx, "SELECT 1 / ($1::int - g) FROM generate_series(1, 5) g", [][]byte{[]byte("3")}, nil, nil, nil).Read()
		if sqlstate(rr.Err) != "22012" {
			t.Fatalf("division by zero (extended) = %v, want 22012", rr.Err)
		}
		// A syntax error the shadow reports, with its position.
		_, err = execAll(t, pc, "SELECT 1 FROM pg_class WHERE")
		if sqlstate(err) != "42601" {
			t.Fatalf("syntax error = %v, want 42601", err)
		}
		for i := 0; i < 20; i++ {
			res, err := execAll(t, pc, "SELECT 1 AS one")
			if err != nil || rows(res[0])[0][0] != "1" {
				t.Fatalf("SELECT 1 after the errors: %v", err)
			}
		}
	}
}

// TestRelay_NoticesAndSettings: the shadow's notices reach the client
// through client_min_messages, and the session's settings reach the
// shadow connection (applied, or skipped when the connection already has
// them) across SET, RESET and other sessions with other values.
func TestRelay_NoticesAndSettings(t *testing.T) {
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t)})
	var mu sync.Mutex
	var notices []string
	cfg, err := pgconn.ParseConfig(ts.dsn("alice", "alice", "hospital"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		notices = append(notices, n.Message)
		mu.Unlock()
	}
	ctx := ctxT(t)
	pc, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(context.Background())
	other := ts.connect(t)
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := notices
		notices = nil
		return out
	}
	// A text-search query of stop words only: PostgreSQL's NOTICE.
	const stopWords = "text-search query contains only stop words or doesn't contain lexemes, ignored"
	if _, err := execAll(t, pc, "SELECT to_tsquery('english', 'the')"); err != nil {
		t.Fatal(err)
	}
	if rr := pc.ExecParams(ctx, "SELECT plainto_tsquery('english', $1)", [][]byte{[]byte("a")}, nil, nil, nil).Read(); rr.Err != nil {
		t.Fatal(rr.Err)
	}
	if n := got(); len(n) != 2 || n[0] != stopWords || n[1] != stopWords {
		t.Fatalf("notices = %q, want two %q", n, stopWords)
	}
	if _, err := execAll(t, pc, "SET client_min_messages = warning; SELECT to_tsquery('english', 'an')"); err != nil {
		t.Fatal(err)
	}
	if n := got(); len(n) != 0 {
		t.Fatalf("notices under client_min_messages = warning: %q", n)
	}

	tz := func(pc *pgconn.PgConn) string {
		t.Helper()
		res, err := execAll(t, pc, "SELECT current_setting('TimeZone')")
		if err != nil {
			t.Fatal(err)
		}
		return rows(res[0])[0][0]
	}
	for i := 0; i < 5; i++ {
		if _, err := execAll(t, pc, "SET TimeZone = 'Europe/Paris'"); err != nil {
			t.Fatal(err)
		}
		if got := tz(pc); got != "Europe/Paris" {
			t.Fatalf("TimeZone after SET = %q", got)
		}
		if got := tz(other); got != "UTC" {
			t.Fatalf("the other session's TimeZone = %q, want UTC", got)
		}
		if _, err := execAll(t, pc, "RESET TimeZone"); err != nil {
			t.Fatal(err)
		}
		if got := tz(pc); got != "UTC" {
			t.Fatalf("TimeZone after RESET = %q", got)
		}
	}
	if !strings.Contains(tz(other), "UTC") {
		t.Fatal("other session")
	}
}

// TestRelay_CancelExtended: a catalog statement forwarded with the
// extended protocol is stopped by a CancelRequest and by
// statement_timeout (57014 both), and the session and the pool go on.
func TestRelay_CancelExtended(t *testing.T) {
	ts := startShadowServer(t)
	ctx := context.Background()
	pc := ts.connect(t)
	slow := func() error {
		return pc.ExecParams(ctx, slowCatalog, nil, nil, nil, nil).Read().Err
	}
	done := make(chan error, 1)
	go func() { done <- slow() }()
	time.Sleep(300 * time.Millisecond)
	if err := pc.CancelRequest(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if sqlstate(err) != "57014" {
			t.Fatalf("cancelled extended catalog statement = %v, want 57014", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the extended catalog statement was not cancelled")
	}
	if _, err := execAll(t, pc, "SET statement_timeout = 300"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := slow(); sqlstate(err) != "57014" || time.Since(start) > 10*time.Second {
		t.Fatalf("extended catalog statement under statement_timeout = %v after %v, want 57014 at once", err, time.Since(start))
	}
	for i := 0; i < 30; i++ {
		rr := pc.ExecParams(ctx, "SELECT $1::int + 1", [][]byte{[]byte("1")}, nil, nil, nil).Read()
		if rr.Err != nil || string(rr.Rows[0][0]) != "2" {
			t.Fatalf("after the cancels: %v", rr.Err)
		}
	}
}
