package proxy

import (
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// clientOut is the session's writer to the client. Messages are encoded
// into one buffer that is written at Flush (ReadyForQuery, an extended
// Flush or Sync), or as soon as it passes outFlushBytes: whatever a session
// asks for between two Syncs (pipelined Executes of catalog portals, a
// multi-statement Query of cursor FETCHes, a catalog statement's notices)
// holds at most about outFlushBytes of the proxy's memory, never its sum
// (attack round 35). A client that does not read then blocks its own
// session's writes, not the proxy's heap; where a session holds a shared
// resource while it writes (a shadow connection, relayShadow), the write
// has a deadline.
//
// A failed write is kept: later messages are dropped and Flush returns
// it, so the session ends at its next Flush (the client's stream may end
// in the middle of a message).
type clientOut struct {
	w   io.Writer
	buf []byte
	err error
	// deadline, when set, bounds each write (the session holds a shared
	// resource meanwhile: holdUntil); it is applied only when something is
	// written, so a statement whose reply goes out after it lets the
	// resource go costs no deadline at all.
	deadline time.Time
}

// deadliner is the socket's write deadline (net.Conn, tls.Conn).
type deadliner interface{ SetWriteDeadline(time.Time) error }

// holdUntil makes writes fail after t (zero: no deadline) until it is
// called again.
func (o *clientOut) holdUntil(t time.Time) { o.deadline = t }

const (
	// outFlushBytes: buffered bytes written before the next message is
	// added (the relay's pieces of a large catalog result are as large).
	outFlushBytes = 64 << 10
	// outKeepBytes: a buffer grown past this by one large message is not
	// kept after it is written.
	outKeepBytes = 4 * outFlushBytes
)

func newClientOut(w io.Writer) *clientOut { return &clientOut{w: w} }

// Send adds one message; the buffer is written first when it is full.
func (o *clientOut) Send(msg pgproto3.BackendMessage) {
	if o.err != nil {
		return
	}
	b, err := msg.Encode(o.buf)
	if err != nil {
		o.err = err
		return
	}
	o.buf = b
	if len(o.buf) >= outFlushBytes {
		o.err = o.write()
	}
}

// sendRaw adds bytes that are already whole messages (the relay's copy of
// the shadow's). A piece as large as the buffer is written as it is,
// without being copied.
func (o *clientOut) sendRaw(b []byte) {
	if o.err != nil {
		return
	}
	if len(b) < outFlushBytes {
		o.buf = append(o.buf, b...)
		if len(o.buf) >= outFlushBytes {
			o.err = o.write()
		}
		return
	}
	if o.err = o.write(); o.err == nil {
		_, o.err = o.writeBounded(b)
	}
}

// writeBounded writes b under the deadline, if one is set.
func (o *clientOut) writeBounded(b []byte) (int, error) {
	d, ok := o.w.(deadliner)
	if o.deadline.IsZero() || !ok {
		return o.w.Write(b)
	}
	_ = d.SetWriteDeadline(o.deadline)
	n, err := o.w.Write(b)
	_ = d.SetWriteDeadline(time.Time{})
	return n, err
}

// failed returns the error of a write that failed, if any.
func (o *clientOut) failed() error { return o.err }

// Flush writes what is buffered.
func (o *clientOut) Flush() error {
	if o.err != nil {
		return o.err
	}
	o.err = o.write()
	return o.err
}

func (o *clientOut) write() error {
	if len(o.buf) == 0 {
		return nil
	}
	_, err := o.writeBounded(o.buf)
	if cap(o.buf) > outKeepBytes {
		o.buf = nil
	} else {
		o.buf = o.buf[:0]
	}
	return err
}
