package proxy

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// wideCatalogSQL is a short catalog statement with about 1,650 result
// columns: "*" repeated over pg_class (33 columns in PostgreSQL 15).
func wideCatalogSQL() string {
	return "SELECT " + strings.Repeat("*,", 49) + "* FROM pg_catalog.pg_class"
}

// retainedHeap is the proxy process's heap in use after a GC.
func retainedHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// TestAttack93_DescribedStatementsUncounted (high; rule 1: proxy memory an
// analyst keeps between statements, not bounded by the per-analyst
// account): a named prepared statement is charged to the analyst's
// account at Parse by its text and parameter types only
// (statementBytes), but the first Describe of it keeps the description
// in the statement (preparedStatement.desc) for the session's life: for
// a catalog statement, the shadow's field descriptions, one pgconn
// FieldDescription (about 40 bytes plus the name's own allocation) per
// result column. PostgreSQL allows 1,664 result columns, and
// "SELECT *,*,…,* FROM pg_catalog.pg_class" (50 stars, 131 bytes) has
// 1,650. A session keeps 2,048 named statements, and one analyst up to a
// quarter of max_connections sessions (50 with the defaults). Each
// Parse + Describe is free (a catalog statement) and takes one shadow
// round trip (about a millisecond).
//
// Measured: 600 such statements in one session, 0.6 s: the proxy's heap
// kept +57 MiB (about 97 KB a statement) with alice's account at 76 KiB
// (bound set to 16 MiB). With the defaults that is about 195 MiB per
// session and 9.7 GB for one analyst's 50 sessions, against a bound of
// 256 MiB: enough to have the proxy killed, with every analyst's session
// and every charged answer in flight.
//
// Want: the description counted as the statement is (charged before it
// is kept), so that the heap the statements keep stays near the
// account's figure.
func TestAttack93_DescribedStatementsUncounted(t *testing.T) {
	const bound = 16 << 20
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.MaxMemoryPerAnalyst = bound }})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	pc := ts.connect(t)
	sql := wideCatalogSQL()
	sd, err := pc.Prepare(ctx, "w0", sql, nil)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	t.Logf("one statement: %d bytes of text, %d result columns", len(sql), len(sd.Fields))

	base := retainedHeap()
	const n = 600
	refused := 0
	for i := 1; i <= n; i++ {
		if _, err := pc.Prepare(ctx, fmt.Sprintf("w%d", i), sql, nil); err != nil {
			if sqlstate(err) == "54000" {
				refused++
				continue
			}
			t.Fatalf("prepare %d: %v", i, err)
		}
	}
	kept := retainedHeap() - base
	acct := ts.srv.account("alice").held.Load()
	t.Logf("%d named, described catalog statements (%d refused): heap kept +%d MiB, alice's account %d KiB, bound %d MiB",
		n, refused, kept>>20, acct>>10, bound>>20)
	// Still alive and usable.
	if _, err := pc.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
		t.Fatalf("SELECT 1: %v", err)
	}
	if kept > 2*bound || kept > 8*acct+(4<<20) {
		t.Errorf("one session's %d described statements keep %d MiB of the proxy's heap, with alice's account at %d KiB (bound %d MiB): statement descriptions are uncounted",
			n, kept>>20, acct>>10, bound>>20)
	}
	runtime.KeepAlive(pc)
}

