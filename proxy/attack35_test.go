package proxy

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Issue 35's attack round: each finding kept as the test of its fix.

// TestAttack35_UnreadCatalogResultHoldsShadowForever (medium): the relay
// of a catalog statement in the simple protocol writes the shadow's rows
// to the client as they come (relay.go relayReply, be.Flush) with no write
// deadline on the client's socket. A client that sends one large catalog
// statement and never reads blocks its session in that write; the shadow
// backend, whose reply the proxy stops reading, blocks in its own send,
// where PostgreSQL does not act on statement_timeout; and the proxy's read
// deadline on the shadow socket never fires because the proxy is not
// reading. The shadow connection, and the analyst's share of the pool, are
// held until the client disconnects: forever, not "at most
// catalog_statement_timeout per statement" (SECURITY.md G8, gap 8). With
// the default share of a quarter of the pool, four colluding analysts
// take every catalog connection of the dataset with one statement per
// connection and no further traffic. The fix: a write deadline on the
// client's socket while a statement's reply is relayed (the catalog
// timeout and its grace), after which the session is closed and the shadow
// connection discarded.
func TestAttack35_UnreadCatalogResultHoldsShadowForever(t *testing.T) {
	// About 100 MB of rows, which no socket buffer holds; never read.
	unreadHoldsShadow(t, 500*time.Millisecond, "SELECT repeat('x', 1000) FROM generate_series(1, 100000)")
}

// unreadHoldsShadow sends query in a session that then reads nothing, and
// checks that the same analyst's other session gets a catalog connection
// once the catalog timeout and its grace are past (the analyst's share of
// the pool is one connection).
func unreadHoldsShadow(t *testing.T, stmtTimeout time.Duration, query string) {
	t.Helper()
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) {
		c.ShadowMaxConns = 2
		c.ShadowMaxConnsPerAnalyst = 1
		c.CatalogStatementTimeout = stmtTimeout
		c.ShadowAcquireTimeout = 300 * time.Millisecond
	}})
	fe, _ := ts.rawSession(t)
	fe.Send(&pgproto3.Query{String: query})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	// Well past the catalog statement_timeout and the proxy's own grace
	// (catalogDeadlineGrace) on it.
	wait := stmtTimeout + catalogDeadlineGrace + 3*time.Second
	time.Sleep(wait)
	other := ts.connect(t) // alice's second session
	_, err := execAll(t, other, "SELECT 1")
	t.Logf("shadow pool: %+v", ts.srv.shadowPool(ts.srv.cfg.Datasets["hospital"]).Stats())
	if err != nil {
		t.Errorf("alice's catalog statement, %v after her other session's unread %q began: %v; the unread statement still holds her share of the shadow pool (want it ended at catalog_statement_timeout + %v)",
			wait, query, err, catalogDeadlineGrace)
	}
}

// TestAttack35_PlanCacheSharedAcrossAnalysts (low): the plan cache
// (plancache.go) is keyed by policy, options and text, not by analyst, and
// planning runs before admission and before the time slot's padding starts
// (paced's start). So alice can learn whether another analyst asked a
// statement text since the cache was last cleared: a text bob planned is
// answered (or EXPLAINed, or refused after planning) without its planning
// time, one probe per guess (the probe itself then fills the entry). The
// answer cache names the analyst for this reason (release.cacheKey); the
// plan cache does not. Any analyst can also clear every analyst's plans
// with 1,024 distinct statements (clear when full). The fix: the analyst
// in planKey (and a per-analyst bound, or an LRU that one analyst cannot
// flush for the others).
func TestAttack35_PlanCacheSharedAcrossAnalysts(t *testing.T) {
	var mu sync.Mutex
	planned := map[string]int{} // statement text -> rewrites
	ts := startServer(t, serverOpts{router: func(r *router) {
		inner := r.rewrite
		r.rewrite = func(ds *policy.Dataset, stmt string, opts rewrite.Options) (*rewrite.Plan, error) {
			mu.Lock()
			planned[stmt]++
			mu.Unlock()
			return inner(ds, stmt, opts)
		}
	}})
	const q = "SELECT department, COUNT(*), SUM(cost) FROM visits WHERE diagnosis IN ('J45', 'E11', 'I10') AND age BETWEEN 30 AND 60 GROUP BY department"
	bob := ts.connectAs(t, "bob", "bob-secret", "hospital")
	if _, err := execAll(t, bob, q); err != nil {
		t.Fatalf("bob: %v", err)
	}
	alice := ts.connect(t)
	start := time.Now()
	if _, err := execAll(t, alice, "EXPLAIN "+q); err != nil {
		t.Fatalf("alice: %v", err)
	}
	t.Logf("alice's EXPLAIN of bob's statement: %v", time.Since(start))
	start = time.Now()
	if _, err := execAll(t, alice, "EXPLAIN "+q+" "); err != nil {
		t.Fatalf("alice: %v", err)
	}
	t.Logf("alice's EXPLAIN of a statement nobody asked: %v", time.Since(start))
	mu.Lock()
	n := planned[q]
	mu.Unlock()
	if n < 2 {
		t.Errorf("bob's statement was planned %d time(s) for bob and alice: alice's statement used the plan bob's made, so its time tells her that bob (or someone) asked exactly this text; the plan cache must be per analyst", n)
	}
}

