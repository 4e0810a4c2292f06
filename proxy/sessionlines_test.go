package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

// TestSessionLines_ConnectLoopBounded (low–medium; round 99's lead): an
// analyst's session start and end lines were written for every session,
// unlimited (review 87 had taken them out of the bucket of free lines so
// that a flood of refused statements could not hide them). A session
// costs its analyst nothing but a password proof, which a client can
// reuse (SCRAM's is fixed by the verifier's salt): a loop of 4 client
// goroutines opened and closed 1,562 sessions a second through the demo
// and wrote 0.49 MB/s of "session started" and "session ended" lines,
// about 42 GB a day from one analyst. They now have a bucket of their own
// per analyst (Server.sessionLines: twice max_connections_per_analyst,
// then 2 a second), apart from the free lines', so neither kind of flood
// hides the other's lines; the lines left out are counted on the next one
// written (lines_not_logged).
func TestSessionLines_ConnectLoopBounded(t *testing.T) {
	w := &logLines87{}
	const perAnalyst = 4
	ts := startServer(t, serverOpts{mutate: func(c *Config) {
		c.Logger = productionLogger(w, zapcore.InfoLevel)
		c.MaxConnectionsPerAnalyst = perAnalyst
	}})
	const sessions = 60
	start := time.Now()
	for i := 0; i < sessions; i++ {
		pc := ts.connectAs(t, "bob", "bob-secret", "hospital")
		pc.Close(context.Background())
	}
	elapsed := time.Since(start)
	time.Sleep(100 * time.Millisecond) // the last session's goroutine logs its end after the close
	bobLines := func() int {
		n := 0
		for _, l := range strings.Split(w.String(), "\n") {
			if strings.Contains(l, "bob") && (strings.Contains(l, "session started") || strings.Contains(l, "session ended")) {
				n++
			}
		}
		return n
	}
	lines := bobLines()
	allowed := 2*perAnalyst + int(sessionStartLinesPerSecond*(elapsed.Seconds()+1))
	t.Logf("%d sessions of bob in %s: %d session lines (at most %d)", sessions, elapsed.Round(time.Millisecond), lines, allowed)
	if lines > allowed {
		t.Errorf("%d session lines for %d sessions of one analyst in %s; at most %d (burst %d, %d a second)",
			lines, sessions, elapsed.Round(time.Millisecond), allowed, 2*perAnalyst, sessionStartLinesPerSecond)
	}
	if lines < 2*perAnalyst {
		t.Errorf("%d session lines: the analyst's burst (%d) was not written", lines, 2*perAnalyst)
	}

	// Another analyst's session is logged whatever bob did.
	before := len(w.String())
	pc := ts.connectAs(t, "alice", "alice", "hospital")
	pc.Close(context.Background())
	time.Sleep(100 * time.Millisecond)
	if after := w.String()[before:]; !strings.Contains(after, "session started") || !strings.Contains(after, "alice") {
		t.Errorf("alice's session start was not logged after bob's connect loop:\n%s", after)
	}

	// Bob's next written line says how many were left out.
	time.Sleep(time.Second)
	before = len(w.String())
	pc = ts.connectAs(t, "bob", "bob-secret", "hospital")
	defer pc.Close(context.Background())
	time.Sleep(100 * time.Millisecond)
	if after := w.String()[before:]; !strings.Contains(after, "lines_not_logged") {
		t.Errorf("bob's next session line does not count the lines left out:\n%s", after)
	}
}
