package proxy

import (
	"context"
	"fmt"
	"strings"
	"sync"
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
