package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
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

// TestAttack106_TLSHandshakeFloodUnbounded (medium; anyone who can reach
// the port, no credentials): every SSLRequest got a TLS handshake at
// once, a key exchange and a signature of the proxy's (1.4 ms of CPU with
// an RSA 2048 key) for a ClientHello the client makes for nearly nothing.
// Against `dpproxy serve` with an RSA key, one client at 0.14 of a core
// had the proxy make 812 handshakes a second on a whole core, and other
// analysts' log-ins went from 46 ms to 80–128 ms (median). Now one
// network gets tlsHandshakesPerSecond (tlsHandshakeBurst at once), then
// waits or is refused with 53300 before the handshake; another network's
// analyst is served.
func TestAttack106_TLSHandshakeFloodUnbounded(t *testing.T) {
	tlsCfg := selfSigned(t)
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.TLS = tlsCfg }})
	var done atomic.Int64
	end := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				nc, err := net.DialTimeout("tcp", ts.addr, time.Second)
				if err != nil {
					continue
				}
				_ = nc.SetDeadline(end)
				if _, err := nc.Write(startupCode(sslRequestCode)); err == nil {
					var b [1]byte
					if _, err := io.ReadFull(nc, b[:]); err == nil && b[0] == 'S' {
						if tls.Client(nc, &tls.Config{InsecureSkipVerify: true}).Handshake() == nil {
							done.Add(1)
						}
					}
				}
				nc.Close()
			}
		}()
	}
	wg.Wait()
	if n := done.Load(); n > tlsHandshakeBurst+2*tlsHandshakesPerSecond {
		t.Errorf("one network made %d TLS handshakes in a second, want at most %d", n, tlsHandshakeBurst+2*tlsHandshakesPerSecond)
	}
	// The flooding network is told why (53300, before the handshake).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tlsDSN := strings.Replace(ts.dsn("alice", "alice", "hospital"), "sslmode=disable", "sslmode=require", 1)
	var refused, other atomic.Int64
	var cw sync.WaitGroup
	for i := 0; i < 2*(tlsHandshakeBurst+int(maxTLSWait/time.Second)*tlsHandshakesPerSecond); i++ {
		cw.Add(1)
		go func() {
			defer cw.Done()
			pc, err := pgconn.Connect(ctx, tlsDSN)
			switch {
			case err == nil:
				pc.Close(ctx)
			case sqlstate(err) == "53300" || strings.Contains(err.Error(), "server refused TLS connection"):
				// pgconn reads no ErrorResponse to an SSLRequest; the
				// bytes are checked below.
				refused.Add(1)
			default:
				other.Add(1)
				t.Errorf("TLS connection past the rate: %v, want 53300", err)
			}
		}()
	}
	cw.Wait()
	if refused.Load() == 0 {
		t.Errorf("no TLS connection refused past the rate")
	}
	// What the refused get: ErrorResponse 53300 with a hint, in plaintext
	// before any handshake (as PostgreSQL's errors before SSL).
	var sawError atomic.Bool
	var rw sync.WaitGroup
	for i := 0; i < 4*tlsHandshakeBurst; i++ {
		rw.Add(1)
		go func() {
			defer rw.Done()
			nc, err := net.DialTimeout("tcp", ts.addr, time.Second)
			if err != nil {
				return
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := nc.Write(startupCode(sslRequestCode)); err != nil {
				return
			}
			var b [1]byte
			if _, err := io.ReadFull(nc, b[:]); err != nil || b[0] != 'E' {
				return
			}
			var hdr [4]byte
			if _, err := io.ReadFull(nc, hdr[:]); err != nil {
				return
			}
			body := make([]byte, int(hdr[0])<<24|int(hdr[1])<<16|int(hdr[2])<<8|int(hdr[3])-4)
			if _, err := io.ReadFull(nc, body); err != nil {
				return
			}
			var er pgproto3.ErrorResponse
			if er.Decode(body) == nil && er.Code == "53300" && er.Hint != "" {
				sawError.Store(true)
			}
		}()
	}
	rw.Wait()
	if !sawError.Load() {
		t.Errorf("no ErrorResponse 53300 with a hint to an SSLRequest past the rate")
	}
	// Another network's analyst connects over TLS meanwhile.
	cfg, err := pgconn.ParseConfig(tlsDSN)
	if err != nil {
		t.Fatal(err)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	cfg.DialFunc = d.DialContext
	pc, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("another network's analyst over TLS: %v", err)
	}
	pc.Close(ctx)
}
