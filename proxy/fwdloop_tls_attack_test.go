//go:build linux

package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// holdConn buffers the writes of a TLS client while held, and sends them
// in one write at release: several TLS records reach the proxy at once.
type holdConn struct {
	net.Conn
	mu   sync.Mutex
	hold bool
	buf  []byte
}

func (h *holdConn) Write(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hold {
		h.buf = append(h.buf, b...)
		return len(b), nil
	}
	return h.Conn.Write(b)
}

func (h *holdConn) release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold = false
	// CloseWrite leaves a write deadline in the past behind it.
	_ = h.Conn.SetWriteDeadline(time.Time{})
	_, err := h.Conn.Write(h.buf)
	h.buf = nil
	return err
}

// tlsWireClient connects over TLS with tune applied to the client's TLS
// config, and returns the wire client and its holdConn.
func tlsWireClient(t *testing.T, ts *testServer, tune func(*tls.Config)) (*wireClient, *holdConn) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(fmt.Sprintf("postgres://alice:alice@%s/hospital?sslmode=require", ts.addr))
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(cfg.TLSConfig)
	}
	var hc *holdConn
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		hc = &holdConn{Conn: nc}
		return hc, nil
	}
	pc, err := pgconn.ConnectConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	hj, err := pc.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := hj.Conn.(*tls.Conn); !ok {
		t.Fatalf("not a TLS session: %T", hj.Conn)
	}
	t.Cleanup(func() { hj.Conn.Close() })
	return &wireClient{nc: hj.Conn, fe: hj.Frontend}, hc
}

func tlsPair(t *testing.T, tune func(*tls.Config)) (on, off *wireClient, hon, hoff *holdConn, ts *testServer) {
	t.Helper()
	dsn := shadowDB(t)
	tlsCfg := selfSigned(t)
	ts = startServer(t, serverOpts{shadowDSN: dsn, mutate: func(c *Config) { c.TLS = tlsCfg }})
	offSrv := startServer(t, serverOpts{shadowDSN: dsn, mutate: func(c *Config) { c.TLS, c.ForwardLoop = tlsCfg, false }})
	on, hon = tlsWireClient(t, ts, tune)
	off, hoff = tlsWireClient(t, offSrv, tune)
	for _, w := range []*wireClient{on, off} {
		for i := 0; i < 3; i++ {
			w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
		}
	}
	return
}

// paddedQuery is a catalog Query of exactly n bytes on the wire.
func paddedQuery(t *testing.T, n int) []byte {
	base := "SELECT 1 AS one -- "
	q := encodeAll(t, &pgproto3.Query{String: base + strings.Repeat("x", n-6-len(base))})
	if len(q) != n {
		t.Fatalf("padded query of %d bytes, want %d", len(q), n)
	}
	return q
}

