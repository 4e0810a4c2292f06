package admin

import (
	"context"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/internal/numfmt"
	"github.com/dpproxy/dpproxy/ledger"
	"github.com/dpproxy/dpproxy/policy"
)

// The dashboard is one server-rendered page: no script, no stylesheet or
// font from elsewhere (it works offline and under a strict CSP), the chart
// an inline SVG. It shows budget figures, charge times and costs, query
// fingerprints and SQLSTATEs — never a released value or a statement's
// text.

// chartDays is how far back the ε-over-time chart reaches.
const chartDays = 30

// Chart geometry (SVG user units).
const (
	chartW, chartH             = 640, 220
	padL, padR, padT, padB     = 48, 12, 12, 28
	maxChartCharges            = 5000
	recentShown, incidentShown = 30, 20
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"}

type budgetRowView struct {
	Analyst                 string
	Spent, Limit, Remaining string
	DeltaSpent, DeltaLimit  string
	DeltaRemaining          string
	Renews, Lifetime        string
	Charges, Reserved       int64
	Incidents               int
	Suspended               bool
	UsedPct                 float64
	Color                   string
	// NoCharge: the analyst may query the dataset and has no charge yet
	// (no ledger row): the figures are the policy's.
	NoCharge bool
	limit    float64
}

type seriesView struct {
	Analyst string
	Color   string
	Points  string // SVG polyline points
	Last    string
}

type tickView struct {
	X, Y   float64
	Label  string
	Anchor string
}

type datasetView struct {
	Name       string
	Accountant string
	Window     string
	Rows       []budgetRowView
	Series     []seriesView
	YTicks     []tickView
	XTicks     []tickView
	Limits     []limitView
	Since      string
	Empty      bool
}

// limitView is a dashed line at an ε limit of the chart: one per distinct
// per-analyst limit (grants raise an analyst's own).
type limitView struct {
	Y     float64
	Label string
	Color string
}

type recentView struct {
	At, Analyst, Dataset, Fingerprint, SQLState, Cost string
	// Outcome says what happened in words: answered, cached, refused
	// with its reason (the metrics' reason label), or failed.
	Outcome        string
	Cached, Failed bool
}

type incidentView struct {
	At, Analyst, Dataset, Fingerprint, Kind, SQLState string
	Suspended                                         bool
}

type pageData struct {
	Now       string
	Error     string
	Datasets  []datasetView
	Recent    []recentView
	Incidents []incidentView
	W, H      int
	PlotL     int
	PlotR     int
	PlotT     int
	PlotB     int
}

func fig(x float64) string {
	if math.IsInf(x, 1) {
		return "unlimited"
	}
	return numfmt.Figure(x)
}

func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	now := s.cfg.now()
	data := pageData{Now: now.UTC().Format("2006-01-02 15:04:05 UTC"), W: chartW, H: chartH,
		PlotL: padL, PlotR: chartW - padR, PlotT: padT, PlotB: chartH - padB}
	// A person looking at the page wants the ledger as it is now: read
	// afresh (the scrape cache is for Prometheus).
	snap := s.budgets.fresh(ctx)
	var history []ledger.ChargePoint
	var incidents []ledger.IncidentInfo
	var errs []string
	if snap.err != nil {
		errs = append(errs, "budgets: the ledger cannot be read")
	}
	since := now.Add(-chartDays * 24 * time.Hour)
	history, err := s.cfg.Ledger.History(ctx, since, maxChartCharges)
	if err != nil {
		errs = append(errs, "charge history: the ledger cannot be read")
	}
	if incidents, err = s.cfg.Ledger.Incidents(ctx, "", "", incidentShown); err != nil {
		errs = append(errs, "incidents: the ledger cannot be read")
	}
	data.Error = strings.Join(errs, "; ")
	data.Datasets = s.datasetViews(snap.budgets, history, since, now)
	for _, rs := range s.cfg.Metrics.Recent(recentShown) {
		v := recentView{At: rs.At.UTC().Format("2006-01-02 15:04:05"), Analyst: rs.Analyst, Dataset: rs.Dataset,
			Fingerprint: rs.Fingerprint, SQLState: rs.SQLState, Cached: rs.Cached, Failed: rs.SQLState != ""}
		if v.SQLState == "" {
			v.SQLState = "00000"
		}
		v.Outcome = outcome(rs)
		switch {
		case rs.Cached:
			v.Cost = "cached (0)"
		case rs.SQLState != "" && rs.CostEpsilon == 0:
			v.Cost = "—"
		default:
			v.Cost = "ε " + fig(rs.CostEpsilon) + ", δ " + fig(rs.CostDelta)
		}
		data.Recent = append(data.Recent, v)
	}
	for _, in := range incidents {
		data.Incidents = append(data.Incidents, incidentView{At: in.At, Analyst: in.Analyst, Dataset: in.Dataset,
			Fingerprint: in.Fingerprint, Kind: in.Kind, SQLState: in.SQLState, Suspended: in.Suspended})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	if err := pageTemplate.Execute(w, data); err != nil {
		s.cfg.Logger.Warn("dashboard render failed", zapError(err))
	}
}

// datasetViews builds one section per dataset: its budget rows and the
// chart of cumulative ε charged per analyst over the last chartDays.
func (s *Server) datasetViews(budgets []ledger.BudgetInfo, history []ledger.ChargePoint, since, now time.Time) []datasetView {
	byDS := map[string]*datasetView{}
	var names []string
	get := func(n string) *datasetView {
		if v := byDS[n]; v != nil {
			return v
		}
		v := &datasetView{Name: n}
		if p := s.cfg.Policies[n]; p != nil {
			v.Accountant = p.Budget.Accountant
			if p.Budget.Window > 0 {
				v.Window = policy.FormatWindow(p.Budget.Window)
			}
		}
		byDS[n] = v
		names = append(names, n)
		return v
	}
	for n := range s.cfg.Policies {
		get(n)
	}
	colors := map[[2]string]string{}
	for _, b := range budgets {
		v := get(b.Dataset)
		if v.Accountant == "" {
			v.Accountant = b.Status.Accountant
		}
		rem := b.Status.Remaining()
		row := budgetRowView{Analyst: analystLabel(b.Analyst), Spent: fig(b.Status.Spent.Epsilon), Limit: fig(b.Status.Limit.Epsilon),
			Remaining: fig(rem.Epsilon), DeltaSpent: fig(b.Status.Spent.Delta), DeltaLimit: fig(b.Status.Limit.Delta), DeltaRemaining: fig(rem.Delta),
			Charges: b.Charges, Reserved: b.Reserved, Incidents: b.Incidents, Suspended: b.Suspended, limit: b.Status.Limit.Epsilon}
		if !b.Status.Renews.IsZero() {
			row.Renews = b.Status.Renews.UTC().Format("2006-01-02 15:04Z")
		}
		if lt := b.Status.Lifetime; lt != nil {
			row.Lifetime = fig(lt.Spent.Epsilon) + " of " + fig(lt.Limit.Epsilon)
		}
		if l := b.Status.Limit.Epsilon; l > 0 && !math.IsInf(l, 1) {
			row.UsedPct = math.Min(100, 100*b.Status.Spent.Epsilon/l)
		}
		if b.Analyst != "" {
			k := [2]string{b.Dataset, b.Analyst}
			colors[k] = palette[len(v.Rows)%len(palette)]
			row.Color = colors[k]
		}
		v.Rows = append(v.Rows, row)
	}
	// Analysts who may query a dataset and have no charge yet have no
	// ledger row: list them with the policy's figures.
	seen := map[[2]string]bool{}
	for _, b := range budgets {
		seen[[2]string{b.Dataset, b.Analyst}] = true
	}
	var analysts []string
	for a := range s.cfg.Analysts {
		analysts = append(analysts, a)
	}
	sort.Strings(analysts)
	for _, a := range analysts {
		for _, n := range names {
			p := s.cfg.Policies[n]
			if p == nil || seen[[2]string{n, a}] || !allowed(s.cfg.Analysts[a], n) {
				continue
			}
			v := byDS[n]
			bud := p.AnalystBudget(a)
			lim, dlim := bud.Epsilon, bud.Delta
			if lim <= 0 {
				lim = math.Inf(1)
			}
			row := budgetRowView{Analyst: a, Spent: "0", Limit: fig(lim), Remaining: fig(lim), DeltaSpent: "0",
				DeltaLimit: fig(dlim), DeltaRemaining: fig(dlim), NoCharge: true, limit: lim}
			colors[[2]string{n, a}] = palette[len(v.Rows)%len(palette)]
			row.Color = colors[[2]string{n, a}]
			v.Rows = append(v.Rows, row)
		}
	}
	sort.Strings(names)
	out := make([]datasetView, 0, len(names))
	for _, n := range names {
		v := byDS[n]
		s.chart(v, history, colors, since, now)
		out = append(out, *v)
	}
	return out
}

// allowed reports whether an analyst whose datasets are ds (empty: all)
// may query dataset n.
func allowed(ds []string, n string) bool {
	return len(ds) == 0 || slices.Contains(ds, n)
}

// outcome says what happened to a DP statement, in words.
func outcome(rs RecentStatement) string {
	switch {
	case rs.Cached:
		return "answered from the cache"
	case rs.SQLState == "" && rs.CostEpsilon == 0 && rs.CostDelta == 0:
		// EXPLAIN, or an answer from the policy's public values (new
		// user's run 94: an EXPLAIN read "ε 0, δ 0 answered").
		return "answered without a charge (EXPLAIN or public values)"
	case rs.SQLState == "":
		return "answered"
	case refusalReason(rs.SQLState) != "":
		return "refused: " + strings.ReplaceAll(refusalReason(rs.SQLState), "_", " ")
	case rs.CostEpsilon > 0:
		return "failed after its charge"
	}
	return "failed"
}

// chart lays out the cumulative ε charged per analyst of v's dataset as
// step lines from the chart's start to now: chartDays ago, or a little
// before the first charge when they all fall in a shorter span (a day's
// charges drawn over 30 days were one vertical line at the right edge).
func (s *Server) chart(v *datasetView, history []ledger.ChargePoint, colors map[[2]string]string, since, now time.Time) {
	type pt struct {
		t time.Time
		e float64
	}
	per := map[string][]pt{}
	var analysts []string
	maxE := 0.0
	for _, c := range history {
		if c.Dataset != v.Name {
			continue
		}
		ps := per[c.Analyst]
		if ps == nil {
			analysts = append(analysts, c.Analyst)
		}
		total := c.Cost.Epsilon
		if len(ps) > 0 {
			total += ps[len(ps)-1].e
		}
		per[c.Analyst] = append(ps, pt{c.At, total})
		maxE = math.Max(maxE, total)
	}
	// The limit lines: every finite limit of an analyst row (the
	// policy's, with grants), one line per distinct limit.
	byLimit := map[float64][]string{}
	var limits []float64
	for _, r := range v.Rows {
		if r.limit > 0 && !math.IsInf(r.limit, 1) && !strings.HasPrefix(r.Analyst, "(") {
			if byLimit[r.limit] == nil {
				limits = append(limits, r.limit)
			}
			byLimit[r.limit] = append(byLimit[r.limit], r.Analyst)
			maxE = math.Max(maxE, r.limit)
		}
	}
	if len(limits) == 0 {
		if p := s.cfg.Policies[v.Name]; p != nil && p.Budget.Epsilon > 0 {
			limits = []float64{p.Budget.Epsilon}
			maxE = math.Max(maxE, p.Budget.Epsilon)
		}
	}
	sort.Float64s(limits)
	v.Empty = len(analysts) == 0
	if first := firstCharge(history, v.Name); !first.IsZero() {
		// Start a tenth of the charges' span (at least an hour) before
		// the first charge, when that is after chartDays ago.
		margin := max(now.Sub(first)/10, time.Hour)
		if start := first.Add(-margin); start.After(since) {
			since = start
		}
	}
	v.Since = since.UTC().Format("2006-01-02 15:04 UTC")
	if maxE <= 0 {
		maxE = 1
	}
	maxE *= 1.05
	span := now.Sub(since).Seconds()
	x := func(t time.Time) float64 {
		f := t.Sub(since).Seconds() / span
		return padL + math.Max(0, math.Min(1, f))*(chartW-padL-padR)
	}
	y := func(e float64) float64 { return chartH - padB - (e/maxE)*(chartH-padT-padB) }
	for _, l := range limits {
		lv := limitView{Y: y(l), Color: "#b00"}
		switch as := byLimit[l]; {
		case len(limits) == 1:
			lv.Label = "per-analyst limit " + fig(l)
		case len(as) == 1:
			lv.Label = "limit " + fig(l) + " (" + as[0] + ")"
			lv.Color = colors[[2]string{v.Name, as[0]}]
		default:
			lv.Label = "limit " + fig(l) + " (" + strings.Join(as, ", ") + ")"
		}
		v.Limits = append(v.Limits, lv)
	}
	sort.Strings(analysts)
	for i, a := range analysts {
		var b strings.Builder
		prev := 0.0
		fmt.Fprintf(&b, "%.1f,%.1f", x(since), y(0))
		for _, p := range per[a] {
			fmt.Fprintf(&b, " %.1f,%.1f %.1f,%.1f", x(p.t), y(prev), x(p.t), y(p.e))
			prev = p.e
		}
		fmt.Fprintf(&b, " %.1f,%.1f", x(now), y(prev))
		c := colors[[2]string{v.Name, a}]
		if c == "" {
			c = palette[i%len(palette)]
		}
		v.Series = append(v.Series, seriesView{Analyst: a, Color: c, Points: b.String(), Last: fig(prev)})
	}
	for i := 0; i <= 4; i++ {
		e := maxE / 1.05 * float64(i) / 4
		v.YTicks = append(v.YTicks, tickView{X: padL - 4, Y: y(e), Label: fig(roundTick(e))})
	}
	for i := 0; i <= 3; i++ {
		t := since.Add(time.Duration(float64(now.Sub(since)) * float64(i) / 3))
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case 3:
			anchor = "end"
		}
		layout := "Jan 2"
		if now.Sub(since) < 3*24*time.Hour {
			layout = "Jan 2 15:04"
		}
		v.XTicks = append(v.XTicks, tickView{X: x(t), Y: chartH - padB + 16, Label: t.UTC().Format(layout), Anchor: anchor})
	}
}

