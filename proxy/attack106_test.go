package proxy

import (
	"context"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// emfileListener fails its first n Accepts as accept4 does when the
// process is out of descriptors.
type emfileListener struct {
	net.Listener
	left atomic.Int32
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.left.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(),
			Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAttack106_EMFILEStopsProxy: the process out of descriptors (another
// listener of the process holding them: the admin endpoint took 20,000
// keep-alive connections from an unauthenticated client) made Accept fail
// with EMFILE, which Serve took for a fatal error: it returned and
// `dpproxy serve` stopped. It must back off and serve again.
func TestAttack106_EMFILEStopsProxy(t *testing.T) {
	ts := startServer(t, serverOpts{listener: func(ln net.Listener) net.Listener {
		l := &emfileListener{Listener: ln}
		l.left.Store(5)
		return l
	}})
	select {
	case err := <-ts.done:
		ts.done <- err
		t.Fatalf("Serve returned on EMFILE: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	pc := ts.connect(t)
	if _, err := pc.Exec(context.Background(), "SHOW dp.budget").ReadAll(); err != nil {
		t.Fatalf("after EMFILE: %v", err)
	}
}
