// Package kdflimit bounds the password derivations (PBKDF2 at a
// verifier's iteration count, a few milliseconds each) that anyone who
// can reach an endpoint can make it run: the admin endpoint's basic
// authentication (attack round 36) and cleartext passwords on the wire
// protocol (attack round 53). Derivations run one at a time (a core at
// most), at most PerNetwork a second for one client network (an IPv4
// address, an IPv6 /56), and at most MaxWaiting wait for their turn (for
// at most MaxWait), PerNetwork of them from one network; past that a
// request is refused without one. There is no bucket for all networks
// together, which guessers from a few networks kept empty (attack rounds
// 37 and 38). The waiting requests are served in turns by network, each
// network's in arrival order: a request waits behind at most one
// derivation of each other network with waiters, however many they have
// queued (attack round 99: first come first served, two networks' 5 a
// second of 188 ms derivations, a verifier of 2^20 iterations, kept a
// queue 2 s long, and every other client's check waited MaxWait and was
// refused). When MaxWaiting are waiting, a request from a network with
// fewer waiters than the network with the most takes the newest waiter's
// place of that network, which is refused: thirteen networks at
// PerNetwork each fill the room, and every other network had been refused
// without a wait.
package kdflimit

import (
	"net"
	"sync"
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
	mu     sync.Mutex
	perNet map[string]*rate.Limiter
	// busy: a derivation runs (or its slot is being handed to a waiter).
	busy bool
	// waiting holds each network's waiting requests in arrival order,
	// turns the networks with waiters in turn order; nWaiting counts them
	// all.
	waiting  map[string][]*waiter
	turns    []string
	nWaiting int
}

// waiter is a waiting request: turn is closed when it may run, or when
// it lost its place (evicted, set first).
type waiter struct {
	turn    chan struct{}
	evicted bool
}

// New returns a Limiter.
func New() *Limiter {
	return &Limiter{perNet: map[string]*rate.Limiter{}, waiting: map[string][]*waiter{}}
}

// Run runs derive within the bounds for a client at remoteAddr (host:port)
// and reports false, without running it, when it may not run now.
func (l *Limiter) Run(remoteAddr string, derive func()) bool {
	network := ClientNet(remoteAddr)
	if !l.allow(network) {
		return false
	}
	l.mu.Lock()
	if !l.busy {
		l.busy = true
		l.mu.Unlock()
	} else {
		if len(l.waiting[network]) >= PerNetwork || (l.nWaiting >= MaxWaiting && !l.evict(network)) {
			l.mu.Unlock()
			return false
		}
		w := &waiter{turn: make(chan struct{})}
		if len(l.waiting[network]) == 0 {
			l.turns = append(l.turns, network)
		}
		l.waiting[network] = append(l.waiting[network], w)
		l.nWaiting++
		l.mu.Unlock()
		t := time.NewTimer(MaxWait)
		select {
		case <-w.turn:
			t.Stop()
			l.mu.Lock()
			evicted := w.evicted
			l.mu.Unlock()
			if evicted {
				return false
			}
		case <-t.C:
			if !l.givenAtTimeout(network, w) {
				return false
			}
			// Handed the slot as the wait ended: it runs.
		}
	}
	defer l.next()
	derive()
	return true
}

// next hands the slot to the first waiter of the network whose turn it
// is (which goes to the back of the turns when it has more), or frees it.
func (l *Limiter) next() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.turns) == 0 {
		l.busy = false
		return
	}
	network := l.turns[0]
	l.turns = append(l.turns[:0:0], l.turns[1:]...)
	q := l.waiting[network]
	w := q[0]
	if len(q) > 1 {
		l.waiting[network] = q[1:]
		l.turns = append(l.turns, network)
	} else {
		delete(l.waiting, network)
	}
	l.nWaiting--
	close(w.turn)
}

// evict makes room for a request of network when MaxWaiting are waiting:
// the newest waiter of the network with the most waiters loses its place,
// when that is more than network's. It reports whether it made room.
// Called with mu held.
func (l *Limiter) evict(network string) bool {
	most := ""
	for _, n := range l.turns {
		if most == "" || len(l.waiting[n]) > len(l.waiting[most]) {
			most = n
		}
	}
	if most == "" || len(l.waiting[most]) <= len(l.waiting[network])+1 {
		return false
	}
	q := l.waiting[most]
	w := q[len(q)-1]
	l.dropWaiter(most, w)
	w.evicted = true
	close(w.turn)
	return true
}

// givenAtTimeout ends w's wait at MaxWait and reports whether next handed
// it the slot meanwhile (then it runs). A waiter evicted as its timer
// fired is gone from the waiters too, but was handed nothing: it had been
// taken for one handed the slot, and ran beside the derivation that held
// it, which then handed the slot on at its end (review 107).
func (l *Limiter) givenAtTimeout(network string, w *waiter) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.dropWaiter(network, w) && !w.evicted
}

// dropWaiter removes w from network's waiters, reporting false when it
// is not there (next handed it the slot). Called with mu held.
func (l *Limiter) dropWaiter(network string, w *waiter) bool {
	q := l.waiting[network]
	for i, x := range q {
		if x != w {
			continue
		}
		l.nWaiting--
		if len(q) > 1 {
			l.waiting[network] = append(q[:i:i], q[i+1:]...)
			return true
		}
		delete(l.waiting, network)
		for j, n := range l.turns {
			if n == network {
				l.turns = append(l.turns[:j:j], l.turns[j+1:]...)
				break
			}
		}
		return true
	}
	return false
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