// firstCharge is the time of the first charge on dataset n in history
// (zero when none).
func firstCharge(history []ledger.ChargePoint, n string) time.Time {
	var first time.Time
	for _, c := range history {
		if c.Dataset == n && (first.IsZero() || c.At.Before(first)) {
			first = c.At
		}
	}
	return first
}

func roundTick(x float64) float64 {
	if x == 0 {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(x))-1)
	return math.Round(x/p) * p
}

var pageTemplate = template.Must(template.New("dashboard").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>dpproxy — steward dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
h1{font-size:1.4em;margin:0 0 .2em} h2{font-size:1.15em;margin:1.6em 0 .4em} h3{font-size:1em;margin:1em 0 .3em}
table{border-collapse:collapse;background:#fff;margin:.3em 0} th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;white-space:nowrap} table.budgets{font-size:13px}
td.num{text-align:right;font-variant-numeric:tabular-nums} .muted{color:#777} .err{color:#b00;font-weight:bold}
.bar{display:inline-block;width:60px;height:9px;background:#e5e5e5;margin-left:.4em;vertical-align:middle}
.bar span{display:block;height:9px} .susp{color:#fff;background:#b00;padding:0 .4em;border-radius:3px}
.ok{color:#080} svg{background:#fff;border:1px solid #ccc} code{font-size:12px}
</style></head><body>
<h1>dpproxy steward dashboard</h1>
<p class="muted">as of <span id="now">{{.Now}}</span> · budget figures from the ledger · no released values are shown</p>
{{if .Error}}<p class="err" id="error">{{.Error}}</p>{{end}}
{{range $ds := .Datasets}}
<section class="dataset" data-dataset="{{.Name}}">
<h2>Dataset {{.Name}}</h2>
<p class="muted">accountant {{.Accountant}}{{if .Window}} · budget window {{.Window}}{{end}}</p>
<table class="budgets">
<tr><th>analyst</th><th>ε spent</th><th>ε limit</th><th>ε remaining</th><th>δ spent</th><th>δ limit</th><th>δ remaining</th>{{if .Window}}<th>window renews</th><th>lifetime ε</th>{{end}}<th>charges</th><th>unanswered</th><th>incidents</th><th>breaker</th></tr>
{{range .Rows}}<tr data-analyst="{{.Analyst}}">
<td>{{if .Color}}<span style="color:{{.Color}}">■</span> {{end}}{{.Analyst}}{{if .NoCharge}} <span class="muted">(no charge yet)</span>{{end}}</td>
<td class="num eps-spent">{{.Spent}}<span class="bar"><span style="width:{{printf "%.0f" .UsedPct}}%;background:{{if .Color}}{{.Color}}{{else}}#555{{end}}"></span></span></td>
<td class="num">{{.Limit}}</td><td class="num eps-remaining">{{.Remaining}}</td>
<td class="num">{{.DeltaSpent}}</td><td class="num">{{.DeltaLimit}}</td><td class="num">{{.DeltaRemaining}}</td>
{{if $ds.Window}}<td>{{.Renews}}</td><td class="num">{{.Lifetime}}</td>{{end}}
<td class="num">{{.Charges}}</td><td class="num">{{.Reserved}}</td><td class="num">{{.Incidents}}</td>
<td>{{if .Suspended}}<span class="susp">suspended</span>{{else}}<span class="ok">closed</span>{{end}}</td>
</tr>{{end}}
</table>
<h3>ε charged since {{.Since}}</h3>
{{if .Empty}}<p class="muted">no charges in the last 30 days</p>{{end}}
<svg class="chart" width="{{$.W}}" height="{{$.H}}" viewBox="0 0 {{$.W}} {{$.H}}" role="img" aria-label="cumulative epsilon charged on {{.Name}}">
<line x1="{{$.PlotL}}" y1="{{$.PlotB}}" x2="{{$.PlotR}}" y2="{{$.PlotB}}" stroke="#888"/>
<line x1="{{$.PlotL}}" y1="{{$.PlotT}}" x2="{{$.PlotL}}" y2="{{$.PlotB}}" stroke="#888"/>
{{range .YTicks}}<text x="{{.X}}" y="{{.Y}}" font-size="10" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>{{end}}
{{range .XTicks}}<text x="{{.X}}" y="{{.Y}}" font-size="10" text-anchor="{{.Anchor}}">{{.Label}}</text>{{end}}
{{range .Limits}}<line class="limit" x1="{{$.PlotL}}" y1="{{.Y}}" x2="{{$.PlotR}}" y2="{{.Y}}" stroke="{{.Color}}" stroke-dasharray="4 3"/><text x="{{$.PlotR}}" y="{{.Y}}" dy="-3" font-size="10" text-anchor="end" fill="{{.Color}}">{{.Label}}</text>{{end}}
{{range .Series}}<polyline class="series" data-analyst="{{.Analyst}}" fill="none" stroke="{{.Color}}" stroke-width="2" points="{{.Points}}"><title>{{.Analyst}}: ε {{.Last}}</title></polyline>{{end}}
</svg>
<p class="legend">{{range .Series}}<span style="color:{{.Color}}">■</span> {{.Analyst}} (ε {{.Last}}) {{end}}</p>
</section>
{{end}}
<h2>Recent DP statements</h2>
<p class="muted">on this proxy since it started; fingerprints of the normalized statement, never its text</p>
<table id="recent"><tr><th>time (UTC)</th><th>dataset</th><th>analyst</th><th>fingerprint</th><th>cost</th><th>outcome</th><th>SQLSTATE</th></tr>
{{range .Recent}}<tr><td>{{.At}}</td><td>{{.Dataset}}</td><td>{{.Analyst}}</td><td><code>{{.Fingerprint}}</code></td><td>{{.Cost}}</td><td{{if .Failed}} class="err"{{end}}>{{.Outcome}}</td><td{{if .Failed}} class="err"{{end}}>{{.SQLState}}</td></tr>
{{else}}<tr><td colspan="7" class="muted">none yet</td></tr>{{end}}
</table>
<h2>Incidents and circuit breakers</h2>
<table id="incidents"><tr><th>time (UTC)</th><th>dataset</th><th>analyst</th><th>fingerprint</th><th>kind</th><th>SQLSTATE</th><th>suspended</th></tr>
{{range .Incidents}}<tr><td>{{.At}}</td><td>{{.Dataset}}</td><td>{{.Analyst}}</td><td><code>{{.Fingerprint}}</code></td><td>{{.Kind}}</td><td>{{.SQLState}}</td><td>{{if .Suspended}}<span class="susp">yes</span>{{else}}no{{end}}</td></tr>
{{else}}<tr><td colspan="7" class="muted">no incidents</td></tr>{{end}}
</table>
</body></html>
`))
