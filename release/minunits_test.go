package release

import (
	"context"
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// minUnitsPolicy is the unit tests' hospital policy with
// min_units_per_cell: 11.
func minUnitsPolicy(t *testing.T) *policy.Dataset {
	t.Helper()
	ds := loadPolicy(t)
	ds.MinUnitsPerCell = 11
	return ds
}

// TestRun_MinUnits_Grouped: under min_units_per_cell 11, a department with
// 2,000 patients is released, one with a (weighted) 2.5 patients and the
// five without rows keep their keys with NULL values and NULL error
// columns, the NOTICE says how many and why, and the count is charged.
//
// ε = 20 over two measurements (COUNT(*) and the unit count): the unit
// count gets ε 10; 7 departments over L0 = 4 are weighted (real-valued
// noise), Laplace of L1 = 4, scale b = 0.4. Cardiology is suppressed only
// if the noise is below −1989 (probability ½e^{−1989/0.4}, nil); the
// group of 2.5 is released only if the noise is ≥ 8.5 (≤ ½e^{−21.25} <
// 3e-10), an empty one if ≥ 11 (< 1e-12). The grid rounding adds at most
// one step (far below 0.4). Over 20 seeds the test falsely fails with
// probability < 20·(3e-10 + 5e-12) < 1e-8.
func TestRun_MinUnits_Grouped(t *testing.T) {
	ds := minUnitsPolicy(t)
	plan := mustRewrite(t, ds, "SELECT department, COUNT(*) FROM visits GROUP BY department")
	if plan.MinUnits != 11 || !plan.UnitsCounted() || !strings.Contains(plan.SQL, "SUM(dp_units)::text") {
		t.Fatalf("plan: MinUnits %d, SQL %s", plan.MinUnits, plan.SQL)
	}
	up := &fakeUpstream{rows: [][]*string{
		{s("cardiology"), s("5000"), s("2000")},
		{s("pediatrics"), s("3"), s("2.5")},
	}}
	for seed := uint64(1); seed <= 20; seed++ {
		led := &memLedger{limit: 100}
		r := newTestReleaser(t, led, seed)
		res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 20,
			Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if len(res.Rows) != 7 {
			t.Fatalf("rows = %v, want the 7 departments", rowsText(res.Rows))
		}
		for i, row := range res.Rows {
			if row[0] == nil {
				t.Fatalf("row %d lost its key: %v", i, rowsText(res.Rows))
			}
			if *row[0] == "cardiology" {
				got, err := strconv.ParseFloat(*row[1], 64)
				// COUNT noise: Laplace of L1 = 4·5 = 20 at ε 10, scale 2:
				// beyond 2·ln(2/1e-9) with probability 1e-9.
				if err != nil || math.Abs(got-5000) > 2*math.Log(2/1e-9) || res.Widths[i][1] == nil {
					t.Fatalf("seed %d: cardiology = %v (width %v), want ≈ 5000 with a width", seed, rowsText(res.Rows)[i], res.Widths[i][1])
				}
				continue
			}
			if row[1] != nil || res.Widths[i][1] != nil {
				t.Fatalf("seed %d: %s released %v (width %v), want NULL", seed, *row[0], *row[1], res.Widths[i][1])
			}
		}
		if !strings.Contains(res.Notice, "6 of 7 groups suppressed (values NULL): fewer than about 11 patients") {
			t.Fatalf("Notice = %q", res.Notice)
		}
		evs := led.reserved[0].Events
		if len(evs) != 2 || evs[0].Epsilon != 10 || evs[1].Mechanism != "laplace" || evs[1].Epsilon != 10 {
			t.Fatalf("events = %+v, want COUNT(*) and the unit count at ε 10 each", evs)
		}
	}
}

// TestRun_MinUnits_Ungrouped: the one cell of an ungrouped query, with
// integer counts (each unit counts 1). ε = 20: the unit count gets ε 10,
// L1 = 1, discrete Laplace of scale 0.1: 3 units are released only if the
// noise is ≥ 8 (probability < e^{−80}), 5,000 are suppressed only if it is
// ≤ −4990 (nil). 20 seeds: false failure < 1e-30.
func TestRun_MinUnits_Ungrouped(t *testing.T) {
	ds := minUnitsPolicy(t)
	plan := mustRewrite(t, ds, "SELECT COUNT(*), AVG(cost) FROM visits")
	if !strings.HasSuffix(plan.SQL, "AS dp_bounded") || !strings.Contains(plan.SQL, ", COUNT(*)::text FROM") {
		t.Fatalf("SQL = %s", plan.SQL)
	}
	for _, tc := range []struct {
		units    string
		released bool
	}{{"3", false}, {"5000", true}} {
		// Columns: COUNT(*), AVG's normalized sum and count, the units.
		up := &fakeUpstream{rows: [][]*string{{s("9000"), s("0"), s("9000"), s(tc.units)}}}
		for seed := uint64(1); seed <= 20; seed++ {
			led := &memLedger{limit: 100}
			r := newTestReleaser(t, led, seed)
			res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 40,
				Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if len(plan.Measures) != 3 || len(led.reserved[0].Events) != 4 {
				t.Fatalf("events = %+v, want 3 measures and the unit count", led.reserved[0].Events)
			}
			row := res.Rows[0]
			if got := row[0] != nil && row[1] != nil; got != tc.released {
				t.Fatalf("units %s, seed %d: row %v, widths %v, released %v, want %v", tc.units, seed, rowsText(res.Rows), res.Widths, got, tc.released)
			}
			if !tc.released && (res.Widths[0][0] != nil || res.Widths[0][1] != nil) {
				t.Fatalf("suppressed cell has a width: %v", res.Widths)
			}
			want := "0 of 1 groups suppressed"
			if !tc.released {
				want = "1 of 1 groups suppressed"
			}
			if !strings.Contains(res.Notice, want) {
				t.Fatalf("Notice = %q, want %q", res.Notice, want)
			}
		}
	}
}

// TestCalibrate_MinUnits: the unit count is one more measurement in the
// query's ε split and in its one charge, under Laplace and Gaussian (one
// more δ share), and EXPLAIN lists it; without the option nothing changes.
func TestCalibrate_MinUnits(t *testing.T) {
	ds := minUnitsPolicy(t)
	plan := mustRewrite(t, ds, "SELECT department, COUNT(*), SUM(cost) FROM visits GROUP BY department")
	req := Request{Dataset: ds, Plan: plan, Epsilon: 0.9, Mechanism: policy.MechanismLaplace, Upstream: noUpstream{}}
	cal, err := (&Releaser{}).calibrate(req)
	if err != nil {
		t.Fatal(err)
	}
	if cal.cells == nil || len(cal.events) != 3 {
		t.Fatalf("events = %+v, want 2 measures and the unit count", cal.events)
	}
	eps := new(big.Rat)
	for _, e := range cal.events {
		if e.Epsilon != splitDown(0.9, 3) {
			t.Fatalf("event %+v: want ε %v each", e, splitDown(0.9, 3))
		}
		eps.Add(eps, new(big.Rat).SetFloat64(e.Epsilon))
	}
	if eps.Cmp(new(big.Rat).SetFloat64(0.9)) > 0 {
		t.Fatalf("events compose to %s > 0.9", eps.FloatString(20))
	}
	// The unit count's sensitivity is L0 = 4: Laplace scale 4/0.3.
	if got := cal.cells.mech.NoiseMultiplier() * 4; math.Abs(got-4/splitDown(0.9, 3)) > 1e-9 {
		t.Fatalf("unit count scale = %v, want %v", got, 4/splitDown(0.9, 3))
	}

	req.Mechanism, req.Delta = policy.MechanismGaussian, 1e-6
	cal, err = (&Releaser{}).calibrate(req)
	if err != nil {
		t.Fatal(err)
	}
	var del float64
	for _, e := range cal.events {
		del += e.Delta
	}
	if len(cal.events) != 3 || cal.events[2].Delta != splitDown(1e-6, 3) || del > 1e-6 {
		t.Fatalf("Gaussian events = %+v, want δ split in 3", cal.events)
	}

	_, rows, err := Explain(ds, plan, Params{Epsilon: 0.9, Mechanism: policy.MechanismLaplace})
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, r := range rows {
		text = append(text, *r[0])
	}
	all := strings.Join(text, "\n")
	if !strings.Contains(all, "measurements=3") || !strings.Contains(all, "Minimum units per cell") || !strings.Contains(all, "min_units_per_cell=11") {
		t.Fatalf("EXPLAIN:\n%s", all)
	}

	plain := loadPolicy(t)
	cal, err = (&Releaser{}).calibrate(Request{Dataset: plain, Plan: mustRewrite(t, plain, "SELECT department, COUNT(*), SUM(cost) FROM visits GROUP BY department"),
		Epsilon: 0.9, Mechanism: policy.MechanismLaplace, Upstream: noUpstream{}})
	if err != nil || cal.cells != nil || len(cal.events) != 2 {
		t.Fatalf("without the option: %v, events %+v", err, cal)
	}
}

// TestCalibrate_MinUnits_PrivateKeys: with private keys the selection's
// count applies the minimum (threshold max(τ, 11)) at no extra cost.
func TestCalibrate_MinUnits_PrivateKeys(t *testing.T) {
	ds := minUnitsPolicy(t)
	plan := mustRewrite(t, ds, "SELECT diagnosis, COUNT(*) FROM visits GROUP BY diagnosis")
	// A large ε and δ make τ small (below 11).
	cal, err := (&Releaser{}).calibrate(Request{Dataset: ds, Plan: plan, Epsilon: 20, Delta: 0.1,
		Mechanism: policy.MechanismLaplace, Upstream: noUpstream{}})
	if err != nil {
		t.Fatal(err)
	}
	if cal.cells != nil || cal.sel == nil || len(cal.events) != 3 {
		t.Fatalf("events = %+v, want the count, the selection's count and its threshold", cal.events)
	}
	if cal.sel.threshold.Cmp(big.NewRat(11, 1)) != 0 || !strings.Contains(cal.sel.describe(), "at least min_units_per_cell 11") {
		t.Fatalf("threshold %s (%s), want 11", cal.sel.threshold.RatString(), cal.sel.describe())
	}
}

// TestVerify_MinUnitsMustMatchPolicy: a plan without the policy's minimum
// (a planner that dropped it) is refused before any charge, and so is a
// plan that carries a minimum the policy does not have.
func TestVerify_MinUnitsMustMatchPolicy(t *testing.T) {
	withMin, plain := minUnitsPolicy(t), loadPolicy(t)
	const q = "SELECT department, COUNT(*) FROM visits GROUP BY department"
	for _, tc := range []struct {
		name     string
		planned  *policy.Dataset
		released *policy.Dataset
	}{
		{"minimum dropped", plain, withMin},
		{"minimum not in the policy", withMin, plain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := mustRewrite(t, tc.planned, q)
			led := &memLedger{limit: 10}
			up := &fakeUpstream{}
			_, err := newTestReleaser(t, led, 1).Run(context.Background(), Request{Analyst: "a", Dataset: tc.released, Plan: plan,
				Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up})
			var pe *pgerr.Error
			if !errors.As(err, &pe) || pe.Code != pgerr.InternalError || !strings.Contains(pe.Message, "minimum of units per cell does not verify") {
				t.Fatalf("Run = %v, want the plan refused", err)
			}
			if len(led.reserved) != 0 || len(up.calls) != 0 {
				t.Fatalf("charged %d times, ran %d queries: want none", len(led.reserved), len(up.calls))
			}
		})
	}
}