// TestAttack93_DescribedPortalsUncounted (medium; rule 1): Describe of a
// DP portal plans its bound text and keeps the columns it told the client
// in the portal (portal.told, described.go), but a portal is counted at
// Bind by its parameters only (paramBytes): a parameterless portal counts
// 0 bytes. "SELECT count(*), … 450 times FROM visits" (4,068 bytes,
// counted once, as the statement's text; short enough for its plan to be
// cached, so each Describe costs a lookup) describes 450 columns, a
// column struct each, and a session keeps 1,024 portals in a transaction
// block (across Syncs).
//
// Measured: 3 sessions × 1,000 such portals, 0.8 s, kept 33 MiB of the
// proxy's heap with alice's account at 11 KiB (bound set to 16 MiB): about
// 11 MiB per session, 550 MiB for the 50 sessions one analyst may hold
// with the defaults (bound 256 MiB). Describe is free (nothing charged).
//
// Want: the columns a portal keeps counted as its parameters are
// (portal.bytes, charged before they are kept, 54000 beyond the bound).
func TestAttack93_DescribedPortalsUncounted(t *testing.T) {
	const bound = 16 << 20
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.MaxMemoryPerAnalyst = bound }})
	// 450 columns in 4,068 bytes: the plan is cached (texts up to 4 KiB).
	sql := "SELECT " + strings.Repeat("count(*),", 449) + "count(*) FROM visits"
	const k, n = 3, 1000
	msgs := []pgproto3.FrontendMessage{&pgproto3.Query{String: "BEGIN"}, &pgproto3.Parse{Name: "s", Query: sql}}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("p%d", i)
		msgs = append(msgs, &pgproto3.Bind{DestinationPortal: name, PreparedStatement: "s"},
			&pgproto3.Describe{ObjectType: 'P', Name: name})
	}
	msgs = append(msgs, &pgproto3.Sync{})
	pcs := make([]*pgconn.PgConn, k)
	for i := range pcs {
		pcs[i] = ts.connect(t)
	}
	base := retainedHeap()
	start := time.Now()
	var errs []string
	for _, pc := range pcs {
		rep := rawSend(t, pc, &noticeCollector{}, msgs...)
		if len(rep.errs) > 0 {
			errs = append(errs, rep.errs[0])
		}
	}
	took := time.Since(start)
	kept := retainedHeap() - base
	acct := ts.srv.account("alice").held.Load()
	t.Logf("%d sessions × %d described DP portals of one %d-byte, 450-column statement (%v; first errors %v): heap kept +%d MiB, alice's account %d KiB, bound %d MiB",
		k, n, len(sql), took, errs, kept>>20, acct>>10, bound>>20)
	for _, pc := range pcs {
		if _, err := pc.Exec(context.Background(), "ROLLBACK; SELECT 1").ReadAll(); err != nil {
			t.Fatalf("ROLLBACK; SELECT 1: %v", err)
		}
	}
	if kept > bound+(4<<20) || kept > 8*acct+(4<<20) {
		t.Errorf("%d sessions' described DP portals keep %d MiB of the proxy's heap, with alice's account at %d KiB (bound %d MiB): the columns portals keep are uncounted",
			k, kept>>20, acct>>10, bound>>20)
	}
}

