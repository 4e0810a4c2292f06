package proxy

import (
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TLS handshakes cost the proxy a key exchange and a signature each
// (about 0.4 ms of CPU with an ECDSA P-256 key, 1.4 ms with RSA 2048),
// and a client that opens connections, sends SSLRequest and a
// ClientHello needs no password and spends a tenth of that (attack round
// 106: one client at 0.14 of a core made an RSA-keyed proxy spend a
// whole core on 800 handshakes a second, and doubled every other
// analyst's log-in time). So each client network (remoteHost) gets
// tlsHandshakesPerSecond handshakes a second, tlsHandshakeBurst at once
// (a connection pool opening at start); past that a handshake waits for
// its turn, at most maxTLSWait, and beyond is refused with 53300 before
// the handshake.
const (
	tlsHandshakesPerSecond = 20
	tlsHandshakeBurst      = 40
	maxTLSWait             = 2 * time.Second
	// maxTLSNetworks bounds the limiters kept; past it they are all
	// forgotten (a flood from that many networks then starts afresh).
	maxTLSNetworks = 4096
)

// waitHandshake waits for network's turn to make a TLS handshake in its
// bucket of lims (Server.tlsRate), and reports false, without waiting,
// when the turn is more than maxTLSWait away.
func waitHandshake(lims *rateLimiters, network string) bool {
	lim := lims.bucket(network, tlsHandshakesPerSecond, tlsHandshakeBurst)
	now := time.Now()
	r := lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if !r.OK() || d > maxTLSWait {
		r.CancelAt(now)
		return false
	}
	if d > 0 {
		time.Sleep(d)
	}
	return true
}

// errTLSRate is the refusal of a handshake past the network's rate.
func errTLSRate() error {
	return pgerr.New(pgerr.TooManyConnections, "too many TLS connections from your network").
		WithDetail("The proxy makes at most %d TLS handshakes a second for one client network (%d at once).", tlsHandshakesPerSecond, tlsHandshakeBurst).
		WithHint("retry in a second; keep connections open (a connection pool) instead of reconnecting")
}
