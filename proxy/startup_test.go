package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

func TestStartup_ParameterStatus(t *testing.T) {
	ts := startServer(t, serverOpts{})
	ctx := ctxT(t)
	pc, err := pgconn.Connect(ctx, ts.dsn("alice", "alice", "hospital")+"&application_name=psqltest&timezone=Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	want := map[string]string{
		"server_version":                DefaultServerVersion,
		"server_encoding":               "UTF8",
		"client_encoding":               "UTF8",
		"DateStyle":                     "ISO, MDY",
		"IntervalStyle":                 "postgres",
		"TimeZone":                      "Europe/Paris",
		"integer_datetimes":             "on",
		"standard_conforming_strings":   "on",
		"application_name":              "psqltest",
		"is_superuser":                  "off",
		"session_authorization":         "alice",
		"default_transaction_read_only": "off",
		"in_hot_standby":                "off",
	}
	for k, v := range want {
		if got := pc.ParameterStatus(k); got != v {
			t.Errorf("ParameterStatus(%q) = %q, want %q", k, got, v)
		}
	}
	if pc.PID() == 0 || len(pc.SecretKey()) != 4 {
		t.Errorf("BackendKeyData: pid %d, secret %x", pc.PID(), pc.SecretKey())
	}
	if pc.TxStatus() != 'I' {
		t.Errorf("TxStatus = %c, want I", pc.TxStatus())
	}
}

func TestAuth_SCRAM(t *testing.T) {
	ts := startServer(t, serverOpts{})
	tests := []struct {
		name, user, password, db string
		wantCode                 string
		wantMsg                  string
	}{
		{name: "plain password", user: "alice", password: "alice", db: "hospital"},
		{name: "verifier", user: "bob", password: "bob-secret", db: "hospital"},
		{name: "wrong password", user: "alice", password: "nope", db: "hospital", wantCode: "28P01", wantMsg: `password authentication failed for user "alice"`},
		{name: "wrong password verifier", user: "bob", password: "bob", db: "hospital", wantCode: "28P01", wantMsg: `password authentication failed for user "bob"`},
		{name: "unknown user", user: "mallory", password: "x", db: "hospital", wantCode: "28P01", wantMsg: `password authentication failed for user "mallory"`},
		// Unknown databases are only revealed after authentication.
		{name: "unknown database wrong password", user: "alice", password: "nope", db: "nosuch", wantCode: "28P01"},
		{name: "unknown database", user: "alice", password: "alice", db: "nosuch", wantCode: "3D000", wantMsg: `database "nosuch" does not exist`},
		{name: "dataset not allowed", user: "bob", password: "bob-secret", db: "clinic", wantCode: "28000"},
		{name: "dataset allowed", user: "carol", password: "carol", db: "clinic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			pc, err := pgconn.Connect(ctx, ts.dsn(tt.user, tt.password, tt.db))
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				pc.Close(ctx)
				return
			}
			if err == nil {
				pc.Close(ctx)
				t.Fatalf("connect succeeded, want %s", tt.wantCode)
			}
			if got := sqlstate(err); got != tt.wantCode {
				t.Fatalf("connect error = %v, want SQLSTATE %s", err, tt.wantCode)
			}
			if tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tt.wantMsg)
			}
			// A misspelt database's hint names the analyst's datasets
			// (a new user's run: it said to run SHOW dp.budget, which
			// needs a connection to one).
			var pe *pgconn.PgError
			if tt.wantCode == "3D000" && (!errors.As(err, &pe) || !strings.Contains(pe.Hint, "hospital")) {
				t.Errorf("unknown database's hint %+v: want it to name the dataset hospital", pe)
			}
		})
	}
}

func TestParseVerifier(t *testing.T) {
	v, err := HashPassword("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "SCRAM-SHA-256$4096:") {
		t.Fatalf("HashPassword = %q", v)
	}
	if _, err := parseVerifier(v); err != nil {
		t.Fatalf("parseVerifier(HashPassword) = %v", err)
	}
	for _, bad := range []string{
		"md5abc", "SCRAM-SHA-256$", "SCRAM-SHA-256$x:abc$a:b", "SCRAM-SHA-256$4096:!!$a:b",
		"SCRAM-SHA-256$4096:c2FsdA==$c2hvcnQ=:c2hvcnQ=",
	} {
		if _, err := credentialsFor(bad); err == nil {
			t.Errorf("credentialsFor(%q) succeeded, want an error", bad)
		}
	}
}

// rawConn dials the server and returns the socket.
func rawConn(t *testing.T, ts *testServer) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return nc
}

func startupCode(code uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, 8)
	return binary.BigEndian.AppendUint32(b, code)
}

