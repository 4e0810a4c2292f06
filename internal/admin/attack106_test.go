package admin

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/policy"
)

// TestAttack106_AdminConnectionsUnbounded (high; anyone who can reach the
// admin port, no credentials): /healthz answers without credentials and
// net/http keeps the connection for IdleTimeout (2 min), so one client
// held as many connections as it opened. Against `dpproxy demo`, 19,990
// keep-alive connections to the admin port took the proxy from 96 MB to
// 424 MB and every one of its 20,000 descriptors: analysts' log-ins were
// refused and the proxy's accept loop stopped ("accept4: too many open
// files"). Now the endpoint keeps at most maxConns open, closing the
// flooding network's own idle ones first, and the steward, from another
// network, is still served.
func TestAttack106_AdminConnectionsUnbounded(t *testing.T) {
	m := NewMetrics([]string{"hospital"})
	s, err := New(Config{User: "steward", Password: "plain:pw", Ledger: &fakeLedger{}, Metrics: m,
		Policies: map[string]*policy.Dataset{"hospital": {Name: "hospital", Budget: policy.Budget{Epsilon: 3, Accountant: "pure"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()

	// The flood: keep-alive connections from 127.0.0.1, each after one
	// /healthz, left idle.
	const flood = 4 * maxConns
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < flood; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			continue // closed already to make room
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			resp.Body.Close()
		}
	}
	open := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil && strings.Contains(err.Error(), "timeout") {
			open++ // still held by the server
		}
	}
	if open > maxConns {
		t.Errorf("%d of %d idle unauthenticated connections still open, want at most %d", open, flood, maxConns)
	}

	// The steward, from another address (127.0.0.2), is served.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/metrics", nil)
	req.SetBasicAuth("steward", "pw")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("steward during the flood: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("steward during the flood: HTTP %d", resp.StatusCode)
	}
}
