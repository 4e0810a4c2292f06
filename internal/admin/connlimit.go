package admin

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/dpproxy/dpproxy/internal/kdflimit"
)

// maxConns bounds the endpoint's open connections. /healthz and the 401
// page need no credentials, and net/http keeps a connection open between
// requests for IdleTimeout: without a bound, one client held as many
// descriptors and goroutines as it opened sockets (attack round 106:
// 20,000 keep-alive connections of one address, 330 MB of the proxy's
// memory and every descriptor of the process; the analysts' log-ins were
// refused and the proxy's accept loop stopped on EMFILE). A steward's
// browser or Prometheus needs a few.
const maxConns = 64

// connLimit is a listener that keeps at most max connections open. Past
// that, accepting one closes another: one of the client network
// (kdflimit.ClientNet) with the most open, preferring one that is not
// serving a request, the oldest first. So a flood from one network closes
// its own connections, and a steward's, from another network, keeps its
// own (as the proxy's start-up slots, proxy.Server.addStarting).
type connLimit struct {
	net.Listener
	max int

	mu     sync.Mutex
	seq    uint64
	conns  map[*limitedConn]struct{}
	perNet map[string]int
}

func newConnLimit(ln net.Listener, max int) *connLimit {
	return &connLimit{Listener: ln, max: max, conns: map[*limitedConn]struct{}{}, perNet: map[string]int{}}
}

// limitedConn is one connection counted by a connLimit.
type limitedConn struct {
	net.Conn
	l       *connLimit
	network string
	seq     uint64
	active  atomic.Bool // serving a request (http.StateActive)
}

func (c *limitedConn) Close() error {
	c.l.remove(c)
	return c.Conn.Close()
}

// Accept accepts a connection and, when that makes more than max, closes
// one (never the new one).
func (l *connLimit) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &limitedConn{Conn: nc, l: l, network: kdflimit.ClientNet(nc.RemoteAddr().String())}
	l.mu.Lock()
	l.seq++
	c.seq = l.seq
	l.conns[c] = struct{}{}
	l.perNet[c.network]++
	var victim *limitedConn
	if len(l.conns) > l.max {
		for o := range l.conns {
			if o == c {
				continue
			}
			if victim == nil || l.before(o, victim) {
				victim = o
			}
		}
		l.removeLocked(victim)
	}
	l.mu.Unlock()
	if victim != nil {
		_ = victim.Conn.Close()
	}
	return c, nil
}

// before reports whether o should be closed before v: from a network with
// more connections, then idle before serving, then older. Called with
// l.mu held.
func (l *connLimit) before(o, v *limitedConn) bool {
	if no, nv := l.perNet[o.network], l.perNet[v.network]; no != nv {
		return no > nv
	}
	if ao, av := o.active.Load(), v.active.Load(); ao != av {
		return av
	}
	return o.seq < v.seq
}

func (l *connLimit) remove(c *limitedConn) {
	l.mu.Lock()
	l.removeLocked(c)
	l.mu.Unlock()
}

func (l *connLimit) removeLocked(c *limitedConn) {
	if _, ok := l.conns[c]; !ok {
		return
	}
	delete(l.conns, c)
	if l.perNet[c.network]--; l.perNet[c.network] <= 0 {
		delete(l.perNet, c.network)
	}
}

// connState is the http.Server's ConnState hook: it marks the connections
// serving a request, which are closed last, and forgets closed ones.
func connState(nc net.Conn, st http.ConnState) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	c, ok := nc.(*limitedConn)
	if !ok {
		return
	}
	switch st {
	case http.StateActive:
		c.active.Store(true)
	case http.StateIdle, http.StateNew:
		c.active.Store(false)
	case http.StateClosed, http.StateHijacked:
		c.active.Store(false)
		c.l.remove(c)
	}
}
