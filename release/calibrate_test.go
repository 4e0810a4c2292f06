package release

import (
	"context"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestCalibrate_RangeCrossCheck: a plan whose sum claims a narrower range
// than its SQL sums (the expression's interval, or the column's bounds)
// is refused before the charge rather than under-noised.
func TestCalibrate_RangeCrossCheck(t *testing.T) {
	t.Parallel()
	ds := loadPolicy(t)
	for _, q := range []string{"SELECT SUM(cost * 2) FROM visits", "SELECT SUM(cost) FROM visits", "SELECT AVG(cost / 2.0 + 1) FROM visits"} {
		p, err := rewrite.Rewrite(ds, q)
		if err != nil {
			t.Fatal(err)
		}
		params := Params{Epsilon: 1, Mechanism: policy.MechanismLaplace}
		if _, _, err := Explain(ds, p, params); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for i, m := range p.Measures {
			if m.Kind != dpplan.MeasureSum && m.Kind != dpplan.MeasureSumSq {
				continue
			}
			c := *p
			c.Measures = append([]dpplan.Measure(nil), p.Measures...)
			c.Measures[i].Upper = m.Upper / 2
			_, _, err := Explain(ds, &c, params)
			if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.InternalError {
				t.Errorf("%s: measure %d with upper %v of %v: err = %v, want XX000", q, i, c.Measures[i].Upper, m.Upper, err)
			}
		}
	}
}

// TestVerifyPlan: every query a release runs upstream must be what the
// emitter writes for the plan, from emitter inputs that agree with the
// policy (verify.go). Each tampering below is refused before the charge.
func TestVerifyPlan(t *testing.T) {
	t.Parallel()
	ds := loadPolicy(t)
	params := Params{Epsilon: 1, Mechanism: policy.MechanismLaplace}
	fresh := func() *dpplan.Plan {
		p, err := rewrite.RewriteWith(ds, "SELECT department, SUM(cost), AVG(age) FROM visits WHERE age > 3 GROUP BY department",
			rewrite.Options{AutoBounds: true, AutoClip: true})
		if err != nil {
			t.Fatal(err)
		}
		if p.Auto == nil || p.Clip == nil {
			t.Fatal("no automatic bounds or clipping")
		}
		c := *p
		return &c
	}
	if _, _, err := Explain(ds, fresh(), params); err != nil {
		t.Fatalf("untouched plan: %v", err)
	}
	withTable := func(p *dpplan.Plan, edit func(*policy.Table)) {
		tb, where := dpplan.SourceOf(p)
		v := *tb
		v.Columns = map[string]*policy.Column{}
		for n, c := range tb.Columns {
			cc := *c
			v.Columns[n] = &cc
		}
		edit(&v)
		dpplan.SetSource(p, &v, where)
	}
	for name, tamper := range map[string]func(p *dpplan.Plan){
		"SQL":            func(p *dpplan.Plan) { p.SQL += " " },
		"clip histogram": func(p *dpplan.Plan) { c := *p.Clip; c.SQL = strings.Replace(c.SQL, "1", "2", 1); p.Clip = &c },
		"profile":        func(p *dpplan.Plan) { a := *p.Auto; a.CombinedSQL += " "; p.Auto = &a },
		"candidate plan": func(p *dpplan.Plan) {
			a := *p.Auto
			c := *a.Plans[0]
			c.SQL += " "
			a.Plans = append([]*dpplan.Plan{&c}, a.Plans[1:]...)
			p.Auto = &a
		},
		"no source": func(p *dpplan.Plan) { dpplan.SetSource(p, nil, nil) },
		// The work bound fixes the answer's time slot (verifyWork): a plan
		// that counts less per-row work than its WHERE clause, or claims
		// fewer rows than WorkOf, is refused.
		"row ops":         func(p *dpplan.Plan) { _, w := dpplan.SourceOf(p); p.RowOps = dpplan.RowOpsOf(p, w) - 1 },
		"work rows":       func(p *dpplan.Plan) { p.Work.Rows-- },
		"work scans":      func(p *dpplan.Plan) { p.Work.Scans-- },
		"rows per unit":   func(p *dpplan.Plan) { withTable(p, func(v *policy.Table) { v.MaxRowsPerUnit++ }) },
		"groups per unit": func(p *dpplan.Plan) { withTable(p, func(v *policy.Table) { v.MaxGroupsPerUnit = 99 }) },
		"unit column":     func(p *dpplan.Plan) { withTable(p, func(v *policy.Table) { v.UnitColumn = "age" }) },
		"bound text":      func(p *dpplan.Plan) { withTable(p, func(v *policy.Table) { v.Columns["cost"].Upper = "40000" }) },
		// Consistent inputs, SQL emitted from them, but the measure's range
		// still the declared one: caught by the range cross-check.
		"wider bounds": func(p *dpplan.Plan) {
			withTable(p, func(v *policy.Table) { v.Columns["cost"].Upper, v.Columns["cost"].UpperNum = "40000", 40000 })
			tb, where := dpplan.SourceOf(p)
			p.SQL = pgemit.SQL(tb, p, where)
			p.Clip, p.Auto = nil, nil
		},
	} {
		p := fresh()
		tamper(p)
		_, _, err := Explain(ds, p, params)
		if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.InternalError || !strings.Contains(pe.Message, "does not verify") && !strings.Contains(pe.Message, "range narrower") {
			t.Errorf("%s: err = %v, want XX000 from the verification", name, err)
		}
	}
}

// TestCalibrate_IntegerAndQuantileCrossChecks: a plan that claims integer
// values for a sum that can have a fraction (integer noise would show the
// fraction), or a quantile range narrower than its SQL clamps to, is
// refused before the charge.
func TestCalibrate_IntegerAndQuantileCrossChecks(t *testing.T) {
	t.Parallel()
	ds := loadPolicy(t)
	params := Params{Epsilon: 1, Mechanism: policy.MechanismLaplace}
	for q, tamper := range map[string]func(m *dpplan.Measure){
		"SELECT SUM(cost / 2.0) FROM visits":                                   func(m *dpplan.Measure) { m.Integer = true },
		"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits": func(m *dpplan.Measure) { m.Upper /= 2 },
		"SELECT MAX(cost * 2) FROM visits":                                     func(m *dpplan.Measure) { m.Lower += 1 },
	} {
		p, err := rewrite.Rewrite(ds, q)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := Explain(ds, p, params); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		c := *p
		c.Measures = append([]dpplan.Measure(nil), p.Measures...)
		tamper(&c.Measures[0])
		if c.Measures[0] == p.Measures[0] {
			t.Fatalf("%s: the tampering changed nothing", q)
		}
		_, _, err = Explain(ds, &c, params)
		if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.InternalError {
			t.Errorf("%s: tampered measure: err = %v, want XX000", q, err)
		}
	}
}

// BenchmarkVerifyPlan: the cost verify.go adds to every release that is
// not answered from the cache, for a plan with automatic bounds and
// clipping (eight emitted queries).
func BenchmarkVerifyPlan(b *testing.B) {
	ds, err := policy.Load("../internal/testdata/hospital.yaml")
	if err != nil {
		b.Fatal(err)
	}
	p, err := rewrite.RewriteWith(ds, "SELECT department, SUM(cost), AVG(age) FROM visits WHERE age > 3 GROUP BY department",
		rewrite.Options{AutoBounds: true, AutoClip: true})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := verifyPlan(ds, p); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRun_CoalesceKeepsHalfWidth: COALESCE(SUM(x), 0) (Metabase's and
// Looker's form) is post-processing of the released sum, and its NOTICE
// states the sum's 95% half-width, not none.
func TestRun_CoalesceKeepsHalfWidth(t *testing.T) {
	ds := loadPolicy(t)
	p, err := rewrite.RewriteWith(ds, "SELECT COALESCE(SUM(cost), 0) AS total, SUM(cost) AS s FROM visits", rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	up := &fakeUpstream{rows: [][]*string{{s("123456")}}}
	res, err := newTestReleaser(t, &memLedger{limit: 3}, 7).Run(context.Background(),
		Request{Analyst: "alice", Dataset: ds, Plan: p, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	if *res.Rows[0][0] != *res.Rows[0][1] {
		t.Errorf("COALESCE(SUM) %s, SUM %s: want the same released value", *res.Rows[0][0], *res.Rows[0][1])
	}
	if got, want := noticeHalfWidth(t, res.Notice, "total"), noticeHalfWidth(t, res.Notice, "s"); !(got > 0) || got != want {
		t.Errorf("NOTICE %q: half-width of total %v, of s %v", res.Notice, got, want)
	}
}

// TestRun_SumKeepsNumericScale: the SUM of a numeric(p, 2) column is
// printed with two decimals, trailing zeros kept, as PostgreSQL prints it.
func TestRun_SumKeepsNumericScale(t *testing.T) {
	ds := loadPolicy(t)
	vis, _ := ds.Table("visits")
	vis.Columns["cost"].PGType, vis.Columns["cost"].Scale = "numeric", 2
	p, err := rewrite.RewriteWith(ds, "SELECT SUM(cost) FROM visits", rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	up := &fakeUpstream{rows: [][]*string{{s("123456")}}}
	res, err := newTestReleaser(t, &memLedger{limit: 3}, 8).Run(context.Background(),
		Request{Analyst: "alice", Dataset: ds, Plan: p, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	v := *res.Rows[0][0]
	if i := strings.IndexByte(v, '.'); i < 0 || len(v)-i-1 != 2 {
		t.Errorf("SUM of numeric(p, 2) printed %q, want two decimals", v)
	}
}
