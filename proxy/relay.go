package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/shadow"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Byte-level forwarding of catalog statements.
//
// A forwarded statement's request is written to the pooled shadow
// connection's socket in one write, and the shadow's reply is read with one
// buffered reader and relayed to the client as PostgreSQL wrote it: the
// messages that go to the client (RowDescription, DataRow, CommandComplete)
// are copied into the client's write buffer without being decoded, so a
// forwarded statement costs the proxy about what it costs PgBouncer (a read
// and a write on each side) plus classification. pgconn still opens,
// authenticates, pings, applies the settings of and closes the
// connections (internal/shadow); it is idle whenever the relay uses the
// socket (SyncConn: no buffered byte, no background read), and the relay
// leaves the socket at a message boundary after ReadyForQuery, or reports
// the connection broken so that it is closed rather than pooled.
//
// Only the statement the classifier routed to the catalog is sent, as the
// text of a Query or a Parse; what comes back is the shadow's, which holds
// no protected rows. ParameterStatus and NotificationResponse of the
// shadow are not the client's and are dropped (the proxy reports its own
// settings); notices go through client_min_messages; an ErrorResponse is
// decoded and becomes the statement's error with its SQLSTATE, as before.

const (
	// relayBufSize is the initial size of a relay's read buffer.
	relayBufSize = frameBufSize
	// cancelDeadline: after a statement_timeout has sent the shadow a
	// CancelRequest, how long the relay waits for its reply before it
	// gives up on the connection (pgconn's DeadlineDelay did the same).
	cancelDeadline = 5 * time.Second
)

// relayBufs are the read buffers of relays, shared between sessions (a
// session holds one only while a statement is forwarded).
var relayBufs = sync.Pool{New: func() any { b := make([]byte, 0, relayBufSize); return &b }}

// errShadowProtocol: the shadow sent something the relay does not expect
// in this state; the connection is closed.
var errShadowProtocol = errors.New("unexpected message from the shadow catalog")

// relay is one forwarded statement's use of a shadow connection's socket.
// Not safe for concurrent use.
type relay struct {
	nc  net.Conn
	f   framer  // the shadow's messages, read from nc
	buf *[]byte // f's buffer when it came from relayBufs
}

// openRelay prepares sc's socket for direct use by one statement. The
// relay is returned by value so that it stays on the caller's stack: a
// forwarded statement allocates nothing for it.
//
// maxMessage bounds the body of one message of the shadow (MaxBufferedResult:
// PostgreSQL's own limit on a field is 1 GB, and a message is read whole
// before it is relayed, so one 29-byte `SELECT repeat('x', 134217728)`
// made the proxy hold its 128 MB row; attack round 35).
func openRelay(ctx context.Context, sc *shadow.Conn, maxMessage int) (relay, error) {
	pg := sc.PgConn()
	if err := pg.SyncConn(ctx); err != nil {
		return relay{}, err
	}
	nc, buf := pg.Conn(), relayBufs.Get().(*[]byte)
	return relay{nc: nc, buf: buf, f: framer{r: nc, buf: *buf, typed: true, max: maxMessage}}, nil
}

// close gives the read buffer back. It reports whether bytes of the
// shadow are left unread, in which case the connection must not be
// reused (they would be read by the next statement).
func (rl *relay) close() (leftover bool) {
	leftover = rl.f.buffered() > 0
	// The framer may have grown the buffer: pool the one it has now.
	if b := rl.f.buf; cap(b) <= 4*relayBufSize {
		*rl.buf = b[:0]
		relayBufs.Put(rl.buf)
	}
	rl.buf, rl.f.buf = nil, nil
	return leftover
}

// send writes a request in one write.
func (rl *relay) send(out []byte) error {
	_, err := rl.nc.Write(out)
	return err
}

// next returns the next whole message of the shadow: its type and its
// bytes (header included), valid until the following call. A length the
// framer refuses is errShadowProtocol.
func (rl *relay) next() (byte, []byte, error) {
	typ, m, err := rl.f.next()
	if err != nil {
		var tooBig *frameTooLargeError
		if errors.As(err, &tooBig) {
			// Refused before its body is read; the connection is not
			// reused (the body is left unread).
			return 0, nil, pgerr.New(programLimitExceeded, "catalog row too large (over %d bytes)", tooBig.max).
				WithHint("select fewer or shorter columns")
		}
		if errors.Is(err, errFrameLength) {
			return 0, nil, errShadowProtocol
		}
		return 0, nil, err
	}
	return typ, m, nil
}

