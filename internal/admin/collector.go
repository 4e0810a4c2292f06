package admin

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/dpproxy/dpproxy/ledger"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// budgetCacheTTL is how long one read of the ledger serves scrapes and
// dashboard views: Prometheus scrapes every 15–60 s and several replicas
// may scrape one proxy, and the budgets change only with charges.
const budgetCacheTTL = 5 * time.Second

// snapshot is one read of the ledger's budget rows.
type snapshot struct {
	at      time.Time
	budgets []ledger.BudgetInfo
	err     error
}

// budgetSource reads the budget rows at most once per budgetCacheTTL. Safe
// for concurrent use.
type budgetSource struct {
	cfg *Config
	mu  sync.Mutex
	cur *snapshot
}

// fresh reads the budget rows now (and keeps them for scrapes).
func (b *budgetSource) fresh(ctx context.Context) *snapshot {
	b.mu.Lock()
	b.cur = nil
	b.mu.Unlock()
	return b.get(ctx)
}

func (b *budgetSource) get(ctx context.Context) *snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.now()
	if b.cur != nil && now.Sub(b.cur.at) < budgetCacheTTL && now.Sub(b.cur.at) >= 0 {
		return b.cur
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	budgets, err := b.cfg.Ledger.Budgets(ctx, b.cfg.Policies, "", "")
	b.cur = &snapshot{at: now, budgets: budgets, err: err}
	return b.cur
}

// budgetCollector exports the ledger's budgets at scrape time: ε and δ
// spent and remaining per analyst × dataset (analyst "(all)" is the
// dataset's global row), incidents and suspensions. Label values are
// dataset and analyst names only.
type budgetCollector struct {
	src                                              *budgetSource
	spentE, spentD, remE, remD, limE, limD, inc, sus *prometheus.Desc
	lifeE, lifeRemE, renews, up                      *prometheus.Desc
}

func newBudgetCollector(src *budgetSource) *budgetCollector {
	l := []string{"dataset", "analyst"}
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, l, nil) }
	return &budgetCollector{src: src,
		spentE:   d("dpproxy_budget_epsilon_spent", "Composed ε spent (in the current window, when the dataset has one)."),
		spentD:   d("dpproxy_budget_delta_spent", "Composed δ spent (in the current window)."),
		remE:     d("dpproxy_budget_epsilon_remaining", "ε remaining (in the current window); +Inf without a cap."),
		remD:     d("dpproxy_budget_delta_remaining", "δ remaining (in the current window); +Inf without a cap."),
		limE:     d("dpproxy_budget_epsilon_limit", "ε limit: the policy's plus the steward's grants; +Inf without a cap."),
		limD:     d("dpproxy_budget_delta_limit", "δ limit; +Inf without a cap."),
		inc:      d("dpproxy_budget_incidents", "Incidents since the last resume."),
		sus:      d("dpproxy_budget_suspended", "1 when the analyst is suspended on the dataset after incidents."),
		lifeE:    d("dpproxy_budget_lifetime_epsilon_spent", "Composed ε spent over all windows (datasets with budget.window)."),
		lifeRemE: d("dpproxy_budget_lifetime_epsilon_remaining", "ε remaining under budget.lifetime."),
		renews:   d("dpproxy_budget_window_renews_timestamp_seconds", "When the current budget window renews (Unix time)."),
		up:       prometheus.NewDesc("dpproxy_ledger_scrape_ok", "1 when the ledger's budgets could be read at this scrape.", nil, nil),
	}
}

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.spentE, c.spentD, c.remE, c.remD, c.limE, c.limD, c.inc, c.sus, c.lifeE, c.lifeRemE, c.renews, c.up} {
		ch <- d
	}
}

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.get(context.Background())
	if s.err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, b := range s.budgets {
		an := analystLabel(b.Analyst)
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, b.Dataset, an)
		}
		rem := b.Status.Remaining()
		g(c.spentE, b.Status.Spent.Epsilon)
		g(c.spentD, b.Status.Spent.Delta)
		g(c.remE, rem.Epsilon)
		g(c.remD, rem.Delta)
		g(c.limE, b.Status.Limit.Epsilon)
		g(c.limD, b.Status.Limit.Delta)
		if b.Analyst != "" {
			g(c.inc, float64(b.Incidents))
			g(c.sus, boolFloat(b.Suspended))
		}
		if !b.Status.Renews.IsZero() {
			g(c.renews, float64(b.Status.Renews.Unix()))
		}
		if lt := b.Status.Lifetime; lt != nil {
			g(c.lifeE, lt.Spent.Epsilon)
			g(c.lifeRemE, positive(lt.Limit.Epsilon-lt.Spent.Epsilon))
		}
	}
}

func positive(x float64) float64 {
	if x < 0 || math.IsNaN(x) {
		return 0
	}
	return x
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// analystLabel names the global row.
func analystLabel(a string) string {
	if a == "" {
		return "(all)"
	}
	return a
}

// poolCollector exports pgxpool statistics of the ledger and upstream
// pools.
type poolCollector struct {
	pools                                      func() map[string]*pgxpool.Stat
	total, idle, acquired, max, empty, waitSec *prometheus.Desc
}

func newPoolCollector(pools func() map[string]*pgxpool.Stat) *poolCollector {
	l := []string{"pool"}
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, l, nil) }
	return &poolCollector{pools: pools,
		total:    d("dpproxy_pool_connections", "Open connections of the pool (ledger, upstream/DATASET)."),
		idle:     d("dpproxy_pool_idle_connections", "Idle connections of the pool."),
		acquired: d("dpproxy_pool_acquired_connections", "Connections in use."),
		max:      d("dpproxy_pool_max_connections", "The pool's size limit."),
		empty:    d("dpproxy_pool_empty_acquire_total", "Acquires that had to wait because the pool was empty."),
		waitSec:  d("dpproxy_pool_acquire_wait_seconds_total", "Total time spent waiting for a connection."),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.total, c.idle, c.acquired, c.max, c.empty, c.waitSec} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for name, st := range c.pools() {
		if st == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(st.TotalConns()), name)
		ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(st.IdleConns()), name)
		ch <- prometheus.MustNewConstMetric(c.acquired, prometheus.GaugeValue, float64(st.AcquiredConns()), name)
		ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(st.MaxConns()), name)
		ch <- prometheus.MustNewConstMetric(c.empty, prometheus.CounterValue, float64(st.EmptyAcquireCount()), name)
		ch <- prometheus.MustNewConstMetric(c.waitSec, prometheus.CounterValue, st.EmptyAcquireWaitTime().Seconds(), name)
	}
}