// TestLoop_TLSCloseNotifyAtPark: the client sends, in one TLS record, a
// Query that ends exactly at the frame reader's 8 KiB buffer and the start
// of another message, then close_notify (tls.Conn.CloseWrite: the TCP
// connection stays open). The goroutine answers the Query and ends the
// session at the close_notify; the loop, which finds the partial message
// and the close_notify in the tls.Conn when the session parks (after the
// Query, which the goroutine read, as the one before was not forwarded), must not
// wait for the rest of a message that can never come.
func TestLoop_TLSCloseNotifyAtPark(t *testing.T) {
	noDRS := func(c *tls.Config) { c.DynamicRecordSizingDisabled = true }
	on, off, hon, hoff, _ := tlsPair(t, noDRS)
	var got [2][]byte
	for i, w := range []*wireClient{on, off} {
		h := []*holdConn{hon, hoff}[i]
		// A session statement: the goroutine does not park after it, so
		// it reads the next record itself.
		w.roundTrip(t, simpleQ("SHOW search_path")...)
		msg := append(paddedQuery(t, 8192), 'Q', 0, 0)
		h.mu.Lock()
		h.hold = true
		h.mu.Unlock()
		if _, err := w.nc.Write(msg); err != nil {
			t.Fatal(err)
		}
		if err := w.nc.(*tls.Conn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if err := h.release(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got[i] = readAllTimeout(w, 5*time.Second)
		if time.Since(start) > 4*time.Second {
			t.Errorf("client %d (loop %v): the session did not end after close_notify: got %q", i, i == 0, got[i])
		}
	}
	if !bytes.Equal(got[0], got[1]) {
		t.Errorf("loop %q\ngoroutine %q", got[0], got[1])
	}
}

// TestLoop_TLSRecordShapes: the same bytes from the loop as from the
// goroutine for pipelined messages in TLS records of every shape: one
// record of 16 KiB carrying a Query that fills the frame reader's buffer
// and a whole second one (nothing follows), many one-byte records in one
// write, a record with two messages and part of a third, completed later;
// over TLS 1.2 and 1.3.
func TestLoop_TLSRecordShapes(t *testing.T) {
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(fmt.Sprintf("%x", v), func(t *testing.T) {
			tune := func(c *tls.Config) {
				c.DynamicRecordSizingDisabled = true
				c.MinVersion, c.MaxVersion = v, v
			}
			on, off, hon, hoff, _ := tlsPair(t, tune)
			q1 := simpleQ("SELECT 1 AS one")
			ext := extQ("", "SELECT $1::int + 1 AS n", true, [][]byte{[]byte("41")}, nil)
			type shape struct {
				name   string
				pieces [][]byte // each written as its own TLS Write (record), held and released together
				later  []byte   // written after a pause
				want   int
			}
			big := append(paddedQuery(t, 8192), paddedQuery(t, 8000)...)
			pipe := encodeAll(t, append(append(append([]pgproto3.FrontendMessage{}, q1...), ext...), q1...)...)
			var bytewise [][]byte
			for i := range pipe {
				bytewise = append(bytewise, pipe[i:i+1])
			}
			shapes := []shape{
				{"16K record, 8K query first", [][]byte{big}, nil, 2},
				{"one-byte records", bytewise, nil, 3},
				{"two and a part", [][]byte{pipe[:len(pipe)-9]}, pipe[len(pipe)-9:], 3},
				{"header split across records", [][]byte{pipe[:2], pipe[2:7], pipe[7:30]}, pipe[30:], 3},
			}
			for round := 0; round < 3; round++ {
				for _, sh := range shapes {
					var got [2][]byte
					for i, w := range []*wireClient{on, off} {
						h := []*holdConn{hon, hoff}[i]
						w.roundTrip(t, q1...)
						h.mu.Lock()
						h.hold = true
						h.mu.Unlock()
						for _, p := range sh.pieces {
							if _, err := w.nc.Write(p); err != nil {
								t.Fatal(err)
							}
						}
						if err := h.release(); err != nil {
							t.Fatal(err)
						}
						if sh.later != nil {
							time.Sleep(20 * time.Millisecond)
							if _, err := w.nc.Write(sh.later); err != nil {
								t.Fatal(err)
							}
						}
						got[i] = w.readReplies(t, sh.want)
					}
					if !bytes.Equal(got[0], got[1]) {
						t.Errorf("round %d, %s:\n loop      %q\n goroutine %q", round, sh.name, got[0], got[1])
					}
				}
			}
		})
	}
}

// TestLoop_TLSGarbageWhileParked: garbage ciphertext, a bad record header
// or an alert from a parked TLS session ends it (an alert to the client,
// the socket closed), with or without a statement running.
func TestLoop_TLSGarbageWhileParked(t *testing.T) {
	cases := []struct {
		name    string
		running bool
		bytes   []byte
	}{
		{"bad MAC", false, append([]byte{23, 3, 3, 0, 40}, bytes.Repeat([]byte{0xAA}, 40)...)},
		{"bad MAC while running", true, append([]byte{23, 3, 3, 0, 40}, bytes.Repeat([]byte{0xAA}, 40)...)},
		{"bad type", false, []byte{99, 3, 3, 0, 1, 0}},
		{"oversized record", false, []byte{23, 3, 3, 0xff, 0xff}},
		{"plaintext alert", false, []byte{21, 3, 3, 0, 2, 2, 40}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			on, off, _, _, ts := tlsPair(t, nil)
			var got [2][]byte
			for i, w := range []*wireClient{on, off} {
				raw := w.nc.(*tls.Conn).NetConn()
				if tc.running {
					if _, err := w.nc.Write(encodeAll(t, simpleQ("SELECT count(*) FROM generate_series(1, 2000000) g")...)); err != nil {
						t.Fatal(err)
					}
					time.Sleep(30 * time.Millisecond)
				}
				if _, err := raw.Write(tc.bytes); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				got[i] = readAllTimeout(w, 8*time.Second)
				if time.Since(start) > 7*time.Second {
					t.Errorf("client %d: the session did not end: %q", i, got[i])
				}
			}
			t.Logf("loop %q goroutine %q", got[0], got[1])
			waitActive(t, ts, 0, "after the bad input")
		})
	}
}

