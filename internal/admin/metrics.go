package admin

import (
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Routes of a statement, as the proxy names them (proxy.StatementEvent).
var routes = [...]string{"session", "catalog", "dp", "refuse", "empty"}

func routeIndex(r string) int {
	switch r {
	case "session":
		return 0
	case "catalog":
		return 1
	case "dp":
		return 2
	case "refuse":
		return 3
	}
	return 4
}

// Metrics holds the per-statement series. Label values are routes,
// SQLSTATEs, dataset and analyst names from the config, refusal reasons:
// never SQL text, literals, values, fingerprints or passwords (a
// fingerprint per label value would also be unbounded cardinality).
//
// The statement path is the forwarding path the benchmarks compare with
// PgBouncer, so every child a successful statement touches is resolved
// here once: a statement costs one counter increment and one histogram
// observation, with no allocation. Safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	statements *prometheus.CounterVec
	okByRoute  [len(routes)]prometheus.Counter
	latency    [len(routes)]prometheus.Observer
	errs       sync.Map // [2]string{route, sqlstate} → prometheus.Counter

	perDataset map[string]*datasetSeries
	refusals   *prometheus.CounterVec
	incidents  *prometheus.CounterVec
	charges    *prometheus.CounterVec

	recent *recentRing
}

type datasetSeries struct {
	answers, cacheHits           prometheus.Counter
	chargedEpsilon, chargedDelta *roundedSum
}

// roundedSum is a counter of charges shown as people wrote them: a float64
// sum of 0.1s showed 112.39999999999993 where the analysts had spent 112.4.
// The sum is read rounded to 12 significant digits (numfmt.Figure's rule:
// far below any privacy parameter's resolution, far above the rounding of
// a float64 sum of many charges). Adding allocates nothing. Safe for
// concurrent use.
type roundedSum struct{ bits atomic.Uint64 }

func (e *roundedSum) add(x float64) {
	for {
		old := e.bits.Load()
		if e.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+x)) {
			return
		}
	}
}

func (e *roundedSum) value() float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(math.Float64frombits(e.bits.Load()), 'g', 12, 64), 64)
	return v
}

// NewMetrics registers the statement series on a private registry (never
// the global default one). datasets are the configured dataset names.
func NewMetrics(datasets []string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), perDataset: map[string]*datasetSeries{}, recent: newRecentRing(recentPerAnalyst)}
	m.statements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dpproxy_statements_total",
		Help: "Statements by route (session, catalog, dp, refuse, empty) and SQLSTATE (00000: success).",
	}, []string{"route", "sqlstate"})
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dpproxy_statement_duration_seconds",
		Help:    "Time from a statement's start to its reply, by route (DP answers include response_time padding).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"route"})
	answers := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dpproxy_dp_answers_total", Help: "DP answers released, including answers from the cache, by dataset.",
	}, []string{"dataset"})
	hits := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dpproxy_dp_cache_hits_total", Help: "DP answers returned from the answer cache at no cost, by dataset.",
	}, []string{"dataset"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dpproxy_refusals_total",
		Help: "Statements refused, by dataset and reason (budget_exhausted 53400, rate_limit 53000 — the rate limit or the DP queue, not_allowed 42501 — incl. suspensions, not_supported 0A000, syntax 42601, bad_setting 22023, too_costly 54000/54001 — over a work, time or size bound).",
	}, []string{"dataset", "reason"})
	m.incidents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dpproxy_upstream_incidents_total", Help: "Errors after a charge (incidents: SECURITY.md G5), by dataset and kind.",
	}, []string{"dataset", "kind"})
	m.charges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dpproxy_ledger_charges_total", Help: "Charges committed to the ledger by this proxy, by dataset.",
	}, []string{"dataset"})
	m.reg.MustRegister(m.statements, lat, answers, hits, m.refusals, m.incidents, m.charges,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for i, r := range routes {
		m.okByRoute[i] = m.statements.WithLabelValues(r, "00000")
		m.latency[i] = lat.WithLabelValues(r)
	}
	for _, d := range datasets {
		ds := &datasetSeries{
			answers: answers.WithLabelValues(d), cacheHits: hits.WithLabelValues(d),
			chargedEpsilon: &roundedSum{}, chargedDelta: &roundedSum{},
		}
		m.perDataset[d] = ds
		m.reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "dpproxy_dp_charged_epsilon_total", ConstLabels: prometheus.Labels{"dataset": d},
				Help: "Sum of the ε charges added to analysts' composed spending by this proxy, by dataset (rounded to 12 significant digits).",
			}, ds.chargedEpsilon.value),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "dpproxy_dp_charged_delta_total", ConstLabels: prometheus.Labels{"dataset": d},
				Help: "Sum of the δ charges added by this proxy, by dataset (rounded to 12 significant digits).",
			}, ds.chargedDelta.value))
		m.charges.WithLabelValues(d)
		for _, r := range refusalReasons {
			m.refusals.WithLabelValues(d, r)
		}
		// Every kind at 0 from the start, so a dashboard or an alert on the
		// series sees it before the first incident (issue 31).
		for _, k := range incidentKinds {
			m.incidents.WithLabelValues(d, k)
		}
	}
	return m
}

