package release

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestRun_PrivateKeyQuantile: a quantile grouped by a column without public
// values is answered by partition selection and then the quantile of each
// kept group, under each mechanism, and the events compose to the
// query's ε and δ.
func TestRun_PrivateKeyQuantile(t *testing.T) {
	ds := loadPolicy(t)
	base := mustRewrite(t, ds, "SELECT diagnosis, percentile_cont(0.5) WITHIN GROUP (ORDER BY age) FROM visits GROUP BY diagnosis")
	if !base.PrivateGroups() || base.Measures[0].Kind != rewrite.MeasureQuantile {
		t.Fatalf("plan: private %v, measures %+v", base.PrivateGroups(), base.Measures)
	}
	for _, tc := range []struct {
		mechanism string
		summary   string // J45's summary
		lo, hi    float64
	}{
		// 20000 ages of 40 and 41: the target ranks 10000, 10001 are in
		// buckets 40 and 41 (utility 0); every other bucket has utility
		// ≤ −10000 and is selected with probability ≤ 110·e^{−0.125·10000/10}
		// < 1e-50 (ε_g = 0.5/4, Δu = 5).
		{policy.MechanismLaplace, "40:10000,41:10000", 40, 41},
		// Under Gaussian the threshold and the count's noise share δ; the
		// quantile is pure ε-DP and takes none.
		{policy.MechanismGaussian, "40:10000,41:10000", 40, 41},
	} {
		t.Run(tc.mechanism, func(t *testing.T) {
			plan := base
			rare := "30:1"
			up := &fakeUpstream{rows: [][]*string{
				{s("J45"), s(tc.summary), s("1000")},
				{s("rare"), s(rare), s("1")},
				{nil, s(tc.summary), s("2000")},
			}}
			// Falsely fails when "rare" (n = 1) is kept: probability ≤
			// δ_p < 1e-6 per seed.
			for seed := uint64(1); seed <= 5; seed++ {
				led := &memLedger{limit: 3}
				r := newTestReleaser(t, led, seed)
				res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Delta: 1e-6,
					Mechanism: tc.mechanism, Upstream: up})
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if len(res.Rows) != 1 || *res.Rows[0][0] != "J45" {
					t.Fatalf("seed %d: released %v, want only J45", seed, rowsText(res.Rows))
				}
				v, err := strconv.ParseFloat(*res.Rows[0][1], 64)
				if err != nil || v < tc.lo || v > tc.hi {
					t.Fatalf("seed %d: median = %s, want in [%v, %v]", seed, *res.Rows[0][1], tc.lo, tc.hi)
				}
				var eps, delta float64
				for _, e := range led.reserved[0].Events {
					eps += e.Epsilon
					delta += e.Delta
				}
				if eps > 1 || eps < 1-1e-9 || delta > 1e-6 || delta < 1e-6*(1-1e-9) && tc.mechanism == policy.MechanismGaussian {
					t.Fatalf("events %+v compose to ε %v δ %v, want 1 and ≤ 1e-6", led.reserved[0].Events, eps, delta)
				}
				if !strings.Contains(res.Notice, "partition selection") {
					t.Fatalf("NOTICE %q does not mention partition selection", res.Notice)
				}
			}
		})
	}
}