// procCPU is the CPU time (user and system) of this process so far.
func procCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestAttack93_StoredTextRelexedOutsideSlot (medium; rule 1: proxy CPU an
// analyst causes for free, not bounded by the analyst's planning slot):
// attack round 82 made splitting and classifying a query string over
// 16 KiB take the analyst's planning slot, so that one analyst's sessions
// keep at most one core checking and planning. But a named DP statement
// with parameters is kept at Parse whatever its length (only a statement
// without parameters is planned there, where rewrite.CheckText refuses
// one over 64 KiB), and every Execute of a portal bound from it binds the
// values into its text (boundText → bindWith), which lexes the whole
// stored text first, outside the slot, before its length check refuses
// it (54000, nothing charged). Describe of the statement does the same
// (bindLiterals), and sends the whole text to the shadow first.
//
// So the 1 MiB text is sent once, and each Bind + Execute + Sync (about
// 40 bytes) costs the proxy a lexing of 1 MiB: a million tokens of "a,"
// take about 0.3 s of CPU and 50 MB of garbage. With 4 of alice's
// sessions doing it in a loop, the proxy used more than one core on them
// (the slot's bound), and another analyst's statements waited for CPU.
//
// Want: binding refuses a text that cannot fit once bound before lexing
// it, and lexing a long stored text takes the analyst's slot, so that the
// sessions of one analyst keep at most one core.
func TestAttack93_StoredTextRelexedOutsideSlot(t *testing.T) {
	ts := startShadowServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	bob := ts.connectAs(t, "bob", "bob-secret", "hospital")
	const bobSQL = "SELECT count(*) FROM visits WHERE age > 30 LIMIT 0"
	base := medianLatency(t, ctx, bob, bobSQL, 2*time.Second)
	for _, c := range []struct {
		name, unit string
		assert     bool
	}{
		// A million tokens: the costliest text to lex.
		{"a,", "a,", true},
		// Parameters written with leading zeros: the text binds to less
		// than 64 KiB, so it must be lexed (in the slot, once fixed).
		{"$0…01,", "$" + strings.Repeat("0", 60) + "1,", false},
	} {
		text := "SELECT count(*) FROM visits WHERE age = $1 AND department IN (" + strings.Repeat(c.unit, (1<<20-200)/len(c.unit)) + "'a')"
		const k = 4
		pcs := make([]*pgconn.PgConn, k)
		refused := ""
		for i := range pcs {
			pcs[i] = ts.connect(t)
			rep := rawSend(t, pcs[i], &noticeCollector{}, &pgproto3.Parse{Name: "big", Query: text, ParameterOIDs: []uint32{23}}, &pgproto3.Sync{})
			if len(rep.errs) > 0 {
				refused = rep.errs[0]
			}
		}
		if refused != "" {
			t.Logf("%s: the %d-byte statement is refused at Parse: %s", c.name, len(text), refused)
			if !strings.HasPrefix(refused, "54000") {
				t.Errorf("%s: want 54000 at Parse, got %s", c.name, refused)
			}
			continue
		}
		run := func(pc *pgconn.PgConn) error {
			return pc.ExecPrepared(ctx, "big", [][]byte{[]byte("1")}, nil, nil).Read().Err
		}
		// One Execute's cost.
		c0, w0 := procCPU(t), time.Now()
		err := run(pcs[0])
		t.Logf("%s: one Bind/Execute/Sync of the stored %d-byte statement: %v wall, %v CPU of the process, %v",
			c.name, len(text), time.Since(w0), procCPU(t)-c0, err)
		if sqlstate(err) != "54000" {
			t.Fatalf("want 54000, got %v", err)
		}
		// k sessions at once, and bob meanwhile.
		fctx, fcancel := context.WithTimeout(ctx, 6*time.Second)
		var wg sync.WaitGroup
		var mu sync.Mutex
		n := 0
		c1, w1 := procCPU(t), time.Now()
		for _, pc := range pcs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for fctx.Err() == nil {
					if err := run(pc); sqlstate(err) != "54000" {
						if fctx.Err() == nil {
							t.Errorf("flood: %v", err)
						}
						return
					}
					mu.Lock()
					n++
					mu.Unlock()
				}
			}()
		}
		time.Sleep(500 * time.Millisecond)
		during := medianLatency(t, ctx, bob, bobSQL, 4*time.Second)
		wg.Wait()
		fcancel()
		cpu, wall := procCPU(t)-c1, time.Since(w1)
		cores := cpu.Seconds() / wall.Seconds()
		per := cpu / time.Duration(max(n, 1))
		t.Logf("%s: %d sessions of alice, %d Executes in %v: %v of CPU (%.2f cores, %v an Execute); bob's catalog statement: median %v during, %v before",
			c.name, k, n, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), cores, per.Round(time.Microsecond), during, base)
		if c.assert && per > 50*time.Millisecond {
			t.Errorf("%s: each free Execute of the stored statement costs the proxy %v of CPU (%.2f cores over %d sessions): the stored text is lexed again per Execute, outside the analyst's slot", c.name, per, cores, k)
		}
		for _, pc := range pcs {
			pc.Close(ctx)
		}
	}
}

