// Package kdflimit bounds the password derivations (PBKDF2 at a
// verifier's iteration count, a few milliseconds each) that anyone who
// can reach an endpoint can make it run: the admin endpoint's basic
// authentication (attack round 36) and cleartext passwords on the wire
// protocol (attack round 53). Derivations run one at a time (a core at
// most), at most PerNetwork a second for one client network (an IPv4
// address, an IPv6 /56), and at most MaxWaiting wait for their turn (for
// at most MaxWait); past that a request is refused without one. There is
// no bucket for all networks together, which guessers from a few networks
// kept empty (attack rounds 37 and 38): a legitimate request waits behind
// at most MaxWaiting others, first come first served.
package kdflimit

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// The bounds; maxNetworks is how many client networks are remembered (the
// map starts again when full).
const (
	PerNetwork  = 5
	MaxWaiting  = 64
	MaxWait     = 2 * time.Second
	maxNetworks = 4096
)

// MaxIterations bounds a verifier's iteration count where each check
// re-derives the key at it.
const MaxIterations = 1 << 20

// Limiter bounds one endpoint's derivations. Safe for concurrent use.
type Limiter struct {
	slot    chan struct{} // one derivation at a time
	waiting atomic.Int32  // requests waiting for slot
	mu      sync.Mutex
	perNet  map[string]*rate.Limiter // under mu
}

// New returns a Limiter.
func New() *Limiter {
	return &Limiter{slot: make(chan struct{}, 1), perNet: map[string]*rate.Limiter{}}
}

// Run runs derive within the bounds for a client at remoteAddr (host:port)
// and reports false, without running it, when it may not run now.
func (l *Limiter) Run(remoteAddr string, derive func()) bool {
	if !l.allow(ClientNet(remoteAddr)) {
		return false
	}
	if l.waiting.Add(1) > MaxWaiting {
		l.waiting.Add(-1)
		return false
	}
	t := time.NewTimer(MaxWait)
	select {
	case l.slot <- struct{}{}:
		t.Stop()
		l.waiting.Add(-1)
	case <-t.C:
		l.waiting.Add(-1)
		return false
	}
	defer func() { <-l.slot }()
	derive()
	return true
}

// allow reports whether a derivation for a client network may run now.
func (l *Limiter) allow(network string) bool {
	l.mu.Lock()
	lim, ok := l.perNet[network]
	if !ok {
		if len(l.perNet) >= maxNetworks {
			clear(l.perNet)
		}
		lim = rate.NewLimiter(PerNetwork, PerNetwork)
		l.perNet[network] = lim
	}
	l.mu.Unlock()
	return lim.Allow()
}

// ClientNet is a client's network for the buckets: its IPv4 address, or
// the /56 of its IPv6 address (one customer usually holds a whole /56).
func ClientNet(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() != nil {
		return host
	}
	return ip.Mask(net.CIDRMask(56, 128)).String() + "/56"
}
