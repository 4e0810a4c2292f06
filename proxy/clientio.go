package proxy

import "net"

// clientIO is the client socket as the session's frame reader and Backend
// see it. The socket changes when the session comes back from the
// forwarding loop (a new descriptor of the same connection), and the bytes
// the loop read but did not answer are read first.
type clientIO struct {
	nc      net.Conn
	pending []byte // read by the loop, not yet by the session
}

func (c *clientIO) Read(b []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(b, c.pending)
		c.pending = c.pending[n:]
		return n, nil
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
	cancelled bool // a CancelRequest hit the statement the loop ran
	idle      bool // the session reached the idle timeout
}
