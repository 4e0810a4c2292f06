package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestReview97_FreePostOuterUnbounded (medium; one analyst, free after one
// charge): since attack round 96's fix (f943784) a post-processing
// statement whose leaves are all remembered skips run.Price, so
// run.Charges keeps CheckLeaves' value (true whenever there is a DP leaf)
// and shadowRun treats the free statement's outer result as charged: it is
// kept whatever the analyst's memory bound (shadowRows unbounded,
// chargeMemoryOwn past it). Before the fix Price set Charges false for a
// fully cached statement and the result was bounded (54000 past it). So
// every free repetition may hold up to max_buffered_result (64 MiB) past
// max_memory_per_analyst_mb, once per session.
//
// Here alice's bound is 8 MiB and the outer SQL returns about 12 MB; the
// charged run is answered (kept whatever the bound, as designed), the
// free repetition must be refused (54000), as any free result over the
// bound is.
func TestReview97_FreePostOuterUnbounded(t *testing.T) {
	r := startRealDP(t, func(c *Config) {
		c.MaxMemoryPerAnalyst = 8 << 20
	})
	pc := r.connect(t)
	if _, err := execAll(t, pc, "SET dp.epsilon = 0.01"); err != nil {
		t.Fatal(err)
	}
	q := "WITH a AS (SELECT COUNT(*) AS n FROM visits WHERE age > 30) SELECT repeat('x', 1000) || a.n AS s FROM a, generate_series(1, 12000) g"
	if _, err := execAll(t, pc, q); err != nil {
		t.Fatalf("charged run: %v", err)
	}
	acctPeak := samplePeak(2*time.Millisecond, func() int64 { return r.srv.memoryOf("alice") })
	_, err := pc.Exec(context.Background(), q).ReadAll()
	peak := acctPeak()
	t.Logf("free repetition: %v; alice's account peaked at %.1f MiB (bound 8 MiB)", err, float64(peak)/(1<<20))
	if err == nil || sqlstate(err) != "54000" {
		t.Errorf("a free (fully cached) post-processing statement's 12 MB outer result was kept past alice's 8 MiB bound (err %v, account peak %.1f MiB): run.Charges is left true when rememberedAll answers every leaf",
			err, float64(peak)/(1<<20))
	}
}

// TestReview97_PipelinedUnnamedParse checks that charging Parse of the
// unnamed statement (attack round 93) does not refuse an honest
// pipeline of unnamed Parse/Bind/Execute (pgx's batch in exec mode,
// pgjdbc's executeBatch before prepareThreshold) of large statements
// under a small bound: each replaces the last, so the session holds at
// most two (the last portal pins the replaced one).
func TestReview97_PipelinedUnnamedParse(t *testing.T) {
	r := startRealDP(t, func(c *Config) {
		c.MaxMemoryPerAnalyst = 16 << 20
	})
	pc := r.connect(t)
	pad := strings.Repeat("x", 900<<10)
	const n = 40
	pl := pc.StartPipeline(context.Background())
	for i := 0; i < n; i++ {
		pl.SendQueryParams(fmt.Sprintf("SELECT %d AS i /* %s */", i, pad), nil, nil, nil, nil)
	}
	pl.SendPipelineSync()
	if err := pl.Flush(); err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		res, err := pl.GetResults()
		if err != nil {
			t.Fatalf("after %d results: %v", got, err)
		}
		if rr, ok := res.(*pgconn.ResultReader); ok {
			if _, err := rr.Close(); err != nil {
				t.Fatalf("statement %d: %v", got, err)
			}
			got++
		}
		if _, ok := res.(*pgconn.PipelineSync); ok {
			break
		}
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pipelined unnamed statements of 900 KiB answered; alice's account now %.1f MiB", got, float64(r.srv.memoryOf("alice"))/(1<<20))
	if got != n {
		t.Errorf("%d of %d answered", got, n)
	}
}

// TestReview97_PostRoomHeldWhileQueued (low–medium; honest BI tool):
// a post-processing statement reserves 3 × its leaves' estimated answers
// (postAnswersRoom; 45 MiB for one GROUP BY of a private key wrapped in
// SELECT * FROM (…) LIMIT n, as Tableau wraps custom SQL) in the
// analyst's account before it waits for a DP admission slot, and holds
// it through the wait (up to dp_queue_timeout). A dashboard of six such
// tiles of one analyst, two running at a time (dp_concurrency_per_analyst),
// reserves 270 MiB at once under the default 256 MiB bound: one tile is
// refused with 54000 whose detail and hint speak of prepared statements
// and portals, though only two statements run. The same six tiles
// unwrapped (plain DP statements, 15 MiB each) are all answered.
func TestReview97_PostRoomHeldWhileQueued(t *testing.T) {
	r := startRealDP(t, func(c *Config) {
		c.DPConcurrency, c.DPConcurrencyPerAnalyst = 4, 2
		c.MaxConnectionsPerAnalyst = 20
		for _, d := range c.Datasets {
			d.ResponseTime = 700 * time.Millisecond
		}
	})
	const n = 6
	pcs := make([]*pgconn.PgConn, n)
	for i := range pcs {
		pcs[i] = r.connect(t)
		if _, err := execAll(t, pcs[i], "SET dp.epsilon = 0.01; SET dp.delta = 1e-8"); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, pc := range pcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := fmt.Sprintf("SELECT * FROM (SELECT diagnosis, COUNT(*) AS n FROM visits WHERE age > %d GROUP BY diagnosis) t LIMIT 2000", 10+i)
			_, errs[i] = pc.Exec(context.Background(), q).ReadAll()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				t.Errorf("tile %d refused: %s %s (detail %q, hint %q)", i, pe.Code, pe.Message, pe.Detail, pe.Hint)
			} else {
				t.Errorf("tile %d: %v", i, err)
			}
		}
	}
}
