package proxy

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Sockets the forwarding loop (fwdloop_linux.go) can own.
//
// Go's runtime registers every net.Conn with its own poller. A socket the
// loop reads with raw syscalls must leave that poller first, or every
// byte that arrives also wakes a runtime thread that has nothing to do
// (the cost the loop exists to avoid). detachFD does that: it keeps a
// duplicate of the descriptor (which shares the original's non-blocking
// mode) and closes the net.Conn, which removes the socket from the
// runtime's poller. attachFD is the way back: net.FileConn registers a
// duplicate again and the loop's copy is closed.

// errDetached: an operation reached a detached socket with nothing to
// attach it to (it was closed meanwhile).
var errDetached = errors.New("socket detached from the runtime poller")

// detachFD takes nc's socket out of the runtime's poller and returns a
// non-blocking descriptor of it; nc is closed.
func detachFD(nc net.Conn) (int, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1, errors.New("not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var dupErr error
	if err := rc.Control(func(s uintptr) { fd, dupErr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if dupErr != nil {
		return -1, dupErr
	}
	_ = nc.Close()
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// attachFD gives fd back to the runtime's poller as a net.Conn and closes
// fd (the net.Conn holds its own duplicate).
func attachFD(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	return net.FileConn(f)
}

// swapConn is a shadow connection's socket as pgconn sees it. While the
// forwarding loop uses the connection (borrowed from the pool, pgconn
// idle) the socket is detached and the loop reads and writes the
// descriptor; the next Read or Write of pgconn or of the relay attaches it
// again. Deadlines set while detached are applied when it is attached.
// Detach is only called while nobody else uses the connection; Read,
// Write, the deadlines and Close may be called concurrently (pgconn's
// context watcher sets deadlines while a read waits).
type swapConn struct {
	mu     sync.Mutex
	nc     net.Conn // attached; nil while detached
	fd     int      // detached: the loop's descriptor; else -1
	armed  bool     // fd is registered with the loop's epoll
	closed bool
	local  net.Addr
	remote net.Addr
	rd, wd time.Time
}

func newSwapConn(nc net.Conn) *swapConn {
	return &swapConn{nc: nc, fd: -1, local: nc.LocalAddr(), remote: nc.RemoteAddr()}
}

// detach returns the descriptor for the loop, detaching the socket if it
// is attached.
func (s *swapConn) detach() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return -1, net.ErrClosed
	}
	if s.nc == nil {
		return s.fd, nil
	}
	fd, err := detachFD(s.nc)
	if err != nil {
		return -1, err
	}
	s.nc, s.fd = nil, fd
	return fd, nil
}

// conn returns the attached net.Conn, attaching it first if needed.
func (s *swapConn) conn() (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, net.ErrClosed
	}
	if s.nc != nil {
		return s.nc, nil
	}
	if s.fd < 0 {
		return nil, errDetached
	}
	if s.armed {
		theLoop.forget(s.fd)
		s.armed = false
	}
	nc, err := attachFD(s.fd)
	s.fd = -1
	if err != nil {
		s.closed = true
		return nil, err
	}
	if !s.rd.IsZero() {
		_ = nc.SetReadDeadline(s.rd)
	}
	if !s.wd.IsZero() {
		_ = nc.SetWriteDeadline(s.wd)
	}
	s.nc = nc
	return nc, nil
}

func (s *swapConn) Read(b []byte) (int, error) {
	nc, err := s.conn()
	if err != nil {
		return 0, err
	}
	return nc.Read(b)
}

func (s *swapConn) Write(b []byte) (int, error) {
	nc, err := s.conn()
	if err != nil {
		return 0, err
	}
	return nc.Write(b)
}

func (s *swapConn) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.nc != nil {
		return s.nc.Close()
	}
	if s.armed {
		theLoop.forget(s.fd)
		s.armed = false
	}
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}

func (s *swapConn) LocalAddr() net.Addr  { return s.local }
func (s *swapConn) RemoteAddr() net.Addr { return s.remote }

func (s *swapConn) SetDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rd, s.wd = t, t
	if s.nc != nil {
		return s.nc.SetDeadline(t)
	}
	return nil
}

func (s *swapConn) SetReadDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rd = t
	if s.nc != nil {
		return s.nc.SetReadDeadline(t)
	}
	return nil
}

func (s *swapConn) SetWriteDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wd = t
	if s.nc != nil {
		return s.nc.SetWriteDeadline(t)
	}
	return nil
}
