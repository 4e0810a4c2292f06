package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"slices"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
)

// Parking a session on the forwarding loop (fwdloop_linux.go): the
// goroutine's side.

// parkable reports whether the session may wait for its next statement on
// the forwarding loop: the server has the loop on, its last statement was
// forwarded (a session that runs DP statements stays on its goroutine,
// where they run anyway), and it holds nothing the loop does not know
// about: no transaction, cursor, portal, pinned shadow connection
// or pending DP release, no statement_timeout, no byte read and not
// handled, no reply waiting for Sync or Flush in the write buffer (the
// loop's answer would overtake it), no debug logging (whose statement lines the loop does not
// write).
func (c *conn) parkable() bool {
	if !c.srv.cfg.ForwardLoop || !c.lastForwarded || c.srv.loopOff.Load() {
		return false
	}
	if c.parkMisses >= parkMissLimit {
		// The loop answered none of this session's last statements
		// (errors, notices, texts it does not cache, a shadow it cannot
		// borrow): park only now and then, so that such a session pays
		// the hand-over rarely.
		if c.parkSkips++; c.parkSkips%parkRetryEvery != 0 {
			return false
		}
	}
	return c.txStatus == 'I' && !c.unflushed && c.cio.err == nil && c.shadow == nil && len(c.cursors) == 0 && len(c.portals) == 0 &&
		!c.extFailed && !c.implicitTx && c.pendingDP == nil &&
		c.fr.rest == 0 && c.fr.br.Buffered() == 0 && len(c.cio.pending) == 0 &&
		!c.shuttingDown.Load() && c.statementTimeout() == 0 &&
		!c.log.Core().Enabled(zap.DebugLevel) && c.srv.shadowPool(c.ds) != nil
}

// park hands the client socket to the loop and waits until the loop gives
// the session back. It reports false when the session is to end.
func (c *conn) park() bool {
	if err := theLoop.start(); err != nil {
		if !c.srv.loopOff.Swap(true) {
			c.log.Warn("forwarding loop unavailable; sessions stay on their goroutines", zap.Error(err))
		}
		return true
	}
	c.rawMu.Lock()
	fd, err := detachFD(c.raw)
	c.rawMu.Unlock()
	if err != nil {
		c.log.Debug("client socket not parked", zap.Error(err))
		return false // the socket is closed or broken
	}
	p := c.parkBuf
	if p == nil {
		p = &parkedSess{c: c}
		c.parkBuf = p
	}
	p.fd, p.sfd = fd, -1
	p.tls, p.tport = nil, nil
	if c.tls {
		// The session's tls.Conn stays its own; the loop feeds it.
		p.tls, p.tport = c.netConn.(*tls.Conn), c.tport
		c.tport.nc = nil
		if len(c.tport.in) == 0 && cap(c.tport.in) > relayFlushBytes {
			c.tport.in = nil // a large message grew it once
		}
	}
	p.in, p.out, p.rb = trimBuf(p.in), trimBuf(p.out), trimBuf(p.rb)
	p.ran = 0
	p.want = slices.Clone(c.shadowSettings())
	p.pool = c.srv.shadowPool(c.ds)
	p.idleAt = c.idleDeadline(time.Now())
	p.clientGone, p.clientOff, p.wantBack, p.cancelled, p.idle = false, false, false, false, false
	c.everParked.Store(true)
	theLoop.send(loopCmd{park: p})
	msg := <-c.unparkCh
	if p.ran == 0 {
		c.parkMisses++
	} else {
		c.parkMisses, c.parkSkips = 0, 0
	}

	nc, err := attachFD(msg.fd)
	if err != nil {
		c.log.Info("client socket lost while parked", zap.Error(err))
		return false
	}
	c.rawMu.Lock()
	c.raw = nc
	if c.tls {
		c.tport.nc = nc // under the same tls.Conn
	} else {
		c.netConn = nc
		c.cio.nc = nc
	}
	c.rawMu.Unlock()
	if len(msg.out) > 0 {
		if _, err := nc.Write(msg.out); err != nil {
			c.log.Debug("write failed", zap.Error(err))
			return false
		}
	}
	if msg.idle {
		c.fatal(pgerr.New(idleSessionTimeout, "terminating connection due to idle-session timeout"))
		return false
	}
	c.cio.pending = append(c.cio.pending[:0], msg.in...)
	c.cio.err = msg.err
	c.cancelNext = msg.cancelled
	return true
}

// Parking of sessions the loop does not help (parkable).
const (
	parkMissLimit  = 3
	parkRetryEvery = 32
)

// trimBuf empties a parked session's buffer, dropping it when a large
// reply grew it (the next park starts small again).
func trimBuf(b []byte) []byte {
	if cap(b) > relayFlushBytes {
		return nil
	}
	return b[:0]
}

// idleDeadline is when the session, idle from now, reaches the server's
// IdleTimeout (zero: none).
func (c *conn) idleDeadline(now time.Time) time.Time {
	if t := c.srv.cfg.IdleTimeout; t > 0 {
		return now.Add(t)
	}
	return time.Time{}
}

// unparkForShutdown asks the loop to give the session back (Serve's drain).
// Safe for concurrent use.
func (c *conn) unparkForShutdown() {
	if c.everParked.Load() {
		theLoop.send(loopCmd{unpark: c})
	}
}

// abortParked gives the session back at once, ending a statement the loop
// runs for it (Serve's drain deadline: closing the client socket does not
// reach the loop's descriptor of it). Safe for concurrent use.
func (c *conn) abortParked() {
	if c.everParked.Load() {
		theLoop.send(loopCmd{unpark: c, abort: true})
	}
}

// wrapShadowDial makes the shadow pool's sockets ones the loop can borrow
// (swapConn).
func wrapShadowDial(pc *pgconn.Config) {
	dial := pc.DialFunc
	pc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newSwapConn(nc), nil
	}
}
