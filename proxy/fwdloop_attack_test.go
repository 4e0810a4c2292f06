//go:build linux

package proxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// parkedClients returns a client of a server with the forwarding loop and
// one of a server without it, both on the same shadow, each parked (a
// forwarded statement answered, then another, so the loop holds them).
func parkedClients(t *testing.T, mutate func(*Config)) (on, off *wireClient, ts *testServer) {
	t.Helper()
	dsn := shadowDB(t)
	ts = startServer(t, serverOpts{shadowDSN: dsn, mutate: mutate})
	offSrv := startServer(t, serverOpts{shadowDSN: dsn, mutate: func(c *Config) {
		if mutate != nil {
			mutate(c)
		}
		c.ForwardLoop = false
	}})
	on, off = wireConnect(t, ts), wireConnect(t, offSrv)
	for _, w := range []*wireClient{on, off} {
		for i := 0; i < 2; i++ {
			w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
		}
	}
	return on, off, ts
}

// readAllTimeout reads whatever the proxy sends within d (until it closes
// the connection or d passes).
func readAllTimeout(w *wireClient, d time.Duration) []byte {
	_ = w.nc.SetReadDeadline(time.Now().Add(d))
	got, _ := io.ReadAll(w.nc)
	return got
}

// TestLoop_LargeMessageWhileParked: a parked session that sends one
// message larger than the loop's input bound (256 KiB) but within
// MaxMessage gets its answer, the same as without the loop; the loop must
// not stop reading the client while no statement runs.
func TestLoop_LargeMessageWhileParked(t *testing.T) {
	on, off, _ := parkedClients(t, nil)
	sql := "SELECT length('" + strings.Repeat("x", 300<<10) + "') AS n"
	var replies [2][]byte
	for i, w := range []*wireClient{on, off} {
		out, _ := (&pgproto3.Query{String: sql}).Encode(nil)
		if _, err := w.nc.Write(out); err != nil {
			t.Fatal(err)
		}
		done := make(chan []byte, 1)
		go func() {
			defer close(done)
			_ = w.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			hdr := make([]byte, 5)
			var got []byte
			for {
				if _, err := io.ReadFull(w.nc, hdr); err != nil {
					done <- got
					return
				}
				body := make([]byte, int(binary.BigEndian.Uint32(hdr[1:]))-4)
				if _, err := io.ReadFull(w.nc, body); err != nil {
					done <- got
					return
				}
				got = append(append(got, hdr...), body...)
				if hdr[0] == 'Z' {
					done <- got
					return
				}
			}
		}()
		replies[i] = <-done
	}
	if !bytes.HasSuffix(replies[1], []byte{'Z', 0, 0, 0, 5, 'I'}) {
		t.Fatalf("without the loop: %q", replies[1])
	}
	if !bytes.Equal(replies[0], replies[1]) {
		t.Fatalf("a 300 KiB Query while parked:\n loop      %q\n goroutine %q", replies[0], replies[1])
	}
	// And the session goes on.
	on.roundTrip(t, simpleQ("SELECT 1 AS one")...)
}

// TestLoop_OversizedLengthWhileParked: a header announcing a message over
// MaxMessage is refused at once (FATAL 08P01), as the goroutine does, not
// waited on until MaxMessage bytes have arrived.
func TestLoop_OversizedLengthWhileParked(t *testing.T) {
	on, off, _ := parkedClients(t, func(c *Config) { c.MaxMessage = 64 << 10 })
	var replies [2][]byte
	for i, w := range []*wireClient{on, off} {
		hdr := []byte{'Q', 0, 0, 0, 0}
		binary.BigEndian.PutUint32(hdr[1:], 1<<20)
		if _, err := w.nc.Write(hdr); err != nil {
			t.Fatal(err)
		}
		replies[i] = readAllTimeout(w, 2*time.Second)
	}
	if !bytes.Contains(replies[1], []byte("08P01")) {
		t.Fatalf("without the loop: %q", replies[1])
	}
	if !bytes.Equal(replies[0], replies[1]) {
		t.Fatalf("an oversized length while parked:\n loop      %q\n goroutine %q", replies[0], replies[1])
	}
}

