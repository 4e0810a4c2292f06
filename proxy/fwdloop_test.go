//go:build linux

package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// wireClient is a client that sends raw frontend messages and reads the
// proxy's replies as bytes, to compare the forwarding loop's answers with
// the goroutine's byte for byte.
type wireClient struct {
	nc net.Conn
	fe *pgproto3.Frontend
}

func wireConnect(t *testing.T, ts *testServer) *wireClient {
	t.Helper()
	hc, err := ts.connect(t).Hijack()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hc.Conn.Close() })
	return &wireClient{nc: hc.Conn, fe: hc.Frontend}
}

// wireConnectTLS is wireConnect over TLS (the session's socket carries TLS
// records; the test reads the plaintext).
func wireConnectTLS(t *testing.T, ts *testServer) *wireClient {
	t.Helper()
	cfg, err := pgconn.ParseConfig(fmt.Sprintf("postgres://alice:alice@%s/hospital?sslmode=require", ts.addr))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := pgconn.ConnectConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := pc.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := hc.Conn.(*tls.Conn); !ok {
		t.Fatalf("not a TLS session: %T", hc.Conn)
	}
	t.Cleanup(func() { hc.Conn.Close() })
	return &wireClient{nc: hc.Conn, fe: hc.Frontend}
}

// roundTrip writes the messages in one write and returns the raw reply up
// to and including the ReadyForQuery of the last Sync or Query.
func (w *wireClient) roundTrip(t *testing.T, msgs ...pgproto3.FrontendMessage) []byte {
	t.Helper()
	var out []byte
	want := 0
	for _, m := range msgs {
		var err error
		if out, err = m.Encode(out); err != nil {
			t.Fatal(err)
		}
		switch m.(type) {
		case *pgproto3.Query, *pgproto3.Sync:
			want++
		}
	}
	if _, err := w.nc.Write(out); err != nil {
		t.Fatal(err)
	}
	return w.readReplies(t, want)
}

func (w *wireClient) readReplies(t *testing.T, want int) []byte {
	t.Helper()
	_ = w.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	var got []byte
	hdr := make([]byte, 5)
	for want > 0 {
		if _, err := io.ReadFull(w.nc, hdr); err != nil {
			t.Fatalf("reading the reply: %v (after %q)", err, got)
		}
		body := make([]byte, int(binary.BigEndian.Uint32(hdr[1:]))-4)
		if _, err := io.ReadFull(w.nc, body); err != nil {
			t.Fatal(err)
		}
		got = append(append(got, hdr...), body...)
		if hdr[0] == 'Z' {
			want--
		}
	}
	return got
}

// loopCase is one exchange of TestLoop_SameBytes.
type loopCase struct {
	name string
	msgs []pgproto3.FrontendMessage
}

func simpleQ(sql string) []pgproto3.FrontendMessage {
	return []pgproto3.FrontendMessage{&pgproto3.Query{String: sql}}
}

func extQ(name, sql string, describe bool, params [][]byte, resultFormats []int16) []pgproto3.FrontendMessage {
	msgs := []pgproto3.FrontendMessage{
		&pgproto3.Parse{Name: name, Query: sql},
		&pgproto3.Bind{PreparedStatement: name, Parameters: params, ResultFormatCodes: resultFormats},
	}
	if describe {
		msgs = append(msgs, &pgproto3.Describe{ObjectType: 'P'})
	}
	return append(msgs, &pgproto3.Execute{}, &pgproto3.Sync{})
}

// TestLoop_SameBytes: a session's replies are the same bytes whether the
// forwarding loop or the session's goroutine answers (fwdloop_linux.go):
// results in both protocols, text and binary, with and without Describe
// and Parse, statements the loop hands back (errors, notices, results over
// its buffer, DP and session statements, pipelined messages), and the
// session goes on after each. Each exchange runs several times so that the
// loop answers the repeats (the first run fills the session's caches);
// the test fails unless the loop answered most of them.
func TestLoop_SameBytes(t *testing.T) {
	t.Run("plaintext", func(t *testing.T) { loopSameBytes(t, false) })
	t.Run("TLS", func(t *testing.T) { loopSameBytes(t, true) })
}

