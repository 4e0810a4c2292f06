package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"
)

// framer is the one reader of PostgreSQL message framing in the proxy: the
// client's start-up packets (conn.go), the client's messages after start-up
// (this file), and the shadow's replies, which the relay copies to the
// client as bytes (relay.go). A message is an optional type byte, an int32
// length that counts itself and the body, and the body. next returns one
// whole message, checked against min and max before its body is read, and
// never hands out a byte past it: a message whose body then fails to decode
// leaves the stream in step (PostgreSQL answers ERROR and goes on), while
// one that cannot be framed does not (FATAL and close).
//
// pgproto3's Backend.Receive and ReceiveStartupMessage frame too, but the
// session needs what they do not give: to tell a malformed body from a
// broken stream, the configured start-up limit, protocol 3.x minors,
// start-up parameters in the order sent, and exact reads before TLS. The
// bodies are decoded by pgproto3's message types (decodeFrontend).
//
// Not safe for concurrent use.
type framer struct {
	r   io.Reader
	buf []byte // buf[off:] is buffered and not handed out yet
	off int
	// typed: messages start with a type byte (all but start-up packets).
	typed bool
	// exact: read no byte past the current message from r. Start-up
	// packets are read so: after an SSLRequest only the TLS handshake may
	// follow, so plaintext bytes pipelined after it are read by the TLS
	// layer as a broken handshake, never taken as part of the encrypted
	// session (CVE-2021-23214's class).
	exact bool
	// min and max bound the body (the bytes after the length field).
	min, max int
	// admit, when set, is asked before a body larger than frameBufSize is
	// read (the relay charges its analyst's memory: relay.go); its error
	// is next's, with the body left unread.
	admit func(body int) error
}

// frameBufSize is a framer's initial buffer: PostgreSQL's own send buffer
// is 8 kB, and pgx found no benefit in a larger one.
const frameBufSize = 8 << 10

// frameHeaderLen is a typed message's type byte and its int32 length.
const frameHeaderLen = 5

// errFrameLength: a length field below the least the message can have.
// The stream cannot be followed after it.
var errFrameLength = errors.New("invalid message length")

// frameTooLargeError: a length field above the framer's max. Nothing of
// the body was read.
type frameTooLargeError struct{ size, max int }

func (e *frameTooLargeError) Error() string {
	return fmt.Sprintf("message body of %d bytes exceeds the limit of %d bytes", e.size, e.max)
}

func newFramer(r io.Reader, max int) *framer {
	return &framer{r: r, buf: make([]byte, 0, frameBufSize), typed: true, max: max}
}

// next returns the next whole message: its type (0 for a start-up packet)
// and its bytes, header included, valid until the next call.
func (f *framer) next() (byte, []byte, error) {
	hl := 4
	if f.typed {
		hl = frameHeaderLen
	}
	if err := f.fill(hl); err != nil {
		return 0, nil, err
	}
	h := f.buf[f.off:]
	n := int(int32(binary.BigEndian.Uint32(h[hl-4:]))) - 4
	if n < f.min {
		return 0, nil, errFrameLength
	}
	if n > f.max {
		return 0, nil, &frameTooLargeError{size: n, max: f.max}
	}
	if f.admit != nil && n > frameBufSize {
		if err := f.admit(n); err != nil {
			return 0, nil, err
		}
	}
	if err := f.fill(hl + n); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	m := f.buf[f.off : f.off+hl+n : f.off+hl+n]
	f.off += hl + n
	if !f.typed {
		return 0, m, nil
	}
	return m[0], m, nil
}

// buffered is the number of bytes read from r and not handed out.
func (f *framer) buffered() int { return len(f.buf) - f.off }

// whole reports whether a whole typed message is buffered: next returns
// it without reading (a pipelined batch's later messages).
func (f *framer) whole() bool {
	b := f.buf[f.off:]
	return len(b) >= frameHeaderLen && len(b)-1 >= int(binary.BigEndian.Uint32(b[1:frameHeaderLen]))
}

