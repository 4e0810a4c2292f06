//go:build linux

package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math/rand"
	"net"
	"os"
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
		t.Fatal("the session is not parked: the loop did not answer its SELECT 1")
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

// encodeAll encodes frontend messages back to back.
func encodeAll(t *testing.T, msgs ...pgproto3.FrontendMessage) []byte {
	t.Helper()
	var out []byte
	for _, m := range msgs {
		var err error
		if out, err = m.Encode(out); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// countReady counts the ReadyForQuery a byte stream of messages should
// get: one per Query and Sync.
func countReady(b []byte) int {
	n := 0
	for len(b) >= 5 {
		size := int(binary.BigEndian.Uint32(b[1:]))
		if b[0] == 'Q' || b[0] == 'S' {
			n++
		}
		if size < 4 || 1+size > len(b) {
			break
		}
		b = b[1+size:]
	}
	return n
}

// TestLoop_SplitPipelines: pipelined mixtures of messages, written in
// pieces with pauses (so the loop sees every kind of partial message), get
// the same bytes with and without the loop, and the sessions stay in step.
func TestLoop_SplitPipelines(t *testing.T) {
	on, off, _ := parkedClients(t, nil)
	raw := func(typ byte, body ...byte) []byte {
		b := []byte{typ, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
		return append(b, body...)
	}
	cases := map[string][]byte{
		"query, ext, query":     encodeAll(t, append(append(simpleQ("SELECT 1 AS one"), extQ("", "SELECT 2 AS two", true, nil, nil)...), &pgproto3.Query{String: "SELECT 1 AS one"})...),
		"ext then flush":        encodeAll(t, &pgproto3.Parse{Query: "SELECT 1 AS one"}, &pgproto3.Bind{}, &pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Flush{}, &pgproto3.Sync{}),
		"copydata between":      append(encodeAll(t, simpleQ("SELECT 1 AS one")...), append(raw('d', 'x', 'y'), encodeAll(t, simpleQ("SELECT 1 AS one")...)...)...),
		"bind wrong count":      encodeAll(t, &pgproto3.Parse{Query: "SELECT 1 AS one"}, &pgproto3.Bind{Parameters: [][]byte{[]byte("1")}}, &pgproto3.Execute{}, &pgproto3.Sync{}),
		"sync with a body":      append(encodeAll(t, &pgproto3.Parse{Query: "SELECT 1 AS one"}, &pgproto3.Bind{}, &pgproto3.Execute{}), append(raw('S', 0), encodeAll(t, &pgproto3.Sync{})...)...),
		"query without nul":     append(raw('Q', 'S', 'E', 'L'), encodeAll(t, simpleQ("SELECT 1 AS one")...)...),
		"query, two nuls":       append(raw('Q', 'x', 0, 0), encodeAll(t, simpleQ("SELECT 1 AS one")...)...),
		"execute row limit":     encodeAll(t, &pgproto3.Parse{Query: "SELECT 1 AS one"}, &pgproto3.Bind{}, &pgproto3.Execute{MaxRows: 1}, &pgproto3.Sync{}),
		"bad result format":     encodeAll(t, &pgproto3.Parse{Query: "SELECT 1 AS one"}, &pgproto3.Bind{ResultFormatCodes: []int16{7}}, &pgproto3.Execute{}, &pgproto3.Sync{}),
		"bad param format":      encodeAll(t, &pgproto3.Parse{Query: "SELECT $1::int AS n"}, &pgproto3.Bind{ParameterFormatCodes: []int16{5}, Parameters: [][]byte{[]byte("1")}}, &pgproto3.Execute{}, &pgproto3.Sync{}),
		"binary param":          encodeAll(t, &pgproto3.Parse{Query: "SELECT $1::int4 AS n", ParameterOIDs: []uint32{23}}, &pgproto3.Bind{ParameterFormatCodes: []int16{1}, Parameters: [][]byte{{0, 0, 0, 9}}}, &pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{}),
		"short binary param":    encodeAll(t, &pgproto3.Parse{Query: "SELECT $1::int4 AS n", ParameterOIDs: []uint32{23}}, &pgproto3.Bind{ParameterFormatCodes: []int16{1}, Parameters: [][]byte{{0, 9}}}, &pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{}),
		"null param":            encodeAll(t, &pgproto3.Parse{Query: "SELECT $1::int4 AS n"}, &pgproto3.Bind{Parameters: [][]byte{nil}}, &pgproto3.Execute{}, &pgproto3.Sync{}),
		"describe other portal": encodeAll(t, &pgproto3.Parse{Query: "SELECT 1 AS one"}, &pgproto3.Bind{DestinationPortal: "p"}, &pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{Portal: "p"}, &pgproto3.Sync{}),
		"named portal":          encodeAll(t, &pgproto3.Parse{Query: "SELECT 1 AS one"}, &pgproto3.Bind{DestinationPortal: "p"}, &pgproto3.Describe{ObjectType: 'P', Name: "p"}, &pgproto3.Execute{Portal: "p"}, &pgproto3.Sync{}),
		"parse named twice":     encodeAll(t, &pgproto3.Parse{Name: "n1", Query: "SELECT 1 AS one"}, &pgproto3.Bind{PreparedStatement: "n1"}, &pgproto3.Execute{}, &pgproto3.Sync{}, &pgproto3.Parse{Name: "n1", Query: "SELECT 1 AS one"}, &pgproto3.Bind{PreparedStatement: "n1"}, &pgproto3.Execute{}, &pgproto3.Sync{}),
		"parse, bind other":     encodeAll(t, &pgproto3.Parse{Query: "SELECT 1 AS one"}, &pgproto3.Bind{PreparedStatement: "nope"}, &pgproto3.Execute{}, &pgproto3.Sync{}),
		"dp in pipeline":        encodeAll(t, &pgproto3.Query{String: "SELECT 1 AS one"}, &pgproto3.Query{String: "SELECT COUNT(*) FROM visits"}, &pgproto3.Query{String: "SELECT 1 AS one"}),
		"begin in pipeline":     encodeAll(t, &pgproto3.Query{String: "SELECT 1 AS one"}, &pgproto3.Query{String: "BEGIN"}, &pgproto3.Query{String: "SELECT 1 AS one"}, &pgproto3.Query{String: "COMMIT"}),
		"function call":         append(raw('F', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0), encodeAll(t, simpleQ("SELECT 1 AS one")...)...),
	}
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sortStrings(names)
	for _, name := range names {
		msgs := cases[name]
		for _, piece := range []int{len(msgs), 1, 3, 7} {
			var replies [2][]byte
			for i, w := range []*wireClient{on, off} {
				w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
				for off := 0; off < len(msgs); off += piece {
					if _, err := w.nc.Write(msgs[off:min(off+piece, len(msgs))]); err != nil {
						t.Fatal(err)
					}
					if piece < len(msgs) && off%(piece*8) == 0 {
						time.Sleep(2 * time.Millisecond)
					}
				}
				replies[i] = w.readReplies(t, countReady(msgs))
			}
			if !bytes.Equal(replies[0], replies[1]) {
				t.Errorf("%s, pieces of %d:\n loop      %q\n goroutine %q", name, piece, replies[0], replies[1])
			}
		}
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestLoop_CancelStormAndLeaks: cancel requests at random points of short
// statements the loop runs, clients that go away mid-statement, and many
// park cycles leave no descriptor, goroutine or pool slot behind, and
// every reply is a success or 57014 with the session in step.
func TestLoop_CancelStormAndLeaks(t *testing.T) {
	ts := startShadowServer(t)
	pool := ts.srv.shadowPool(ts.srv.cfg.Datasets["hospital"])
	// Warm up: the pool's connections and the loop exist.
	warm := ts.connect(t)
	for i := 0; i < 3; i++ {
		if _, err := execAll(t, warm, "SELECT 1 AS one"); err != nil {
			t.Fatal(err)
		}
	}
	warm.Close(context.Background())
	time.Sleep(200 * time.Millisecond)
	fds0, gs0 := openFDs(t), runtime.NumGoroutine()
	open0 := pool.Stats().Open

	rng := rand.New(rand.NewSource(1))
	ran := theLoop.ran.Load()
	for round := 0; round < 30; round++ {
		pc := ts.connect(t)
		for i := 0; i < 3; i++ {
			if _, err := execAll(t, pc, "SELECT 1 AS one"); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 5; i++ {
			done := make(chan error, 1)
			go func() { _, err := execAll(t, pc, "SELECT count(*) FROM generate_series(1, 300000) g"); done <- err }()
			time.Sleep(time.Duration(rng.Intn(25000)) * time.Microsecond)
			_ = pc.CancelRequest(context.Background())
			if err := <-done; err != nil && sqlstate(err) != "57014" {
				t.Fatalf("round %d: %v", round, err)
			}
			res, err := execAll(t, pc, "SELECT 7 AS seven")
			if err != nil || rows(res[0])[0][0] != "7" {
				t.Fatalf("round %d: after a cancel: %v", round, err)
			}
		}
		if round%3 == 0 {
			// Go away in the middle of a statement.
			hj, err := pc.Hijack()
			if err != nil {
				t.Fatal(err)
			}
			out, _ := (&pgproto3.Query{String: "SELECT count(*) FROM generate_series(1, 3000000) g"}).Encode(nil)
			_, _ = hj.Conn.Write(out)
			time.Sleep(10 * time.Millisecond)
			if round%2 == 0 {
				_ = hj.Conn.(*net.TCPConn).SetLinger(0)
			}
			hj.Conn.Close()
		} else {
			pc.Close(context.Background())
		}
	}
	if theLoop.ran.Load()-ran < 30 {
		t.Fatalf("the loop answered only %d statements", theLoop.ran.Load()-ran)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(100 * time.Millisecond)
		st := pool.Stats()
		fds, gs := openFDs(t), runtime.NumGoroutine()
		if ts.srv.active.Load() == 0 && fds <= fds0+(st.Open-open0) && gs <= gs0+2 && st.Open == st.Idle {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the storm: %d sessions, %d descriptors (%d before), %d goroutines (%d before), pool %+v (open %d before)",
				ts.srv.active.Load(), fds, fds0, gs, gs0, st, open0)
		}
	}
}

// TestLoop_UnflushedReplyBeforePark: a message answered without a flush
// (Parse, Close or Describe of a statement, whose replies wait for Sync or
// Flush) leaves its reply in the session's write buffer; a statement the
// loop then answered went out before it, out of order.
func TestLoop_UnflushedReplyBeforePark(t *testing.T) {
	on, off, _ := parkedClients(t, nil)
	steps := [][][]byte{
		{encodeAll(t, &pgproto3.Parse{Name: "s9", Query: "SELECT 1 AS one"}), encodeAll(t, &pgproto3.Bind{PreparedStatement: "s9"}, &pgproto3.Execute{}, &pgproto3.Sync{})},
		{encodeAll(t, &pgproto3.Close{ObjectType: 'S', Name: "s9"}), encodeAll(t, simpleQ("SELECT 1 AS one")...)},
		{encodeAll(t, &pgproto3.Parse{Name: "s8", Query: "SELECT 1 AS one"}, &pgproto3.Sync{}), encodeAll(t, &pgproto3.Describe{ObjectType: 'S', Name: "s8"}), encodeAll(t, simpleQ("SELECT 1 AS one")...)},
	}
	for k, parts := range steps {
		var replies [2][]byte
		for i, w := range []*wireClient{on, off} {
			w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
			w.roundTrip(t, simpleQ("SELECT 1 AS one")...)
			want := 0
			for _, p := range parts {
				want += countReady(p)
				if _, err := w.nc.Write(p); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			replies[i] = w.readReplies(t, want)
		}
		if !bytes.Equal(replies[0], replies[1]) {
			t.Errorf("step %d:\n loop      %q\n goroutine %q", k, replies[0], replies[1])
		}
	}
}

// TestLoop_WalkSplitReply: a shadow reply read in two pieces, split at any
// byte (inside a message's 5-byte header too), is a plain success, not a
// failed or broken reply.
func TestLoop_WalkSplitReply(t *testing.T) {
	var reply []byte
	for _, m := range []pgproto3.BackendMessage{
		&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("one"), DataTypeOID: 23, DataTypeSize: 4, TypeModifier: -1}}},
		&pgproto3.DataRow{Values: [][]byte{[]byte("1")}},
		&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")},
		&pgproto3.ReadyForQuery{TxStatus: 'I'},
	} {
		reply, _ = m.Encode(reply)
	}
	body := reply[:len(reply)-6] // without ReadyForQuery
	for k := 1; k < len(reply); k++ {
		p := &parkedSess{c: &conn{srv: &Server{}}}
		p.rb = append(make([]byte, 0, 64), reply[:k]...)
		if r := p.walk(); r != walkMore || p.failed {
			t.Fatalf("split at %d: first piece: %v (failed %v)", k, r, p.failed)
		}
		p.rb = append(p.rb, reply[k:]...)
		if r := p.walk(); r != walkDone || p.failed || p.zStatus != 'I' {
			t.Fatalf("split at %d: %v (failed %v)", k, r, p.failed)
		}
		if !bytes.Equal(p.out, body) {
			t.Fatalf("split at %d: out %q", k, p.out)
		}
	}
}