// TestAttack35_RefusedSettingShowsPreviousHolders (low): a shadow setting
// the proxy accepts but PostgreSQL refuses (search_path is checked by
// anyValue; PostgreSQL refuses a value with an unbalanced quote) makes
// Apply fail for that setting alone, and acquireShadow then runs the
// statement anyway on a connection that keeps the previous holder's value
// ("the proxy's own value stays authoritative"). So alice reads, with
// current_setting or current_schema(), the search_path of whichever
// analyst last used the connection (and her statement resolves names in
// that analyst's schemas). The fix: when Apply cannot set a value, reset
// that setting on the connection (set_config(name, NULL)) or discard the
// connection, and refuse the value at SET time as PostgreSQL does.
func TestAttack35_RefusedSettingShowsPreviousHolders(t *testing.T) {
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) {
		c.ShadowMaxConns = 1
		c.ShadowMaxConnsPerAnalyst = 1
	}})
	bob := ts.connectAs(t, "bob", "bob-secret", "hospital")
	res, err := execAll(t, bob, "SET search_path = other; SELECT current_setting('search_path')")
	if err != nil {
		t.Fatalf("bob: %v", err)
	}
	t.Logf("bob's search_path on the shadow: %v", rows(res[1]))
	alice := ts.connect(t)
	_, err = execAll(t, alice, `SET search_path = '"x'`)
	t.Logf("alice's SET: %v", err)
	res, err = execAll(t, alice, "SELECT current_setting('search_path')")
	if err != nil {
		t.Logf("alice's statement: %v", err)
		return
	}
	got := rows(res[0])[0][0]
	t.Logf("alice's statement sees search_path %q", got)
	if strings.Contains(got, "other") {
		t.Errorf("alice's catalog statement ran with bob's search_path %q: a setting PostgreSQL refused left the previous holder's value on the shared shadow connection", got)
	}
}

// TestAttack35_OneCatalogRowBuffersGigabyte (high): the relay reads each
// message of the shadow whole (framer with max maxShadowMessage = 1 GiB)
// and then copies it into the client's write buffer (rawOut.send), so one
// catalog row of n bytes costs the proxy about 2n of heap before a byte
// reaches the client; MaxBufferedResult bounds only portals' results. A
// catalog statement of a few dozen bytes, SELECT repeat('x', 500000000) ||
// repeat('x', 500000000) or two such columns, is a 1 GB DataRow: about
// 2 GB of the proxy's heap, from each of an analyst's share of shadow
// connections at once (a quarter of shadow_max_connections, 5 by default:
// 10 GB), before the proxy ends out of memory with every analyst's
// session. The shadow backend builds the value too (allowed functions
// spend memory, which catalog_statement_timeout does not bound). Here a
// 128 MB row with MaxBufferedResult 1 MiB. The fix: a bound on one
// shadow message well below 1 GiB (MaxBufferedResult, or the message
// limit) — 54000 and the connection discarded — or relaying a large
// DataRow in pieces without holding it whole; and a cap on the length of
// repeat/lpad/rpad/string_agg results on the catalog route.
func TestAttack35_OneCatalogRowBuffersGigabyte(t *testing.T) {
	const maxBuf = 1 << 20
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.MaxBufferedResult = maxBuf }})
	nc := ts.rawConn(t)
	const rowBytes = 128 << 20
	q := fmt.Sprintf("SELECT repeat('x', %d)", rowBytes)
	var reply string
	alloc := allocatedDuring(func() {
		if _, err := nc.Write(appendQuery(nil, q)); err != nil {
			t.Fatal(err)
		}
		reply = discardUntilReady(t, nc)
	})
	t.Logf("reply: %s; the proxy allocated %d MB for one %d MB catalog row", reply, alloc>>20, rowBytes>>20)
	if alloc > 32<<20 {
		t.Errorf("one catalog statement of %d bytes made the proxy allocate %d MB (a %d MB row read whole, then copied): one shadow message must be bounded (MaxBufferedResult %d MiB) or streamed",
			len(q), alloc>>20, rowBytes>>20, maxBuf>>20)
	}
}

