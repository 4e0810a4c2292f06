package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestDP_ClientCannotStopRelease: a client's statement_timeout and cancel
// request end the statement for the client (57014, at once, at the moment
// the client chose) but never reach the DP release, which runs under the
// proxy's own context and finishes in the background; the session's next
// DP statement waits for it. So the reply to a cancel or timeout is the
// same whether or not the upstream query had finished (issue 14).
func TestDP_ClientCannotStopRelease(t *testing.T) {
	ts := startServer(t, serverOpts{})
	gate := make(chan struct{})
	ts.releaser.gate = gate
	ts.releaser.started = make(chan struct{}, 4)
	pc := ts.connect(t)
	if _, err := execAll(t, pc, "SET statement_timeout = 100"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := execAll(t, pc, "SELECT COUNT(*) FROM visits")
	if sqlstate(err) != "57014" || !strings.Contains(err.Error(), "statement timeout") {
		t.Fatalf("DP statement under a 100ms client timeout: %v, want 57014", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the timeout reply took %v", d)
	}
	<-ts.releaser.started

	// The next DP statement waits for the first release: it is still held.
	if _, err := execAll(t, pc, "SET statement_timeout = 0"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := pc.Exec(context.Background(), "SELECT SUM(cost) FROM visits").ReadAll()
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("second DP statement ended (%v) while the first release was still running", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(gate)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("second DP statement: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second DP statement never answered")
	}
	ts.releaser.mu.Lock()
	ended := append([]bool(nil), ts.releaser.ctxEnded...)
	ts.releaser.mu.Unlock()
	if len(ended) != 2 || ended[0] || ended[1] {
		t.Fatalf("release contexts ended = %v; the client's timeout must not reach the release", ended)
	}
}

// TestServe_SIGTERMEndsDespiteStuckSession: a session stuck in work that
// ignores cancellation (here a planner that blocks until the test ends)
// cannot keep Serve from returning: after the drain deadline and its
// grace, Serve returns without it (issue 14: SIGTERM always finishes).
func TestServe_SIGTERMEndsDespiteStuckSession(t *testing.T) {
	stuck := make(chan struct{})
	var ts *testServer
	execDone := make(chan struct{})
	defer func() {
		// Unstick the session Serve left behind and let it end (and log)
		// before the test does: its logger is the test's (a race and a
		// "Log in goroutine after … has completed" panic under CI's -race
		// run), and the client's read ends before the harness closes it.
		close(stuck)
		for end := time.Now().Add(10 * time.Second); ts.srv.active.Load() > 0 && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		select {
		case <-execDone:
		case <-time.After(10 * time.Second):
		}
	}()
	ts = startServer(t, serverOpts{
		mutate: func(c *Config) { c.DrainTimeout = 200 * time.Millisecond },
		router: func(r *router) {
			r.rewrite = func(*policy.Dataset, string, rewrite.Options) (*rewrite.Plan, error) {
				<-stuck
				return nil, context.Canceled
			}
		},
	})
	pc := ts.connect(t)
	go func() {
		defer close(execDone)
		_, _ = pc.Exec(context.Background(), "SELECT COUNT(*) FROM visits WHERE age > 2").ReadAll()
	}()
	time.Sleep(100 * time.Millisecond) // the session is in the planner
	start := time.Now()
	ts.cancel()
	select {
	case err := <-ts.done:
		ts.done <- nil
		if err != nil {
			t.Fatalf("Serve = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return with a session stuck past the drain deadline")
	}
	if d := time.Since(start); d > 200*time.Millisecond+drainGrace+time.Second {
		t.Errorf("Serve returned after %v, want about the drain deadline plus %v", d, drainGrace)
	}
}
