package proxy

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// sendMsgs writes messages to a raw session in one write.
func sendMsgs(t *testing.T, nc net.Conn, msgs ...pgproto3.FrontendMessage) {
	t.Helper()
	var b []byte
	for _, m := range msgs {
		var err error
		if b, err = m.Encode(b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestAttack38_PortalParameterSlotsUncharged (high; an authenticated
// analyst, no shadow or data server needed): the per-analyst memory
// account (memory.go, round 37) and checkPortalRoom count a portal's
// parameters by their bytes (len(v)), and nothing counts the slices the
// proxy allocates per parameter. A statement may declare 65,535
// parameters in its Parse (ParameterOIDs: 4 bytes each, 256 KiB), and a
// Bind of 65,535 NULL parameters (4 bytes each on the wire) with as many
// parameter and result format codes is about 512 KiB, under the 1 MiB
// message bound; the proxy then keeps params = make([][]byte, 65535)
// (1.5 MiB of slice headers) plus two []int16 of 128 KiB: about 1.8 MiB
// per portal, charged 0 bytes. A session keeps up to 1,024 portals inside
// a transaction block (maxPortals): about 1.8 GiB per session, times
// max_connections_per_analyst sessions (50 by default), whatever
// max_memory_per_analyst_mb says — the proxy is killed for lack of
// memory, ending every analyst's session (rule 1).
//
// The fix: charge what a portal really holds — e.g. 24 bytes per
// parameter slot plus 2 per format code on top of len(v) (and the same in
// checkPortalRoom and memoryHeld) — or bound the parameter count of a
// statement by the message size it was parsed from (PostgreSQL takes at
// most 65,535, but the proxy need not keep a slot per NULL parameter).
func TestAttack38_PortalParameterSlotsUncharged(t *testing.T) {
	const budget = 8 << 20
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.MaxMemoryPerAnalyst = budget }})
	nc := ts.rawConn(t)
	const n = 65535
	oids := make([]uint32, n)
	sendMsgs(t, nc, &pgproto3.Query{String: "BEGIN"})
	if r := discardUntilReady(t, nc); strings.Contains(r, "E") {
		t.Fatalf("BEGIN: %s", r)
	}
	sendMsgs(t, nc, &pgproto3.Parse{Name: "w", Query: "SELECT 1", ParameterOIDs: oids}, &pgproto3.Sync{})
	if r := discardUntilReady(t, nc); !strings.HasPrefix(r, "1") {
		t.Fatalf("Parse of a statement with %d parameters: %s", n, r)
	}
	params := make([][]byte, n) // all NULL: 4 bytes each on the wire
	formats := make([]int16, n)
	before := heapAlloc()
	const portals = 48
	bound := 0
	bound = keepUntilRefused(t, nc, portals, "2", func(i int) pgproto3.FrontendMessage {
		return &pgproto3.Bind{
			DestinationPortal: fmt.Sprint("p", i), PreparedStatement: "w",
			ParameterFormatCodes: formats, Parameters: params, ResultFormatCodes: formats,
		}
	})
	grew := heapAlloc() - before
	charged := ts.srv.memoryOf("alice")
	t.Logf("%d portals bound; heap grew by %d MiB; alice's account %d bytes (bound %d MiB)", bound, grew>>20, charged, budget>>20)
	if grew > 2*budget {
		t.Errorf("one session's %d portals of %d NULL parameters hold %d MiB of the proxy's heap, charged %d bytes to the analyst's account (bound %d MiB): the parameter slots are not counted (1,024 portals ≈ 1.8 GiB per session, × max_connections_per_analyst)",
			bound, n, grew>>20, charged, budget>>20)
	}
}

// TestAttack38_ParseParameterTypesUncharged (medium; an authenticated
// analyst): a named statement is charged len(text) (parse, checkMemory;
// checkPreparedRoom and stmtBytes likewise), but it also keeps the Parse's
// ParameterOIDs (parseOIDs: 4 bytes × up to 65,535 = 256 KiB, and as much
// again in desc.paramOIDs once described). "SELECT 1" with 65,535
// parameter types is charged 8 bytes for 256 KiB kept: a session's 2,048
// named statements (maxPreparedStatements) hold 512 MiB (1 GiB described)
// uncharged, × max_connections_per_analyst sessions. The fix: count
// 4 × len(ParameterOIDs) (and the description's) in the statement's size
// wherever its text is counted.
func TestAttack38_ParseParameterTypesUncharged(t *testing.T) {
	const budget = 4 << 20
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.MaxMemoryPerAnalyst = budget }})
	nc := ts.rawConn(t)
	oids := make([]uint32, 65535)
	before := heapAlloc()
	const stmts = 64
	kept := 0
	kept = keepUntilRefused(t, nc, stmts, "1", func(i int) pgproto3.FrontendMessage {
		return &pgproto3.Parse{Name: fmt.Sprint("s", i), Query: "SELECT 1", ParameterOIDs: oids}
	})
	grew := heapAlloc() - before
	t.Logf("%d statements kept; heap grew by %d MiB (bound %d MiB)", kept, grew>>20, budget>>20)
	if grew > 2*budget {
		t.Errorf("one session's %d named statements of 8 bytes of text with 65,535 parameter types hold %d MiB of the proxy's heap under a %d MiB per-analyst bound: parseOIDs are not counted",
			kept, grew>>20, budget>>20)
	}
}