// rawConn is an authenticated session's socket, for a client that reads
// replies without keeping them (the test runs in the proxy's process, so
// a pgproto3 client's buffers would count as the proxy's allocations).
func (ts *testServer) rawConn(t *testing.T) net.Conn {
	t.Helper()
	return ts.hijack(t).Conn
}

// discardUntilReady reads backend messages up to ReadyForQuery without
// keeping their bodies, and returns the message types seen (with the
// SQLSTATE of an ErrorResponse).
func discardUntilReady(t *testing.T, nc net.Conn) string {
	t.Helper()
	return readReply(t, nc, false)
}

// readReply reads backend messages up to ReadyForQuery (or, with atRow,
// up to a DataRow's header, leaving its body unread) without keeping
// their bodies, and returns the message types seen (with an error's
// SQLSTATE and message).
func readReply(t *testing.T, nc net.Conn, atRow bool) string {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	defer nc.SetReadDeadline(time.Time{})
	var seen strings.Builder
	hdr := make([]byte, 5)
	for {
		if _, err := io.ReadFull(nc, hdr); err != nil {
			t.Fatalf("read: %v (so far %s)", err, seen.String())
		}
		n := int64(binary.BigEndian.Uint32(hdr[1:])) - 4
		seen.WriteByte(hdr[0])
		switch {
		case hdr[0] == 'D' && atRow:
			return seen.String()
		case hdr[0] == 'E':
			body := make([]byte, n)
			if _, err := io.ReadFull(nc, body); err != nil {
				t.Fatal(err)
			}
			var e pgproto3.ErrorResponse
			if e.Decode(body) == nil {
				fmt.Fprintf(&seen, "(%s %s)", e.Code, e.Message)
			}
			continue
		}
		if _, err := io.CopyN(io.Discard, nc, n); err != nil {
			t.Fatal(err)
		}
		if hdr[0] == 'Z' {
			return seen.String()
		}
	}
}

// TestAttack35_UnauthenticatedSocketsTakeEverySession (medium; a network
// attacker, no credentials): Serve counts a connection against
// MaxConnections from accept, and a connection that sends nothing holds
// its place for the whole AuthTimeout (30 s by default). MaxConnections
// idle TCP connections, re-opened every AuthTimeout, shut every analyst
// out ("sorry, too many clients already"), while
// max_connections_per_analyst bounds only authenticated sessions. (A
// PostgreSQL server behaves the same way, but it keeps
// superuser_reserved_connections and its authentication_timeout is the
// only bound; the proxy is the only door to the data.) The fix: count
// unauthenticated connections apart, under a bound of their own (and per
// remote address), so that start-ups in progress cannot take authenticated
// analysts' places; or a short deadline for the first start-up packet.
func TestAttack35_UnauthenticatedSocketsTakeEverySession(t *testing.T) {
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.MaxConnections = 4 }})
	for i := 0; i < 4; i++ {
		nc, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
	}
	time.Sleep(100 * time.Millisecond) // accepted
	bob, err := pgconnConnect(t, ts.dsn("bob", "bob-secret", "hospital"))
	if err != nil {
		t.Fatalf("bob cannot connect while 4 unauthenticated sockets that sent nothing are open: %v", err)
	}
	if _, err := execAll(t, bob, "SHOW dp.epsilon"); err != nil {
		t.Fatalf("bob: %v", err)
	}
}

