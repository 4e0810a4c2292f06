package proxy

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// post96 is a post-processing statement of n DP leaves (distinct
// predicates, so n answers) whose outer SQL adds them up.
func post96(n int, outer string) string {
	var with, sum, from []string
	for i := 1; i <= n; i++ {
		with = append(with, fmt.Sprintf("a%d AS (SELECT COUNT(*) AS n FROM visits WHERE age > %d)", i, 10+i))
		sum = append(sum, fmt.Sprintf("a%d.n", i))
		from = append(from, fmt.Sprintf("a%d", i))
	}
	return "WITH " + strings.Join(with, ", ") + " SELECT " + strings.Join(sum, " + ") + " AS s FROM " + strings.Join(from, ", ") + outer
}

// TestAttack96_FreePostHoldsDPSlot (medium; colluding analysts, or one
// analyst where dp_concurrency ≤ dp_concurrency_per_analyst): a
// post-processing statement takes one of the dataset's DP admission
// slots before its leaves are looked up in the answer cache
// (proxy/post.go), and holds it until the statement ends: through the
// padding of every leaf's time slot (their sum, 16 leaves × the slot) and
// through its outer SQL on the shadow (up to catalog_statement_timeout),
// even when every leaf is answered from the cache and nothing is read or
// charged. A plain DP statement answered from the cache takes no slot
// (dp.go remembered). So a statement repeated for free holds a slot of
// the data server's fair share as long as the most expensive charged one
// (measured on the demo: a 16-leaf repetition held it 32 s, more than
// dp_queue_timeout's 30 s), and SECURITY.md's "colluding analysts can
// take the shadow pool, for catalog statements only, not DP queries"
// does not hold: five colluders with two sessions each hold all ten of
// the demo's slots at no cost after one charge each, and another
// analyst's DP query fails with 53000.
//
// Here the dataset has 2 slots, both alice's (standing for the colluders'
// ten); her two sessions repeat a charged 8-leaf statement (cached: it
// costs nothing), and bob's new DP query, with a 1.5 s queue timeout,
// must still be answered.
func TestAttack96_FreePostHoldsDPSlot(t *testing.T) {
	r := startRealDP(t, func(c *Config) {
		c.DPConcurrency, c.DPConcurrencyPerAnalyst = 2, 2
		c.DPQueueTimeout = 1500 * time.Millisecond
		for _, d := range c.Datasets {
			d.ResponseTime = 400 * time.Millisecond
		}
	})
	a1, a2 := r.connect(t), r.connect(t)
	bob := r.connectAs(t, "bob", "bob-secret", "hospital")
	for _, pc := range []*pgconn.PgConn{a1, a2} {
		if _, err := execAll(t, pc, "SET dp.epsilon = 0.01"); err != nil {
			t.Fatal(err)
		}
	}
	q := post96(8, "")
	start := time.Now()
	if _, err := execAll(t, a1, q); err != nil { // charged once
		t.Fatal(err)
	}
	t.Logf("first (charged) run: %v", time.Since(start))
	spent := func() string {
		res, err := execAll(t, a1, "SHOW dp.budget")
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows(res[0]) {
			if row[0] == "hospital" {
				return row[2]
			}
		}
		t.Fatal("no hospital row in SHOW dp.budget")
		return ""
	}
	before := spent()
	// Both of alice's sessions repeat it (free) while bob asks.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, pc := range []*pgconn.PgConn{a1, a2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			_, err := pc.Exec(context.Background(), q).ReadAll()
			t.Logf("alice's free repetition: %v (%v)", time.Since(t0), err)
			errs <- err
		}()
	}
	time.Sleep(200 * time.Millisecond)
	t0 := time.Now()
	_, err := execAll(t, bob, "SELECT COUNT(*) FROM visits WHERE age > 60")
	bobTook := time.Since(t0)
	wg.Wait()
	close(errs)
	for e := range errs {
		if e != nil {
			t.Fatalf("alice's repetition: %v", e)
		}
	}
	after := spent()
	t.Logf("alice's spend %s -> %s over the repetitions; bob's DP query: %v after %v", before, after, err, bobTook)
	if before != after {
		t.Fatalf("the repetitions were charged (%s -> %s): the test needs them free", before, after)
	}
	if err != nil {
		t.Errorf("bob's DP query failed (%s) while alice's free, fully cached post-processing statements held the dataset's DP slots: %v", sqlstate(err), err)
	}
}

