package release

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestIntervals_CoverAndAreTight: the stated 95% half-widths of AVG,
// VAR_POP, VAR_SAMP, STDDEV and a derived SUM cover the (bounded) true
// value in about 95% of releases and are no wider than 1.3× the empirical
// 95% error (issue 16: the old union bounds were 3–12× wider). Each case
// runs 400 releases of one ungrouped query over fixed data with the
// test-only noise source (seeded), Laplace and Gaussian, at a small and a
// large ε. Where the noise is as large as the value (the 95% error above
// 30% of it) the released value is clamped into its range and the
// interval may be up to 2× wide there, never narrow.
//
// Acceptance: coverage in [0.91, 0.99] (with 400 releases the estimate has
// a standard error of 1.1 points at 95%, so a calibrated interval falls
// outside with probability below 3·10⁻⁴ — and the seeded test is
// deterministic); the median stated half-width between 0.8× and 1.3× the
// empirical 95% error. Power: a union bound like the old one (≥ 1.5× here)
// or a half-width from half the noise (coverage about 70%) fails.
func TestIntervals_CoverAndAreTight(t *testing.T) {
	ds := loadPolicy(t)
	// 600 patients, 1–4 visits each, ages spread over [0, 110] (skewed).
	rng := rand.New(rand.NewPCG(16, 4))
	var ages [][]float64
	for u := 0; u < 600; u++ {
		var v []float64
		for range 1 + rng.IntN(4) {
			v = append(v, math.Round(110*math.Pow(rng.Float64(), 1.5)))
		}
		ages = append(ages, v)
	}
	var all []float64
	for _, v := range ages {
		all = append(all, v...)
	}
	n := float64(len(all))
	mean := 0.0
	for _, x := range all {
		mean += x
	}
	mean /= n
	ss := 0.0
	for _, x := range all {
		ss += (x - mean) * (x - mean)
	}
	truth := map[string]float64{
		"avg": mean, "var_pop": ss / n, "var_samp": ss / (n - 1), "stddev": math.Sqrt(ss / (n - 1)), "sum": mean * n,
	}
	queries := map[string]string{
		"avg":      "SELECT AVG(age) FROM visits",
		"var_pop":  "SELECT VAR_POP(age) FROM visits",
		"var_samp": "SELECT VAR_SAMP(age) FROM visits",
		"stddev":   "SELECT STDDEV(age) FROM visits",
		"sum":      "SELECT SUM(age), AVG(age) FROM visits",
	}
	// Gaussian at ε = 0.3 (δ = 10⁻⁶) puts the count's σ near 1,000 for
	// these 1,500 rows: a VAR_SAMP is NULL in about 8% of releases (a noisy
	// count below 2) and no interval can say much; it starts at ε = 1.
	for _, mech := range []string{policy.MechanismLaplace, policy.MechanismGaussian} {
		epsilons := []float64{0.3, 3}
		if mech == policy.MechanismGaussian {
			epsilons = []float64{1, 3}
		}
		for _, eps := range epsilons {
			for _, name := range []string{"avg", "var_pop", "var_samp", "stddev", "sum"} {
				t.Run(fmt.Sprintf("%s/eps=%g/%s", mech, eps, name), func(t *testing.T) {
					plan, err := rewrite.RewriteWith(ds, queries[name], rewrite.Options{NoBias: true})
					if err != nil {
						t.Fatal(err)
					}
					up := &fakeUpstream{rows: [][]*string{measureRow(t, plan, all)}}
					r := newTestReleaser(t, &memLedger{limit: 1e9}, uint64(eps*10)+uint64(len(name)))
					var errs, widths []float64
					covered := 0
					const runs = 400
					for range runs {
						res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: eps, Delta: 1e-6,
							Mechanism: mech, Upstream: up, NoCache: true})
						if err != nil {
							t.Fatal(err)
						}
						if res.Rows[0][0] == nil {
							// VAR_SAMP with a noisy count below 2: not covered.
							errs = append(errs, math.Inf(1))
							widths = append(widths, 0)
							continue
						}
						got, err := strconv.ParseFloat(*res.Rows[0][0], 64)
						if err != nil {
							t.Fatal(err)
						}
						h := noticeHalfWidth(t, res.Notice, plan.Outputs[0].Name)
						e := math.Abs(got - truth[name])
						errs = append(errs, e)
						widths = append(widths, h)
						if e <= h {
							covered++
						}
					}
					slices.Sort(errs)
					slices.Sort(widths)
					p95, med := errs[int(0.95*runs)-1], widths[runs/2]
					cov := float64(covered) / runs
					t.Logf("coverage %.3f, stated ±%.4g (median), empirical p95 %.4g, ratio %.2f", cov, med, p95, med/p95)
					if cov < 0.91 {
						t.Errorf("coverage %.3f below 0.91", cov)
					}
					// Where the noise is of the size of the value itself
					// (p95 above 30% of it), the released estimate is
					// clamped into its range, which the interval does not
					// credit: it may be conservative there, never narrow.
					tight, loose := 1.3, 0.99
					if p95 > 0.3*math.Abs(truth[name]) {
						tight, loose = 2, 1
					}
					if cov > loose {
						t.Errorf("coverage %.3f above %.2f: needlessly wide", cov, loose)
					}
					if r := med / p95; r < 0.8 || r > tight {
						t.Errorf("stated half-width %.4g is %.2f× the empirical 95%% error %.4g (allowed 0.8–%.1f)", med, r, p95, tight)
					}
				})
			}
		}
	}
}

