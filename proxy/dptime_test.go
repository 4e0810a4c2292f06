package proxy

import (
	"context"
	"strings"
	"testing"
	"time"
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