func loopSameBytes(t *testing.T, useTLS bool) {
	dsn := shadowDB(t)
	var tlsCfg *tls.Config
	if useTLS {
		tlsCfg = selfSigned(t)
	}
	on := startServer(t, serverOpts{shadowDSN: dsn, mutate: func(c *Config) { c.TLS = tlsCfg }})
	off := startServer(t, serverOpts{shadowDSN: dsn, mutate: func(c *Config) { c.ForwardLoop, c.TLS = false, tlsCfg }})
	connect := wireConnect
	if useTLS {
		connect = wireConnectTLS
	}
	cases := []loopCase{
		{"select 1", simpleQ("SELECT 1 AS one")},
		{"catalog rows", simpleQ("SELECT relname, relkind FROM pg_catalog.pg_class WHERE relname IN ('visits', 'patients') ORDER BY 1")},
		{"no rows", simpleQ("SELECT 1 WHERE false")},
		{"error", simpleQ("SELECT 1 / 0")},
		{"syntax error", simpleQ("SELECT 1 FROM pg_class WHERE")},
		{"large result", simpleQ("SELECT repeat('x', 100000) AS big")},
		{"many rows", simpleQ("SELECT g FROM generate_series(1, 5000) g")},
		{"dp statement", simpleQ("SELECT COUNT(*) FROM visits")},
		{"session statement", simpleQ("SHOW search_path")},
		{"two statements", simpleQ("SELECT 1; SELECT 2")},
		{"empty", simpleQ("")},
		{"pipelined", append(simpleQ("SELECT 1 AS one"), &pgproto3.Query{String: "SELECT 2 AS two"})},
		{"extended", extQ("", "SELECT 1 AS one", true, nil, nil)},
		{"extended, no describe", extQ("", "SELECT 2 AS two", false, nil, nil)},
		{"extended, binary", extQ("", "SELECT 42::int4 AS n", true, nil, []int16{1})},
		{"extended, parameter", extQ("", "SELECT $1::int + 1 AS n", true, [][]byte{[]byte("41")}, nil)},
		{"extended, error", extQ("", "SELECT 1 / (0 * $1::int)", true, [][]byte{[]byte("1")}, nil)},
		{"extended, wrong parameter count", extQ("", "SELECT $1::int", true, nil, nil)},
		{"extended, then simple", append(extQ("", "SELECT 1 AS one", true, nil, nil), &pgproto3.Query{String: "SELECT 1 AS one"})},
		{"bind of a named statement", []pgproto3.FrontendMessage{
			&pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{},
		}},
		{"execute with a row limit", []pgproto3.FrontendMessage{
			&pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Execute{MaxRows: 1}, &pgproto3.Sync{},
		}},
	}
	clients := [2]*wireClient{connect(t, on), connect(t, off)}
	for i, w := range clients {
		// A named statement for the Bind cases, and a forwarded statement
		// first so that the session parks.
		got := w.roundTrip(t, &pgproto3.Parse{Name: "s1", Query: "SELECT 7 AS seven"}, &pgproto3.Sync{})
		if !bytes.HasSuffix(got, []byte{'Z', 0, 0, 0, 5, 'I'}) {
			t.Fatalf("client %d: Parse s1: %q", i, got)
		}
	}
	before := theLoop.ran.Load()
	for round := 0; round < 4; round++ {
		for _, tc := range cases {
			var replies [2][]byte
			for i, w := range clients {
				// A forwarded statement before each case: the session is
				// parked when the case's bytes arrive.
				w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
				replies[i] = w.roundTrip(t, tc.msgs...)
			}
			if !bytes.Equal(replies[0], replies[1]) {
				t.Errorf("round %d, %s:\n loop      %q\n goroutine %q", round, tc.name, replies[0], replies[1])
			}
		}
	}
	if t.Failed() {
		return
	}
	// Of the 4 × 2 × len(cases) exchanges of the loop's client, the
	// forwarded statement before each case (after the first round) and the
	// cases the loop runs (select 1, catalog rows, no rows, many rows,
	// pipelined ×2, extended ×4, bind of s1) come from the loop.
	t.Logf("the loop answered %d statements", theLoop.ran.Load()-before)
	if ran := theLoop.ran.Load() - before; ran < int64(3*(len(cases)+10)) {
		t.Fatalf("the loop answered %d statements, want at least %d", ran, 3*(len(cases)+10))
	}
}

