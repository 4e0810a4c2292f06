package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// selfSigned returns a TLS config with a fresh self-signed certificate for
// 127.0.0.1.
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "dpproxy test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
}

func TestTLS(t *testing.T) {
	tlsCfg := selfSigned(t)
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.TLS = tlsCfg; c.RequireTLS = true }})
	ctx := ctxT(t)

	// sslmode=require: TLS, then SCRAM.
	pc, err := pgconn.Connect(ctx, strings.Replace(ts.dsn("alice", "alice", "hospital"), "sslmode=disable", "sslmode=require", 1))
	if err != nil {
		t.Fatalf("connect over TLS: %v", err)
	}
	if _, ok := pc.Conn().(*tls.Conn); !ok {
		t.Errorf("connection is %T, want *tls.Conn", pc.Conn())
	}
	res, err := pc.Exec(ctx, "SHOW dp.epsilon").ReadAll()
	if err != nil || rows(res[0])[0][0] != "0.1" {
		t.Fatalf("query over TLS: %v %v", res, err)
	}
	pc.Close(ctx)

	// RequireTLS refuses plaintext sessions.
	_, err = pgconn.Connect(ctx, ts.dsn("alice", "alice", "hospital"))
	if got := sqlstate(err); got != "28000" {
		t.Fatalf("plaintext with RequireTLS: %v, want 28000", err)
	}

	// Plaintext pipelined after the SSLRequest is never taken as part of
	// the session: the TLS handshake fails and the connection closes.
	nc := rawConn(t, ts)
	startup, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters: map[string]string{"user": "alice", "database": "hospital"}}).Encode(nil)
	if _, err := nc.Write(append(startupCode(sslRequestCode), startup...)); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if _, err := io.ReadFull(nc, b[:]); err != nil || b[0] != 'S' {
		t.Fatalf("SSLRequest reply %q %v, want S", b[0], err)
	}
	rest, _ := io.ReadAll(nc)
	// An Authentication request ('R') or error ('E') would mean the
	// plaintext was read as a StartupMessage; a TLS alert starts with 0x15.
	if len(rest) > 0 && (rest[0] == 'R' || rest[0] == 'E') {
		t.Fatalf("server answered pipelined plaintext: %q", rest)
	}
}

// TestCleartextOverTLS: with AllowCleartextOverTLS, TLS sessions are asked
// for a cleartext password (checked against the SCRAM verifier), plaintext
// sessions still get SCRAM, and a wrong password fails the same way.
func TestCleartextOverTLS(t *testing.T) {
	tlsCfg := selfSigned(t)
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.TLS = tlsCfg; c.AllowCleartextOverTLS = true }})
	ctx := ctxT(t)
	over := func(dsn string) string { return strings.Replace(dsn, "sslmode=disable", "sslmode=require", 1) }

	// Which method does the server ask for? Read the first auth request.
	authRequest := func(useTLS bool) pgproto3.BackendMessage {
		t.Helper()
		nc := rawConn(t, ts)
		var conn net.Conn = nc
		if useTLS {
			if _, err := nc.Write(startupCode(sslRequestCode)); err != nil {
				t.Fatal(err)
			}
			var b [1]byte
			if _, err := io.ReadFull(nc, b[:]); err != nil || b[0] != 'S' {
				t.Fatalf("SSLRequest reply %q %v", b[0], err)
			}
			tc := tls.Client(nc, &tls.Config{InsecureSkipVerify: true})
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			conn = tc
		}
		fe := pgproto3.NewFrontend(conn, conn)
		fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
			Parameters: map[string]string{"user": "bob", "database": "hospital"}})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	if m, ok := authRequest(true).(*pgproto3.AuthenticationCleartextPassword); !ok {
		t.Fatalf("TLS session asked for %T, want a cleartext password", m)
	}
	if m, ok := authRequest(false).(*pgproto3.AuthenticationSASL); !ok {
		t.Fatalf("plaintext session asked for %T, want SCRAM", m)
	}

	// bob's password is stored only as a SCRAM verifier; alice's as plain:.
	for _, u := range [][2]string{{"bob", "bob-secret"}, {"alice", "alice"}} {
		pc, err := pgconn.Connect(ctx, over(ts.dsn(u[0], u[1], "hospital")))
		if err != nil {
			t.Fatalf("%s over TLS with a cleartext password: %v", u[0], err)
		}
		pc.Close(ctx)
	}
	if _, err := pgconn.Connect(ctx, over(ts.dsn("bob", "wrong", "hospital"))); sqlstate(err) != "28P01" {
		t.Fatalf("wrong password over TLS: %v, want 28P01", err)
	}
	if _, err := pgconn.Connect(ctx, over(ts.dsn("mallory", "x", "hospital"))); sqlstate(err) != "28P01" {
		t.Fatalf("unknown user over TLS: %v, want 28P01", err)
	}
}

func TestIdleTimeout(t *testing.T) {
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.IdleTimeout = 200 * time.Millisecond }})
	pc := ts.connect(t)
	time.Sleep(600 * time.Millisecond)
	_, err := execAll(t, pc, "SHOW dp.epsilon")
	if err == nil {
		t.Fatal("idle session still open")
	}
}
