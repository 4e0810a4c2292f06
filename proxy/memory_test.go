package proxy

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestMemoryPerAnalyst: the sessions of one analyst together keep at most
// MaxMemoryPerAnalyst (54000 beyond, the session usable); what a session
// lets go (DEALLOCATE) and what an ended session held are the analyst's
// again; another analyst's account is apart.
func TestMemoryPerAnalyst(t *testing.T) {
	const budget = 4 << 20
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.MaxMemoryPerAnalyst = budget }})
	lit := strings.Repeat("x", 512<<10)
	// send writes one message and a Sync and returns the reply's message
	// types (and an error's SQLSTATE) up to ReadyForQuery.
	send := func(nc net.Conn, m pgproto3.FrontendMessage) string {
		t.Helper()
		b, err := m.Encode(nil)
		if err == nil {
			b, err = (&pgproto3.Sync{}).Encode(b)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(b); err != nil {
			t.Fatal(err)
		}
		return discardUntilReady(t, nc)
	}
	parse := func(nc net.Conn, name string) string {
		return send(nc, &pgproto3.Parse{Name: name, Query: "SELECT '" + lit + "'"})
	}
	a1, a2 := ts.rawConn(t), ts.rawConn(t)
	n, reply := 0, ""
	for ; n < 20; n++ {
		c := a1
		if n%2 == 1 {
			c = a2
		}
		if reply = parse(c, fmt.Sprint("p", n)); !strings.HasPrefix(reply, "1") {
			break
		}
	}
	if !strings.Contains(reply, "54000") {
		t.Fatalf("alice's two sessions prepared %d statements of 512 KiB under a %d MiB bound; last reply %s", n, budget>>20, reply)
	}
	if n < 6 || n > 8 {
		t.Errorf("refused at statement %d of 512 KiB, bound %d MiB", n+1, budget>>20)
	}
	// Bob's account is his own.
	if r := parse(ts.hijackAs(t, "bob", "bob-secret").Conn, "b"); !strings.HasPrefix(r, "1") {
		t.Errorf("bob, while alice's sessions hold their bound: %s", r)
	}
	// What a session lets go is the analyst's again.
	if r := send(a1, &pgproto3.Query{String: "DEALLOCATE ALL"}); strings.Contains(r, "E") {
		t.Fatalf("DEALLOCATE ALL: %s", r)
	}
	if r := parse(a2, "again"); !strings.HasPrefix(r, "1") {
		t.Errorf("after DEALLOCATE ALL in the other session: %s", r)
	}
	a2.Close()
	a1.Close()
	for i := 0; ; i++ {
		if ts.srv.memoryOf("alice") == 0 {
			break
		}
		if i == 200 {
			t.Fatal("alice's account not given back when her sessions ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// memoryOf is what analyst's sessions are charged now.
func (s *Server) memoryOf(analyst string) int64 { return s.account(analyst).held.Load() }