// fill makes n bytes past off available in buf, reading from r only what
// is missing when exact, else as much as the buffer holds. A partial
// header at EOF is io.ErrUnexpectedEOF.
func (f *framer) fill(n int) error {
	if len(f.buf)-f.off >= n {
		return nil
	}
	if f.off == len(f.buf) {
		f.buf, f.off = f.buf[:0], 0
		if cap(f.buf) > 4*frameBufSize && n <= frameBufSize && !f.exact {
			// A large message is over: do not keep its buffer.
			f.buf = make([]byte, 0, frameBufSize)
		}
	}
	if cap(f.buf)-f.off < n {
		nb := f.buf
		if cap(f.buf) < n {
			nb = make([]byte, 0, max(n, 2*cap(f.buf)))
		}
		k := copy(nb[:cap(nb)], f.buf[f.off:])
		f.buf, f.off = nb[:k], 0
	}
	for {
		end := cap(f.buf)
		if f.exact {
			end = f.off + n
		}
		k, err := f.r.Read(f.buf[len(f.buf):end])
		f.buf = f.buf[:len(f.buf)+k]
		if len(f.buf)-f.off >= n {
			return nil
		}
		if err != nil {
			if err == io.EOF && len(f.buf) > f.off {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
}

// frontendMessages decodes a client's messages after start-up with
// pgproto3's message types, reused from one message to the next as
// pgproto3's Backend reuses its own: a decoded message, like the bytes it
// refers to, is valid until the next one is read. Not safe for
// concurrent use.
type frontendMessages struct {
	query        pgproto3.Query
	parse        pgproto3.Parse
	bind         pgproto3.Bind
	describe     pgproto3.Describe
	execute      pgproto3.Execute
	close        pgproto3.Close
	sync         pgproto3.Sync
	flush        pgproto3.Flush
	terminate    pgproto3.Terminate
	functionCall pgproto3.FunctionCall
	copyData     pgproto3.CopyData
	copyDone     pgproto3.CopyDone
	copyFail     pgproto3.CopyFail
}

// errUnknownMessage: a message type no frontend sends after start-up.
var errUnknownMessage = errors.New("unknown frontend message type")

// decode decodes a message framed whole by a framer (m, header included)
// and checks that it used its whole body (wellSized).
func (fm *frontendMessages) decode(m []byte) (pgproto3.FrontendMessage, error) {
	var msg pgproto3.FrontendMessage
	switch m[0] {
	case 'Q':
		msg = &fm.query
	case 'P':
		msg = &fm.parse
	case 'B':
		msg = &fm.bind
	case 'D':
		msg = &fm.describe
	case 'E':
		msg = &fm.execute
	case 'C':
		msg = &fm.close
	case 'S':
		msg = &fm.sync
	case 'H':
		msg = &fm.flush
	case 'X':
		msg = &fm.terminate
	case 'F':
		msg = &fm.functionCall
	case 'd':
		msg = &fm.copyData
	case 'c':
		msg = &fm.copyDone
	case 'f':
		msg = &fm.copyFail
	default:
		return nil, errUnknownMessage
	}
	body := m[frameHeaderLen:]
	if err := msg.Decode(body); err != nil {
		return nil, err
	}
	if !wellSized(msg, len(body)) {
		return nil, errMalformed
	}
	return msg, nil
}

// receiveAuth reads one message of the authentication exchange (type 'p')
// and decodes it into msg, which says which one is expected (pgproto3's
// Backend decides the same by its auth type).
func (c *conn) receiveAuth(msg pgproto3.FrontendMessage) error {
	typ, m, err := c.fr.next()
	if err != nil {
		return err
	}
	if typ != 'p' {
		return pgerr.New(pgerr.ProtocolViolation, "expected %s, got message type %q", authMessageName(msg), typ)
	}
	return msg.Decode(m[frameHeaderLen:])
}

func authMessageName(msg pgproto3.FrontendMessage) string {
	if _, ok := msg.(*pgproto3.PasswordMessage); ok {
		return "password response"
	}
	return "SASL response"
}

// errMalformed marks a message wellSized refuses.
var errMalformed = errors.New("malformed message")

// wellSized reports whether a decoded message used its whole body.
// pgproto3 ignores bytes after the fields of Parse, Bind and Execute;
// PostgreSQL refuses them ("invalid message format"), and so do we. The
// other message types are checked by pgproto3 itself.
func wellSized(msg pgproto3.FrontendMessage, size int) bool {
	switch m := msg.(type) {
	case *pgproto3.Parse:
		return size == len(m.Name)+1+len(m.Query)+1+2+4*len(m.ParameterOIDs)
	case *pgproto3.Bind:
		n := len(m.DestinationPortal) + 1 + len(m.PreparedStatement) + 1 + 2 + 2*len(m.ParameterFormatCodes) + 2
		for _, p := range m.Parameters {
			n += 4 + len(p)
		}
		return size == n+2+2*len(m.ResultFormatCodes)
	case *pgproto3.Execute:
		return size == len(m.Portal)+1+4
	}
	return true
}

// malformed answers a message of type typ that was read whole but is
// malformed, the way PostgreSQL does (postgres.c, PostgresMain and
// SocketBackend): the stream is still in step, so the message fails with
// ERROR 08P01 and the session goes on. A Query or FunctionCall is then
// answered with ReadyForQuery; an extended-protocol message starts the
// skip until Sync; a Sync ends the skip and is answered with
// ReadyForQuery; copy messages outside COPY are ignored, as well-formed
// ones are; a Terminate ends the session. While skipping until Sync,
// nothing but Sync and Terminate is looked at. It reports whether the
// session goes on.
func (c *conn) malformed(ctx context.Context, typ byte) bool {
	if typ == 'X' {
		return false
	}
	if c.sess.extFailed && typ != 'S' {
		return true
	}
	err := pgerr.New(pgerr.ProtocolViolation, "invalid message format")
	if typ != 'd' && typ != 'c' && typ != 'f' {
		// The first of a session is logged; the rest are counted and
		// logged with its end (round 73: a line of 162 bytes for each
		// 6-byte message, free and unbounded).
		if c.malformedSeen++; c.malformedSeen == 1 {
			c.log.Warn("malformed message", zap.String(logKeyMessage, string(typ)))
		}
	}
	switch typ {
	case 'Q', 'F':
		c.sendError(err)
		c.readyForQuery()
	case 'P', 'B', 'D', 'E', 'C', 'H':
		c.sendError(err)
		c.sess.skipUntilSync()
	case 'S':
		c.sendError(err)
		c.extended(ctx, &pgproto3.Sync{})
	case 'd', 'c', 'f':
		return true
	default:
		c.fatal(pgerr.New(pgerr.ProtocolViolation, "invalid frontend message type %d", typ))
		return false
	}
	if err := c.be.Flush(); err != nil {
		c.log.Debug("write failed", zap.Error(err))
		return false
	}
	return true
}
