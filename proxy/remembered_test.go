package proxy

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/release"
	"github.com/jackc/pgx/v5/pgconn"
)

// rememberingReleaser is a fakeReleaser with an in-memory answer cache
// like release.Releaser's: Remembered answers a request whose plan and ε
// Run answered before.
type rememberingReleaser struct {
	fakeReleaser
	mu         sync.Mutex
	seen       map[string]bool
	remembered int
}

func (r *rememberingReleaser) key(req release.Request) string {
	return req.Plan.Fingerprint + "/" + req.Mechanism + "/" + time.Duration(req.Epsilon*1e9).String()
}

func (r *rememberingReleaser) Run(ctx context.Context, req release.Request) (*release.Result, error) {
	res, err := r.fakeReleaser.Run(ctx, req)
	if err == nil {
		r.mu.Lock()
		r.seen[r.key(req)] = true
		r.mu.Unlock()
	}
	return res, err
}

func (r *rememberingReleaser) Remembered(req release.Request) (*release.Result, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.NoCache || !r.seen[r.key(req)] {
		return nil, false
	}
	r.remembered++
	res := fakeResult(req.Plan)
	res.Cached, res.Notice = true, "dp: cached answer (fake)"
	return res, true
}

// TestDP_RememberedAnswer: a repeated DP query is answered from the
// releaser's memory on the session's goroutine (Run is not called again),
// still padded to the dataset's response_time; a cancel during that
// padding gets 57014 and leaves the session usable; dp.cache = off goes
// to Run.
func TestDP_RememberedAnswer(t *testing.T) {
	const pad = 300 * time.Millisecond
	rel := &rememberingReleaser{seen: map[string]bool{}}
	ts := startServer(t, serverOpts{mutate: func(c *Config) {
		c.Releaser = rel
		c.Datasets["hospital"].ResponseTime = pad
	}})
	pc := ts.connect(t)
	const q = "SELECT COUNT(*) FROM visits"
	for i := range 3 {
		start := time.Now()
		res, err := execAll(t, pc, q)
		if err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		if took := time.Since(start); took < pad {
			t.Fatalf("query %d took %v, less than the response_time %v", i, took, pad)
		}
		if got := rows(res[0]); len(got) != 1 || got[0][0] != "42" {
			t.Fatalf("query %d: rows %v", i, got)
		}
	}
	if n := len(rel.requests()); n != 1 || rel.remembered != 2 {
		t.Fatalf("Run called %d times and Remembered answered %d; want 1 and 2", n, rel.remembered)
	}

	// A cancel during the padding of a remembered answer: 57014 at once.
	ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	go func() {
		time.Sleep(pad / 3)
		if err := pc.CancelRequest(context.Background()); err != nil {
			t.Errorf("cancel request: %v", err)
		}
	}()
	start := time.Now()
	_, err := pc.Exec(ctx, q).ReadAll()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("cancelled remembered answer: %v, want 57014", err)
	}
	if took := time.Since(start); took >= pad {
		t.Errorf("the cancel took effect after %v, not during the %v padding", took, pad)
	}
	if _, err := execAll(t, pc, q); err != nil {
		t.Fatalf("session after the cancel: %v", err)
	}

	// dp.cache = off: answered by Run.
	if _, err := execAll(t, pc, "SET dp.cache = off"); err != nil {
		t.Fatal(err)
	}
	if _, err := execAll(t, pc, q); err != nil {
		t.Fatal(err)
	}
	if n := len(rel.requests()); n != 2 {
		t.Fatalf("with dp.cache = off Run was called %d times in all, want 2", n)
	}
}

func (r *rememberingReleaser) RunBatch(ctx context.Context, reqs []release.Request) ([]*release.Result, error) {
	return runEach(ctx, r.Run, reqs)
}
