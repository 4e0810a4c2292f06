package proxy

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestAttack40_FetchPortalChargedUnchecked (low–medium; an authenticated
// analyst with a catalog, no race needed): the result of a portal the
// proxy builds itself (encodeResult: a FETCH from a cursor, a DP or
// post-processed answer, SHOW) is not grown by growResult: execute
// reserves 1 MiB (reserveResult), builds the whole result, and then
// settleResult(br.size()) charges its size with chargeMemoryOwn — an Add
// that is never checked against MaxMemoryPerAnalyst. A FETCH ALL from a
// cursor copies the cursor's rows, encoded, into the portal: as large as
// the cursor (up to MaxBufferedResult, 64 MiB), of which only the first
// MiB was checked. A row-limited Execute keeps it (suspended) in a
// transaction block, so the analyst's account stays above the bound
// between statements, contrary to SECURITY.md gap 8 ("charged 1 MiB at a
// time as its rows arrive, refused (54000) when the next step does not
// fit"). The same holds for COPY (copy.go: the rows are reserved up to R
// while read, then 2·R — rows and lines — charged unchecked) and for a
// post-processed answer's encoded copy.
//
// Measured here with an 8 MiB bound: a 6.7 MiB cursor (checked) and one
// FETCH ALL portal leave the account at ≈ 13.4 MiB, 1.7× the bound. With
// the defaults one session passes the 256 MiB bound by up to ≈ 64 MiB, and
// sessions that Execute such FETCHes at once pass it by one result each
// (each needs only 1 MiB of room when it starts), about twice the bound.
//
// The fix: grow the reservation as the proxy-built result is encoded
// (call growResult(size so far) in encodeResult's loop, as the relay does
// per DataRow), and in copy.go/shadowRun reserve (checkMemory) the lines
// and the encoded copy before building them instead of chargeMemoryOwn.
func TestAttack40_FetchPortalChargedUnchecked(t *testing.T) {
	const budget = 8 << 20
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.MaxMemoryPerAnalyst = budget }})
	nc := ts.rawConn(t)
	sendMsgs(t, nc, &pgproto3.Query{String: "DECLARE c SCROLL CURSOR WITH HOLD FOR SELECT repeat('x', 1000000) AS v FROM generate_series(1, 7)"})
	if r := discardUntilReady(t, nc); strings.Contains(r, "E") {
		t.Fatalf("DECLARE: %s", r)
	}
	afterDeclare := ts.srv.memoryOf("alice")
	sendMsgs(t, nc, &pgproto3.Query{String: "BEGIN"})
	if r := discardUntilReady(t, nc); strings.Contains(r, "E") {
		t.Fatalf("BEGIN: %s", r)
	}
	// A row-limited Execute keeps the whole FETCH result in portal p
	// (suspended; the transaction block keeps it past Sync).
	sendMsgs(t, nc,
		&pgproto3.Parse{Query: "FETCH ALL FROM c"},
		&pgproto3.Bind{DestinationPortal: "p"},
		&pgproto3.Execute{Portal: "p", MaxRows: 1},
		&pgproto3.Sync{})
	reply := discardUntilReady(t, nc)
	charged := ts.srv.memoryOf("alice")
	t.Logf("cursor: account %.1f MiB; FETCH ALL portal: %s; account %.1f MiB (bound %d MiB)",
		float64(afterDeclare)/(1<<20), reply, float64(charged)/(1<<20), budget>>20)
	if charged > budget {
		t.Errorf("alice's account is %.1f MiB after a FETCH portal, above her %d MiB bound: a proxy-built portal result (encodeResult) is charged after it is built (settleResult → chargeMemoryOwn), unchecked; the FETCH should have been refused with 54000",
			float64(charged)/(1<<20), budget>>20)
	}
}
