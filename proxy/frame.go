package proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"
)

// frameReader sits between the socket and pgproto3's Backend after
// start-up and never hands out bytes of more than one message per Read.
// The Backend reads a message's header and then exactly its body, so when
// Receive returns, the frameReader has handed out no byte past the message
// it decoded: typ is that message's type, and rest is 0 when its whole body
// was read. This is how the session tells a message whose body pgproto3
// could not decode (the stream is still in step: PostgreSQL answers ERROR
// and goes on) from a broken stream (FATAL and close). Not safe for
// concurrent use.
type frameReader struct {
	br   *bufio.Reader
	typ  byte // type of the current message
	rest int  // bytes of the current message not handed out yet
	size int  // body length of the current message
	bad  bool // the current message's length is invalid (< 4)
	err  error
}

// frameHeaderLen is a message's type byte and its int32 length.
const frameHeaderLen = 5

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{br: bufio.NewReaderSize(r, 8192)}
}

func (f *frameReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if f.rest == 0 {
		hdr, err := f.br.Peek(frameHeaderLen)
		if err != nil {
			// A partial header stays buffered; the session ends anyway.
			f.err = err
			return 0, err
		}
		f.typ = hdr[0]
		f.rest = frameHeaderLen
		n := int(int32(binary.BigEndian.Uint32(hdr[1:])))
		f.bad = n < 4
		f.size = max(n-4, 0)
		f.rest += f.size
	}
	n, err := f.br.Read(p[:min(len(p), f.rest)])
	f.rest -= n
	if err != nil {
		f.err = err
	}
	return n, err
}

// decodeFailed reports whether the last Receive error came from decoding a
// message whose bytes were all read (a malformed body), and its type.
func (f *frameReader) decodeFailed() (byte, bool) {
	return f.typ, f.err == nil && f.rest == 0 && !f.bad && f.typ != 0
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
	if c.extFailed && typ != 'S' {
		return true
	}
	err := pgerr.New(pgerr.ProtocolViolation, "invalid message format")
	switch typ {
	case 'Q', 'F':
		c.log.Warn("malformed message", zap.String(logKeyMessage, string(typ)))
		c.sendError(err)
		c.readyForQuery()
	case 'P', 'B', 'D', 'E', 'C', 'H':
		c.log.Warn("malformed message", zap.String(logKeyMessage, string(typ)))
		c.sendError(err)
		c.extFailed = true
	case 'S':
		c.log.Warn("malformed message", zap.String(logKeyMessage, string(typ)))
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