// clinicPolicy has two protected tables with declared join multiplicities
// and a key with ten public values.
func clinicPolicy(t *testing.T) *policy.Dataset {
	t.Helper()
	ds, err := policy.Load("../rewrite/testdata/clinic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestExplain_ElasticL1 measures issue 9's over-noising fix: a grouped
// elastic join is calibrated to its direct L1 bound E·M
// (dpplan/join_l1.go) instead of L0·E·M with L0 = min(E, groups). Here
// E = 2·(3·20 + 2·50) = 320 and 10 groups, so L0 = 10: the Laplace scale
// falls by 10× and the Gaussian L2 sensitivity by √10×. The figures are
// logged for BENCHMARKS.md (go test ./release -run TestExplain_ElasticL1 -v).
func TestExplain_ElasticL1(t *testing.T) {
	ds := clinicPolicy(t)
	q := "SELECT v.kind, COUNT(*), SUM(l.result) FROM visits v JOIN labs l ON v.ward_id = l.ward_id GROUP BY v.kind"
	plan := mustRewrite(t, ds, q)
	if plan.MaxGroupsPerUnit != 10 || plan.Join.Changed != 320 {
		t.Fatalf("L0 = %d, E = %d; want 10 and 320", plan.MaxGroupsPerUnit, plan.Join.Changed)
	}
	// ε = 1 over 2 measures: 0.5 each.
	want := map[string]float64{"count(*)": 320, "sum(result)": 3200}
	for _, mech := range []string{policy.MechanismLaplace, policy.MechanismGaussian} {
		_, rows, err := Explain(ds, plan, Params{Epsilon: 1, Delta: 1e-6, Mechanism: mech})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range rows {
			l := *r[0]
			for m, em := range want {
				if !strings.Contains(l, "Measurement") || !strings.Contains(l, m) {
					continue
				}
				n++
				sens, scale := field(t, l, "sensitivity"), field(t, l, "noise_scale")
				if sens != em {
					t.Errorf("%s %s: sensitivity %v, want E·M = %v (line %q)", mech, m, sens, em, l)
				}
				// Before: L0·L∞ (Laplace) or √L0·L∞ (Gaussian).
				before := 10 * em
				if mech == policy.MechanismGaussian {
					before = math.Sqrt(10) * em
				}
				t.Logf("%s %s: sensitivity %v (was %v), noise scale %.6g (was %.6g), %.3g× smaller",
					mech, m, sens, before, scale, scale*before/sens, before/sens)
			}
		}
		if n != 2 {
			t.Fatalf("%s: found %d of 2 measurements", mech, n)
		}
	}

	// A quantile over the same join: the exponential method's groups each
	// get the measure's whole ε (Λ/L∞ = 1), not ε/L0.
	qp := mustRewrite(t, ds, "SELECT v.kind, percentile_cont(0.5) WITHIN GROUP (ORDER BY l.result) FROM visits v JOIN labs l ON v.ward_id = l.ward_id GROUP BY v.kind")
	_, rows, err := Explain(ds, qp, Params{Epsilon: 1, Delta: 0, Mechanism: policy.MechanismLaplace})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rows {
		if l := *r[0]; strings.Contains(l, "Measurement m0") {
			found = true
			if g := field(t, strings.ReplaceAll(l, ",", " "), "epsilon per group"); g != 1 {
				t.Errorf("elastic quantile: epsilon per group %v, want 1 (line %q)", g, l)
			}
			if g := field(t, strings.ReplaceAll(l, ",", " "), "rank sensitivity"); g != 320 {
				t.Errorf("elastic quantile: rank sensitivity %v, want E = 320", g)
			}
		}
	}
	if !found {
		t.Fatal("no quantile measurement in EXPLAIN")
	}
}

// TestMechanisms_JoinCrossChecks: release refuses plans whose join bounds
// do not follow from the policy: an L1 bound on a plan that is no elastic
// join, an L1 bound below L∞, an E that does not match the policy, and a
// quantile whose row bound is not the join's.
func TestMechanisms_JoinCrossChecks(t *testing.T) {
	ds := clinicPolicy(t)
	req := func(p *rewrite.Plan) error {
		_, err := (&Releaser{}).mechanisms(Request{Dataset: ds, Plan: p, Epsilon: 1, Mechanism: policy.MechanismLaplace})
		return err
	}
	single := mustRewrite(t, ds, "SELECT kind, COUNT(*) FROM visits GROUP BY kind")
	elastic := mustRewrite(t, ds, "SELECT v.kind, COUNT(*), MIN(l.result) FROM visits v JOIN labs l ON v.ward_id = l.ward_id GROUP BY v.kind")
	unit := mustRewrite(t, ds, "SELECT v.kind, MAX(l.result) FROM visits v JOIN labs l ON v.patient_id = l.patient_id GROUP BY v.kind")
	for _, p := range []*rewrite.Plan{single, elastic, unit} {
		if err := req(p); err != nil {
			t.Fatalf("valid plan refused: %v", err)
		}
	}
	tamper := func(p *rewrite.Plan, f func(*rewrite.Plan)) *rewrite.Plan {
		c := *p
		c.Measures = append([]rewrite.Measure(nil), p.Measures...)
		for i := range c.Measures {
			if q := c.Measures[i].Quantile; q != nil {
				qc := *q
				c.Measures[i].Quantile = &qc
			}
		}
		if p.Join != nil {
			j := *p.Join
			c.Join = &j
		}
		f(&c)
		return &c
	}
	for name, p := range map[string]*rewrite.Plan{
		"L1 on one table":       tamper(single, func(p *rewrite.Plan) { p.Measures[0].L1 = p.Measures[0].LInf }),
		"L1 below LInf":         tamper(elastic, func(p *rewrite.Plan) { p.Measures[0].L1 = p.Measures[0].LInf / 2 }),
		"E off the policy":      tamper(elastic, func(p *rewrite.Plan) { p.Join.Changed = 3 }),
		"quantile rows below E": tamper(elastic, func(p *rewrite.Plan) { p.Measures[1].Quantile.Rows = 3 }),
		"unit join rows":        tamper(unit, func(p *rewrite.Plan) { p.Measures[0].Quantile.Rows = 2 }),
	} {
		if err := req(p); err == nil || !strings.Contains(err.Error(), "internal error") {
			t.Errorf("%s: mechanisms = %v, want an internal error", name, err)
		}
	}
}