// measureRow returns the upstream row of an ungrouped plan over values
// (every value one row within the policy's bounds of age): its counts,
// sums and sums of squares, centred as the plan says.
func measureRow(t *testing.T, plan *rewrite.Plan, values []float64) []*string {
	t.Helper()
	row := make([]*string, len(plan.Measures))
	for i, m := range plan.Measures {
		c := 0.0
		if m.Centre != "" {
			var err error
			if c, err = strconv.ParseFloat(m.Centre, 64); err != nil {
				t.Fatal(err)
			}
		}
		acc := new(big.Rat)
		for _, x := range values {
			d := new(big.Rat).SetFloat64(x - c)
			switch m.Kind {
			case rewrite.MeasureCount:
				acc.Add(acc, big.NewRat(1, 1))
			case rewrite.MeasureSum:
				acc.Add(acc, d)
			case rewrite.MeasureSumSq:
				acc.Add(acc, d.Mul(d, d))
			default:
				t.Fatalf("measure kind %v", m.Kind)
			}
		}
		s := acc.FloatString(6)
		row[i] = &s
	}
	return row
}

// noticeHalfWidth reads "±h (name, …)" from a NOTICE.
func noticeHalfWidth(t *testing.T, notice, name string) float64 {
	t.Helper()
	for _, part := range strings.Split(notice, "±")[1:] {
		num, rest, ok := strings.Cut(part, " (")
		if ok && strings.HasPrefix(rest, name+",") {
			h, err := strconv.ParseFloat(num, 64)
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
	}
	t.Fatalf("no half-width of %s in %q", name, notice)
	return 0
}

// TestIntervals_AvgNearBound: an AVG whose true value lies within its
// noise of the lower bound (ages near 0 in [0, 110]) is clamped at 0 in
// many releases, so its errors towards 0 are cut short. The stated
// half-width (simHalfWidthTails) must still cover the truth in about 95%
// of releases and be no wider than 1.3× the empirical 95% error (issue
// 16); the unclamped simulation it replaced stated 1.3–1.46× there, and a
// symmetric 95% quantile of the clamped errors covered 92%.
//
// 1,000 releases: a calibrated interval's coverage has a standard error
// of 0.7 points, so [0.92, 0.985] rejects one with probability below
// 10⁻³ (and the seeded test is deterministic).
func TestIntervals_AvgNearBound(t *testing.T) {
	ds := loadPolicy(t)
	rng := rand.New(rand.NewPCG(16, 5))
	var all []float64
	for range 1500 {
		all = append(all, math.Round(12*math.Pow(rng.Float64(), 3)))
	}
	mean := 0.0
	for _, x := range all {
		mean += x
	}
	mean /= float64(len(all))
	plan, err := rewrite.RewriteWith(ds, "SELECT AVG(age) FROM visits", rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	up := &fakeUpstream{rows: [][]*string{measureRow(t, plan, all)}}
	r := newTestReleaser(t, &memLedger{limit: 1e9}, 77)
	const runs = 1000
	var errs, widths []float64
	covered, atZero := 0, 0
	for range runs {
		res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 0.2,
			Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true})
		if err != nil {
			t.Fatal(err)
		}
		got, err := strconv.ParseFloat(*res.Rows[0][0], 64)
		if err != nil {
			t.Fatal(err)
		}
		if got == 0 {
			atZero++
		}
		h := noticeHalfWidth(t, res.Notice, plan.Outputs[0].Name)
		e := math.Abs(got - mean)
		errs = append(errs, e)
		widths = append(widths, h)
		if e <= h {
			covered++
		}
	}
	slices.Sort(errs)
	slices.Sort(widths)
	p95, med := errs[int(0.95*runs)-1], widths[runs/2]
	cov := float64(covered) / runs
	t.Logf("mean %.3g, released 0 in %d of %d, coverage %.3f, stated ±%.4g (median), empirical p95 %.4g, ratio %.2f",
		mean, atZero, runs, cov, med, p95, med/p95)
	if atZero < runs/10 || p95 < mean/2 {
		t.Fatalf("the case does not reach the bound (released 0 in %d of %d, p95 %.3g, mean %.3g): choose a smaller ε", atZero, runs, p95, mean)
	}
	if cov < 0.92 || cov > 0.985 {
		t.Errorf("coverage %.3f outside [0.92, 0.985]", cov)
	}
	if r := med / p95; r < 0.8 || r > 1.3 {
		t.Errorf("stated half-width %.4g is %.2f× the empirical 95%% error %.4g (allowed 0.8–1.3)", med, r, p95)
	}
}
