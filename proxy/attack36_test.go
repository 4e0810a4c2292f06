package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgcluster"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Issue 36's attack round (on round 35's fixes): each finding kept as the
// test of its fix.

// TestAttack36_CopyCatalogRowBuffersWhole (high): round 35 bounded one
// message of the shadow at MaxBufferedResult in the relay (relay.go
// openRelay), but catalog queries that the proxy runs through pgconn
// rather than the relay — COPY (query) TO STDOUT, DECLARE … CURSOR, and
// the outer SQL of a post-processing statement (cursor.go shadowRows) —
// read each DataRow whole with pgproto3's default limit of 1 GiB, copy it
// (string(v)) and only then compare the running size with
// MaxBufferedResult. So `COPY (SELECT repeat('x', 134217728)) TO STDOUT`
// (46 bytes) makes the proxy allocate about 256 MB before it refuses the
// result with 54000; a ~1 GB value costs about 2 GB, from each of an
// analyst's share of shadow connections at once. The fix: bound the
// shadow pgconn's message body (Frontend.SetMaxBodyLen(MaxBufferedResult)
// on the shadow connections, or a BuildFrontend in the pool's config) so
// a row over the bound is refused before its body is read, and the
// connection dropped.
func TestAttack36_CopyCatalogRowBuffersWhole(t *testing.T) {
	const maxBuf = 1 << 20
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.MaxBufferedResult = maxBuf }})
	const rowBytes = 128 << 20
	for _, q := range []string{
		fmt.Sprintf("COPY (SELECT repeat('x', %d)) TO STDOUT", rowBytes),
		fmt.Sprintf("BEGIN; DECLARE c CURSOR FOR SELECT repeat('x', %d); ROLLBACK", rowBytes),
	} {
		nc := ts.rawConn(t)
		var reply string
		alloc := allocatedDuring(func() {
			if _, err := nc.Write(appendQuery(nil, q)); err != nil {
				t.Fatal(err)
			}
			reply = discardUntilReady(t, nc)
		})
		t.Logf("%s: reply %s; the proxy allocated %d MB", q, reply, alloc>>20)
		if alloc > 32<<20 {
			t.Errorf("%q (%d bytes) made the proxy allocate %d MB for one %d MB catalog row: the pgconn path (shadowRows) reads a shadow message whole, unbounded by MaxBufferedResult (%d MiB)",
				q, len(q), alloc>>20, rowBytes>>20, maxBuf>>20)
		}
	}
}

// TestAttack36_UnreadNoticesHoldShadowForever (medium): round 35 gave the
// relay's writes to the client a deadline (relayShadow), but catalog
// statements the proxy runs through pgconn — COPY (query) TO STDOUT,
// DECLARE … CURSOR, the outer SQL of a post-processing statement
// (cursor.go shadowRows), Describe (describeShadow) — forward the
// shadow's notices from pgconn's OnNotice callback (acquireShadow's
// onNotice) into clientOut, which now writes to the client whenever 64 KiB
// are buffered, with no write deadline. A client that does not read blocks
// its session in that write inside pgconn's receive loop, holding the
// shadow connection: catalogContext's deadline only cancels a read of the
// shadow, which no longer happens, so the connection (and the analyst's
// share of the pool; a post-processing statement holds its DP admission
// slot too) is held until the client disconnects. Allowed functions emit
// notices at will (to_tsquery of a stop word). The fix: the same write
// deadline as relayShadow while any shadow statement runs (shadowRows,
// describeShadow), or notices of pgconn paths kept (bounded) and sent
// after the connection is released.
func TestAttack36_UnreadNoticesHoldShadowForever(t *testing.T) {
	// Hundreds of thousands of notices (tens of MB, more than the socket
	// buffers hold); never read.
	unreadHoldsShadow(t, 2*time.Second, "COPY (SELECT count(to_tsquery('english', left('the' || g, 3))) FROM generate_series(1, 2000000) g) TO STDOUT")
}