// procCPU is the process's user+system CPU time.
func procCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestLoop_ClientResetDuringStatement: a client that resets its
// connection while the loop runs its (long) statement must not make the
// loop spin (an EPOLLHUP reported at every wait) until the statement ends.
func TestLoop_ClientResetDuringStatement(t *testing.T) {
	ts := startShadowServer(t)
	w := wireConnect(t, ts)
	for i := 0; i < 2; i++ {
		w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	}
	// Classify (and cache) the slow text without running it.
	w.roundTrip(t, &pgproto3.Parse{Name: "slow", Query: slowCatalog}, &pgproto3.Sync{})
	w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	ran := theLoop.ran.Load()
	w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	if theLoop.ran.Load() == ran {
		t.Skip("the session is not parked")
	}
	out, _ := (&pgproto3.Query{String: slowCatalog}).Encode(nil)
	if _, err := w.nc.Write(out); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the loop runs it
	tc := w.nc.(*net.TCPConn)
	_ = tc.SetLinger(0)
	_ = tc.Close() // RST
	time.Sleep(100 * time.Millisecond)
	before, start := procCPU(t), time.Now()
	time.Sleep(time.Second)
	used, wall := procCPU(t)-before, time.Since(start)
	if used > wall/2 {
		t.Fatalf("the process used %v of CPU in %v after a client reset during a statement (the loop spins)", used, wall)
	}
}

// skipReply reads one reply up to ReadyForQuery without keeping it; it
// returns the bytes read.
func skipReply(t *testing.T, br *bufio.Reader) int {
	t.Helper()
	n := 0
	hdr := make([]byte, 5)
	for {
		if _, err := io.ReadFull(br, hdr); err != nil {
			t.Fatalf("reading the reply: %v (after %d bytes)", err, n)
		}
		size := int(binary.BigEndian.Uint32(hdr[1:])) - 4
		if _, err := br.Discard(size); err != nil {
			t.Fatal(err)
		}
		n += 5 + size
		if hdr[0] == 'Z' {
			return n
		}
	}
}

// bigReplyAlloc sends big as a simple Query and reads its reply without
// keeping it; it returns the bytes the process allocated meanwhile.
func bigReplyAlloc(t *testing.T, w *wireClient, big string) uint64 {
	t.Helper()
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	out, _ := (&pgproto3.Query{String: big}).Encode(nil)
	if _, err := w.nc.Write(out); err != nil {
		t.Fatal(err)
	}
	_ = w.nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	skipReply(t, bufio.NewReaderSize(w.nc, 64<<10))
	runtime.ReadMemStats(&ms1)
	return ms1.TotalAlloc - ms0.TotalAlloc
}

// TestLoop_LargeResultNotBuffered: a parked session's statement with a
// large result (which the goroutine streams) must not make the loop read
// and buffer the whole result before handing it back: the loop's buffer
// grew to half the result (32 MiB for 63 MB) and the shadow ran it in
// full twice.
func TestLoop_LargeResultNotBuffered(t *testing.T) {
	big := "SELECT g, 'abcdefghij' AS s FROM generate_series(1, 2000000) g"
	on, off, _ := parkedClients(t, nil)
	var alloc [2]uint64
	for i, w := range []*wireClient{on, off} {
		w.roundTrip(t, &pgproto3.Parse{Name: "big", Query: big}, &pgproto3.Sync{})
		w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
		w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
		back := theLoop.handedBack.Load()
		alloc[i] = bigReplyAlloc(t, w, big)
		if i == 0 && theLoop.handedBack.Load() == back {
			t.Fatal("the loop did not hold the session")
		}
		w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
	}
	if alloc[0] > alloc[1]+16<<20 {
		t.Fatalf("a 63 MB catalog result allocated %d MB with the loop, %d MB without", alloc[0]>>20, alloc[1]>>20)
	}
}