// Registry returns the private registry (for /metrics and collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

var refusalReasons = []string{"budget_exhausted", "rate_limit", "not_allowed", "not_supported", "syntax", "bad_setting", "too_costly"}

// incidentKinds are the kinds release records (the ledger's incident.kind).
var incidentKinds = []string{"upstream", "timeout", "result", "noise", "panic"}

func refusalReason(sqlstate string) string {
	switch sqlstate {
	case "53400":
		return "budget_exhausted"
	case "53000":
		return "rate_limit"
	case "42501":
		return "not_allowed"
	case "0A000":
		return "not_supported"
	case "42601":
		return "syntax"
	case "22023":
		return "bad_setting"
	case "54000", "54001":
		return "too_costly"
	}
	return ""
}

// Statement is one statement. For a DP answer, dp is set (cost and cache
// hit); fingerprint is only kept for the dashboard's recent list (never a
// label) and may be "" for non-DP statements.
func (m *Metrics) Statement(route, sqlstate, dataset string, d time.Duration, dp *DPAnswer) {
	i := routeIndex(route)
	m.latency[i].Observe(d.Seconds())
	if sqlstate == "" {
		m.okByRoute[i].Inc()
	} else {
		m.errorCounter(route, sqlstate).Inc()
		// A SET the proxy refuses (22023 on the session route) is a bad
		// setting too, as the help text says.
		if reason := refusalReason(sqlstate); reason != "" && (route == "dp" || route == "refuse" || route == "session" && reason == "bad_setting") {
			m.refusals.WithLabelValues(dataset, reason).Inc()
		}
	}
	if dp != nil {
		if s := m.perDataset[dataset]; s != nil {
			s.answers.Inc()
			if dp.Cached {
				s.cacheHits.Inc()
			} else {
				s.chargedEpsilon.add(dp.CostEpsilon)
				s.chargedDelta.add(dp.CostDelta)
			}
		}
	}
}

func (m *Metrics) errorCounter(route, sqlstate string) prometheus.Counter {
	k := [2]string{route, sqlstate}
	if c, ok := m.errs.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c := m.statements.WithLabelValues(route, sqlstate)
	m.errs.Store(k, c)
	return c
}

// Charged counts a committed charge (the ledger decorator, internal/audit).
func (m *Metrics) Charged(dataset string) { m.charges.WithLabelValues(dataset).Inc() }

// Incident counts an error after a charge.
func (m *Metrics) Incident(dataset, kind string) { m.incidents.WithLabelValues(dataset, kind).Inc() }

// DPAnswer is a released DP answer.
type DPAnswer struct {
	Cached                 bool
	CostEpsilon, CostDelta float64
}

// RecentStatement is one DP statement as the dashboard lists it: never
// its text or values.
type RecentStatement struct {
	At          time.Time
	Analyst     string
	Dataset     string
	Fingerprint string
	SQLState    string // "" on success
	Cached      bool
	CostEpsilon float64
	CostDelta   float64
}

// RecordDP keeps a DP statement for the dashboard.
func (m *Metrics) RecordDP(s RecentStatement) { m.recent.add(s) }

// Recent returns the newest DP statements, newest first: the newest n of
// those kept, each analyst's newest recentPerAnalyst.
func (m *Metrics) Recent(n int) []RecentStatement { return m.recent.list(n) }

// recentPerAnalyst is how many of an analyst's DP statements the
// dashboard keeps: one analyst's statements (a refused or cached one is
// free) cannot push the others' off the list (attack round 86's note).
const recentPerAnalyst = 10

// recentRing keeps each analyst's newest DP statements, in a ring per
// analyst (the analysts are the config's). Safe for concurrent use.
type recentRing struct {
	mu   sync.Mutex
	per  int
	byAn map[string]*analystRing
}

type analystRing struct {
	buf  []RecentStatement
	next int
	full bool
}

func newRecentRing(per int) *recentRing {
	return &recentRing{per: per, byAn: map[string]*analystRing{}}
}

func (r *recentRing) add(s RecentStatement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.byAn[s.Analyst]
	if !ok {
		a = &analystRing{buf: make([]RecentStatement, r.per)}
		r.byAn[s.Analyst] = a
	}
	a.buf[a.next] = s
	a.next++
	if a.next == len(a.buf) {
		a.next, a.full = 0, true
	}
}

func (r *recentRing) list(n int) []RecentStatement {
	r.mu.Lock()
	var out []RecentStatement
	for _, a := range r.byAn {
		size := a.next
		if a.full {
			size = len(a.buf)
		}
		for i := 1; i <= size; i++ {
			out = append(out, a.buf[(a.next-i+len(a.buf))%len(a.buf)])
		}
	}
	r.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	return out[:min(n, len(out))]
}
