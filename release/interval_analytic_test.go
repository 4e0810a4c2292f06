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

// TestComboQuantiles checks the quantiles of a standardized sum of
// Laplace variables (comboQuantiles) against closed forms where they are
// known, against the closed-form tail off the table's grid, and against
// Monte Carlo.
func TestComboQuantiles(t *testing.T) {
	near := func(name string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol*want {
			t.Errorf("%s = %.9g, want %.9g (±%g relative)", name, got, want, tol)
		}
	}
	// One Laplace of variance 1 (scale 1/√2): P(Y > t) = ½e^{−√2·t}.
	q975, q95 := comboQuantiles(false, [3]float64{3, 0, 0})
	near("q975 of one Laplace", q975, math.Log(20)/math.Sqrt2, 1e-9)
	near("q95 of one Laplace", q95, math.Log(10)/math.Sqrt2, 1e-9)
	// Two equal (scale ½ each): P(|Y| > t) = e^{−2t}(1 + t).
	solve := func(p float64) float64 {
		lo, hi := 0.0, 4.0
		for range 100 {
			if m := (lo + hi) / 2; math.Exp(-2*m)*(1+m) > p {
				lo = m
			} else {
				hi = m
			}
		}
		return hi
	}
	q975, q95 = comboQuantiles(false, [3]float64{0, 2, 2})
	near("q975 of two equal Laplace", q975, solve(0.05), 1e-6)
	near("q95 of two equal Laplace", q95, solve(0.1), 1e-6)
	// Gaussian noise: the normal quantiles whatever the weights.
	if q975, q95 := comboQuantiles(true, [3]float64{1, 0.3, 0}); q975 != normalQ975 || q95 != normalQ95 {
		t.Errorf("Gaussian quantiles %v, %v", q975, q95)
	}
	// Off the grid, the interpolated table against the closed-form tail
	// (distinct scales: no perturbation).
	rng := rand.New(rand.NewPCG(27, 6))
	for range 200 {
		c := [3]float64{rng.Float64(), rng.Float64(), rng.Float64()}
		if rng.IntN(3) == 0 {
			c[2] = 0
		}
		s := slices.Clone(c[:])
		slices.Sort(s)
		slices.Reverse(s)
		norm := math.Sqrt(2 * (s[0]*s[0] + s[1]*s[1] + s[2]*s[2]))
		var alphas []float64
		for _, a := range s {
			if a > 0 {
				alphas = append(alphas, a/norm)
			}
		}
		q975, q95 := comboQuantiles(false, c)
		near(fmt.Sprintf("q975 of %v", c), q975, laplaceComboQuantile(alphas, 0.025), 1e-3)
		near(fmt.Sprintf("q95 of %v", c), q95, laplaceComboQuantile(alphas, 0.05), 1e-3)
	}
	// Monte Carlo, three unequal weights and two equal of three: with
	// 10⁶ draws the tail frequency at a true 5% point has a standard
	// error of 2.2·10⁻⁴; accepting ±1.5·10⁻³ (6.9 standard errors)
	// rejects a right table with probability below 10⁻¹¹ (and the seeded
	// test is deterministic).
	for _, c := range [][3]float64{{1, 0.7, 0.4}, {1, 1, 0.5}} {
		q975, q95 := comboQuantiles(false, c)
		norm := math.Sqrt(c[0]*c[0] + c[1]*c[1] + c[2]*c[2])
		const n = 1_000_000
		abs, up := 0, 0
		for range n {
			var y float64
			for _, a := range c {
				y += a / norm / math.Sqrt2 * (rng.ExpFloat64() - rng.ExpFloat64())
			}
			if math.Abs(y) > q975 {
				abs++
			}
			if y > q95 {
				up++
			}
		}
		if p := float64(abs) / n; math.Abs(p-0.05) > 1.5e-3 {
			t.Errorf("%v: P(|Y| > q975) = %.4f, want 0.05", c, p)
		}
		if p := float64(up) / n; math.Abs(p-0.05) > 1.5e-3 {
			t.Errorf("%v: P(Y > q95) = %.4f, want 0.05", c, p)
		}
	}
}

