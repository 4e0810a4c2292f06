package release

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

func mustRewrite(t *testing.T, ds *policy.Dataset, q string) *rewrite.Plan {
	t.Helper()
	p, err := rewrite.RewriteWith(ds, q, rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatalf("Rewrite(%q): %v", q, err)
	}
	return p
}

// TestRun_PartitionSelection: GROUP BY a column without public values
// releases a large group, drops groups of one and three units, never
// releases the NULL group, and charges the selection (its ε share and the
// threshold's δ) with the query.
func TestRun_PartitionSelection(t *testing.T) {
	ds := loadPolicy(t)
	plan := mustRewrite(t, ds, "SELECT diagnosis, COUNT(*) FROM visits GROUP BY diagnosis")
	if !plan.PrivateGroups() || plan.MaxGroupsPerUnit != 4 {
		t.Fatalf("plan: private %v, L0 %d", plan.PrivateGroups(), plan.MaxGroupsPerUnit)
	}
	// Rows: key, COUNT(*), distinct units.
	up := &fakeUpstream{rows: [][]*string{
		{s("J45"), s("2500"), s("1000")},
		{s("rare"), s("5"), s("1")},
		{s("small"), s("12"), s("3")},
		{nil, s("4000"), s("2000")},
	}}
	// ε = 1 over 2 measurements (the count and the selection): the
	// selection's Laplace scale is b = L0/0.5 = 8. δ = 1e-6 goes to the
	// threshold: δ_p = 1 − (1−1e-6)^{1/4} ≈ 2.5e-7, so "rare" (n = 1) is
	// kept with probability ≤ 2.5e-7 and "small" (n = 3) with probability
	// ≤ 2.5e-7·e^{2/8} < 3.3e-7 (P(Z ≥ k) decays by e^{−1/b} per step);
	// τ ≈ 1 + 8·ln(1/(2δ_p)) ≈ 117, so J45 (n = 1000) is dropped with
	// probability ≤ ½e^{−883/8} < 1e-47. Over 20 seeds the test falsely
	// fails with probability < 20·(2.5e-7 + 3.3e-7) < 1.2e-5.
	for seed := uint64(1); seed <= 20; seed++ {
		led := &memLedger{limit: 3}
		r := newTestReleaser(t, led, seed)
		res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Delta: 1e-6,
			Mechanism: policy.MechanismLaplace, Upstream: up})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if len(res.Rows) != 1 || *res.Rows[0][0] != "J45" {
			t.Fatalf("seed %d: released %v, want only J45", seed, rowsText(res.Rows))
		}
		// Count noise: Laplace of scale L1/ε = 4·5/0.5 = 40; |Z| ≥ 40·ln(2/1e-9)
		// with probability ≤ 1e-9.
		got, err := strconv.ParseFloat(*res.Rows[0][1], 64)
		if err != nil || math.Abs(got-2500) > 40*math.Log(2/1e-9) {
			t.Fatalf("count = %s, want ≈ 2500", *res.Rows[0][1])
		}
		evs := led.reserved[0].Events
		if len(evs) != 3 {
			t.Fatalf("events = %+v, want count, selection count, threshold", evs)
		}
		var eps, delta float64
		for _, e := range evs {
			eps += e.Epsilon
			delta += e.Delta
		}
		if evs[1].Mechanism != "laplace" || evs[1].Epsilon != 0.5 || evs[2].Mechanism != thresholdMechanism ||
			evs[2].Epsilon != 0 || evs[2].Delta != 1e-6 || eps != 1 || delta != 1e-6 {
			t.Fatalf("events = %+v: want ε 0.5 + 0.5 and the threshold's δ 1e-6", evs)
		}
		if !strings.Contains(res.Notice, "partition selection") || !strings.Contains(res.Notice, "threshold delta 1e-06") {
			t.Fatalf("Notice = %q", res.Notice)
		}
	}
}

