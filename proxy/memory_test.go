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

// TestAnswerRoom_PrivateKeyReservedBeforeCharge: an answer over a private
// key holds up to dpplan.MaxSelectedGroups groups, and its room is that
// bound's (release.AnswerBytes), reserved before the charge like a public
// key's. Under an analyst bound of 8 MiB the GROUP BY diagnosis (about
// 15 MB of room: 12,945 groups of 1 KiB keys) is refused with 54000 and
// nothing charged, while a GROUP BY of a public key is answered. (Until
// 7 December the room of every private-key answer was a constant 1 MiB,
// and the answer was kept whatever it had grown to once charged.)
func TestAnswerRoom_PrivateKeyReservedBeforeCharge(t *testing.T) {
	r, _ := startRealDP53(t, nil, func(c *Config) { c.MaxMemoryPerAnalyst = 8 << 20 })
	pc := r.connect(t)
	n0 := len(r.charges(t))
	_, err := execAll(t, pc, "SELECT diagnosis, COUNT(*) FROM visits GROUP BY diagnosis")
	if sqlstate(err) != "54000" || len(r.charges(t)) != n0 {
		t.Fatalf("private key under an 8 MiB bound: %v, %d charges; want 54000 and none", err, len(r.charges(t))-n0)
	}
	if !strings.Contains(err.Error(), "MiB") {
		t.Errorf("the error does not say the room: %v", err)
	}
	if _, err := execAll(t, pc, "SELECT department, COUNT(*) FROM visits GROUP BY department"); err != nil {
		t.Fatalf("a public key's answer after the refusal: %v", err)
	}
	if len(r.charges(t)) != n0+1 {
		t.Errorf("%d charges, want 1 (the public key's)", len(r.charges(t))-n0)
	}
}
