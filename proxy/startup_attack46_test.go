package proxy

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestAttack46_UnauthenticatedNamesFillTheLog (attack round 46, severity
// low; a network attacker, no credentials): the start-up packet's user
// and database values (up to MaxStartupMessage, 10,000 bytes together)
// are attached whole to the connection's logger before authentication
// (conn.startup: c.log.With(analyst=user, dataset=database)), so every
// failed start-up writes them, verbatim and attacker-chosen, into the
// operator's log at Info ("connection refused"). PostgreSQL truncates
// both to NAMEDATALEN-1 (63 bytes) as soon as it reads the start-up packet
// (ProcessStartupPacket), so a server log line of a failed login holds at
// most 63 bytes of them. Here one connection that fails SCRAM puts a
// 9,000-byte user name in the log; at the rate a single client can open
// connections (no password needed; start-ups from one address only evict
// each other) that is megabytes a second of attacker text in the log
// (disk, log shipping, the audit pipeline), with no session and no
// charge. Control: a 7-byte name is logged as it is.
//
// Suggested fix: truncate user and database to 63 bytes when the start-up
// packet is parsed (as PostgreSQL does; an analyst's name is never longer,
// internal/config could enforce it) and log no more than that; the Warn
// line for each unmatched CancelRequest could also drop to Debug or be
// rate-limited.
func TestAttack46_UnauthenticatedNamesFillTheLog(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.Logger = zap.New(core) }})
	host, port, _ := net.SplitHostPort(ts.addr)

	failLogin := func(user string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		dsn := fmt.Sprintf("host=%s port=%s user=%s password=wrong database=hospital sslmode=disable", host, port, user)
		pc, err := pgconn.Connect(ctx, dsn)
		if err == nil {
			pc.Close(ctx)
			t.Fatalf("login as %.20s… succeeded", user)
		}
	}
	// loggedBytes: the largest analyst field of a log line at Info or
	// above that names a user starting with prefix.
	loggedBytes := func(prefix string) int {
		longest := -1
		for _, e := range logs.All() {
			if e.Level < zapcore.InfoLevel {
				continue
			}
			for _, f := range e.Context {
				if f.Key == logKeyAnalyst && strings.HasPrefix(f.String, prefix) {
					longest = max(longest, len(f.String))
				}
			}
		}
		return longest
	}

	// Control: a short unknown name is logged as sent.
	failLogin("mallory")
	if n := loggedBytes("mallory"); n != len("mallory") {
		t.Fatalf("control: the failed login of mallory logged an analyst field of %d bytes, want %d", n, len("mallory"))
	}

	long := "x" + strings.Repeat("y", 8999)
	failLogin(long)
	if n := loggedBytes("xyyy"); n > 63 {
		t.Errorf("one failed, unauthenticated login wrote a %d-byte attacker-chosen user name into the log at Info (PostgreSQL keeps at most 63 bytes of it)", n)
	}
}

// TestAttack46_EndlessSSLRequests (attack round 46, severity low; a
// network attacker, no credentials): negotiate answers every SSLRequest
// and GSSENCRequest with 'N' and goes back for the next start-up packet,
// however many came before. PostgreSQL negotiates each at most once
// (ProcessStartupPacket's ssl_done/gss_done): a second SSLRequest is read
// as an unsupported protocol version and ends the connection with FATAL.
// So one unauthenticated socket can pipeline SSLRequests (8 bytes each)
// for the whole AuthTimeout (30 s), each costing the proxy a read and a
// write system call and a reply: unbounded CPU per connection before any
// authentication, which the start-up bounds (per address, per
// max_connections) do not limit, since they count sockets, not work.
// Here 1,000 pipelined SSLRequests get 1,000 'N's. Control: the first
// one gets 'N', as it should.
//
// Suggested fix: as PostgreSQL, accept at most one SSLRequest and one
// GSSENCRequest per connection (and none after TLS is up) and end the
// start-up with FATAL 08P01 "unsupported frontend protocol" otherwise.
func TestAttack46_EndlessSSLRequests(t *testing.T) {
	ts := startServer(t, serverOpts{})
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f} // SSLRequest
	var batch []byte
	for range 1000 {
		batch = append(batch, req...)
	}
	go func() { _, _ = nc.Write(batch) }()
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	var b [1]byte
	ns := 0
	for {
		if _, err := nc.Read(b[:]); err != nil {
			break // closed by the proxy (or the safety deadline)
		}
		if b[0] != 'N' {
			break // an ErrorResponse: the negotiation ended
		}
		ns++
		if ns == 1 {
			continue // control: the first SSLRequest is answered 'N'
		}
		if ns > 2 {
			t.Errorf("the proxy answered %d SSLRequests on one unauthenticated connection and waits for more; PostgreSQL ends the start-up at the second", ns)
			return
		}
	}
	if ns == 0 {
		t.Fatalf("control: the first SSLRequest got no 'N'")
	}
}