// TestAttack96_PostParamsUncounted (medium; one analyst, free after one
// charge): a post-processing statement binds its leaves' released rows
// as text arrays (pipeline.Outer) and pgconn copies them into the Bind
// message of the outer SQL, held in the shadow connection's write buffer
// while the outer SQL runs (up to catalog_statement_timeout). Neither is
// counted in the analyst's memory account (execPost reserves room for
// the outer result only): the leaves' answers may total 16 MiB
// (pipeline.CheckLeaves), so each free repetition holds 16–32 MiB the
// account never sees, once per session (max_connections_per_analyst),
// where a plain DP statement's cached answer has its room charged
// (dp.go answerRoom, attack round 66).
//
// Here 7 leaves of 1.6 MB answers (CASE labels of 800 bytes × 1,000
// buckets), charged once, are repeated from 8 sessions at once under a
// 16 MiB bound, with an outer SQL that runs about a second; the heap
// they grow must stay within the bound (plus slack), or be refused.
func TestAttack96_PostParamsUncounted(t *testing.T) {
	r := startRealDP(t, func(c *Config) {
		c.MaxMemoryPerAnalyst = 48 << 20
		c.MaxConnectionsPerAnalyst = 20
	})
	var with, parts []string
	for i := 1; i <= 7; i++ {
		with = append(with, fmt.Sprintf("a%d AS (%s)", i, labelDP(800, 1000+i)))
		parts = append(parts, fmt.Sprintf("(SELECT count(*) FROM a%d)", i))
	}
	q := "WITH " + strings.Join(with, ", ") + " SELECT " + strings.Join(parts, " + ") +
		" + (SELECT count(*) FROM a1 x, a1 y, generate_series(1, 2) g) AS s"
	const n = 8
	pcs := make([]*pgconn.PgConn, n)
	for i := range pcs {
		pcs[i] = r.connect(t)
		if _, err := execAll(t, pcs[i], "SET dp.epsilon = 0.001"); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	if _, err := execAll(t, pcs[0], q); err != nil {
		t.Fatal(err)
	}
	t.Logf("charged run: %v", time.Since(t0))
	t0 = time.Now()
	if _, err := execAll(t, pcs[0], q); err != nil {
		t.Fatal(err)
	}
	t.Logf("free run: %v", time.Since(t0))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := int64(ms.HeapInuse)
	heapPeak := samplePeak(20*time.Millisecond, func() int64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapInuse) - base
	})
	acctPeak := samplePeak(20*time.Millisecond, func() int64 { return r.srv.memoryOf("alice") })
	var wg sync.WaitGroup
	var refused, answered atomic.Int32
	for _, pc := range pcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := pc.Exec(context.Background(), q).ReadAll()
			switch {
			case err == nil:
				answered.Add(1)
			case sqlstate(err) == "54000":
				refused.Add(1)
			default:
				t.Errorf("repetition: %v", err)
			}
		}()
	}
	wg.Wait()
	peak, acct := heapPeak(), acctPeak()
	t.Logf("%d free repetitions at once: %d answered, %d refused (54000); heap grew up to %.1f MiB; alice's account peaked at %.1f MiB (bound 48 MiB)",
		n, answered.Load(), refused.Load(), float64(peak)/(1<<20), float64(acct)/(1<<20))
	if peak > 64<<20 {
		t.Errorf("alice's free post-processing statements grew the heap by %.1f MiB with her account at most %.1f MiB (bound 48 MiB): the leaves' bound arrays are not counted",
			float64(peak)/(1<<20), float64(acct)/(1<<20))
	}
}

// samplePeak samples f every period, from now until the function it
// returns is called, which returns the largest value seen (at least 0).
func samplePeak(period time.Duration, f func() int64) func() int64 {
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(period):
			}
			if v := f(); v > peak.Load() {
				peak.Store(v)
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return peak.Load()
	}
}