// TestAttack35_PipelinedExecutesBufferUnbounded (high): in the extended
// protocol the session writes to the client only at Sync, Flush or an
// error (needsFlush); until then every Execute's rows are appended to the
// pgproto3 Backend's write buffer, which nothing bounds. A client that
// sends Bind and Execute of a catalog portal again and again without Sync
// (30 bytes each, within the 1 MiB message limit however many) makes the
// proxy keep every result: each up to MaxBufferedResult (64 MiB by
// default), so one session holds as much of the proxy's heap as it sends
// Executes, before the proxy ends out of memory with every analyst's
// session. (Issue 33's held-rows budget counts suspended portals and
// cursors only.) Here 100 Executes of 0.9 MiB with MaxBufferedResult 1 MiB
// (90 MiB unbounded; 300 of them, 270 MiB, had taken over the reader's 60 s
// to read back under load).
// The fix: flush the write buffer when it passes a bound (as PostgreSQL's
// own 8 KiB send buffer does), under a write deadline, so that an unread
// client blocks its own session rather than growing the proxy's heap.
func TestAttack35_PipelinedExecutesBufferUnbounded(t *testing.T) {
	const maxBuf = 1 << 20
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.MaxBufferedResult = maxBuf }})
	nc := ts.rawConn(t)
	var out []byte
	var err error
	if out, err = (&pgproto3.Parse{Name: "big", Query: "SELECT repeat('x', 100) FROM generate_series(1, 8000)"}).Encode(out); err != nil {
		t.Fatal(err)
	}
	if out, err = (&pgproto3.Sync{}).Encode(out); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(out); err != nil {
		t.Fatal(err)
	}
	if got := discardUntilReady(t, nc); strings.Contains(got, "E") {
		t.Fatalf("Parse: %s", got)
	}
	before := heapAlloc()
	const executes = 100
	out = out[:0]
	for i := 0; i < executes; i++ {
		if out, err = (&pgproto3.Bind{PreparedStatement: "big"}).Encode(out); err != nil {
			t.Fatal(err)
		}
		if out, err = (&pgproto3.Execute{}).Encode(out); err != nil {
			t.Fatal(err)
		}
	}
	if out, err = (&pgproto3.Sync{}).Encode(out); err != nil {
		t.Fatal(err)
	}
	t.Logf("sending %d bytes: %d × Bind, Execute, then one Sync, and not reading", len(out), executes)
	if _, err := nc.Write(out); err != nil {
		t.Fatal(err)
	}
	// Wait until the session has run them (its heap stops growing).
	held, last := int64(0), int64(-1)
	for i := 0; i < 150 && held != last; i++ {
		time.Sleep(200 * time.Millisecond)
		last, held = held, heapAlloc()-before
	}
	t.Logf("proxy heap grew by %d MiB (MaxBufferedResult %d MiB)", held>>20, maxBuf>>20)
	reply := discardUntilReady(t, nc)
	t.Logf("reply: %d messages", len(reply))
	if held > 8*maxBuf {
		t.Errorf("one session's pipelined Executes hold %d MiB of the proxy's memory (MaxBufferedResult %d MiB): the write buffer is not bounded", held>>20, maxBuf>>20)
	}
}

// TestAttack35_CustomSettingsUnbounded (high): SET of an extension-style
// placeholder ("x.k1") is accepted with any value (isCustomSetting,
// session.set) and kept in the session's settings with no bound on their
// number or size. One analyst's session stores whatever it SETs: here
// 200 SETs of 512 KiB values (100 MiB of the proxy's heap); with
// max_connections_per_analyst sessions and no end but the proxy's memory.
// The fix: bound the custom settings of a session (their number and bytes,
// 54000 beyond), as checkPreparedRoom bounds prepared statements.
func TestAttack35_CustomSettingsUnbounded(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	val := strings.Repeat("v", 512<<10)
	before := heapAlloc()
	var refused error
	for i := 0; i < 200 && refused == nil; i++ {
		_, refused = execAll(t, pc, fmt.Sprintf("SET x.k%d = '%s'", i, val))
	}
	held := heapAlloc() - before
	t.Logf("refused: %v; proxy heap grew by %d MiB", refused, held>>20)
	if held > 32<<20 {
		t.Errorf("one session's custom settings hold %d MiB of the proxy's memory: their number and size are not bounded", held>>20)
	}
}