func TestStartup_SSLAndGSSENCRequestAnsweredN(t *testing.T) {
	ts := startServer(t, serverOpts{})
	nc := rawConn(t, ts)
	var b [1]byte
	for _, code := range []uint32{gssEncRequestCode, sslRequestCode} {
		if _, err := nc.Write(startupCode(code)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(nc, b[:]); err != nil {
			t.Fatal(err)
		}
		if b[0] != 'N' {
			t.Fatalf("reply to request %d = %q, want N", code, b[0])
		}
	}
	// The session goes on in plaintext.
	fe := pgproto3.NewFrontend(nc, nc)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters: map[string]string{"user": "alice", "database": "hospital"}})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	msg, err := fe.Receive()
	if err != nil {
		t.Fatal(err)
	}
	sasl, ok := msg.(*pgproto3.AuthenticationSASL)
	if !ok || len(sasl.AuthMechanisms) != 1 || sasl.AuthMechanisms[0] != "SCRAM-SHA-256" {
		t.Fatalf("after StartupMessage got %#v, want AuthenticationSASL SCRAM-SHA-256", msg)
	}
}

func readFatal(t *testing.T, nc net.Conn) *pgproto3.ErrorResponse {
	t.Helper()
	fe := pgproto3.NewFrontend(nc, nc)
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatalf("want an ErrorResponse, got %v", err)
		}
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			return e
		}
	}
}

func TestStartup_OversizedMessagesRejected(t *testing.T) {
	ts := startServer(t, serverOpts{})

	t.Run("startup packet", func(t *testing.T) {
		nc := rawConn(t, ts)
		b := binary.BigEndian.AppendUint32(nil, 20_000)
		b = binary.BigEndian.AppendUint32(b, pgproto3.ProtocolVersion30)
		nc.Write(b)
		e := readFatal(t, nc)
		if e.Code != "08P01" || e.Severity != "FATAL" {
			t.Errorf("got %s %s %q, want FATAL 08P01", e.Severity, e.Code, e.Message)
		}
	})
	t.Run("SASL message before authentication", func(t *testing.T) {
		nc := rawConn(t, ts)
		fe := pgproto3.NewFrontend(nc, nc)
		fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
			Parameters: map[string]string{"user": "alice", "database": "hospital"}})
		fe.Flush()
		if _, err := fe.Receive(); err != nil { // AuthenticationSASL
			t.Fatal(err)
		}
		fe.Send(&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: make([]byte, 50_000)})
		fe.Flush()
		e := readFatal(t, nc)
		if e.Code != "08P01" {
			t.Errorf("got %s %q, want 08P01", e.Code, e.Message)
		}
	})
	t.Run("query after authentication", func(t *testing.T) {
		ts := startServer(t, serverOpts{mutate: func(c *Config) { c.MaxMessage = 1000 }})
		pc := ts.connect(t)
		_, err := execAll(t, pc, "SHOW dp.epsilon -- "+strings.Repeat("x", 2000))
		if err == nil {
			t.Fatal("oversized query accepted")
		}
		if got := sqlstate(err); got != "08P01" {
			t.Errorf("error = %v, want 08P01", err)
		}
	})
}

func TestStartup_UnsupportedProtocol(t *testing.T) {
	ts := startServer(t, serverOpts{})
	nc := rawConn(t, ts)
	b := binary.BigEndian.AppendUint32(nil, 9)
	b = binary.BigEndian.AppendUint32(b, 2<<16)
	b = append(b, 0)
	nc.Write(b)
	if e := readFatal(t, nc); e.Code != "0A000" {
		t.Errorf("got %s %q, want 0A000", e.Code, e.Message)
	}
}

