package proxy

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap/zapcore"
)

// TestStartLines_UnauthenticatedFloodBounded: connections that need no
// password (a cancel request with an unknown key, a start-up packet of an
// unknown protocol) had each written a log line: one client wrote 0.97
// MB/s of the first kind and 1.15 MB/s of the second through the demo.
// Before authentication a client network's Info and Warn lines now have a
// bucket (startLinesBurst, then startLinesPerSecond); the first line
// written after some were left out counts them, another network's lines
// are written whatever the flood, and an analyst's session is logged as
// before.
func TestStartLines_UnauthenticatedFloodBounded(t *testing.T) {
	w := &logLines87{}
	ts := startServer(t, serverOpts{mutate: func(c *Config) {
		c.Logger = productionLogger(w, zapcore.InfoLevel)
	}})
	send := func(d *net.Dialer, msg []byte) {
		t.Helper()
		c, err := d.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 512)
		for {
			if _, err := c.Read(buf); err != nil {
				return // the proxy closed it: its line, if any, is written
			}
		}
	}
	cancel := unknownCancel()
	badProtocol := []byte{0, 0, 0, 8, 1, 2, 3, 4}
	count := func(s, what string) int {
		n := 0
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, what) {
				n++
			}
		}
		return n
	}

	attacker := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	const each = 150
	start := time.Now()
	for range each {
		send(attacker, cancel)
		send(attacker, badProtocol)
	}
	elapsed := time.Since(start)
	time.Sleep(100 * time.Millisecond)
	flood := w.String()
	lines := count(flood, "cancel request with an unknown key") + count(flood, "connection refused")
	allowed := startLinesBurst + int(startLinesPerSecond*(elapsed.Seconds()+1))
	t.Logf("%d unauthenticated connections from one network in %s: %d lines (at most %d)", 2*each, elapsed.Round(time.Millisecond), lines, allowed)
	if lines > allowed {
		t.Errorf("%d lines for %d connections that needed no password in %s; at most %d (burst %d, %d a second)",
			lines, 2*each, elapsed.Round(time.Millisecond), allowed, startLinesBurst, startLinesPerSecond)
	}
	if lines < startLinesBurst {
		t.Errorf("%d lines: the network's burst (%d) was not written", lines, startLinesBurst)
	}

	// Another network's refused start-up is logged whatever the flood.
	before := len(w.String())
	send(&net.Dialer{}, badProtocol)
	time.Sleep(100 * time.Millisecond)
	if after := w.String()[before:]; !strings.Contains(after, "connection refused") || !strings.Contains(after, "127.0.0.1") {
		t.Errorf("another network's refused start-up was not logged after the flood:\n%s", after)
	}
	// So is an analyst's session.
	before = len(w.String())
	pc := ts.connectAs(t, "alice", "alice", "hospital")
	pc.Close(context.Background())
	time.Sleep(100 * time.Millisecond)
	if after := w.String()[before:]; !strings.Contains(after, "session started") {
		t.Errorf("an analyst's session was not logged after the flood:\n%s", after)
	}
	// The network's next line written says how many were left out.
	time.Sleep(time.Second)
	before = len(w.String())
	send(attacker, cancel)
	time.Sleep(100 * time.Millisecond)
	if after := w.String()[before:]; !strings.Contains(after, "lines_not_logged") {
		t.Errorf("the network's next line does not count the lines left out:\n%s", after)
	}
}

// TestReview112_FailedLoginsNotHiddenByCancelFlood: before authentication
// every line of a client network shared one bucket, so a flood of cancel
// requests with unknown keys (which need no password) from a network
// emptied it, and the password guesses that followed from that network
// were not logged (only counted among the cancel requests): the guessed
// user names were lost. Failed authentications have their own bucket per
// network.
func TestReview112_FailedLoginsNotHiddenByCancelFlood(t *testing.T) {
	w := &logLines87{}
	ts := startServer(t, serverOpts{mutate: func(c *Config) {
		c.Logger = productionLogger(w, zapcore.InfoLevel)
	}})
	attacker := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}}
	for range 3 * startLinesBurst {
		sendUnknownCancel(t, attacker, ts.addr)
	}
	time.Sleep(100 * time.Millisecond)
	before := len(w.String())
	cfg, err := pgconn.ParseConfig(ts.dsn("alice", "guess1", "hospital"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = attacker.DialContext
	ctx, cancelCtx := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelCtx()
	if pc, err := pgconn.ConnectConfig(ctx, cfg); err == nil {
		pc.Close(ctx)
		t.Fatal("a wrong password was accepted")
	}
	time.Sleep(100 * time.Millisecond)
	if after := w.String()[before:]; !strings.Contains(after, "password authentication failed") {
		t.Errorf("a failed log-in after a flood of unknown cancel keys from its network was not logged:\n%s", after)
	}
}

// TestStartLines_ManyNetworksBounded: each client network had its own
// bucket and nothing bounded them together, so whoever holds many
// addresses (an IPv6 /48 is 65,536 networks here) wrote a bucket's burst
// from each: 240 loopback addresses of 3 unknown cancel keys each wrote a
// line per connection. All networks' lines together now have a bucket
// (startLinesTotalBurst, then startLinesTotalPerSecond).
func TestStartLines_ManyNetworksBounded(t *testing.T) {
	w := &logLines87{}
	ts := startServer(t, serverOpts{mutate: func(c *Config) {
		c.Logger = productionLogger(w, zapcore.InfoLevel)
	}})
	const networks, each = 240, 3
	start := time.Now()
	for i := range networks {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(i+10))}}
		for range each {
			sendUnknownCancel(t, d, ts.addr)
		}
	}
	elapsed := time.Since(start)
	time.Sleep(100 * time.Millisecond)
	lines := strings.Count(w.String(), "cancel request with an unknown key")
	allowed := startLinesTotalBurst + int(startLinesTotalPerSecond*(elapsed.Seconds()+1))
	t.Logf("%d connections from %d networks in %s: %d lines (at most %d)", networks*each, networks, elapsed.Round(time.Millisecond), lines, allowed)
	if lines > allowed {
		t.Errorf("%d lines for %d cancel requests from %d networks in %s; at most %d (all networks: burst %d, %d a second)",
			lines, networks*each, networks, elapsed.Round(time.Millisecond), allowed, startLinesTotalBurst, startLinesTotalPerSecond)
	}
	if lines < startLinesTotalBurst {
		t.Errorf("%d lines: the networks' total burst (%d) was not written", lines, startLinesTotalBurst)
	}
}

// unknownCancel is a CancelRequest with a key no session holds.
func unknownCancel() []byte {
	msg := make([]byte, 16)
	binary.BigEndian.PutUint32(msg[0:], 16)
	binary.BigEndian.PutUint32(msg[4:], cancelRequestCode)
	binary.BigEndian.PutUint32(msg[8:], 4242)
	return msg
}

// sendUnknownCancel sends one from d and waits until the proxy closes the
// connection (its line, if any, is written by then).
func sendUnknownCancel(t *testing.T, d *net.Dialer, addr string) {
	t.Helper()
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write(unknownCancel())
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Read(make([]byte, 16))
}