// relayReply reads the shadow's reply up to ReadyForQuery. In the simple
// protocol (br nil) RowDescription, DataRow and CommandComplete go to the
// client as they arrive; in the extended protocol they are kept in br
// (bounded by MaxBufferedResult). It returns the statement's error and
// whether the connection can be reused.
func (c *conn) relayReply(ctx context.Context, rl *relay, br *bufferedResult) (stmtErr error, reusable bool) {
	var pgErr *pgconn.PgError
	changed := false // a ParameterStatus or notification: not reusable
	for {
		typ, m, err := rl.next()
		if err != nil {
			return c.shadowFailed(ctx, relayIOError(err)), false
		}
		switch typ {
		case 'T', 'D', 'C', 'I', 'n', '1', '2':
			if pgErr != nil {
				continue // nothing of a failed statement follows its error
			}
			if br == nil {
				if typ == 'n' || typ == '1' || typ == '2' {
					return c.shadowFailed(ctx, errShadowProtocol), false
				}
				if c.be.sendRaw(m); c.be.failed() != nil {
					return c.be.failed(), false
				}
				continue
			}
			switch typ {
			case 'T':
				br.rawDesc = append([]byte(nil), m...)
			case 'D':
				if err := c.growResult(len(br.raw) + len(m)); err != nil { // memory.go
					return err, false
				}
				br.raw = append(br.raw, m...)
				br.ends = append(br.ends, len(br.raw))
			case 'C':
				br.tag = string(cstring(m[frameHeaderLen:]))
			case 'I':
				return c.shadowFailed(ctx, errShadowProtocol), false
			}
		case 'N':
			var n pgproto3.NoticeResponse
			if err := n.Decode(m[frameHeaderLen:]); err != nil {
				return c.shadowFailed(ctx, fmt.Errorf("%w: %v", errShadowProtocol, err)), false
			}
			if c.sess.wantsMessages(n.Severity) {
				// Written out as the rows are (clientOut): one statement's
				// notices can number in the millions.
				if c.be.sendRaw(m); c.be.failed() != nil {
					return c.be.failed(), false
				}
			}
		case 'E':
			var e pgproto3.ErrorResponse
			if err := e.Decode(m[frameHeaderLen:]); err != nil {
				return c.shadowFailed(ctx, fmt.Errorf("%w: %v", errShadowProtocol, err)), false
			}
			if pgErr == nil {
				pgErr = pgconn.ErrorResponseToPgError(&e)
			}
			if e.Severity == "FATAL" || e.Severity == "PANIC" {
				// The shadow session ends: no ReadyForQuery follows.
				return c.shadowFailed(ctx, pgErr), false
			}
		case 'S', 'A':
			// The shadow's ParameterStatus and notifications are not the
			// client's. Neither should come: a catalog statement changes
			// no reported setting and listens to nothing (the allow-lists
			// of pgsql.CheckCatalog), so the connection is no longer in
			// the state its next holder expects and is closed, not
			// pooled (pgconn, which does not read these bytes, would not
			// see the change at Release).
			changed = true
		case 'Z':
			if len(m) != frameHeaderLen+1 {
				return c.shadowFailed(ctx, errShadowProtocol), false
			}
			// The proxy never opens a transaction on the shadow: a
			// connection that reports one is not reused.
			reusable = m[frameHeaderLen] == 'I' && !changed
			if pgErr != nil {
				return c.shadowFailed(ctx, pgErr), reusable
			}
			return nil, reusable
		default:
			// COPY, authentication, function call replies: never the
			// answer to a statement the classifier forwards.
			return c.shadowFailed(ctx, fmt.Errorf("%w: %q", errShadowProtocol, typ)), false
		}
	}
}

// relayIOError keeps an I/O error of the relay recognisable as one.
func relayIOError(err error) error {
	if errors.Is(err, errShadowProtocol) {
		return err
	}
	return fmt.Errorf("shadow connection: %w", err)
}

// cstring is b up to its first NUL.
func cstring(b []byte) []byte {
	for i, x := range b {
		if x == 0 {
			return b[:i]
		}
	}
	return b
}

// watchShadow arranges for a CancelRequest to reach the shadow query the
// statement runs on sc while it waits on the socket, and returns the
// function to call when it has ended. A client's CancelRequest and the
// drain deadline go through cancelRunning (c.shadowPG); statement_timeout,
// which only cancels the context, through a callback on the context, set
// only when the timeout is (context.AfterFunc per statement is a
// measurable share of a forwarded statement's CPU). Either way the
// statement's context is done by the time its connection is released, so
// the connection is closed rather than pooled and no late CancelRequest
// can reach another session's query.
func (c *conn) watchShadow(ctx context.Context, pg *pgconn.PgConn) func() {
	if c.sess.statementTimeout() > 0 {
		stop := context.AfterFunc(ctx, func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = pg.CancelRequest(cctx)
			// A shadow that does not answer its cancel ends the wait.
			_ = pg.Conn().SetReadDeadline(time.Now().Add(cancelDeadline))
		})
		return func() { stop() }
	}
	c.cancelMu.Lock()
	c.shadowPG = pg
	c.cancelMu.Unlock()
	return func() {
		c.cancelMu.Lock()
		c.shadowPG = nil
		c.cancelMu.Unlock()
	}
}

// appendQuery appends a Query message.
func appendQuery(dst []byte, text string) []byte {
	dst = append(dst, 'Q', 0, 0, 0, 0)
	dst = append(dst, text...)
	dst = append(dst, 0)
	binary.BigEndian.PutUint32(dst[len(dst)-len(text)-5:], uint32(len(text)+5))
	return dst
}