// TestAttack35_SavepointsCloneSettings (high): each SAVEPOINT clones the
// session's settings map (savepointStmt: maps.Clone of settings and
// txCommit) and nothing bounds the number of savepoints. With n custom
// settings (TestAttack35_CustomSettingsUnbounded) each SAVEPOINT of 12
// bytes costs O(n) of the proxy's heap: memory quadratic in the bytes
// sent. Here 10,000 small settings (one 190 KB Query) and 400 savepoints
// (one 5 KB Query) hold hundreds of MiB. The fix: bound the savepoints of
// a transaction (PostgreSQL's own cost is its backend's memory; the proxy's
// heap is every analyst's), and the settings (above); or keep a savepoint's
// undo log instead of a copy.
func TestAttack35_SavepointsCloneSettings(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	var sb strings.Builder
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&sb, "SET x.k%d = 1;", i)
	}
	if _, err := execAll(t, pc, sb.String()); err != nil {
		t.Logf("settings: %v", err)
	}
	before := heapAlloc()
	sp := "BEGIN;" + strings.Repeat("SAVEPOINT s;", 400)
	_, err := execAll(t, pc, sp)
	held := heapAlloc() - before
	t.Logf("%d-byte Query: %v; proxy heap grew by %d MiB", len(sp), err, held>>20)
	if held > 32<<20 {
		t.Errorf("one session's savepoints hold %d MiB of the proxy's memory after a %d-byte Query: savepoints (and the settings each one copies) are not bounded", held>>20, len(sp))
	}
}

// TestAttack35_CatalogNoticesBufferedUnbounded (high): the relay copies the
// shadow's NoticeResponses into the client's write buffer (relayReply,
// case 'N') without counting them toward relayFlushBytes, and in the
// extended protocol nothing is written before Sync anyway; allowed
// functions make the shadow send one NOTICE per call (to_tsquery of a stop
// word: "text-search query contains only stop words…"). So
// SELECT count(to_tsquery('english', left('the' || g, 3))) FROM
// generate_series(1, n) g
// makes the proxy hold n notices (about 150 bytes each) before its one row,
// bounded only by how many the shadow sends in catalog_statement_timeout
// (hundreds of MB per statement, from each connection of an analyst's
// share at once). Here 600,000 notices (a few seconds of the shadow). The fix: count notices toward the
// relay's flush (and the write-buffer bound of
// TestAttack35_PipelinedExecutesBufferUnbounded), or drop notices beyond a
// number per statement.
func TestAttack35_CatalogNoticesBufferedUnbounded(t *testing.T) {
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t)})
	nc := ts.rawConn(t)
	const n = 600000
	q := fmt.Sprintf("SELECT count(to_tsquery('english', left('the' || g, 3))) FROM generate_series(1, %d) g", n)
	var reply string
	peak := int64(0)
	alloc := allocatedDuring(func() {
		before := heapAlloc()
		if _, err := nc.Write(appendQuery(nil, q)); err != nil {
			t.Fatal(err)
		}
		// Read nothing until the shadow is done, as a client that reads
		// its replies at the end would.
		last := int64(-1)
		for i := 0; i < 100 && peak != last; i++ {
			time.Sleep(200 * time.Millisecond)
			last, peak = peak, heapAlloc()-before
		}
		reply = discardUntilReady(t, nc)
	})
	notices := strings.Count(reply, "N")
	t.Logf("%d notices; the proxy allocated %d MiB, held %d MiB at once", notices, alloc>>20, peak>>20)
	if peak > 32<<20 {
		t.Errorf("one catalog statement's notices held %d MiB of the proxy's memory: notices are not counted toward the relay's flush or any bound", peak>>20)
	}
}
