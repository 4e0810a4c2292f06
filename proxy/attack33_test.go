package proxy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/release"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Issue 33's attack round (rule 1: every cost an analyst can cause is
// bounded before the charge by public quantities, memory included), each
// finding kept as the test of its fix.

// heapAlloc is the live heap after a collection (the proxy runs in this
// process).
func heapAlloc() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// readyWithoutError reads up to ReadyForQuery and fails on an error.
func readyWithoutError(t *testing.T, fe *pgproto3.Frontend, what string) {
	t.Helper()
	for _, m := range receiveUntilReady(t, fe) {
		if e, ok := m.(*pgproto3.ErrorResponse); ok {
			t.Fatalf("%s: %s %s", what, e.Code, e.Message)
		}
	}
}

// TestAttack33_PortalsHoldUnboundedMemory: a catalog portal keeps the
// shadow's whole reply in the proxy's memory (up to MaxBufferedResult)
// after its first row-limited Execute, until Sync (or the end of the
// explicit transaction). Before the fix nothing bounded the portals a
// session held, nor their memory: 200 suspended portals of 0.9 MiB held
// 226 MiB of the heap all analysts share. Now a row-limited Execute that
// would keep one more result is refused with 54000 before it runs once
// the session's suspended portals and cursors hold MaxBufferedResult
// (session.checkHeldRoom), so a session holds at most about twice that.
func TestAttack33_PortalsHoldUnboundedMemory(t *testing.T) {
	const maxBuf = 1 << 20 // 1 MiB per buffered result
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.MaxBufferedResult = maxBuf }})
	fe, _ := ts.rawSession(t)

	// About 0.9 MiB of DataRows per run, under MaxBufferedResult.
	fe.Send(&pgproto3.Parse{Name: "big", Query: "SELECT repeat('x', 100) FROM generate_series(1, 8000)"})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	readyWithoutError(t, fe, "Parse")
	before := heapAlloc()

	const portals = 200
	done := make(chan error, 1)
	go func() {
		// Read the replies: BindComplete, one DataRow, PortalSuspended
		// per portal.
		suspended := 0
		for suspended < portals {
			m, err := fe.Receive()
			if err != nil {
				done <- err
				return
			}
			switch m := m.(type) {
			case *pgproto3.ErrorResponse:
				done <- fmt.Errorf("portal %d: %s %s", suspended, m.Code, m.Message)
				return
			case *pgproto3.PortalSuspended:
				suspended++
			}
		}
		done <- nil
	}()
	for i := 0; i < portals; i++ {
		p := fmt.Sprintf("p%d", i)
		fe.Send(&pgproto3.Bind{DestinationPortal: p, PreparedStatement: "big"})
		fe.Send(&pgproto3.Execute{Portal: p, MaxRows: 1})
		fe.Send(&pgproto3.Flush{})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("%d portals of 0.9 MiB suspended in one session with MaxBufferedResult 1 MiB: none refused", portals)
		}
		if !strings.Contains(err.Error(), "54000") || !strings.Contains(err.Error(), "unread rows") {
			t.Fatalf("refused with %v, want 54000 (the session's unread rows)", err)
		}
		if !strings.HasPrefix(err.Error(), "portal 2:") {
			t.Errorf("refused at %v, want the third portal (the first two hold 1.8 MiB, over the 1 MiB)", err)
		}
	case <-time.After(120 * time.Second):
		t.Fatal("no reply")
	}
	held := heapAlloc() - before
	t.Logf("%d portals suspended: proxy heap grew by %d MiB (MaxBufferedResult %d MiB)", portals, held>>20, maxBuf>>20)
	// The most a session may hold by design elsewhere is maxCursors
	// buffered results (cursor.go).
	if limit := int64(maxCursors) * maxBuf; held > limit {
		t.Errorf("one session holds %d MiB of the proxy's memory in suspended portals, over %d MiB (maxCursors × MaxBufferedResult), and nothing refuses more portals", held>>20, limit>>20)
	}
	fe.Send(&pgproto3.Sync{})
	_ = fe.Flush()
}

// TestAttack33_DeepParensCrashProxy: a DP statement whose WHERE clause is
// nested in ~250,000 parentheses (about 500 KB, under the 1 MiB message
// bound) was folded for relative dates (rewrite/reldate.go foldClock)
// before any depth check, one recursion per parenthesis, until the
// goroutine's stack passed Go's 1 GB limit: "fatal error: stack overflow",
// which no recover catches, so the whole proxy exited with every analyst's
// session. rewrite.CheckText now refuses it first (54000: over 64 KiB). The
// statement runs in a child process so that this test binary would survive
// a crash; the child serves the proxy, sends it as alice, wants her
// refusal, and then bob's statement answered.
func TestAttack33_DeepParensCrashProxy(t *testing.T) {
	if os.Getenv("DPPROXY_ATTACK33_CHILD") == "1" {
		attack33DeepParensChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttack33_DeepParensCrashProxy$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DPPROXY_ATTACK33_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := string(out)
		if i := strings.Index(msg, "fatal error"); i >= 0 {
			msg = msg[i:min(len(msg), i+200)]
		} else if len(msg) > 2000 {
			msg = msg[len(msg)-2000:]
		}
		t.Fatalf("the proxy process died on one analyst's statement (%v):\n%s", err, msg)
	}
}