// TestRun_PartitionSelection_Rate checks the threshold's guarantee through
// Run: with L0 = 1 (the patients table), ε = 1 (selection ε 0.5, discrete
// Laplace with t = 2) and a large δ = 0.2 (so that the rate is
// observable), a group of one unit is kept with probability exactly
// p = q^k/(1+q), q = e^{−1/2}, for the smallest k with p ≤ δ_p = 0.2
// (the threshold is τ = 1 + k); a group of 60 units is kept.
func TestRun_PartitionSelection_Rate(t *testing.T) {
	ds := loadPolicy(t)
	plan := mustRewrite(t, ds, "SELECT birth_year, COUNT(*) FROM patients GROUP BY birth_year")
	if plan.MaxGroupsPerUnit != 1 || plan.Outputs[0].PGType != "int8" {
		t.Fatalf("plan: L0 %d, key type %s", plan.MaxGroupsPerUnit, plan.Outputs[0].PGType)
	}
	const n = 4000
	up := &fakeUpstream{}
	for i := 0; i < n; i++ {
		up.rows = append(up.rows, []*string{s(strconv.Itoa(100000 + i)), s("1"), s("1")})
	}
	up.rows = append(up.rows, []*string{s("1950"), s("60"), s("60")})
	led := &memLedger{limit: 3}
	r := newTestReleaser(t, led, 7)
	res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Delta: 0.2,
		Mechanism: policy.MechanismLaplace, Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	q := math.Exp(-0.5)
	k := 1.0
	for math.Pow(q, k)/(1+q) > 0.2 {
		k++
	}
	p := math.Pow(q, k) / (1 + q)
	kept, big := 0, false
	prev := int64(math.MinInt64)
	for _, row := range res.Rows {
		v, err := strconv.ParseInt(*row[0], 10, 64)
		if err != nil || v <= prev {
			t.Fatalf("keys not sorted numerically: %v after %v", *row[0], prev)
		}
		prev = v
		if v == 1950 {
			big = true
		} else {
			kept++
		}
	}
	// τ = 1 + k ≤ 5 here, so the group of 60 units is dropped with
	// probability ≤ ½·q^{55} < 1e-12. The count of kept singletons is
	// Binomial(4000, p): |kept − np| ≤ 6σ fails with probability < 2e-9
	// (normal approximation; np ≈ 470).
	sigma := math.Sqrt(n * p * (1 - p))
	t.Logf("kept %d of %d singletons (np = %.1f, p = %.4f)", kept, n, n*p, p)
	if !big || math.Abs(float64(kept)-n*p) > 6*sigma || p > 0.2 {
		t.Fatalf("kept %d singletons (want %.0f ± %.0f, p = %.4f ≤ 0.2), large group kept: %v", kept, n*p, 6*sigma, p, big)
	}
}

// TestRun_PartitionSelection_NoDelta: pure ε (δ = 0) cannot select
// partitions; the query is refused before any budget is spent or data read.
func TestRun_PartitionSelection_NoDelta(t *testing.T) {
	ds := loadPolicy(t)
	plan := mustRewrite(t, ds, "SELECT department, diagnosis, COUNT(*) FROM visits GROUP BY 1, 2")
	led := &memLedger{limit: 3}
	up := &fakeUpstream{}
	_, err := newTestReleaser(t, led, 1).Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1,
		Mechanism: policy.MechanismLaplace, Upstream: up})
	pe, ok := pgerr.As(err)
	if !ok || pe.Code != pgerr.FeatureNotSupported || !strings.Contains(pe.Message, "GROUP BY diagnosis needs dp.delta > 0") ||
		!strings.Contains(pe.Hint, "SET dp.delta") || !strings.Contains(pe.Hint, "department") {
		t.Fatalf("Run with δ = 0: %v (hint %q)", err, pe.Hint)
	}
	if len(led.reserved) != 0 || len(up.calls) != 0 {
		t.Fatalf("refused query reserved %d charges and sent %d queries", len(led.reserved), len(up.calls))
	}
	// A bounded numeric column: the hint offers its buckets too.
	agePlan := mustRewrite(t, ds, "SELECT age, COUNT(*) FROM visits GROUP BY age")
	_, err = newTestReleaser(t, led, 1).Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: agePlan, Epsilon: 1,
		Mechanism: policy.MechanismLaplace, Upstream: up})
	if pe, ok := pgerr.As(err); !ok || !strings.Contains(pe.Hint, "width_bucket(age, 0, 110, 10)") {
		t.Fatalf("GROUP BY age with δ = 0: %v, want a hint offering width_bucket(age, 0, 110, 10)", err)
	}
	if _, _, err := Explain(ds, plan, Params{Epsilon: 1, Delta: 0, Mechanism: policy.MechanismLaplace}); err == nil {
		t.Fatalf("EXPLAIN with δ = 0 accepted")
	}
}

