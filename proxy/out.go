package proxy

import (
	"io"

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
}

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
		_, o.err = o.w.Write(b)
	}
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
	_, err := o.w.Write(o.buf)
	if cap(o.buf) > outKeepBytes {
		o.buf = nil
	} else {
		o.buf = o.buf[:0]
	}
	return err
}