// TestAttack36_UnreadPostNoticesHoldDPSlot (medium): the same unbounded
// write as TestAttack36_UnreadNoticesHoldShadowForever, on a
// post-processing statement: its outer SQL runs on the shadow (shadowRun)
// while the statement holds its DP admission slot (execPost: c.ticket),
// and the outer SQL's notices are written to the client from pgconn's
// callback with no deadline. bob, who does not read, keeps one of the
// dataset's dp_concurrency slots for as long as his socket stays open
// (and keeps every other analyst's DP statement "contended", so their
// time-outs are no longer incidents: ticket.contended). With
// dp_concurrency 1 here, alice's DP statements all fail with 53000 after
// dp_queue_timeout; by default each analyst takes 2 of 10 slots per
// stuck session pair, so five accounts take them all. The fix: a write
// deadline while a shadow statement runs (as relayShadow), or the
// notices of the outer SQL kept and sent after the slot is given back.
func TestAttack36_UnreadPostNoticesHoldDPSlot(t *testing.T) {
	const stmtTimeout = 2 * time.Second
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) {
		c.CatalogStatementTimeout = stmtTimeout
		c.DPConcurrency = 1
		c.DPQueueTimeout = 2 * time.Second
		for _, d := range c.Datasets {
			d.Upstream = nopUpstream{}
		}
	}})
	bob := ts.connectAs(t, "bob", "bob-secret", "hospital")
	hj, err := bob.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hj.Conn.Close() })
	q := "SELECT s.n, (SELECT count(to_tsquery('english', left('the' || g, 3))) FROM generate_series(1, 2000000) g) AS k FROM (SELECT COUNT(*) AS n FROM visits) s"
	hj.Frontend.Send(&pgproto3.Query{String: q})
	if err := hj.Frontend.Flush(); err != nil {
		t.Fatal(err)
	}
	wait := stmtTimeout + catalogDeadlineGrace + 3*time.Second
	time.Sleep(wait)
	alice := ts.connect(t)
	_, err = execAll(t, alice, "SELECT COUNT(*) FROM visits")
	t.Logf("alice's DP statement %v after bob's unread post-processing statement began: %v", wait, err)
	if err != nil {
		t.Errorf("alice's DP statement failed (%v): bob's post-processing statement, whose outer SQL's notices he does not read, still holds the dataset's DP slot %v after it began (want it ended at catalog_statement_timeout + %v)",
			err, wait, catalogDeadlineGrace)
	}
}

// nopUpstream is a dataset's Upstream for the fake releaser, which never
// calls it (release.MaxCost wants one to be set).
type nopUpstream struct{}

func (nopUpstream) Query(context.Context, string, ...any) ([][]*string, error) { return nil, nil }

// TestAttack36_CatalogStatementShadowMemory (medium): the shadow cluster
// is shared by every analyst of a dataset (G8), and a catalog statement's
// cost there is bounded only by catalog_statement_timeout, which does not
// bound memory: allowed aggregate and string functions build values of up
// to 1 GB in the shadow backend. `SELECT length(string_agg(repeat('x',
// 1000000), ”)) FROM generate_series(1, 800)` (70 bytes) makes the shadow
// backend hold 800 MB and is answered in about 4 s; an analyst's share of
// the pool (5 connections by default) holds 4 GB at once, the whole pool
// (20) 16 GB, enough for the kernel's OOM killer to end a shadow backend,
// after which PostgreSQL restarts and drops every analyst's catalog
// connection. (The same statements fill the shadow's disk: a sort spilled
// 685 MB of temp files in one 10 s statement, and the shadow has no
// temp_file_limit.) The round-35 bound on one shadow message keeps the
// proxy safe, not the shadow. The fix: cap the size arguments of repeat,
// lpad, rpad, string_agg/array_agg inputs… in the catalog allow-list, or
// bound the shadow role (temp_file_limit; a memory cap outside PostgreSQL,
// e.g. a cgroup per shadow cluster) and say so in SECURITY.md.
//
// Fixed where PostgreSQL can be: the shadow server runs with a bound on
// each process's memory (pgcluster.Options.MaxProcessMemory, as `dpproxy
// demo` starts its shadow and SECURITY.md G8 asks of a deployment) and a
// temp_file_limit (`dpproxy doctor` warns without one). This test runs its
// shadow so: the statement fails with 53200 in its own backend, and the
// server and the other sessions go on.
func TestAttack36_CatalogStatementShadowMemory(t *testing.T) {
	sh := pgtest.NewClusterWith(t, pgcluster.Options{MaxProcessMemory: 1 << 30, Settings: map[string]string{"temp_file_limit": "1GB"}})
	ctx := context.Background()
	if err := pgtest.Exec(ctx, sh.DSN("postgres"),
		`CREATE TABLE visits (patient_id bigint, visit_date date, department text, diagnosis text,
			age int, cost numeric(10,2), length_of_stay int)`,
		`CREATE TABLE patients (patient_id bigint primary key, birth_year int, sex text, region text)`); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, serverOpts{shadowDSN: sh.DSN("postgres")})
	pc, other := ts.connect(t), ts.connect(t)
	const q = "SELECT length(string_agg(repeat('x', 1000000), '')) FROM generate_series(1, 400)"
	res, err := execAll(t, pc, q)
	if err == nil {
		t.Errorf("%q was answered (%v): one catalog statement made the shared shadow backend build a 400 MB value; the shadow's memory per statement is not bounded", q, rows(res[0]))
	} else if !strings.Contains(err.Error(), "53200") {
		t.Errorf("%q: %v, want 53200 out of memory from the shadow", q, err)
	}
	for _, c := range []*pgconn.PgConn{pc, other} {
		if _, err := execAll(t, c, "SELECT count(*) FROM pg_class"); err != nil {
			t.Errorf("a catalog statement after the refused one: %v (the shadow server must go on)", err)
		}
	}
}