// TestRun_PartitionSelection_Gaussian: the Gaussian split gives δ/(m+2) to
// each measure, the selection's noise and the threshold, and the whole
// query never exceeds its (ε, δ).
func TestRun_PartitionSelection_Gaussian(t *testing.T) {
	ds := loadPolicy(t)
	plan := mustRewrite(t, ds, "SELECT diagnosis, COUNT(*), AVG(cost) FROM visits GROUP BY diagnosis")
	up := &fakeUpstream{rows: [][]*string{{s("J45"), s("3000"), s("900000"), s("3000"), s("1500")}}}
	led := &memLedger{limit: 10}
	res, err := newTestReleaser(t, led, 3).Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 2, Delta: 1e-6,
		Mechanism: policy.MechanismGaussian, Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	// 3 measures + selection count + threshold.
	evs := led.reserved[0].Events
	if len(evs) != 5 {
		t.Fatalf("events = %+v", evs)
	}
	var eps, delta float64
	for _, e := range evs {
		eps += e.Epsilon
		delta += e.Delta
	}
	if eps > 2 || eps < 2*(1-1e-12) || delta > 1e-6 || delta < 1e-6*(1-1e-12) || evs[4].Delta != evs[3].Delta || evs[4].Epsilon != 0 {
		t.Fatalf("events = %+v: ε %v, δ %v, want 2 and 1e-6 in total", evs, eps, delta)
	}
	// τ for σ of ε = 0.5, δ = 2e-7, Δ₂ = 2 is far below 1500 units.
	if len(res.Rows) != 1 {
		t.Fatalf("rows = %v", rowsText(res.Rows))
	}
}

