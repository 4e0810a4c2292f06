package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/catalog"
	"github.com/dpproxy/dpproxy/internal/upstream"
	"github.com/jackc/pgx/v5"
)

// TestAttack60_QuantilesPassTimeoutAfterCharge (attack round 60, severity
// medium) is rewrite's TestAttack60_QuantileWorkUncounted end to end: a
// real proxy, release, ledger and data database, with a work bound
// (visits declare max_rows 20,000, the table's real size), the default
// work_rate of 500,000 rows/s, a 500 ms response_time and a statement
// time-out of 1 s (the data server's and the proxy's, in place of the
// default 30 s, to keep the test fast: every figure scales with the rows).
//
// One percentile_cont of age plans to a work bound of 20,000 rows (0.04 s)
// and is answered in its 0.5 s slot. A hundred of them (levels 1/101 …
// 100/101: a 5 KB statement) plan to the same 20,000-row bound — the work
// bound does not count measures — so the proxy accepts the statement and
// charges it; upstream, each quantile is a window sort and two array
// aggregations over every row (about 11 ms per quantile per 10,000 rows
// here), so the emitted SQL needs about 2 s, past the 1 s time-out. The
// analyst gets the incident's XX000 after the charge, and with the
// default incident_limit of 1 every further DP statement is refused
// (42501) until a steward resumes them. At the defaults (30 s time-out,
// 250,000 max_rows) 200 quantiles do the same (51.7 s measured on 200,000
// visits), and the step of the slot ladder an accepted one lands on moves
// with how many rows the WHERE keeps.
//
// The correct behaviour asserted: a statement the proxy accepts and
// charges finishes within its statement time-out — it is answered, or it
// is refused before the charge — and the analyst is not suspended by a
// query the planner accepted.
func TestAttack60_QuantilesPassTimeoutAfterCharge(t *testing.T) {
	b, ts := startTimedDP(t)
	pc := ts.connect(t)
	if _, err := execAll(t, pc, "SET dp.contribution = fixed"); err != nil {
		t.Fatal(err)
	}
	quantiles := func(k int) string {
		var ms []string
		for i := 0; i < k; i++ {
			ms = append(ms, fmt.Sprintf("percentile_cont(%g) WITHIN GROUP (ORDER BY age)", float64(i+1)/float64(k+1)))
		}
		return "SELECT " + strings.Join(ms, ", ") + " FROM visits"
	}
	// The control: one quantile, answered.
	start := time.Now()
	if _, err := execAll(t, pc, quantiles(1)); err != nil {
		t.Fatalf("control: one quantile: %v", err)
	}
	t.Logf("one quantile answered in %v", time.Since(start).Round(time.Millisecond))
	explain, err := execAll(t, pc, "EXPLAIN "+quantiles(100))
	if err != nil {
		t.Fatalf("EXPLAIN of 100 quantiles: %v", err)
	}
	for _, row := range rows(explain[0]) {
		if strings.Contains(strings.ToLower(row[0]), "work") || strings.Contains(strings.ToLower(row[0]), "slot") {
			t.Logf("EXPLAIN: %s", row[0])
		}
	}

	before := len(chargesOf(t, b.ledgerDSN))
	start = time.Now()
	_, err = execAll(t, pc, quantiles(100))
	took := time.Since(start)
	charged := len(chargesOf(t, b.ledgerDSN)) > before
	if err != nil && charged {
		t.Errorf("100 quantiles of age were accepted and charged (work bound of one quantile), then failed after %v: %v — an accepted query passed the %v statement time-out after its charge", took.Round(time.Millisecond), err, timedDPTimeout)
	}
	if _, err := execAll(t, pc, "SELECT COUNT(*) FROM visits"); err != nil {
		t.Errorf("after that query the analyst's next DP statement fails: %v", err)
	}
}

// chargesOf returns the ids of the ledger's charge rows.
func chargesOf(t *testing.T, ledgerDSN string) []int64 {
	t.Helper()
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, ledgerDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rs, err := conn.Query(ctx, `SELECT id FROM dpproxy_ledger.charge ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rs, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// timedDPTimeout is startTimedDP's statement time-out.
const timedDPTimeout = time.Second

// startTimedDP is a proxy over 20,000 visits of 4,000 patients whose
// policy declares the table's real size, with a 1 s statement time-out, a
// 500 ms response time and a work rate of 500,000 rows/s: a plan's work
// bound and time slot are those EXPLAIN shows, and a query that runs past
// them fails after its charge.
func startTimedDP(t *testing.T) (realBackends, *testServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := newRealBackends(t, ctx, []string{
		`INSERT INTO patients SELECT p, 1930 + p % 90, CASE WHEN p % 2 = 0 THEN 'F' ELSE 'M' END,
			(ARRAY['north','south','east','west','central'])[1 + p % 5] FROM generate_series(1, 4000) p`,
		`INSERT INTO visits SELECT 1 + v % 4000, DATE '2020-01-01' + (v * 7) % 1800,
			(ARRAY['cardiology','emergency','neurology','oncology','orthopedics','pediatrics','surgery'])[1 + v % 7],
			'D' || (v % 13), 1 + v % 100, (v % 500) * 3.5, v % 10 FROM generate_series(1, 20000) v`,
	})
	up, err := upstream.New(ctx, upstream.Config{DSN: b.dataDSN, StatementTimeout: timedDPTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	dataConn, err := pgx.Connect(ctx, b.dataDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer dataConn.Close(context.Background())
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) {
		c.Releaser, c.Ledger = b.rel, b.led
		c.StatementTimeout = timedDPTimeout
		for _, d := range c.Datasets {
			d.Upstream = up
			d.ResponseTime = 500 * time.Millisecond
			d.WorkRate = 500000
		}
		hosp := c.Datasets["hospital"].Policy
		hosp.Tables["visits"].MaxRows = 20000 // the table's real size
		if problems, err := catalog.Verify(ctx, dataConn, hosp); err != nil || len(problems) > 0 {
			t.Fatalf("the data database does not fit the policy: %v %q", err, problems)
		}
	}})
	return b, ts
}
