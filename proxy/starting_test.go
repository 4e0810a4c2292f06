package proxy

import (
	"net"
	"testing"

	"go.uber.org/zap"
)

// TestAddStarting: when MaxConnections start-ups are in progress, a new
// one ends the oldest of the address that has the most, one that has not
// sent its start-up packet before one that has; an address with fewer
// start-ups than another is let in past the accept cap (fromMinority).
func TestAddStarting(t *testing.T) {
	s := startingServer(3)
	mk := func(from string, begun bool) *conn { return startingConn(t, from, begun) }
	bob := mk("10.0.0.1", true)
	flood1, flood2 := mk("10.0.0.9", true), mk("10.0.0.9", false)
	for _, c := range []*conn{flood1, bob, flood2} {
		s.addStarting(c)
	}
	if !s.fromMinority(&net.TCPAddr{IP: net.ParseIP("10.0.0.1")}) || s.fromMinority(&net.TCPAddr{IP: net.ParseIP("10.0.0.9")}) {
		t.Error("fromMinority: bob's address has fewer start-ups than the flood's")
	}
	flood3 := mk("10.0.0.9", false)
	s.addStarting(flood3)
	// The flood's address has the most; of its start-ups, flood2 has not
	// begun (flood1 has) and is older than flood3.
	if !flood2.evicted || flood1.evicted || bob.evicted || flood3.evicted {
		t.Errorf("evicted: flood1 %v flood2 %v flood3 %v bob %v; want flood2 alone", flood1.evicted, flood2.evicted, flood3.evicted, bob.evicted)
	}
	if len(s.starting) != 3 || s.startingFrom["10.0.0.9"] != 2 || s.startingFrom["10.0.0.1"] != 1 {
		t.Errorf("after eviction: %d start-ups, by address %v", len(s.starting), s.startingFrom)
	}
	s.endStarting(bob)
	s.endStarting(bob) // twice: no effect
	if _, ok := s.startingFrom["10.0.0.1"]; ok || len(s.starting) != 2 {
		t.Errorf("after bob's session began: %d start-ups, by address %v", len(s.starting), s.startingFrom)
	}
}

// startingServer is a Server with only what start-up counting uses.
func startingServer(maxConns int) *Server {
	return &Server{cfg: Config{MaxConnections: maxConns}, starting: map[*conn]struct{}{}, startingFrom: map[string]int{}}
}

// startingConn is a start-up in progress from a client network (as
// remoteHost names it), over a pipe.
func startingConn(t *testing.T, from string, begun bool) *conn {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	c := &conn{raw: a, from: from, log: zap.NewNop(), startLog: zap.NewNop()}
	c.begun.Store(begun)
	return c
}