// readUntilRow reads backend messages until a DataRow's header (then
// stops reading, the rest unread), an ErrorResponse or ReadyForQuery, and
// returns the message types seen (with an error's SQLSTATE).
func readUntilRow(t *testing.T, nc net.Conn) string {
	t.Helper()
	return readReply(t, nc, true)
}

// TestAttack38_UnreadExtendedResultUncharged (medium-high; an
// authenticated analyst): an Execute without a row limit (MaxRows 0, what
// every driver sends) of a catalog portal buffers the shadow's whole
// result (execShadowExtended, up to MaxBufferedResult, 64 MiB) in
// p.result before it sends a row, and neither checks nor charges the
// analyst's memory account (extended.go execute: only MaxRows > 0 does).
// SECURITY.md gap 8 says such a statement's own result "is freed when the
// statement ends", but the statement ends only when its rows are written:
// a client that does not read blocks the write (no deadline once the
// shadow connection is given back: out.go), and the session keeps its
// 64 MiB for as long as the socket stays open. Each of an analyst's 50
// sessions does so: 3.2 GiB per analyst held indefinitely, outside
// max_memory_per_analyst_mb; a few analysts end the proxy (rule 1). Here
// four sessions each keep 12 MiB under an 8 MiB per-analyst bound.
//
// The fix: charge the buffered result of every Execute (checkMemory
// before it runs, chargeMemoryOwn once its size is known, released when
// it is sent), or relay a row-unlimited catalog Execute as the simple
// protocol does (streamed under the shadow's write deadline) instead of
// buffering it; the same for COPY … TO STDOUT of a catalog query
// (materialize) and for FETCH ALL of a large cursor.
func TestAttack38_UnreadExtendedResultUncharged(t *testing.T) {
	const budget = 8 << 20
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) {
		c.MaxMemoryPerAnalyst = budget
		c.MaxBufferedResult = 16 << 20
	}})
	const sessions = 4
	const query = "SELECT repeat('x', 1048576) FROM generate_series(1, 12)" // 12 MiB
	before := heapAlloc()
	kept := 0
	for i := 0; i < sessions; i++ {
		nc := ts.rawConn(t)
		sendMsgs(t, nc, &pgproto3.Parse{Query: query}, &pgproto3.Bind{},
			&pgproto3.Execute{}, &pgproto3.Sync{})
		// The first row arriving means the proxy holds the whole result
		// (runPortal returns it before sendRows); then stop reading.
		r := readUntilRow(t, nc)
		if strings.HasSuffix(r, "D") {
			kept++
			continue
		}
		if !strings.Contains(r, "54000") {
			t.Fatalf("session %d: %s", i, r)
		}
	}
	grew := heapAlloc() - before
	charged := ts.srv.memoryOf("alice")
	t.Logf("%d sessions hold an unread 12 MiB result; heap grew by %d MiB; alice's account %d bytes (bound %d MiB)", kept, grew>>20, charged, budget>>20)
	if grew > 2*budget {
		t.Errorf("alice's %d sessions whose client does not read keep %d MiB of catalog results in the proxy, charged %d bytes under a %d MiB per-analyst bound: row-unlimited Executes are neither checked nor charged, and are held until the client reads (50 sessions × 64 MiB = 3.2 GiB per analyst)",
			kept, grew>>20, charged, budget>>20)
	}
}

// keepUntilRefused sends up to n messages made by msg, each with a Sync,
// while their replies begin with ok (ParseComplete "1", BindComplete
// "2"); it stops at a 54000 and fails on anything else, and returns how
// many were kept.
func keepUntilRefused(t *testing.T, nc net.Conn, n int, ok string, msg func(int) pgproto3.FrontendMessage) int {
	t.Helper()
	for i := 0; i < n; i++ {
		sendMsgs(t, nc, msg(i), &pgproto3.Sync{})
		r := discardUntilReady(t, nc)
		if !strings.HasPrefix(r, ok) {
			if !strings.Contains(r, "54000") {
				t.Fatalf("message %d: %s", i, r)
			}
			return i
		}
	}
	return n
}