// TestExplain_MinUnits_SampleAgg: a sample-and-aggregate plan under the
// minimum measures its unit count also with k fixed, charges it, and
// EXPLAIN says what happens to a group below the minimum.
func TestExplain_MinUnits_SampleAgg(t *testing.T) {
	ds := minUnitsPolicy(t)
	plan, err := rewrite.RewriteWith(ds, "SELECT department, corr(cost, age) FROM visits GROUP BY department", rewrite.Options{NoBias: true, SampleBlocks: 8})
	if err != nil {
		t.Fatal(err)
	}
	if plan.SampleAgg == nil || plan.SampleAgg.CountMeasure < 0 {
		t.Fatalf("plan %+v: want a unit count", plan.SampleAgg)
	}
	cal, err := (&Releaser{}).calibrate(Request{Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: noUpstream{}})
	if err != nil {
		t.Fatal(err)
	}
	if cal.saCount == nil || len(cal.events) != 2 {
		t.Fatalf("events %+v: want the unit count and the statistic", cal.events)
	}
	_, rows, err := Explain(ds, plan, Params{Epsilon: 1, Mechanism: policy.MechanismLaplace})
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, r := range rows {
		all = append(all, *r[0])
	}
	if text := strings.Join(all, "\n"); !strings.Contains(text, "below min_units_per_cell=11 is released with NULL statistics") {
		t.Fatalf("EXPLAIN:\n%s", text)
	}
}