// TestLoop_TLSSlowReader: a TLS client that pipelines many statements
// with sizeable results and reads nothing until it has sent them all gets
// every reply, the same as from the goroutine.
func TestLoop_TLSSlowReader(t *testing.T) {
	on, off, _, _, _ := tlsPair(t, nil)
	var msgs []pgproto3.FrontendMessage
	for i := 0; i < 400; i++ {
		msgs = append(msgs, &pgproto3.Query{String: "SELECT g, repeat('y', 50) FROM generate_series(1, 200) g"})
	}
	out := encodeAll(t, msgs...)
	var got [2][]byte
	for i, w := range []*wireClient{on, off} {
		errc := make(chan error, 1)
		go func() { _, err := w.nc.Write(out); errc <- err }()
		time.Sleep(300 * time.Millisecond) // the socket buffers fill
		got[i] = w.readReplies(t, len(msgs))
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got[0], got[1]) {
		t.Fatalf("replies differ: %d vs %d bytes", len(got[0]), len(got[1]))
	}
}

// TestLoop_TLSLeaks: many TLS sessions that park and unpark leave no
// descriptor or goroutine behind.
func TestLoop_TLSLeaks(t *testing.T) {
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.TLS = selfSigned(t) }})
	pool := ts.srv.shadowPool(ts.srv.cfg.Datasets["hospital"])
	w, _ := tlsWireClient(t, ts, nil)
	w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	w.nc.Close()
	time.Sleep(200 * time.Millisecond)
	fds0, gs0 := openFDs(t), runtime.NumGoroutine()
	open0 := pool.Stats().Open
	for round := 0; round < 20; round++ {
		w, _ := tlsWireClient(t, ts, nil)
		for i := 0; i < 5; i++ {
			w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
			w.roundTrip(t, simpleQ("SHOW search_path")...) // back to the goroutine
		}
		switch round % 3 {
		case 0:
			_ = w.nc.(*tls.Conn).CloseWrite()
			_, _ = io.Copy(io.Discard, w.nc)
		case 1:
			_, _ = w.nc.Write(encodeAll(t, &pgproto3.Terminate{}))
		}
		w.nc.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(100 * time.Millisecond)
		st := pool.Stats()
		fds, gs := openFDs(t), runtime.NumGoroutine()
		if ts.srv.active.Load() == 0 && fds <= fds0+(st.Open-open0) && gs <= gs0+2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions, %d descriptors (%d before), %d goroutines (%d before)", ts.srv.active.Load(), fds, fds0, gs, gs0)
		}
	}
}

// TestLoop_TLSBadRecordAfterQuery: a Query and a record that fails its MAC
// arrive in one write. The goroutine answers the Query, then meets the bad
// record (TLS sends its alert); the loop must do the same in that order,
// not read the bad record first (its alert would break the TLS session
// before the reply).
func TestLoop_TLSBadRecordAfterQuery(t *testing.T) {
	on, off, hon, hoff, _ := tlsPair(t, nil)
	var got [2][]byte
	for i, pair := range []struct {
		w *wireClient
		h *holdConn
	}{{on, hon}, {off, hoff}} {
		pair.h.mu.Lock()
		pair.h.hold = true
		pair.h.mu.Unlock()
		if _, err := pair.w.nc.Write(encodeAll(t, simpleQ("SELECT 1 AS one")...)); err != nil {
			t.Fatal(err)
		}
		pair.h.mu.Lock()
		pair.h.buf = append(pair.h.buf, append([]byte{23, 3, 3, 0, 40}, bytes.Repeat([]byte{0xAA}, 40)...)...)
		pair.h.mu.Unlock()
		if err := pair.h.release(); err != nil {
			t.Fatal(err)
		}
		got[i] = readAllTimeout(pair.w, 8*time.Second)
	}
	if !bytes.Contains(got[1], []byte{'Z', 0, 0, 0, 5, 'I'}) {
		t.Fatalf("without the loop the Query got no reply: %q", got[1])
	}
	if !bytes.Equal(got[0], got[1]) {
		t.Fatalf("a Query then a bad record:\n loop      %q\n goroutine %q", got[0], got[1])
	}
}