func TestCancelRequest(t *testing.T) {
	ts := startServer(t, serverOpts{})
	ts.releaser.wait = true
	ts.releaser.started = make(chan struct{}, 1)
	pc := ts.connect(t)

	sendCancel := func(pid uint32, secret []byte) {
		nc := rawConn(t, ts)
		b := binary.BigEndian.AppendUint32(nil, 16)
		b = binary.BigEndian.AppendUint32(b, cancelRequestCode)
		b = binary.BigEndian.AppendUint32(b, pid)
		b = append(b, secret...)
		if _, err := nc.Write(b); err != nil {
			t.Fatal(err)
		}
		// The server never replies; it closes the connection.
		var one [1]byte
		if n, err := nc.Read(one[:]); n != 0 || err == nil {
			t.Errorf("cancel request got a reply (%d bytes, %v)", n, err)
		}
	}

	done := make(chan error, 1)
	go func() {
		_, err := pc.Exec(context.Background(), "SELECT COUNT(*) FROM visits").ReadAll()
		done <- err
	}()
	<-ts.releaser.started

	wrong := append([]byte(nil), pc.SecretKey()...)
	wrong[0] ^= 0xff
	sendCancel(pc.PID(), wrong)
	sendCancel(pc.PID()+1, pc.SecretKey())
	select {
	case err := <-done:
		t.Fatalf("statement ended after a cancel request with a wrong key: %v", err)
	case <-time.After(300 * time.Millisecond):
	}

	sendCancel(pc.PID(), pc.SecretKey())
	select {
	case err := <-done:
		if sqlstate(err) != "57014" || !strings.Contains(err.Error(), "canceling statement due to user request") {
			t.Fatalf("cancelled statement error = %v, want 57014", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("statement not cancelled")
	}
	// The session is still usable.
	ts.releaser.mu.Lock()
	ts.releaser.wait = false
	ts.releaser.started = nil
	ts.releaser.mu.Unlock()
	res, err := execAll(t, pc, "SHOW dp.epsilon")
	if err != nil || rows(res[0])[0][0] != "0.1" {
		t.Fatalf("after cancel: %v %v", res, err)
	}
}

func TestMaxConnections(t *testing.T) {
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.MaxConnections = 1 }})
	ts.connect(t)
	ctx := ctxT(t)
	_, err := pgconn.Connect(ctx, ts.dsn("alice", "alice", "hospital"))
	if got := sqlstate(err); got != "53300" {
		t.Fatalf("second connection: %v, want 53300", err)
	}
}

func TestServe_DrainClosesIdleSessions(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	ts.cancel()
	select {
	case err := <-ts.done:
		ts.done <- nil
		if err != nil {
			t.Fatalf("Serve = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if _, err := execAll(t, pc, "SHOW dp.epsilon"); err == nil {
		t.Fatal("session still answering after shutdown")
	}
}

func TestSession_PanicClosesOnlyThatConnection(t *testing.T) {
	ts := startServer(t, serverOpts{})
	ts.releaser.panics = true
	pc := ts.connect(t)
	_, err := execAll(t, pc, "SELECT COUNT(*) FROM visits")
	if got := sqlstate(err); got != "XX000" {
		t.Fatalf("after panic: %v, want XX000", err)
	}
	if strings.Contains(err.Error(), "fake releaser panic") {
		t.Errorf("panic text leaked to the client: %v", err)
	}
	ts.releaser.mu.Lock()
	ts.releaser.panics = false
	ts.releaser.mu.Unlock()
	pc2 := ts.connect(t)
	if _, err := execAll(t, pc2, "SELECT COUNT(*) FROM visits"); err != nil {
		t.Fatalf("server not serving after a panic: %v", err)
	}
}

func TestStartup_NewerMinorVersionNegotiated(t *testing.T) {
	ts := startServer(t, serverOpts{})
	nc := rawConn(t, ts)
	fe := pgproto3.NewFrontend(nc, nc)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion32,
		Parameters: map[string]string{"user": "alice", "database": "hospital", "_pq_.future": "1"}})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	msg, err := fe.Receive()
	if err != nil {
		t.Fatal(err)
	}
	npv, ok := msg.(*pgproto3.NegotiateProtocolVersion)
	if !ok || npv.NewestMinorProtocol != 0 || len(npv.UnrecognizedOptions) != 1 || npv.UnrecognizedOptions[0] != "_pq_.future" {
		t.Fatalf("got %#v, want NegotiateProtocolVersion 3.0 naming _pq_.future", msg)
	}
	if msg, err := fe.Receive(); err != nil {
		t.Fatal(err)
	} else if _, ok := msg.(*pgproto3.AuthenticationSASL); !ok {
		t.Fatalf("then %T, want AuthenticationSASL", msg)
	}
}

func TestServe_DrainCancelsStatementsAfterDeadline(t *testing.T) {
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.DrainTimeout = 300 * time.Millisecond }})
	ts.releaser.wait = true
	ts.releaser.started = make(chan struct{}, 1)
	pc := ts.connect(t)
	done := make(chan error, 1)
	go func() {
		_, err := pc.Exec(context.Background(), "SELECT COUNT(*) FROM visits").ReadAll()
		done <- err
	}()
	<-ts.releaser.started
	start := time.Now()
	ts.cancel()
	select {
	case err := <-ts.done:
		ts.done <- nil
		if err != nil {
			t.Fatalf("Serve = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the drain deadline")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("Serve returned after %v, before the drain deadline", d)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("statement succeeded after shutdown")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("client never saw the end of the statement")
	}
}