// TestLoop_Cancel: a CancelRequest reaches a catalog statement the loop
// runs; the client gets 57014 at once, the statement is not run again,
// and the session and the pool go on.
func TestLoop_Cancel(t *testing.T) {
	ts := startShadowServer(t)
	ctx := context.Background()
	pc := ts.connect(t)
	// The first run classifies and caches the text (on the goroutine).
	for i := 0; i < 2; i++ {
		if _, err := execAll(t, pc, "SELECT 1 AS one"); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := execAll(t, pc, slowCatalog); done <- err }()
		time.Sleep(300 * time.Millisecond)
		ran := theLoop.ran.Load()
		start := time.Now()
		if err := pc.CancelRequest(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if sqlstate(err) != "57014" {
				t.Fatalf("run %d: cancelled catalog statement = %v, want 57014", i, err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("run %d: cancel answered after %v", i, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d: the catalog statement was not cancelled", i)
		}
		if theLoop.ran.Load() != ran {
			t.Fatalf("run %d: the loop answered a cancelled statement", i)
		}
	}
	for i := 0; i < 20; i++ {
		res, err := execAll(t, pc, "SELECT 1 AS one")
		if err != nil || rows(res[0])[0][0] != "1" {
			t.Fatalf("after the cancels: %v", err)
		}
	}
}

// TestLoop_IdleTimeout: a session parked on the loop still ends with
// 57P05 when it stays idle past the server's IdleTimeout.
func TestLoop_IdleTimeout(t *testing.T) {
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.IdleTimeout = 500 * time.Millisecond }})
	w := wireConnect(t, ts)
	for i := 0; i < 3; i++ {
		w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	}
	start := time.Now()
	_ = w.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	msg, err := w.fe.Receive()
	if err != nil {
		t.Fatalf("waiting for the idle timeout: %v", err)
	}
	e, ok := msg.(*pgproto3.ErrorResponse)
	if !ok || e.Code != "57P05" {
		t.Fatalf("idle parked session got %#v, want FATAL 57P05", msg)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 5*time.Second {
		t.Fatalf("idle timeout after %v, want about 0.5–1.5 s", d)
	}
}

// TestLoop_Shutdown: parked sessions get 57P01 when the server drains, and
// a client that goes away while parked ends its session.
func TestLoop_Shutdown(t *testing.T) {
	ts := startShadowServer(t)
	gone := wireConnect(t, ts)
	gone.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	gone.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	gone.nc.Close()
	w := wireConnect(t, ts)
	for i := 0; i < 3; i++ {
		w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	}
	waitActive(t, ts, 1, "after one client went away while parked")
	ts.cancel()
	_ = w.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	msg, err := w.fe.Receive()
	if err != nil {
		t.Fatalf("waiting for shutdown: %v", err)
	}
	if e, ok := msg.(*pgproto3.ErrorResponse); !ok || e.Code != adminShutdown {
		t.Fatalf("parked session at shutdown got %#v, want FATAL 57P01", msg)
	}
	select {
	case err := <-ts.done:
		ts.done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the drain")
	}
}

// TestLoop_ManySessions: sessions parked at once, each answered in turn
// by the loop, each getting its own answers.
func TestLoop_ManySessions(t *testing.T) {
	ts := startShadowServer(t)
	const n = 20
	clients := make([]*wireClient, n)
	for i := range clients {
		clients[i] = wireConnect(t, ts)
	}
	before := theLoop.ran.Load()
	for round := 0; round < 5; round++ {
		for i, w := range clients {
			sql := fmt.Sprintf("SELECT %d AS n", i)
			got := w.roundTrip(t, simpleQ(sql)...)
			v := fmt.Sprint(i)
			if !strings.Contains(string(got), "\x00\x01\x00\x00\x00"+string(rune(len(v)))+v+"C") {
				t.Fatalf("client %d round %d: %q", i, round, got)
			}
		}
	}
	if ran := theLoop.ran.Load() - before; ran < 3*n {
		t.Fatalf("the loop answered %d of %d statements", ran, 5*n)
	}
}

// recordingObserver keeps the routes of the statements it is told of.
type recordingObserver struct {
	mu     sync.Mutex
	routes []string
}

func (r *recordingObserver) Statement(ev StatementEvent) {
	r.mu.Lock()
	r.routes = append(r.routes, ev.Route+"/"+ev.SQLState+"/"+ev.Analyst+"/"+ev.Dataset)
	r.mu.Unlock()
}