// TestAttack93_PortalsPinReplacedStatements (high; rule 1): a portal
// refers to the statement it was bound from (portal.stmt), and is counted
// by its parameters only. The session counts a statement's text while the
// statement is kept (stmtBytes), but Parse of the unnamed statement
// replaces it, and its text is no longer counted, while the portals bound
// from it keep it alive until their transaction ends. So in a transaction
// block, Parse "" of a 1 MiB text and Bind of a new portal, repeated, keep
// 1 MiB per portal uncounted, up to 1,024 portals a session (1 GiB), and
// one analyst holds 50 sessions with the defaults. Each step is free (a
// catalog statement that is never run). (DEALLOCATE of a named statement
// does the same: it drops the statement, not its portals.)
//
// Want: a portal counts the text it keeps alive once its statement is no
// longer counted (or keeps only what it needs to run), so that the heap
// kept stays near the analyst's account.
func TestAttack93_PortalsPinReplacedStatements(t *testing.T) {
	const bound = 16 << 20
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.MaxMemoryPerAnalyst = bound }})
	pc := ts.connect(t)
	text := "SELECT '" + strings.Repeat("x", 1<<20-100) + "' AS pad"
	const n = 64
	base := retainedHeap()
	rep := rawSend(t, pc, &noticeCollector{}, &pgproto3.Query{String: "BEGIN"})
	var errs []string
	start := time.Now()
	for i := 0; i < n; i++ {
		rep = rawSend(t, pc, &noticeCollector{},
			&pgproto3.Parse{Query: text},
			&pgproto3.Bind{DestinationPortal: fmt.Sprintf("p%d", i)},
			&pgproto3.Sync{})
		if len(rep.errs) > 0 {
			errs = append(errs, rep.errs[0])
			break
		}
	}
	took := time.Since(start)
	kept := retainedHeap() - base
	acct := ts.srv.account("alice").held.Load()
	t.Logf("%d × (Parse of the unnamed statement, %d bytes; Bind of a new portal) in a block, %v (errors %v): heap kept +%d MiB, alice's account %d KiB, bound %d MiB",
		n, len(text), took, errs, kept>>20, acct>>10, bound>>20)
	if _, err := pc.Exec(context.Background(), "ROLLBACK; SELECT 1").ReadAll(); err != nil {
		t.Fatalf("ROLLBACK; SELECT 1: %v", err)
	}
	if kept > bound+(4<<20) || kept > 4*acct+(4<<20) {
		t.Errorf("one session's %d portals of replaced unnamed statements keep %d MiB of the proxy's heap, with alice's account at %d KiB (bound %d MiB): the replaced statements' texts are uncounted",
			n, kept>>20, acct>>10, bound>>20)
	}
}

// TestAttack93_RelayBufferKeptPerSession (low; rule 1): the buffer a
// session builds its requests to the shadow in (conn.relayOut) is reused
// for the session's life at the capacity of its largest request: the text
// of a catalog statement (up to the 1 MiB a message holds) and, for a
// portal, its Bind's parameters too (another 1 MiB). Review 74 made a
// session waiting for its next message keep nothing of the last one; this
// buffer still keeps up to 2 MiB per idle session, uncounted: 100 MiB for
// the 50 sessions one analyst may hold, 400 MiB for max_connections.
//
// Want: a buffer grown past a small size let go after the statement.
func TestAttack93_RelayBufferKeptPerSession(t *testing.T) {
	ts := startShadowServer(t)
	const k = 16
	sql := "SELECT length('" + strings.Repeat("x", 1<<20-100) + "')"
	pcs := make([]*pgconn.PgConn, k)
	for i := range pcs {
		pcs[i] = ts.connect(t)
	}
	base := retainedHeap()
	for _, pc := range pcs {
		if _, err := pc.Exec(context.Background(), sql).ReadAll(); err != nil {
			t.Fatal(err)
		}
	}
	kept := retainedHeap() - base
	acct := ts.srv.account("alice").held.Load()
	t.Logf("%d idle sessions after one %d-byte catalog statement each: heap kept +%d MiB, alice's account %d KiB", k, len(sql), kept>>20, acct>>10)
	if kept > k<<20/2 {
		t.Errorf("%d idle sessions keep %d MiB after one 1 MiB catalog statement each (account %d KiB): the relay's request buffer is kept at its largest size", k, kept>>20, acct>>10)
	}
}

// TestAttack93_CursorColumnsCounted: a cursor's column descriptions count
// in what the session holds (the round's note: 1,650 columns of SELECT
// *,*,… FROM pg_class, about 53 KB a cursor, had counted 0 with no rows).
func TestAttack93_CursorColumnsCounted(t *testing.T) {
	s := &session{}
	cols := make([]column, 1650)
	for i := range cols {
		cols[i] = column{name: strings.Repeat("c", 20), oid: 25}
	}
	cur := s.declare(&pgsql.CursorStmt{Name: "c1", Hold: true}, &resultSet{cols: cols})
	if held := s.heldBytes(""); held < 1650*20 || held != cur.bytes {
		t.Errorf("a cursor of 1,650 columns and no rows holds %d bytes (cursor %d), want at least %d", held, cur.bytes, 1650*20)
	}
}
