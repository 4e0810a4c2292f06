package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cancelShadowGoroutines counts the goroutines that send a CancelRequest
// to the shadow server (cancelRunning's, one per client CancelRequest).
func cancelShadowGoroutines() int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	return bytes.Count(buf.Bytes(), []byte("(*PgConn).CancelRequest("))
}

// sendCancel sends one CancelRequest with key (pid, secret) to addr.
func sendCancel(addr string, pid uint32, secret []byte) error {
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	msg := make([]byte, 8, 16)
	binary.BigEndian.PutUint32(msg[0:], uint32(8+4+len(secret)))
	binary.BigEndian.PutUint32(msg[4:], cancelRequestCode)
	msg = binary.BigEndian.AppendUint32(msg, pid)
	msg = append(msg, secret...)
	_ = nc.SetDeadline(time.Now().Add(time.Second))
	if _, err := nc.Write(msg); err != nil {
		return err
	}
	var b [1]byte
	_, _ = nc.Read(b[:]) // the proxy closes without a word
	return nil
}

// TestAttack83_CancelFloodDialsShadowPerRequest (low–medium; rule 1: a
// cost an analyst causes, not bounded by any public quantity, landing on
// the server the analysts share): while a catalog statement runs with no
// statement_timeout, every CancelRequest carrying the session's key makes
// the proxy start a goroutine that opens a new connection to the shadow
// server and sends it PostgreSQL's CancelRequest (cancelRunning), with no
// check that one was already sent for this statement. PostgreSQL forks a
// process for each. A statement whose client does not read its rows is
// blocked sending them, which PostgreSQL's cancel does not end, and the
// proxy's relay is blocked writing to the client until the catalog
// timeout plus 5 s: for that whole window the analyst's own key turns
// every 16-byte cancel packet into a shadow connection and a fork, and
// nothing counts them (CancelRequest connections need no authentication
// and last milliseconds, so max_connections does not bound their rate).
// Measured (2-core machine, a CI run alongside, 8 flooding senders for
// 3 s each, shadow behind a counting TCP forwarder): with a wrong key,
// 27,300 CancelRequests, 0 shadow connections, bob's catalog SELECT 1 at
// a median of 2.0 ms; with alice's own key, 2,314–2,500 CancelRequests for
// one statement and as many shadow connections (each a goroutine, a socket
// and a PostgreSQL fork; up to 304–326 cancel goroutines at once), and
// bob's SELECT 1 at a median of 17–21 ms (0.22–0.27 ms before the flood,
// 10 times the wrong-key flood's): the other analyst pays for the forks
// on the shadow host. Want: one shadow CancelRequest per statement (clear
// shadowPG, or keep a flag, once cancelRunning has sent it), so the
// analyst's cancels cost the proxy what anyone's cost.
func TestAttack83_CancelFloodDialsShadowPerRequest(t *testing.T) {
	fwd := newCountingForwarder(t, shadowDB(t))
	ts := startServer(t, serverOpts{shadowDSN: fwd.dsn})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	// alice's session: a catalog statement whose rows she never reads.
	a := ts.connect(t)
	pid, secret := a.PID(), a.SecretKey()
	hj, err := a.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	defer hj.Conn.Close()
	q := "SELECT repeat('x', 1000) FROM generate_series(1, 10000000)"
	msg := appendQuery(nil, q)
	if _, err := hj.Conn.Write(msg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the buffers fill; the relay blocks writing to alice

	// bob's catalog statements meanwhile.
	b := ts.connectAs(t, "bob", "bob-secret", "hospital")
	var bobMu sync.Mutex
	var bobTimes []time.Duration
	bobStop := make(chan struct{})
	bobDone := make(chan struct{})
	go func() {
		defer close(bobDone)
		for {
			select {
			case <-bobStop:
				return
			default:
			}
			start := time.Now()
			if _, err := b.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
				t.Logf("bob: %v", err)
			}
			bobMu.Lock()
			bobTimes = append(bobTimes, time.Since(start))
			bobMu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	bobMu.Lock()
	before := median(bobTimes)
	bobTimes = nil
	bobMu.Unlock()

	// flood sends CancelRequests with key from 8 senders for 3 s and
	// returns how many it sent, the peak of shadow-cancel goroutines and
	// bob's median latency meanwhile.
	flood := func(key []byte) (int64, int64, time.Duration) {
		bobMu.Lock()
		bobTimes = nil
		bobMu.Unlock()
		base := cancelShadowGoroutines()
		var sent, peak atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if sendCancel(ts.addr, pid, key) == nil {
						sent.Add(1)
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if n := int64(cancelShadowGoroutines() - base); n > peak.Load() {
					peak.Store(n)
				}
			}
		}()
		time.Sleep(3 * time.Second)
		close(stop)
		wg.Wait()
		bobMu.Lock()
		defer bobMu.Unlock()
		return sent.Load(), peak.Load(), median(bobTimes)
	}
	// Control: the same flood with a wrong key (anyone can send it).
	wrong := append([]byte(nil), secret...)
	wrong[0] ^= 0xff
	dials0 := fwd.accepted.Load()
	sentWrong, _, underWrong := flood(wrong)
	time.Sleep(500 * time.Millisecond)
	dialsWrong := fwd.accepted.Load() - dials0
	// The flood with alice's own key.
	dialsBefore := fwd.accepted.Load()
	sent, peak, under := flood(secret)
	close(bobStop)
	<-bobDone
	time.Sleep(500 * time.Millisecond)
	shadowCancels := fwd.accepted.Load() - dialsBefore
	t.Logf("wrong key: %d CancelRequests, %d shadow connections, bob's SELECT 1 median %v", sentWrong, dialsWrong, underWrong)
	t.Logf("alice's key: %d CancelRequests for one statement; the proxy opened %d shadow connections (peak %d cancel goroutines at once); bob's SELECT 1: median %v before, %v during",
		sent, shadowCancels, peak, before, under)
	if shadowCancels > 4 {
		t.Errorf("one catalog statement's CancelRequests made the proxy open %d connections to the shadow server (one goroutine, one connection and one PostgreSQL fork each); want at most one per statement", shadowCancels)
	}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}

// countingForwarder relays TCP connections to a PostgreSQL server and
// counts them: the shadow DSN points at it, so every connection the proxy
// opens to the shadow (pooled ones and CancelRequests) is counted.
type countingForwarder struct {
	dsn      string
	accepted atomic.Int64
}

func newCountingForwarder(t *testing.T, dsn string) *countingForwarder {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f := &countingForwarder{}
	u.Host = ln.Addr().String()
	f.dsn = u.String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.accepted.Add(1)
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer s.Close()
				go func() { _, _ = io.Copy(s, c); s.Close() }()
				_, _ = io.Copy(c, s)
			}()
		}
	}()
	return f
}