func attack33DeepParensChild(t *testing.T) {
	ts := startServer(t, serverOpts{})
	alice := ts.connect(t)
	const depth = 250000
	q := "SELECT COUNT(*) FROM visits WHERE " + strings.Repeat("(", depth) + "age = 1" + strings.Repeat(")", depth)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	_, err := alice.Exec(ctx, q).ReadAll()
	t.Logf("alice's %d-byte statement: %v after %v", len(q), err, time.Since(start))
	if err == nil || !strings.Contains(err.Error(), "54000") {
		t.Errorf("alice's statement: %v, want 54000 (too long)", err)
	}
	bob := ts.connectAs(t, "bob", "bob-secret", "hospital")
	if _, err := execAll(t, bob, "SHOW dp.epsilon"); err != nil {
		t.Fatalf("bob after alice's statement: %v", err)
	}
}

// TestAttack33_OtherDatasetLoadIsNotContention: a time-out is an
// incident (and, at the default incident_limit 1, suspends the analyst)
// unless req.Contended reports that another analyst's DP statement ran
// meanwhile (release/incident.go). Contended came from the dataset's own
// admission, but datasets of one deployment share data servers: alice's
// DP statement on clinic, running with bob's on hospital, did not count,
// so a time-out of bob's under alice's load would have suspended him.
// Now every dataset's admission shares one activity set (admission.go).
// (Another proxy's statements are still not seen: SECURITY.md, gap 8.)
func TestAttack33_OtherDatasetLoadIsNotContention(t *testing.T) {
	ts := startServer(t, serverOpts{})
	ts.releaser.gate = make(chan struct{})
	ts.releaser.started = make(chan struct{}, 2)
	alice := ts.connectAs(t, "alice", "alice", "clinic")
	bob := ts.connectAs(t, "bob", "bob-secret", "hospital")
	done := make(chan error, 2)
	go func() {
		_, err := alice.Exec(context.Background(), "SELECT COUNT(*) FROM visits").ReadAll()
		done <- err
	}()
	<-ts.releaser.started
	go func() {
		_, err := bob.Exec(context.Background(), "SELECT COUNT(*) FROM patients").ReadAll()
		done <- err
	}()
	<-ts.releaser.started
	reqs := ts.releaser.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	var bobReq *release.Request
	for i := range reqs {
		if reqs[i].Analyst == "bob" {
			bobReq = &reqs[i]
		}
	}
	contended := bobReq != nil && bobReq.Contended != nil && bobReq.Contended()
	close(ts.releaser.gate)
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if !contended {
		t.Errorf("bob's release ran while alice's DP statement (dataset clinic) ran, but Contended() is false: a time-out of bob's under alice's load would be bob's incident")
	}
}

// TestAttack33_OneAnalystTakesEveryConnection: max_connections was one
// count for all analysts, with no share per analyst as the shadow pool and
// DP admission have: one analyst who opened max_connections idle sessions
// shut every other analyst out (53300). Now each analyst holds at most
// MaxConnectionsPerAnalyst sessions (default a quarter of MaxConnections,
// at least 2): alice's third session is refused with PostgreSQL's 53300
// "too many connections for role", and bob connects.
func TestAttack33_OneAnalystTakesEveryConnection(t *testing.T) {
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.MaxConnections = 4 }})
	opened := 0
	var refused error
	for i := 0; i < 4; i++ {
		pc, err := pgconnConnect(t, ts.dsn("alice", "alice", "hospital"))
		if err != nil {
			refused = err
			break
		}
		_ = pc // alice, idle
		opened++
	}
	if opened != 2 || refused == nil || !strings.Contains(refused.Error(), "53300") || !strings.Contains(refused.Error(), `too many connections for role "alice"`) {
		t.Fatalf("alice opened %d sessions, then %v; want 2, then 53300 too many connections for role", opened, refused)
	}
	bob, err := pgconnConnect(t, ts.dsn("bob", "bob-secret", "hospital"))
	if err != nil {
		t.Fatalf("bob cannot connect while alice holds idle sessions: %v", err)
	}
	if _, err := execAll(t, bob, "SHOW dp.epsilon"); err != nil {
		t.Fatalf("bob: %v", err)
	}
}

// TestPlanSlot_OneAnalystPlansOneAtATime: planning runs before admission
// and the charge, so an analyst's sessions plan one statement at a time
// (dp.go prepare): while alice's planning slot is held, her next DP
// statement waits (and ends at her statement_timeout, 57014, uncharged),
// and bob's is planned and answered meanwhile; freed, alice's is answered.
func TestPlanSlot_OneAnalystPlansOneAtATime(t *testing.T) {
	ts := startServer(t, serverOpts{})
	alice := ts.connect(t)
	bob := ts.connectAs(t, "bob", "bob-secret", "hospital")
	slot := ts.srv.planSlot("alice")
	slot <- struct{}{} // as if another of alice's sessions were planning
	if _, err := execAll(t, alice, "SET statement_timeout = 200"); err != nil {
		t.Fatal(err)
	}
	if _, err := execAll(t, alice, "SELECT COUNT(*) FROM visits"); err == nil || !strings.Contains(err.Error(), "57014") {
		t.Fatalf("alice's statement while her planning slot is held: %v, want 57014 at her statement_timeout", err)
	}
	if _, err := execAll(t, bob, "SELECT COUNT(*) FROM patients"); err != nil {
		t.Fatalf("bob's statement while alice's planning slot is held: %v", err)
	}
	<-slot
	if _, err := execAll(t, alice, "SELECT COUNT(*) FROM visits"); err != nil {
		t.Fatalf("alice's statement once her slot is free: %v", err)
	}
	if n := len(ts.releaser.requests()); n != 2 {
		t.Errorf("%d releases, want 2 (bob's and alice's second): the statement that waited must not be released", n)
	}
}