// TestExplain_PartitionSelection: EXPLAIN shows the threshold the release
// would use (the exact discrete one of noise.PartitionThreshold).
func TestExplain_PartitionSelection(t *testing.T) {
	ds := loadPolicy(t)
	plan := mustRewrite(t, ds, "SELECT diagnosis, COUNT(*) FROM visits GROUP BY diagnosis")
	all := explainPlan(t, ds, plan, 1, 1e-6, policy.MechanismLaplace)
	m, _ := noise.NewLaplace(noise.Params{Epsilon: 0.5, Sensitivity: 4, Integer: true, Cells: 4})
	tau, err := noise.PartitionThreshold(m, 1e-6, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := "keep a group iff its noisy distinct units >= threshold=" + tau.RatString() + " "
	for _, sub := range []string{fmt.Sprintf("groups=data-dependent (partition selection; the answer holds the first %d by key)", dpplan.MaxSelectedGroups(plan)), "measurements=2", "Cost: epsilon=1 delta=1e-06",
		"threshold delta=1e-06", want, "(private values: released only for groups kept by partition selection)",
		"COUNT(*)::text"} {
		if !strings.Contains(all, sub) {
			t.Errorf("EXPLAIN lacks %q:\n%s", sub, all)
		}
	}
}

// TestRun_PartitionSelection_NoGroupKept: a grouped AVG and STDDEV over a
// private key whose every group is too small to pass the threshold
// releases no row and says so: no error after the charge (it panicked on
// the half-width of no group: an incident that suspended honest analysts,
// found by the attack review of issue 27).
func TestRun_PartitionSelection_NoGroupKept(t *testing.T) {
	ds := loadPolicy(t)
	for _, q := range []string{
		"SELECT diagnosis, AVG(cost) FROM visits GROUP BY diagnosis",
		"SELECT diagnosis, STDDEV(cost) FROM visits GROUP BY diagnosis",
	} {
		plan := mustRewrite(t, ds, q)
		// Rows: key, the measures, the group's distinct units (one).
		row := []*string{s("rare")}
		for range plan.Measures {
			row = append(row, s("3"))
		}
		row = append(row, s("1"))
		led := &memLedger{limit: 3}
		// With δ = 1e-9 a group of one unit is kept with probability
		// below 1e-9 (the threshold's guarantee): the test falsely fails
		// with at most that probability.
		res, err := newTestReleaser(t, led, 7).Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 0.01, Delta: 1e-9,
			Mechanism: policy.MechanismLaplace, Upstream: &fakeUpstream{rows: [][]*string{row}}})
		if err != nil {
			t.Fatalf("%s: Run: %v", q, err)
		}
		if len(res.Rows) != 0 || !strings.Contains(res.Notice, "no group released") || len(led.incidents) != 0 {
			t.Fatalf("%s: rows %v, notice %q, incidents %d", q, rowsText(res.Rows), res.Notice, len(led.incidents))
		}
	}
}

// TestRun_PartitionSelection_HoldsFirstGroups: when more groups pass
// partition selection than an answer holds (dpplan.MaxSelectedGroups: here
// a key and 999 COUNT(*) columns make a group weigh 1,000 cells, so 60 groups),
// the answer holds the first ones by key — a function of the selected set,
// whatever order the data server sends them in — and says how many passed.
func TestRun_PartitionSelection_HoldsFirstGroups(t *testing.T) {
	ds := loadPolicy(t)
	q := "SELECT diagnosis" + strings.Repeat(", COUNT(*)", 999) + " FROM visits GROUP BY diagnosis"
	plan := mustRewrite(t, ds, q)
	limit := dpplan.MaxSelectedGroups(plan)
	if limit != 60 || len(plan.Measures) != 1 {
		t.Fatalf("premise: %d groups an answer, %d measures", limit, len(plan.Measures))
	}
	// 100 groups of a million units each (kept by the selection with
	// probability 1 − e^{−10⁵}), sent in a scrambled order.
	var rows [][]*string
	for i := 0; i < 100; i++ {
		k := (i * 37) % 100
		rows = append(rows, []*string{s(fmt.Sprintf("D%03d", k)), s("1000000"), s("1000000")})
	}
	led := &memLedger{limit: 1000}
	r := newTestReleaser(t, led, 1)
	res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Delta: 1e-6,
		Mechanism: policy.MechanismLaplace, Upstream: &fakeUpstream{rows: rows}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != limit {
		t.Fatalf("released %d groups, want the first %d", len(res.Rows), limit)
	}
	for i, row := range res.Rows {
		if want := fmt.Sprintf("D%03d", i); *row[0] != want {
			t.Fatalf("group %d is %s, want %s: the first groups by key", i, *row[0], want)
		}
	}
	if !strings.Contains(res.Notice, "100 groups passed partition selection; the answer holds the first 60 by key") {
		t.Errorf("NOTICE does not say how many groups passed:\n%s", res.Notice)
	}
	// Fewer selected groups than the answer holds: no such note.
	res, err = r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Delta: 1e-6, NoCache: true,
		Mechanism: policy.MechanismLaplace, Upstream: &fakeUpstream{rows: rows[:30]}})
	if err != nil || len(res.Rows) != 30 || strings.Contains(res.Notice, "groups passed") {
		t.Fatalf("30 groups: %d released, %v, notice %q", len(res.Rows), err, res.Notice)
	}
}