func (r *recordingObserver) count(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.routes {
		if x == s {
			n++
		}
	}
	return n
}

// TestLoop_Observer: the statements the loop answers reach the Observer
// like the goroutine's, once each.
func TestLoop_Observer(t *testing.T) {
	obs := &recordingObserver{}
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.Observer = obs }})
	w := wireConnect(t, ts)
	before := theLoop.ran.Load()
	const n = 50
	for i := 0; i < n; i++ {
		w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	}
	if ran := theLoop.ran.Load() - before; ran < n/2 {
		t.Fatalf("the loop answered %d of %d statements", ran, n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for obs.count("catalog//alice/hospital") < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // any extra report would have arrived
	if got := obs.count("catalog//alice/hospital"); got != n {
		t.Fatalf("the Observer saw %d catalog statements, want %d", got, n)
	}
}

// TestLoop_Backoff: a session whose forwarded statements the loop cannot
// answer (here results over its buffer, which the goroutine streams) stops
// parking after a few tries, so it does not pay the hand-over each time,
// and gets every answer right.
func TestLoop_Backoff(t *testing.T) {
	ts := startShadowServer(t)
	w := wireConnect(t, ts)
	const n = 64
	before := theLoop.handedBack.Load()
	for i := 0; i < n; i++ {
		got := w.roundTrip(t, simpleQ("SELECT repeat('x', 100000) AS big")...)
		if len(got) < 100000 || !bytes.HasSuffix(got, []byte{'Z', 0, 0, 0, 5, 'I'}) {
			t.Fatalf("statement %d: %d bytes", i, len(got))
		}
	}
	if back := theLoop.handedBack.Load() - before; back < parkMissLimit || back > parkMissLimit+n/parkRetryEvery+1 {
		t.Fatalf("%d hand-overs for %d statements the loop cannot answer, want %d to %d", back, n, parkMissLimit, parkMissLimit+n/parkRetryEvery+1)
	}
	// A statement the loop answers brings the session back to it.
	for i := 0; i < 40; i++ {
		w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	}
	ran := theLoop.ran.Load()
	for i := 0; i < 10; i++ {
		w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	}
	if theLoop.ran.Load()-ran != 10 {
		t.Fatalf("after the backoff the loop answered %d of 10", theLoop.ran.Load()-ran)
	}
}

// TestLoop_DrainDeadline: a catalog statement the loop runs when the
// drain deadline passes is ended, the client gets FATAL 57P01, and Serve
// returns.
func TestLoop_DrainDeadline(t *testing.T) {
	ts := startShadowServer(t)
	done := slowInLoop(t, ts)
	ran := theLoop.ran.Load()
	start := time.Now()
	ts.cancel()
	select {
	case err := <-done:
		if sqlstate(err) != adminShutdown {
			t.Fatalf("statement at the drain deadline = %v, want 57P01", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the statement outlived the drain deadline")
	}
	select {
	case err := <-ts.done:
		ts.done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("drain took %v (deadline 2 s)", d)
	}
	if theLoop.ran.Load() != ran {
		t.Fatal("the loop answered the statement")
	}
}

// slowInLoop starts slowCatalog on a new session of ts so that the loop
// runs it: a first run (on the goroutine, which caches the text) is
// cancelled, a forwarded statement parks the session, and the second run
// is the loop's. It returns the second run's result, to come.
func slowInLoop(t *testing.T, ts *testServer) <-chan error {
	t.Helper()
	pc := ts.connect(t)
	done := make(chan error, 1)
	go func() { _, err := execAll(t, pc, slowCatalog); done <- err }()
	time.Sleep(300 * time.Millisecond)
	if err := pc.CancelRequest(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; sqlstate(err) != "57014" {
		t.Fatalf("first run = %v, want 57014", err)
	}
	if _, err := execAll(t, pc, "SELECT 1 AS one"); err != nil {
		t.Fatal(err)
	}
	go func() { _, err := execAll(t, pc, slowCatalog); done <- err }()
	time.Sleep(300 * time.Millisecond)
	if !loopRunsOne(ts) {
		t.Fatal("the slow statement is not running in the loop")
	}
	return done
}

// loopRunsOne reports whether a session of ts has a statement running in
// the forwarding loop.
func loopRunsOne(ts *testServer) bool {
	ts.srv.mu.Lock()
	defer ts.srv.mu.Unlock()
	for c := range ts.srv.conns {
		c.cancelMu.Lock()
		running := c.loopRunning
		c.cancelMu.Unlock()
		if running {
			return true
		}
	}
	return false
}

// TestLoop_Abort: abortParked ends a statement the loop runs even when no
// cancel reaches the shadow (a shadow that ignores it): the session goes
// back to its goroutine at once, which ends it as the drain does.
func TestLoop_Abort(t *testing.T) {
	ts := startShadowServer(t)
	done := slowInLoop(t, ts)
	ts.srv.mu.Lock()
	for c := range ts.srv.conns {
		c.shuttingDown.Store(true)
		c.abortParked()
	}
	ts.srv.mu.Unlock()
	select {
	case err := <-done:
		if sqlstate(err) != adminShutdown {
			t.Fatalf("aborted statement = %v, want 57P01", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("abortParked did not end the statement")
	}
}

// choppyConn writes in pieces of a few bytes with pauses, so TLS records
// reach the proxy split at arbitrary points.
type choppyConn struct {
	net.Conn
	piece int
}

func (c *choppyConn) Write(b []byte) (int, error) {
	for i := 0; i < len(b); i += c.piece {
		if _, err := c.Conn.Write(b[i:min(i+c.piece, len(b))]); err != nil {
			return i, err
		}
		time.Sleep(200 * time.Microsecond)
	}
	return len(b), nil
}

// TestLoop_TLSSplitRecords: a TLS session whose records arrive in pieces
// (partial records, a header split anywhere) is answered by the loop as by
// its goroutine, and its end (close_notify, then the socket) ends the
// session.
func TestLoop_TLSSplitRecords(t *testing.T) {
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.TLS = selfSigned(t) }})
	for _, piece := range []int{1, 3, 7, 100} {
		cfg, err := pgconn.ParseConfig(fmt.Sprintf("postgres://alice:alice@%s/hospital?sslmode=require", ts.addr))
		if err != nil {
			t.Fatal(err)
		}
		dial := cfg.DialFunc
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &choppyConn{Conn: nc, piece: piece}, nil
		}
		pc, err := pgconn.ConnectConfig(ctxT(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		before := theLoop.ran.Load()
		for i := 0; i < 10; i++ {
			res, err := execAll(t, pc, fmt.Sprintf("SELECT %d AS n", i%3))
			if err != nil || rows(res[0])[0][0] != fmt.Sprint(i%3) {
				t.Fatalf("piece %d, statement %d: %v", piece, i, err)
			}
			rr := pc.ExecParams(ctxT(t), "SELECT $1::int + 1", [][]byte{[]byte(fmt.Sprint(i))}, nil, nil, nil).Read()
			if rr.Err != nil || string(rr.Rows[0][0]) != fmt.Sprint(i+1) {
				t.Fatalf("piece %d, extended %d: %v", piece, i, rr.Err)
			}
		}
		if ran := theLoop.ran.Load() - before; ran < 10 {
			t.Fatalf("piece %d: the loop answered %d of 20", piece, ran)
		}
		// Terminate ends the session; the proxy may close the socket
		// before the client's close_notify (as PostgreSQL does).
		_ = pc.Close(ctxT(t))
	}
	waitActive(t, ts, 0, "after their clients closed")
}

// waitActive waits up to 5 s for ts to have n sessions.
func waitActive(t *testing.T, ts *testServer, n int64, when string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for ts.srv.active.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions active %s, want %d", ts.srv.active.Load(), when, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLoop_TLSLargeMessage: a TLS session's Query of 300 KiB (many
// records) while parked gets the goroutine's answer, and the loop does not
// stall on it.
func TestLoop_TLSLargeMessage(t *testing.T) {
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.TLS = selfSigned(t) }})
	w := wireConnectTLS(t, ts)
	w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	for _, n := range []int{250 << 10, 300 << 10} {
		got := w.roundTrip(t, simpleQ("SELECT length('"+strings.Repeat("x", n)+"') AS n")...)
		if !strings.Contains(string(got), fmt.Sprint(n)) || !bytes.HasSuffix(got, []byte{'Z', 0, 0, 0, 5, 'I'}) {
			t.Fatalf("%d-byte Query over TLS: %q", n, got)
		}
		w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	}
}
