package release

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"syscall"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// cpuNow is the process's user + system CPU time in nanoseconds.
func cpuNow(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkRelease_AvgDayDepartment is the answer an analyst measured at
// 5.5 s of proxy CPU (issue 27, item 6): SELECT date_trunc('day',
// visit_date), department, AVG(cost) … GROUP BY 1, 2 over the public domain
// of 1,827 days × 7 departments = 12,789 groups at ε = 0.001, released end
// to end by Run (the production noise source, crypto/rand; a fake upstream
// returns about 16 visits per group, as in the demo's 200,000). It
// reports the process CPU per answer (cpu-ms/op), which with -cpu 1 is
// what one answer costs the proxy.
func BenchmarkRelease_AvgDayDepartment(b *testing.B) {
	benchRelease(b, "SELECT date_trunc('day', visit_date) AS day, department, AVG(cost) FROM visits GROUP BY 1, 2")
}

// BenchmarkRelease_WorstAccepted is near the largest answer over public keys
// that checkAnswerCells accepts (maxAnswerCells noisy cells): the 12,789
// day × department groups with an average and a count (four
// measurements, about 51,000 cells). Its cpu-ms/op is the proxy CPU of the
// worst accepted many-group answer (issue 27: at most 1 s).
func BenchmarkRelease_WorstAccepted(b *testing.B) {
	benchRelease(b, "SELECT date_trunc('day', visit_date) AS day, department, AVG(cost), COUNT(*) FROM visits GROUP BY 1, 2")
}

// BenchmarkRelease_QuantileGroups is near the largest grouped quantile
// answer checkAnswerCells accepts: a median per week of five years (261
// groups; up to 600 are accepted), each an exact exponential mechanism over
// 2¹⁴ buckets.
func BenchmarkRelease_QuantileGroups(b *testing.B) {
	benchRelease(b, "SELECT date_trunc('week', visit_date) AS w, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits GROUP BY 1")
}

// benchRelease releases query end to end over a fake upstream and reports
// the process CPU per answer.
func benchRelease(b *testing.B, query string) {
	ds, err := policy.Load("../internal/testdata/hospital.yaml")
	if err != nil {
		b.Fatal(err)
	}
	plan, err := rewrite.RewriteWith(ds, query, rewrite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := checkAnswerCells(plan); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d measurements", len(plan.Measures))
	groups, err := groupKeys(plan.Keys)
	if err != nil {
		b.Fatal(err)
	}
	up := &fakeUpstream{}
	for g, key := range groups {
		n := 10 + g%13
		mean := 300 + float64(g%11)*250
		var row []*string
		for _, k := range key {
			row = append(row, s(k))
		}
		for _, m := range plan.Measures {
			switch m.Kind {
			case rewrite.MeasureQuantile:
				// n values in distinct buckets spread over the grid.
				var parts []string
				step := m.Quantile.Buckets / n
				for i := range n {
					parts = append(parts, fmt.Sprintf("%d:1", i*step+g%step))
				}
				row = append(row, s(strings.Join(parts, ",")))
			case rewrite.MeasureSum:
				row = append(row, s(fmt.Sprintf("%.2f", float64(n)*(mean-10000))))
			case rewrite.MeasureCount:
				row = append(row, s(fmt.Sprint(n)))
			default:
				row = append(row, s("0"))
			}
		}
		up.rows = append(up.rows, row)
	}
	r, err := New(Config{Ledger: &memLedger{limit: 1e9}})
	if err != nil {
		b.Fatal(err)
	}
	req := Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 0.001, Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true}
	b.ResetTimer()
	start := cpuNow(b)
	for b.Loop() {
		res, err := r.Run(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Rows) != len(groups) {
			b.Fatalf("%d rows, want %d", len(res.Rows), len(groups))
		}
	}
	b.ReportMetric(float64(cpuNow(b)-start)/1e6/float64(b.N), "cpu-ms/op")
}

// BenchmarkIntervals_ManyGroups is the NOTICE's half-widths (errorsText:
// floatRows, groupHalfWidths, the widest and the per-group summary, the
// bias statement) of one AVG, VAR_SAMP or STDDEV output over the most
// groups a plan may release (maxGroups = 1,000,000), Laplace at ε = 1:
// "large" groups (10,000 rows each: the closed forms), "empty" ones
// (counts within noise of 0: simulated out of the answer's budget, the
// rest stated by trivialBound) and "mixed" (counts spread from 0 to 80σ_C:
// every regime). It reports the CPU per answer and per group.
func BenchmarkIntervals_ManyGroups(b *testing.B) {
	ds, err := policy.Load("../internal/testdata/hospital.yaml")
	if err != nil {
		b.Fatal(err)
	}
	n := maxGroups
	domain := make([]string, n)
	groups := make([][]string, n)
	for g := range domain {
		domain[g] = fmt.Sprint(g)
		groups[g] = []string{domain[g]}
	}
	for _, agg := range []string{"AVG", "VAR_SAMP", "STDDEV"} {
		plan, err := rewrite.RewriteWith(ds, "SELECT department, "+agg+"(cost) FROM visits GROUP BY department", rewrite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		r, err := New(Config{Ledger: &memLedger{limit: 1e9}})
		if err != nil {
			b.Fatal(err)
		}
		req := Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace}
		ms, err := r.mechanisms(req)
		if err != nil {
			b.Fatal(err)
		}
		wide := *plan
		wide.Keys = []rewrite.Key{plan.Keys[0]}
		wide.Keys[0].Domain = domain
		req.Plan = &wide
		var countSD float64
		for i, m := range plan.Measures {
			if m.Kind == rewrite.MeasureCount {
				countSD = drawOf(ms[i].mech).sd()
			}
		}
		for _, regime := range []string{"large", "empty", "mixed"} {
			noisy := make([][]*big.Rat, n)
			for g := range noisy {
				count := 10000.0
				switch regime {
				case "empty":
					count = float64(g%7) - 3
				case "mixed":
					count = float64(g%81) * countSD
				}
				mean := float64(g%200) * 100 // cost in [0, 20000), centred at 10000
				noisy[g] = make([]*big.Rat, len(plan.Measures))
				for i, m := range plan.Measures {
					var v float64
					switch m.Kind {
					case rewrite.MeasureCount:
						v = count
					case rewrite.MeasureSum:
						v = count * (mean - 10000)
					case rewrite.MeasureSumSq:
						v = count * ((mean-10000)*(mean-10000) + 2000*2000)
					}
					noisy[g][i] = new(big.Rat).SetFloat64(v)
				}
			}
			b.Run(agg+"/"+regime, func(b *testing.B) {
				start := cpuNow(b)
				for b.Loop() {
					if errorsText(req, ms, noisy, groups, cellWidths(req.Plan, ms, noisy)) == "" {
						b.Fatal("no NOTICE")
					}
				}
				cpu := float64(cpuNow(b)-start) / float64(b.N)
				b.ReportMetric(cpu/1e6, "cpu-ms/op")
				b.ReportMetric(cpu/float64(n), "cpu-ns/group")
			})
		}
	}
}
