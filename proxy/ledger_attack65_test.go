package proxy

import (
	"context"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/ledger"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5/pgconn"
)

// Attack round 65: rule 1 (every cost an analyst can cause is bounded
// before the charge by public quantities; no analyst's statement changes
// another's session, resources or standing) against the ledger's shared
// connection pool and the post-processing path.

// leafCopies65 is a post-processing statement whose n DP leaves are the
// same statement leaf (CTEs a, b, c, …), then extra leaves, selecting
// count(*) from the first.
func leafCopies65(leaf string, n int, extra ...string) string {
	var b strings.Builder
	b.WriteString("WITH ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(rune('a'+i)) + " AS (" + leaf + ")")
	}
	for i, e := range extra {
		b.WriteString(", " + string(rune('a'+n+i)) + " AS (" + e + ")")
	}
	b.WriteString(" SELECT count(*) FROM a")
	return b.String()
}

// execLong65 runs a simple query with a long client deadline: the
// statements of this round take tens of seconds under the race detector.
func execLong65(t *testing.T, pc *pgconn.PgConn, sql string) ([]*pgconn.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return pc.Exec(ctx, sql).ReadAll()
}

// heapPeak65 samples the heap until stop is closed and keeps its peak.
func heapPeak65(stop <-chan struct{}, done chan<- uint64) {
	var ms runtime.MemStats
	var peak uint64
	for {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
		select {
		case <-stop:
			done <- peak
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestAttack65_PostLeafCopiesHoldHundredsOfMB (attack round 65, severity
// high: rule 1, memory one analyst's one free statement makes the proxy
// hold, 50 times max_memory_per_analyst_mb and far past SECURITY.md's "a
// simple-protocol DP answer while it is sent: at most 16 MiB, one per
// session").
//
// Attack: alice releases once (one charge) a DP statement over public keys
// whose answer is just under the 16 MiB answer bound (labelDP: two CASE
// labels of 1,700 bytes × a 4,000-bucket width_bucket, 8,004 groups, 14 MB
// stored in the ledger; too large for the in-memory answer cache, so it is
// served from the ledger). Then she sends a post-processing statement that
// names that same leaf 16 times (WITH a AS (leaf), b AS (leaf), … p AS
// (leaf) SELECT count(*) FROM a: 57 KB, under the 64 KiB text bound).
// Every leaf is cached: the statement charges nothing, passes no rate
// limit and (pipeline.CheckPost, release.IsCached) fetches and parses the
// 14 MB answer from the ledger once per leaf, 16 times, outside the DP
// admission; RunBatch answers the 16 leaves with one answer, but
// pipeline.Outer encodes each leaf's columns again as text arrays
// (textArray: a strings.Builder, then a copy), 16 × 14 MB of parameters,
// which pgconn copies once more into one Bind message to the shadow. None
// of it is counted in the analyst's memory (only the outer result is), and
// the outer phase runs after the admission ticket is given back (paced
// frees a ticket it took itself when RunBatch returns), so the analyst's
// sessions do it at once up to their shadow share.
//
// Measured (one session, no race detector, GOGC 10): the free statement
// took 7.7–10.5 s (35 s under the race detector) and the proxy's heap
// peaked 656–787 MB above its level before it (672 MB under race),
// against a max_memory_per_analyst of 16 MiB; the statement succeeded.
// Five sessions (the default shadow share per analyst) hold ~4 GB.
//
// Fix direction: bound a post-processing statement's leaves together
// before the charge (the sum of their release.AnswerBytes, each leaf
// named again counted again, against the answer bound or the analyst's
// memory), charge the leaves' results and the encoded parameters to the
// analyst's memory (checkMemory before the leaves are looked up or run,
// as for a kept answer) for as long as they are held, bind a leaf named
// twice once (one parameter set, referenced by both CTEs), and keep the
// admission ticket until the outer SQL has run.
func TestAttack65_PostLeafCopiesHoldHundredsOfMB(t *testing.T) {
	const bound = 16 << 20
	old := debug.SetGCPercent(10)
	defer debug.SetGCPercent(old)
	r := startRealDP(t, func(c *Config) { c.MaxMemoryPerAnalyst = bound })
	pc := r.connect(t)
	leaf := labelDP(1700, 4000)
	if _, err := execLong65(t, pc, leaf); err != nil {
		t.Fatal(err)
	}
	all := r.charges(t)
	t.Logf("the leaf's answer stored in the ledger: %d bytes", len(all[len(all)-1].answer))
	post := leafCopies65(leaf, 16)
	t.Logf("post-processing statement: %d bytes", len(post))
	n0 := len(all)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	stop, peakc := make(chan struct{}), make(chan uint64)
	go heapPeak65(stop, peakc)
	start := time.Now()
	res, err := execLong65(t, pc, post)
	close(stop)
	peak := <-peakc
	growth := int64(peak) - int64(base)
	charged := len(r.charges(t)) - n0
	t.Logf("post: err %v in %v, %d charges, heap peak %d MB above its level before (max_memory_per_analyst %d MB)",
		err, time.Since(start), charged, growth>>20, bound>>20)
	if err == nil {
		t.Logf("rows %v", rows(res[0]))
	}
	// One statement's transient memory: the analyst's bound, one answer
	// being sent (16 MiB) and slack for the collector (GOGC 10).
	if limit := int64(4 * bound); growth > limit {
		t.Errorf("one free post-processing statement (%d charges) raised the proxy's heap by %d MB, past %d MB (4 × max_memory_per_analyst): its 16 copies of a cached leaf are held and encoded uncounted",
			charged, growth>>20, limit>>20)
	}
}

// meter65 is the ledger as release sees it, counting the answer-cache
// reads of one fingerprint in flight at once and timing the reservations
// of one analyst.
type meter65 struct {
	*ledger.Ledger
	fingerprint atomic.Pointer[string]
	inFlight    atomic.Int64
	maxInFlight atomic.Int64
	reads       atomic.Int64

	mu       sync.Mutex
	analyst  string
	reserves []time.Duration
}

func (m *meter65) Cached(ctx context.Context, dataset, fingerprint, version string) ([]byte, bool, error) {
	if fp := m.fingerprint.Load(); fp != nil && *fp == fingerprint {
		n := m.inFlight.Add(1)
		defer m.inFlight.Add(-1)
		m.reads.Add(1)
		for {
			mx := m.maxInFlight.Load()
			if n <= mx || m.maxInFlight.CompareAndSwap(mx, n) {
				break
			}
		}
	}
	return m.Ledger.Cached(ctx, dataset, fingerprint, version)
}

func (m *meter65) Reserve(ctx context.Context, c accountant.Charge) (*accountant.Reservation, error) {
	start := time.Now()
	res, err := m.Ledger.Reserve(ctx, c)
	m.mu.Lock()
	if c.Analyst == m.analyst {
		m.reserves = append(m.reserves, time.Since(start))
	}
	m.mu.Unlock()
	return res, err
}

// takeReserves returns the reservation times recorded since the last call.
func (m *meter65) takeReserves() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.reserves
	m.reserves = nil
	return out
}

func median65(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestAttack65_RefusedPostStatementsFloodLedger (attack round 65, severity
// medium: rule 1, ledger work and proxy CPU an analyst causes with
// statements refused before any charge, with no admission, rate limit or
// per-analyst bound, which delays every other analyst's charge on the
// shared ledger pool).
//
// The ledger's pgxpool (max(4, NumCPU) connections) serves every
// session's Reserve, Release, Status and answer-cache read. A DP
// statement's cache reads happen under its admission ticket
// (dp_concurrency_per_analyst, default 2), but a post-processing
// statement's leaves are looked up in the answer cache by
// pipeline.CheckPost (release.IsCached) before the rate limit and the
// admission, one ledger read per leaf named (not deduplicated), and before
// the other leaves' refusals: the leaves' release.Check (the 60,000-cell
// bound, partition selection's δ, …) runs leaf by leaf interleaved with the
// lookups.
//
// Attack: alice releases once a leaf whose 14 MB answer is served from the
// ledger only (over the in-memory cache's entry bound), then loops, in 6
// sessions, a statement naming it 15 times plus one leaf over the
// 60,000-cell bound. Each statement reads 15 × 14 MB from the ledger and
// parses it (2.5 s), then is refused with 54000: nothing charged, nothing
// counted, repeatable forever (also with an exhausted budget).
//
// Measured (no race detector): bob's fresh DP statement took 17–34 ms
// alone and 0.25–3.4 s during the flood (medians ×13 to ×35 over runs),
// his Reserve alone 0.8 ms against 54 ms (×65), waiting behind alice's
// reads in the pool's FIFO; alice had 6 ledger answer reads in flight at
// once (her admission allows 2). With the race detector: 1.6 ms against
// 41 ms, 5 reads in flight.
//
// Fix direction: in CheckPost run every leaf's release.Check before any
// cache lookup, deduplicate leaves by cache key, and take the rate limit
// and the DP admission ticket before the lookups (a cached leaf is still
// free, but its ledger read waits for the analyst's share like any DP
// statement's); consider a ledger-pool share per analyst (as the shadow
// pool has) and a bound on Status/Cached reads of one analyst.
func TestAttack65_RefusedPostStatementsFloodLedger(t *testing.T) {
	m := &meter65{analyst: "bob"}
	r := startRealDP(t, func(c *Config) {
		m.Ledger = c.Ledger.(*ledger.Ledger)
		rel, err := release.New(release.Config{Ledger: m, Planner: rewrite.Replan})
		if err != nil {
			t.Fatal(err)
		}
		c.Releaser = rel
	})
	perAnalyst := int64(defaultDPConcurrencyPerAnalyst)
	pc := r.connect(t)
	leaf := labelDP(1700, 4000)
	if _, err := execLong65(t, pc, leaf); err != nil {
		t.Fatal(err)
	}
	all := r.charges(t)
	fp := all[len(all)-1].fingerprint
	m.fingerprint.Store(&fp)
	post := leafCopies65(leaf, 15, "SELECT width_bucket(age, 0, 110, 9998) AS w, department, COUNT(*) FROM visits GROUP BY 1, 2")
	n0 := len(all)
	start := time.Now()
	_, err := execLong65(t, pc, post)
	t.Logf("the attack statement (%d bytes): %v (SQLSTATE %s) in %v after %d ledger reads of the cached leaf",
		len(post), err, sqlstate(err), time.Since(start), m.reads.Load())
	if sqlstate(err) != "54000" {
		t.Fatalf("the attack statement was not refused with 54000: %v", err)
	}

	bob := r.connectAs(t, "bob", "bob-secret", "hospital")
	if _, err := execAll(t, bob, "SET dp.epsilon = 0.01; SET dp.cache = off"); err != nil {
		t.Fatal(err)
	}
	const q = "SELECT department, COUNT(*) FROM visits GROUP BY 1"
	bobRuns := func(n int) (stmt []time.Duration) {
		for range n {
			t0 := time.Now()
			if _, err := execLong65(t, bob, q); err != nil {
				t.Errorf("bob's DP statement: %v", err)
				return
			}
			stmt = append(stmt, time.Since(t0))
		}
		return stmt
	}
	base := bobRuns(5)
	baseRes := m.takeReserves()

	m.maxInFlight.Store(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var refused, other atomic.Int64
	const sessions = 6
	for range sessions {
		a := r.connect(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				_, err := a.Exec(ctx, post).ReadAll()
				cancel()
				if sqlstate(err) == "54000" {
					refused.Add(1)
				} else {
					other.Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	flood := bobRuns(5)
	floodRes := m.takeReserves()
	close(stop)
	wg.Wait()
	charged := len(since(r.charges(t), n0, "alice"))
	t.Logf("bob's statements alone %v (Reserve median %v); during alice's flood %v (Reserve median %v)",
		base, median65(baseRes), flood, median65(floodRes))
	t.Logf("alice: %d statements refused with 54000 (%d other), %d charges, %d ledger reads of her cached leaf, at most %d in flight at once",
		refused.Load(), other.Load(), charged, m.reads.Load(), m.maxInFlight.Load())
	if mx := m.maxInFlight.Load(); mx > perAnalyst {
		t.Errorf("alice's statements, refused before any charge, had %d ledger answer reads in flight at once (her DP admission allows %d): the shared ledger pool is hers to fill",
			mx, perAnalyst)
	}
	if charged != 0 {
		t.Errorf("alice's refused statements charged %d times", charged)
	}
}
