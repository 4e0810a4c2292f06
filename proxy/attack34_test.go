package proxy

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Issue 34's attack round (on issue 33's fixes): each finding kept as the
// test of its fix.

// allocatedDuring returns the bytes the process allocated while f ran
// (the proxy runs in this process).
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// manyPlaceholders is a DP statement of about 60 KB with n uses of $1.
func manyPlaceholders(n int) string {
	return "SELECT COUNT(*) FROM visits WHERE department IN (" + strings.Repeat("$1,", n-1) + "$1)"
}

// TestAttack34_BoundTextAmplification_SQLExecute: rewrite.CheckText (64
// KiB) runs on the statement after its parameters are bound as literals,
// and bindLiterals builds that text first, with nothing bounding it: n
// uses of $1 times a literal of m bytes is n·m bytes of proxy heap before
// anything refuses it. Here 20,000 × 8 KB = 160 MB (and the builder's
// growth doubles it) from one 70 KB simple query; within the 1 MiB message
// limit, 300,000 × 0.5 MB is 150 GB: one analyst's statement ends the
// proxy (out of memory) for everyone, before admission and the charge.
func TestAttack34_BoundTextAmplification_SQLExecute(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	if _, err := execAll(t, pc, "PREPARE amp(text) AS "+manyPlaceholders(20000)); err != nil {
		t.Fatalf("PREPARE: %v", err)
	}
	exec := "EXECUTE amp('" + strings.Repeat("x", 8000) + "')"
	var err error
	alloc := allocatedDuring(func() { _, err = execAll(t, pc, exec) })
	t.Logf("EXECUTE of a %d-byte statement: %v; the proxy allocated %d MB", len(exec), err, alloc>>20)
	if alloc > 32<<20 {
		t.Errorf("one EXECUTE of %d bytes made the proxy allocate %d MB before refusing it: the bound text must be bounded (MaxStatementBytes) before it is built", len(exec), alloc>>20)
	}
}

// TestAttack34_BoundTextAmplification_Bind: the same through the extended
// protocol. Parse does not check a statement with parameters (checkDP runs
// for n == 0 only) and Bind counts only the parameters' own bytes
// (checkPortalRoom): Execute (or Describe of the portal) binds 20,000 × 8
// KB into one string.
func TestAttack34_BoundTextAmplification_Bind(t *testing.T) {
	ts := startServer(t, serverOpts{})
	fe, _ := ts.rawSession(t)
	fe.Send(&pgproto3.Parse{Name: "amp", Query: manyPlaceholders(20000), ParameterOIDs: []uint32{25}})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	readyWithoutError(t, fe, "Parse")
	var msgs []pgproto3.BackendMessage
	alloc := allocatedDuring(func() {
		fe.Send(&pgproto3.Bind{PreparedStatement: "amp", Parameters: [][]byte{[]byte(strings.Repeat("x", 8000))}})
		fe.Send(&pgproto3.Execute{})
		fe.Send(&pgproto3.Sync{})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		msgs = receiveUntilReady(t, fe)
	})
	for _, m := range msgs {
		if e, ok := m.(*pgproto3.ErrorResponse); ok {
			t.Logf("Execute: %s %s", e.Code, e.Message)
		}
	}
	t.Logf("the proxy allocated %d MB", alloc>>20)
	if alloc > 32<<20 {
		t.Errorf("one Bind of 8 KB and an Execute made the proxy allocate %d MB before refusing the statement: bound the bound text before building it", alloc>>20)
	}
}

// TestAttack34_ExplainUnclosedOptionsClosesSession: "EXPLAIN (" panics in
// pgsql.RefuseWrites (pgsql.TestAttack34_ExplainUnclosedOptionsPanics);
// the session's recover closes the connection with an internal error
// instead of answering 42601 and keeping the session.
func TestAttack34_ExplainUnclosedOptionsClosesSession(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	_, err := execAll(t, pc, "EXPLAIN (")
	if got := sqlstate(err); got != "42601" {
		t.Errorf("EXPLAIN (: %v, want SQLSTATE 42601", err)
	}
	if _, err := execAll(t, pc, "SELECT 1"); err != nil && pc.IsClosed() {
		t.Errorf("the session was closed: %v", err)
	}
}

// TestAttack34_DescribePortalHoldsUnboundedMemory: issue 33's fix checks
// the session's held results (checkHeldRoom) before a row-limited Execute
// and a DECLARE, but Describe of a catalog portal runs the portal at once
// and keeps its whole result in p.result (extended.go, describe 'P') with
// no check. Bind + Describe per portal, inside a transaction block so
// that Sync does not drop them: 200 portals of 0.9 MiB with
// MaxBufferedResult 1 MiB, i.e. up to maxPortals (1,024) ×
// MaxBufferedResult (64 MiB by default) = 64 GiB per session.
func TestAttack34_DescribePortalHoldsUnboundedMemory(t *testing.T) {
	const maxBuf = 1 << 20
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.MaxBufferedResult = maxBuf }})
	fe, _ := ts.rawSession(t)
	fe.Send(&pgproto3.Query{String: "BEGIN"})
	fe.Send(&pgproto3.Parse{Name: "big", Query: "SELECT repeat('x', 100) FROM generate_series(1, 8000)"})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		readyWithoutError(t, fe, "set-up")
	}
	before := heapAlloc()
	const portals = 200
	refused := ""
	for i := 0; i < portals && refused == ""; i++ {
		p := fmt.Sprintf("p%d", i)
		fe.Send(&pgproto3.Bind{DestinationPortal: p, PreparedStatement: "big"})
		fe.Send(&pgproto3.Describe{ObjectType: 'P', Name: p})
		fe.Send(&pgproto3.Sync{})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, m := range receiveUntilReady(t, fe) {
			if e, ok := m.(*pgproto3.ErrorResponse); ok {
				refused = fmt.Sprintf("portal %d: %s %s", i, e.Code, e.Message)
			}
		}
	}
	held := heapAlloc() - before
	t.Logf("refused: %q; proxy heap grew by %d MiB (MaxBufferedResult %d MiB)", refused, held>>20, maxBuf>>20)
	if held > 4*maxBuf {
		t.Errorf("one session holds %d MiB of the proxy's memory in described portals, over about twice MaxBufferedResult (%d MiB): Describe of a catalog portal is not checked (checkHeldRoom)", held>>20, maxBuf>>20)
	}
}