// ageOutput returns the ratioOutput of the only aggregate of
// SELECT <agg>(age) FROM visits under the test policy, with the
// mechanisms a release at ε would use.
func ageOutput(t *testing.T, agg, mechanism string, eps float64) *ratioOutput {
	t.Helper()
	ds := loadPolicy(t)
	plan, err := rewrite.RewriteWith(ds, "SELECT "+agg+"(age) FROM visits", rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	r := newTestReleaser(t, &memLedger{limit: 1e9}, 1)
	ms, err := r.mechanisms(Request{Dataset: ds, Plan: plan, Epsilon: eps, Delta: 1e-6, Mechanism: mechanism})
	if err != nil {
		t.Fatal(err)
	}
	return newRatioOutput(plan, 0, plan.Outputs[0], ms)
}

// ageInputs are the true inputs of a group of n values of age, half at
// mean − d and half at mean + d (d = half the distance to the nearer
// bound), centred as the plan's measures are: (S, C) for AVG, (Q, S, C)
// for the variances. It returns them with the bounded truth of o.
func ageInputs(o *ratioOutput, n, mean float64) ([]float64, float64) {
	d := math.Min(mean, 110-mean) / 2
	const c = 55 // the midpoint of [0, 110]: the centre of the sums
	s := n * (mean - c)
	if o.o.Kind == rewrite.OutputAvg {
		return []float64{s, n}, mean
	}
	q := n/2*(mean-d-c)*(mean-d-c) + n/2*(mean+d-c)*(mean+d-c)
	truth := d * d
	if o.o.Sample {
		truth *= n / (n - 1)
	}
	if o.o.Sqrt {
		truth = math.Sqrt(truth)
	}
	return []float64{q, s, n}, truth
}

// TestIntervals_AnalyticMatchesSimulation: in the analytic regime the
// closed-form half-width agrees with the simulation it replaces (4,000
// draws, as before issue 27). AVG, VAR_SAMP and STDDEV of age, Laplace
// and Gaussian, for groups whose count is 12 to 200 noise standard
// deviations (the regime starts at 10), the mean near the lower bound, in
// the middle and near the upper bound; 40 noisy releases each.
//
// Acceptance, per case: the median ratio closed form / simulation in
// [0.93, 1.2], its 10th and 90th percentiles in [0.85, 1.3], and no ratio
// below 0.85; a rare larger one is a STDDEV whose variance interval
// reaches 0 in one computation and not in the other (mapped through the
// root there, which is wider: the same switch as before). The simulation's own error
// is about 2% per quantile (intervalSims) and its equal-tail term is the
// larger of two noisy quantiles (biased up by about 1%); the first-order
// form leaves out the ratio's skew, which makes it up to 15% wider than
// the simulation where a mean sits at a bound and the count's noise
// dominates (mean 5 of [0, 110] at 12σ_C), and at most 5% narrower
// elsewhere (measured over 400 releases per case while choosing
// analyticCountSDs). The test is deterministic (seeded): a failure is a
// change of the closed form, not chance.
func TestIntervals_AnalyticMatchesSimulation(t *testing.T) {
	for _, mech := range []string{policy.MechanismLaplace, policy.MechanismGaussian} {
		for _, agg := range []string{"AVG", "VAR_SAMP", "STDDEV"} {
			o := ageOutput(t, agg, mech, 0.3)
			for _, u := range []float64{12, 30, 200} {
				for _, mean := range []float64{5, 55, 90} {
					x0, _ := ageInputs(o, math.Round(u*o.countSD), mean)
					rng := rand.New(rand.NewPCG(uint64(u), uint64(mean)))
					x := make([]float64, len(x0))
					var ratios []float64
					for g := 0; len(ratios) < 40 && g < 4000; g++ {
						for i := range x {
							x[i] = x0[i] + o.draws[i].draw(rng)
						}
						st := o.analytic(x)
						if st.sim {
							continue // not in the analytic regime (a STDDEV's root near 0)
						}
						old := o.simulate(g, intervalSims, x, groupState{})
						ratios = append(ratios, st.h/old)
					}
					if len(ratios) == 0 {
						continue
					}
					slices.Sort(ratios)
					k := len(ratios) / 10
					med, p10, p90 := ratios[len(ratios)/2], ratios[k], ratios[len(ratios)-1-k]
					name := fmt.Sprintf("%s %s u=%g mean=%g", mech, agg, u, mean)
					t.Logf("%s: %d analytic, ratio to the simulation %.3f (median), %.3f–%.3f (10–90%%), %.3f–%.3f",
						name, len(ratios), med, p10, p90, ratios[0], ratios[len(ratios)-1])
					if med < 0.93 || med > 1.2 || p10 < 0.85 || p90 > 1.3 || ratios[0] < 0.85 {
						t.Errorf("%s: closed form / simulation median %.3f, 10–90%% %.3f–%.3f, least %.3f; want median in [0.93, 1.2], 10–90%% in [0.85, 1.3], none below 0.85",
							name, med, p10, p90, ratios[0])
					}
				}
			}
		}
	}
	// AVG and VAR come out of the analytic regime only through the count
	// (the curvature guard does not bind at 12σ_C): the case would
	// otherwise test nothing.
	o := ageOutput(t, "VAR_SAMP", policy.MechanismLaplace, 0.3)
	if x, _ := ageInputs(o, math.Round(10.5*o.countSD)+2, 55); o.analytic(x).sim {
		t.Error("VAR_SAMP at 10.5σ_C is not in the analytic regime")
	}
}

// TestIntervals_RegimesCover releases a grouped AVG and VAR_SAMP end to
// end (Run) over seven departments: three with counts 25, 60 and 150
// noise standard deviations (the closed forms: the noisy count stays above
// 10σ_C except with probability below 10⁻⁹), three with 2, 4 and 6 (always
// simulated but for a noisy count 4σ_C above its truth, probability below
// 0.2%), and one empty. Over 300 releases, the stated per-group
// half-widths (the NOTICE's "per group: …") cover the bounded truth in
// each regime: pooled over its three groups, 900 statements, whose
// coverage has a standard error of 0.73 points at 95%.
//
// Acceptance: analytic regime in [0.92, 0.985] and, per group, the median
// stated half-width within 0.8–1.3× the empirical 95% error (issue 16);
// simulated regime at least 0.92, with no upper limit (small counts are
// clamped into the range and may be stated by trivialBound, which covers
// every truth). A calibrated interval falls below 0.92 with probability
// below 10⁻⁴; the test is seeded and so deterministic.
func TestIntervals_RegimesCover(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.RewriteWith(ds, "SELECT department, AVG(age) AS a, VAR_SAMP(age) AS v FROM visits GROUP BY department", rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	const eps = 1.0
	r := newTestReleaser(t, &memLedger{limit: 1e9}, 27)
	req := Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: eps, Mechanism: policy.MechanismLaplace, NoCache: true}
	ms, err := r.mechanisms(req)
	if err != nil {
		t.Fatal(err)
	}
	var countSD float64
	for i, m := range plan.Measures {
		if m.Kind == rewrite.MeasureCount {
			countSD = drawOf(ms[i].mech).sd()
		}
	}
	groups, err := groupKeys(plan.Keys)
	if err != nil {
		t.Fatal(err)
	}
	us := []float64{25, 60, 150, 2, 4, 6, 0} // counts in σ_C, per department
	analytic := func(g int) bool { return us[g] >= 25 }
	type truth struct{ avg, vs float64 }
	truths := make([]truth, len(groups))
	up := &fakeUpstream{}
	rng := rand.New(rand.NewPCG(27, 7))
	for g, key := range groups {
		n := int(math.Round(us[g] * countSD))
		var values []float64
		for range n {
			values = append(values, math.Round(20+70*rng.Float64()*rng.Float64()))
		}
		if n > 1 {
			m, ss := 0.0, 0.0
			for _, v := range values {
				m += v
			}
			m /= float64(n)
			for _, v := range values {
				ss += (v - m) * (v - m)
			}
			truths[g] = truth{m, ss / float64(n-1)}
		}
		up.rows = append(up.rows, append([]*string{s(key[0])}, measureRow(t, plan, values)...))
	}
	req.Upstream = up
	const runs = 300
	type stat struct{ errs, widths []float64 }
	stats := map[string]*stat{}
	covered := map[string][2]int{}
	for range runs {
		res, err := r.Run(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for col, name := range []string{"a", "v"} {
			hs := perGroupHalfWidths(t, res.Notice, name, len(groups))
			for g := range groups {
				if us[g] == 0 {
					continue // no truth
				}
				cell := res.Rows[g][1+col]
				if cell == nil {
					continue // VAR_SAMP of a noisy count below 2: NULL
				}
				got, err := strconv.ParseFloat(*cell, 64)
				if err != nil {
					t.Fatal(err)
				}
				want := truths[g].avg
				if name == "v" {
					want = truths[g].vs
				}
				regime := "simulated"
				if analytic(g) {
					regime = "analytic"
				}
				key := fmt.Sprintf("%s %s", name, regime)
				c := covered[key]
				c[1]++
				e := math.Abs(got - want)
				if e <= hs[g] {
					c[0]++
				}
				covered[key] = c
				gk := fmt.Sprintf("%s %d", name, g)
				if stats[gk] == nil {
					stats[gk] = &stat{}
				}
				stats[gk].errs = append(stats[gk].errs, e)
				stats[gk].widths = append(stats[gk].widths, hs[g])
			}
		}
	}
	for _, key := range []string{"a analytic", "a simulated", "v analytic", "v simulated"} {
		c := covered[key]
		cov := float64(c[0]) / float64(c[1])
		t.Logf("%s: coverage %.3f of %d", key, cov, c[1])
		if cov < 0.92 || strings.HasSuffix(key, "analytic") && cov > 0.985 {
			t.Errorf("%s: coverage %.3f outside its bounds", key, cov)
		}
	}
	for g := range groups {
		if !analytic(g) {
			continue
		}
		for _, name := range []string{"a", "v"} {
			st := stats[fmt.Sprintf("%s %d", name, g)]
			slices.Sort(st.errs)
			slices.Sort(st.widths)
			p95, med := st.errs[int(0.95*float64(len(st.errs)))-1], st.widths[len(st.widths)/2]
			t.Logf("%s %s (%gσ_C): stated ±%.4g (median), empirical p95 %.4g, ratio %.2f", name, groups[g][0], us[g], med, p95, med/p95)
			if ratio := med / p95; ratio < 0.8 || ratio > 1.3 {
				t.Errorf("%s %s: stated %.4g is %.2f× the empirical 95%% error %.4g (allowed 0.8–1.3)", name, groups[g][0], med, ratio, p95)
			}
		}
	}
}

// perGroupHalfWidths reads "±h (name, …; per group: k1 ±h1, k2 ±h2, …)"
// from a NOTICE, in group order.
func perGroupHalfWidths(t *testing.T, notice, name string, n int) []float64 {
	t.Helper()
	_, rest, ok := strings.Cut(notice, " ("+name+", ")
	if !ok {
		t.Fatalf("no half-width of %s in %q", name, notice)
	}
	_, rest, ok = strings.Cut(rest, "per group: ")
	if !ok {
		t.Fatalf("no per-group half-widths of %s in %q", name, notice)
	}
	rest, _, _ = strings.Cut(rest, ")")
	var hs []float64
	for _, item := range strings.Split(rest, ", ") {
		_, h, ok := strings.Cut(item, " ±")
		if !ok {
			t.Fatalf("bad per-group item %q", item)
		}
		f, err := strconv.ParseFloat(h, 64)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, f)
	}
	if len(hs) != n {
		t.Fatalf("%d per-group half-widths of %s, want %d", len(hs), name, n)
	}
	return hs
}

// TestIntervals_DrawBudget: however many groups ask for a simulation, one
// answer's simulations stay within intervalDrawBudget noise draws; when
// the budget cannot give each its floor, the groups nearest the analytic
// regime are simulated and the rest are stated by trivialBound, which
// covers every truth; when it can, every such group is simulated with
// the same number of draws (at most intervalSims), and the half-widths
// of a small answer are those of before (4,000 draws each).
func TestIntervals_DrawBudget(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.RewriteWith(ds, "SELECT department, AVG(cost), STDDEV(cost) FROM visits GROUP BY department", rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	r := newTestReleaser(t, &memLedger{limit: 1e9}, 1)
	ms, err := r.mechanisms(Request{Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace})
	if err != nil {
		t.Fatal(err)
	}
	var count, sum, sumSq int
	for i, m := range plan.Measures {
		switch m.Kind {
		case rewrite.MeasureCount:
			count = i
		case rewrite.MeasureSum:
			sum = i
		case rewrite.MeasureSumSq:
			sumSq = i
		}
	}
	countSD := drawOf(ms[count].mech).sd()
	rows := func(n int, counts func(g int) float64) [][]float64 {
		out := make([][]float64, n)
		for g := range out {
			out[g] = make([]float64, len(plan.Measures))
			c := counts(g)
			out[g][count] = c
			out[g][sum] = c * -5000 // mean 5000 of [0, 20000], centre 10000
			out[g][sumSq] = c * (5000*5000 + 3000*3000)
		}
		return out
	}
	avg := newRatioOutput(plan, 1, plan.Outputs[1], ms)

	// 20,000 groups whose counts run from 0 to 10σ_C: every one asks for
	// a simulation, far more than the budget allows at its floor.
	const n = 20000
	noisy := rows(n, func(g int) float64 { return float64(g) / n * 10 * countSD })
	hw, spent := groupHalfWidths(plan, ms, noisy)
	if spent > intervalDrawBudget || spent < intervalDrawBudget/2 {
		t.Fatalf("spent %d noise draws, want at most the budget %d (and most of it)", spent, intervalDrawBudget)
	}
	simulated := 0
	for g := range n {
		x := avg.load(noisy[g])
		b := clampF(avg.rawAvg(x), avg.o.Lower, avg.o.Upper)
		triv := trivialBound(b, avg.o.Lower, avg.o.Upper)
		if hw[1][g] > triv {
			t.Fatalf("group %d: ±%g above the trivial bound %g", g, hw[1][g], triv)
		}
		if hw[1][g] < triv {
			simulated++
			// Simulated groups are the highest counts: no group below a
			// simulated one's count is simulated before it… checked
			// by order: the last groups are the nearest the regime.
			if g < n/2 {
				t.Fatalf("group %d (count %.3gσ_C) simulated before the larger counts", g, noisy[g][count]/countSD)
			}
		}
	}
	if simulated == 0 || simulated > intervalDrawBudget/minIntervalSims {
		t.Fatalf("%d AVG groups simulated, want between 1 and %d", simulated, intervalDrawBudget/minIntervalSims)
	}

	// Seven groups (the departments), one with a small count: simulated
	// with intervalSims draws exactly as before issue 27.
	small := rows(7, func(g int) float64 { return []float64{3, 50, 100, 200, 400, 800, 1600}[g] * countSD })
	hw, spent = groupHalfWidths(plan, ms, small)
	if spent == 0 || spent > intervalDrawBudget {
		t.Fatalf("spent %d", spent)
	}
	x := avg.load(small[0])
	r0 := avg.rawAvg(x)
	b := clampF(r0, avg.o.Lower, avg.o.Upper)
	est := func(v []float64) float64 { return clampF(b+avg.rawAvg(v)-r0, avg.o.Lower, avg.o.Upper) }
	want := math.Min(simHalfWidthTails(groupSeed(1, 0), intervalSims, x, avg.draws, est, avg.limit), trivialBound(b, avg.o.Lower, avg.o.Upper))
	if hw[1][0] != want {
		t.Fatalf("small answer: ±%g, want the 4,000-draw simulation's ±%g", hw[1][0], want)
	}
}

// TestFloatRows: the fast conversion agrees with big.Rat.Float64, on and
// off its fast path.
func TestFloatRows(t *testing.T) {
	vals := []*big.Rat{
		big.NewRat(3, 8), big.NewRat(-7, 1), big.NewRat(1, 3), big.NewRat(0, 1),
		new(big.Rat).SetFrac(new(big.Int).Lsh(big.NewInt(1), 80), big.NewInt(3)),
		new(big.Rat).SetFrac(big.NewInt(5), new(big.Int).Lsh(big.NewInt(1), 70)),
		new(big.Rat).SetFloat64(123456.789), new(big.Rat).SetFloat64(-1e-300), nil,
	}
	out := floatRows([][]*big.Rat{vals, vals})
	for r := range out {
		for i, v := range vals {
			want := 0.0
			if v != nil {
				want, _ = v.Float64()
			}
			if out[r][i] != want {
				t.Errorf("row %d: %v → %v, want %v", r, v, out[r][i], want)
			}
		}
	}
}
