package integration

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
)

var fairDuration = flag.Duration("fair.duration", 60*time.Second, "how long TestFairShare_HeavyAnalyst loads the data server (issue 27: 60 s)")

// The heaviest statements an analyst can run on the demo, as the attack of
// issue 27 ran them: unit self-joins (the largest fan-out accepted: three
// copies are refused), grouped by a private key, and many groups,
// uncached, at the floor ε.
var heavyQueries = []string{
	`SELECT a.diagnosis, COUNT(*) FROM visits a JOIN visits b ON a.patient_id = b.patient_id GROUP BY a.diagnosis`,
	`SELECT a.department, AVG(b.cost), STDDEV(b.cost) FROM visits a JOIN visits b ON a.patient_id = b.patient_id GROUP BY a.department`,
	`SELECT date_trunc('day', visit_date), department, AVG(cost) FROM visits GROUP BY 1, 2`,
}

// TestFairShare_HeavyAnalyst: one analyst (hoarder) runs the heaviest
// accepted DP queries from six sessions at once for -fair.duration while a
// second analyst (victim) keeps running ordinary DP and catalog statements.
// None of victim's statements fails after a charge, no incident is recorded
// against him and he is never suspended: hoarder's load is capped by her
// share of the dataset's DP slots (proxy/admission.go), and a time-out
// under her load would be an availability failure, not victim's incident.
func TestFairShare_HeavyAnalyst(t *testing.T) {
	requireDemo(t)
	if testing.Short() && !pgtest.InCI() {
		t.Skip("-short: loads the data server for -fair.duration (never skipped under CI)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *fairDuration+3*time.Minute)
	defer cancel()
	// Analysts of this test only: the ledger tests count hoarder's charges,
	// and the releases of her statements still running at the end finish
	// in the background.
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		for _, a := range []string{"hoarder", "victim"} {
			cfg["analysts"].(map[string]any)[a] = map[string]any{"password": "plain:" + a}
		}
	})
	p := startProxy(t, cfgPath, addr)
	ledger := connect(t, ctx, ledgerDSN())
	var before int
	if err := ledger.QueryRow(ctx, "SELECT count(*) FROM dpproxy_ledger.incident WHERE analyst = 'victim'").Scan(&before); err != nil {
		t.Fatal(err)
	}

	// hoarder's sessions end with the test's load: her statements still
	// running then are cancelled (their releases finish in the proxy).
	cctx, stopCarol := context.WithCancel(ctx)
	defer stopCarol()
	var wg sync.WaitGroup
	var heavy, heavyRefused atomic.Int64
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pgconn.Connect(cctx, p.dsn("hoarder"))
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close(context.Background())
			if _, err := c.Exec(ctx, "SET dp.epsilon = 0.001; SET dp.delta = 1e-9; SET dp.cache = off").ReadAll(); err != nil {
				t.Error(err)
				return
			}
			for n := i; ; n++ {
				heavy.Add(1)
				_, err := c.Exec(cctx, heavyQueries[n%len(heavyQueries)]).ReadAll()
				if cctx.Err() != nil {
					return
				}
				if err != nil {
					if heavyRefused.Add(1) <= 3 {
						t.Logf("hoarder: %v", err)
					}
				}
			}
		}()
	}

	// victim: a DP statement and a catalog statement, again and again.
	c, err := pgconn.Connect(ctx, p.dsn("victim"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "SET dp.epsilon = 0.01; SET dp.cache = off").ReadAll(); err != nil {
		t.Fatal(err)
	}
	var answered int
	var failures []string
	deadline := time.Now().Add(*fairDuration)
	for time.Now().Before(deadline) {
		for _, q := range []string{
			"SELECT department, COUNT(*) FROM visits GROUP BY department",
			"SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' ORDER BY 1",
		} {
			if _, err := c.Exec(ctx, q).ReadAll(); err != nil {
				failures = append(failures, fmt.Sprintf("%s: %v", strings.Fields(q)[1], err))
				continue
			}
			answered++
		}
	}
	stopCarol()
	wg.Wait()
	t.Logf("hoarder sent %d heavy statements (%d refused or failed); victim had %d answers", heavy.Load(), heavyRefused.Load(), answered)
	if len(failures) > 0 {
		t.Fatalf("%d of victim's statements failed under hoarder's load:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	if heavy.Load() < 8 {
		t.Fatalf("hoarder sent only %d heavy statements: the test did not load the data server", heavy.Load())
	}
	var after int
	var suspended bool
	if err := ledger.QueryRow(ctx, "SELECT count(*), coalesce(bool_or(suspended), false) FROM dpproxy_ledger.incident WHERE analyst = 'victim'").Scan(&after, &suspended); err != nil {
		t.Fatal(err)
	}
	if after != before || suspended {
		t.Fatalf("victim has %d new incidents (suspended %v) after hoarder's load", after-before, suspended)
	}
}
