package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

// logLines87 keeps every line written to it.
type logLines87 struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *logLines87) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *logLines87) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// floodInBackground87 keeps one session of alice sending refused
// statements (Parse "x" + Sync) until stop is closed, reading and
// discarding the replies, so that alice's line bucket stays empty.
func floodInBackground87(t *testing.T, ts *testServer) (stop func()) {
	t.Helper()
	pc := ts.connectAs(t, "alice", "alice", "hospital")
	hj, err := pc.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	nc := hj.Conn
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, nc) }()
	go func() {
		defer wg.Done()
		batch := bytes.Repeat(refusedParseSync(), 200)
		for {
			select {
			case <-done:
				return
			default:
			}
			_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := nc.Write(batch); err != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() {
		close(done)
		_, _ = nc.Write(binary.BigEndian.AppendUint32([]byte{'X'}, 4))
		nc.Close()
		wg.Wait()
	}
}

// TestReview87_FloodHidesSessionStartsAndChargedAnswers (medium; round
// 86's fix). The per-analyst line bucket wraps the whole session logger
// (proxy/conn.go startup), not the free lines it was meant for: while an
// analyst keeps a flood of refused statements going (2 a second suffice
// once the burst of 60 is spent), the proxy's log drops that analyst's
// "session started" lines (remote address, TLS, application_name) of
// every other session they open, and the "dp answer released" line of a
// new, charged release. SECURITY.md gap 9 says the price is only "which
// free statements they ran past that rate (their fingerprints)"; here the
// steward loses where the analyst connected from and which plans they
// were charged for in the proxy's log.
func TestReview87_FloodHidesSessionStartsAndChargedAnswers(t *testing.T) {
	w := &logLines87{}
	ts := startServer(t, serverOpts{mutate: func(c *Config) {
		c.Logger = productionLogger(w, zapcore.InfoLevel)
	}})
	stop := floodInBackground87(t, ts)
	defer stop()
	// Let the flood spend the burst.
	for i := 0; i < 500 && !strings.Contains(w.String(), "lines_not_logged") && strings.Count(w.String(), "\n") < 80; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	before := len(w.String())

	// A second session of alice, from the same machine, and a new DP
	// release (the fake releaser: a fresh, uncached answer).
	pc := ts.connectAs(t, "alice", "alice", "hospital")
	if _, err := execAll(t, pc, "SELECT COUNT(*) FROM visits"); err != nil {
		t.Fatalf("DP statement: %v", err)
	}
	pc.Close(context.Background())
	time.Sleep(50 * time.Millisecond)
	after := w.String()[before:]
	if !strings.Contains(after, "session started") {
		t.Errorf("alice's new session's \"session started\" line (remote address, TLS) was left out of the proxy's log by her own flood of refused statements")
	}
	if !strings.Contains(after, "dp answer released") {
		t.Errorf("the \"dp answer released\" line of a new (charged) release was left out of the proxy's log by the analyst's flood of refused statements")
	}
}

// TestReview87_DebugLevelCountsWrittenLinesAsNotLogged (low). With
// log_level debug, logStatement asks the limited core for an Info entry
// first (c.log.Check(InfoLevel, ...)), which spends a token and counts a
// line "not logged" when the bucket is empty, then writes the statement
// at Debug anyway. So at Debug every statement is written, yet the
// analyst's bucket is spent by lines that are never written at Info, the
// count lines_not_logged reports lines that were logged, and other Info
// lines (session started, dp answer released) are dropped.
func TestReview87_DebugLevelCountsWrittenLinesAsNotLogged(t *testing.T) {
	w := &logLines87{}
	ts := startServer(t, serverOpts{mutate: func(c *Config) {
		c.Logger = productionLogger(w, zapcore.DebugLevel)
	}})
	pc := ts.connectAs(t, "alice", "alice", "hospital")
	hj, err := pc.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	nc := hj.Conn
	defer nc.Close()
	const n = 200
	go func() { _, _ = io.Copy(io.Discard, nc) }()
	if _, err := nc.Write(bytes.Repeat(refusedParseSync(), n)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500 && strings.Count(w.String(), "\"statement\"")+strings.Count(w.String(), "\tstatement\t") < n; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	pc2 := ts.connectAs(t, "alice", "alice", "hospital")
	pc2.Close(context.Background())
	time.Sleep(50 * time.Millisecond)
	out := w.String()
	stmts := strings.Count(out, "\tstatement\t")
	t.Logf("%d statement lines written at debug", stmts)
	if stmts >= n && strings.Contains(out, "lines_not_logged") {
		t.Errorf("all %d refused statements were written (at Debug), yet a line reports lines_not_logged", n)
	}
	if strings.Count(out, "session started") < 2 {
		t.Errorf("at log_level debug, alice's second session's \"session started\" line was dropped: her Debug statement lines spent her Info bucket")
	}
}
