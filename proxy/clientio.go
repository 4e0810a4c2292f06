package proxy

import (
	"net"
	"os"
	"time"
)

// clientIO is the client socket as the session's frame reader and Backend
// see it. The socket changes when the session comes back from the
// forwarding loop (a new descriptor of the same connection), and the bytes
// the loop read but did not answer are read first.
type clientIO struct {
	nc      net.Conn
	pending []byte // read by the loop, not yet by the session
	// err: the read error the loop met after pending (a TLS error),
	// returned once pending is read, as the socket would have.
	err error
}

func (c *clientIO) Read(b []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(b, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	if err := c.err; err != nil {
		c.err = nil
		return 0, err
	}
	return c.nc.Read(b)
}

func (c *clientIO) Write(b []byte) (int, error) { return c.nc.Write(b) }

// unparkMsg is what the forwarding loop hands back with a session: the
// client socket's descriptor, the bytes it read and did not answer, the
// answer bytes it could not write, and why it gave the session back.
type unparkMsg struct {
	fd        int
	in, out   []byte
	cancelled bool  // a CancelRequest hit the statement the loop ran
	idle      bool  // the session reached the idle timeout
	err       error // the read error after in (TLS)
}

// tlsTransport is the socket under a TLS session's tls.Conn. Normally it
// passes reads and writes to the socket. While the session is parked on the
// forwarding loop it holds no socket (the loop owns the descriptor): the
// loop puts the ciphertext it read in in, and a Read with in empty fails
// with a timeout, which tls.Conn treats as temporary (it keeps a partial
// record and is asked again later); writes collect in out for the loop to
// send. Bytes left in in when the session comes back are read first.
type tlsTransport struct {
	nc            net.Conn // nil while parked
	in, out       []byte
	local, remote net.Addr
}

func newTLSTransport(nc net.Conn) *tlsTransport {
	return &tlsTransport{nc: nc, local: nc.LocalAddr(), remote: nc.RemoteAddr()}
}

func (t *tlsTransport) Read(b []byte) (int, error) {
	if len(t.in) > 0 {
		n := copy(b, t.in)
		t.in = t.in[:copy(t.in, t.in[n:])]
		return n, nil
	}
	if t.nc == nil {
		return 0, os.ErrDeadlineExceeded
	}
	return t.nc.Read(b)
}

func (t *tlsTransport) Write(b []byte) (int, error) {
	if t.nc == nil {
		t.out = append(t.out, b...)
		return len(b), nil
	}
	return t.nc.Write(b)
}

func (t *tlsTransport) Close() error {
	if t.nc == nil {
		return nil
	}
	return t.nc.Close()
}

func (t *tlsTransport) LocalAddr() net.Addr  { return t.local }
func (t *tlsTransport) RemoteAddr() net.Addr { return t.remote }

func (t *tlsTransport) SetDeadline(d time.Time) error {
	if t.nc == nil {
		return nil
	}
	return t.nc.SetDeadline(d)
}

func (t *tlsTransport) SetReadDeadline(d time.Time) error {
	if t.nc == nil {
		return nil
	}
	return t.nc.SetReadDeadline(d)
}

func (t *tlsTransport) SetWriteDeadline(d time.Time) error {
	if t.nc == nil {
		return nil
	}
	return t.nc.SetWriteDeadline(d)
}
