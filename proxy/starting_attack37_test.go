package proxy

import (
	"fmt"
	"net"
	"testing"
)

// TestAttack37_IPv6FloodFromOnePrefix (medium; a network attacker, no
// credentials): round 36 evicts start-ups from the remote address with
// the most in progress (Server.addStarting, startingFrom keyed by the
// whole host address), so a flood from one address ends only its own
// start-ups. But an IPv6 client normally holds a whole /64 (every cloud
// VM, every home line): the attacker gives each of its connections a new
// source address of its prefix, every address then has one start-up in
// progress, like the analyst's, and the victim is picked among equals
// (map order): each flood connection ends a random start-up, the
// analyst's with probability 1/max_connections. At 10,000 connections a
// second and a 50 ms SCRAM handshake, 500 evictions fall into each of the
// analyst's handshakes: about 8% of them survive with max_connections
// 200. SECURITY.md's advice (per-source connection rate limits in the
// network) does not help against one source per connection either. The
// fix: count start-ups by network, not host - an IPv6 address by its /64
// (or /56), an IPv4 one by itself (IPv4-mapped IPv6 addresses as IPv4),
// in startingFrom and fromMinority alike.
func TestAttack37_IPv6FloodFromOnePrefix(t *testing.T) {
	s := startingServer(4)
	mk := func(from string, begun bool) *conn {
		return startingConn(t, remoteHost(&net.TCPAddr{IP: net.ParseIP(from), Port: 40000}), begun)
	}
	// The analyst, in SCRAM already, from its own network.
	bob := mk("2001:db8:1::10", true)
	s.addStarting(bob)
	// The flood: one new address of the attacker's /64 per connection,
	// each having sent its start-up packet (so "unbegun first" does not
	// help).
	n := 0
	for n < 400 && !bob.evicted {
		n++
		s.mu.Lock()
		s.addStarting(mk(fmt.Sprintf("2001:db8::%x", n), true))
		s.mu.Unlock()
	}
	if bob.evicted {
		t.Errorf("bob's start-up (from 2001:db8:1::10) was ended by the %d-th start-up of a flood from one IPv6 /64 (2001:db8::/64, one address per connection): start-ups are counted by host address, so the flood's addresses each count 1, like bob's (in progress by address: %v)", n, s.startingFrom)
	}
}
