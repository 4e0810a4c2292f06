package release

import (
	"context"
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

// TestMechanisms_JoinCrossChecks: release refuses plans whose join bounds
// do not follow from the policy: a direct L1 bound on a measure that is
// not the bias estimate, a shape release does not know, and a quantile
// whose row bound is not the join's.
func TestMechanisms_JoinCrossChecks(t *testing.T) {
	ds := clinicPolicy(t)
	req := func(p *rewrite.Plan) error {
		_, err := (&Releaser{}).mechanisms(Request{Dataset: ds, Plan: p, Epsilon: 1, Mechanism: policy.MechanismLaplace})
		return err
	}
	single := mustRewrite(t, ds, "SELECT kind, COUNT(*) FROM visits GROUP BY kind")
	unit := mustRewrite(t, ds, "SELECT v.kind, MAX(l.result) FROM visits v JOIN labs l ON v.patient_id = l.patient_id GROUP BY v.kind")
	for _, p := range []*rewrite.Plan{single, unit} {
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
		"L1 on a unit join":     tamper(unit, func(p *rewrite.Plan) { p.Measures[0].L1 = p.Measures[0].LInf }),
		"an unknown join shape": tamper(unit, func(p *rewrite.Plan) { p.Join.Shape = "key" }),
		"unit join rows":        tamper(unit, func(p *rewrite.Plan) { p.Measures[0].Quantile.Rows = 2 }),
	} {
		if err := req(p); err == nil || !strings.Contains(err.Error(), "internal error") {
			t.Errorf("%s: mechanisms = %v, want an internal error", name, err)
		}
	}
}
