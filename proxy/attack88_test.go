package proxy

import (
	"context"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// copyForceQuoteStmt is a COPY of a catalog query with cols columns all
// named a, whose FORCE_QUOTE lists a n times.
func copyForceQuoteStmt(cols, n int) string {
	q := "SELECT " + strings.Repeat("1 a,", cols-1) + "1 a"
	return "COPY (" + q + ") TO STDOUT WITH (FORMAT csv, FORCE_QUOTE (" + strings.Repeat("a,", n-1) + "a))"
}

// medianLatency runs sql on pc for d and returns the median time.
func medianLatency(t *testing.T, ctx context.Context, pc *pgconn.PgConn, sql string, d time.Duration) time.Duration {
	t.Helper()
	var ds []time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		start := time.Now()
		if _, err := pc.Exec(ctx, sql).ReadAll(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		ds = append(ds, time.Since(start))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// flood runs sql as COPY on k sessions of alice until ctx ends, counting
// the statements.
func floodCopy(t *testing.T, ctx context.Context, ts *testServer, k int, sql string) (wait func() int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for i := 0; i < k; i++ {
		pc := ts.connect(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := pc.CopyTo(ctx, io.Discard, sql); err != nil {
					if ctx.Err() == nil {
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
	return func() int { wg.Wait(); return n }
}

// TestAttack88_CopyForceQuoteQuadraticOutsideSlot (medium; rule 1: a
// cost an analyst causes for free, not bounded before it is spent, landing
// on every analyst of the proxy): execCopy checks each FORCE_QUOTE name
// against every column of the query, and then, to mark the forced
// columns, every column against every FORCE_QUOTE name
// (proxy/copy.go: two nested loops, no early exit, no set). The list's
// length is bounded only by the message (1 MiB: 500,000 names "a,") and
// a catalog query's columns by PostgreSQL's 1,664, so one 1 MiB
// statement, COPY (SELECT 1 a, 1 a, … 1,664 times) TO STDOUT WITH
// (FORMAT csv, FORCE_QUOTE (a, a, … 500,000 times)), makes the proxy
// compare 1.7 billion strings. The analyst's planning slot (textSlot,
// attack round 82) covers only the split and classification of a text
// over 16 KiB: it is given back before runSimple, so execCopy, and
// logStatement's fingerprint of the text, run on as many cores as the
// analyst has sessions. The statement costs nothing (a catalog COPY, no
// budget, no rate limit) and answers one row.
//
// Measured (2-core machine, a CI run alongside): one such statement takes
// 1.8–2.2 s of the proxy (execCopy 1.1 s of it in a CPU profile) against
// 0.5 s for the same 1 MiB with a one-column query (lexing and
// classifying); with 4 of alice's sessions sending it in a loop, bob's
// catalog SELECT 1 goes from a median of 0.35 ms to 64 ms (1.9–15 ms under
// the same flood with one column, whose cost is mostly the slot's). Want: the
// FORCE_QUOTE check linear (a set of the column names; at most as many
// names as columns), so that the statement's cost is its classification's,
// which the slot bounds.
func TestAttack88_CopyForceQuoteQuadraticOutsideSlot(t *testing.T) {
	ts := startShadowServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	// One statement's time, with the one-column control of the same size.
	a := ts.connect(t)
	timeOne := func(cols int) time.Duration {
		sql := copyForceQuoteStmt(cols, 500000)
		best := time.Duration(1 << 62)
		for i := 0; i < 2; i++ {
			start := time.Now()
			if _, err := a.CopyTo(ctx, io.Discard, sql); err != nil {
				t.Fatalf("COPY (%d columns): %v", cols, err)
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	narrow, wide := timeOne(1), timeOne(1664)
	t.Logf("one 1 MiB COPY: %v with 1 column, %v with 1,664 columns", narrow, wide)

	// Another analyst's catalog statements while alice's sessions send it.
	bob := ts.connectAs(t, "bob", "bob-secret", "hospital")
	base := medianLatency(t, ctx, bob, "SELECT 1", 2*time.Second)
	during := map[int]time.Duration{}
	for _, cols := range []int{1, 1664} {
		fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
		wait := floodCopy(t, fctx, ts, 4, copyForceQuoteStmt(cols, 500000))
		time.Sleep(time.Second)
		during[cols] = medianLatency(t, ctx, bob, "SELECT 1", 6*time.Second)
		fcancel()
		n := wait()
		t.Logf("bob's SELECT 1: median %v before, %v while 4 of alice's sessions send the %d-column COPY (%d sent)", base, during[cols], cols, n)
	}
	if wide > 2*narrow {
		t.Errorf("the 1,664-column COPY took %v, %.1f times the one-column COPY of the same size (%v): its FORCE_QUOTE check is quadratic, outside the analyst's slot", wide, float64(wide)/float64(narrow), narrow)
	}
	// bob's medians are logged above, not asserted: milliseconds of
	// latency under CI's -race load would measure the machine.
}
