package release

import (
	"context"
	"math"
	"math/big"
	"strconv"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

func ratOf(t *testing.T, s string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("bad rational %q", s)
	}
	return r
}

// TestVariance checks the post-processing of noisy (count, sum, sum of
// squares) into VAR_POP/VAR_SAMP: exact on clean inputs, NULL for the
// sample form below 2, floored at 0 and capped by Popoviciu's bound.
func TestVariance(t *testing.T) {
	tests := []struct {
		name         string
		c, s, q      string
		lower, upper float64
		sample       bool
		want         string // "" for NULL
	}{
		// {1, 2, 3, 4}: n 4, sum 10, sum of squares 30, SS = 5.
		{"pop", "4", "10", "30", 0, 10, false, "5/4"},
		{"samp", "4", "10", "30", 0, 10, true, "5/3"},
		// Noise made SS negative: floored at 0.
		{"negative", "4", "10", "20", 0, 10, false, "0"},
		// Population variance of values in [0, 10] is at most 5² = 25.
		{"cap pop", "4", "0", "1000", 0, 10, false, "25"},
		// Sample variance of n values in [0, 10] is at most 25·n/(n−1).
		{"cap samp", "4", "0", "1000", 0, 10, true, "100/3"},
		{"samp below 2", "1.5", "3", "5", 0, 10, true, ""},
		{"samp negative count", "-3", "3", "5", 0, 10, true, ""},
		// Pop with a noisy count below 1 divides by 1: SS = 5 − 4 = 1.
		{"pop count floored", "0.5", "2", "5", 0, 10, false, "1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := variance(ratOf(t, tc.c), ratOf(t, tc.s), ratOf(t, tc.q), tc.lower, tc.upper, tc.sample)
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("variance = %s, want NULL", got.RatString())
			case tc.want != "" && (got == nil || got.Cmp(ratOf(t, tc.want)) != 0):
				t.Fatalf("variance = %v, want %s", got, tc.want)
			}
		})
	}
	if r := sqrtRat(big.NewRat(25, 4)); r.Cmp(big.NewRat(5, 2)) != 0 {
		t.Fatalf("sqrt(25/4) = %s", r.RatString())
	}
}

// TestMechanisms_NewMeasures checks the noise calibration of the measures
// added for COUNT(DISTINCT unit) and the variance family, on plans built by
// the real rewriter: Laplace scale b = L0·L∞/(ε/m).
func TestMechanisms_NewMeasures(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.RewriteWith(ds, "SELECT department, COUNT(DISTINCT patient_id), var_pop(cost) FROM visits GROUP BY department", rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	r := newTestReleaser(t, &memLedger{limit: 10}, 1)
	ms, err := r.mechanisms(Request{Dataset: ds, Plan: plan, Epsilon: 0.4, Mechanism: policy.MechanismLaplace})
	if err != nil {
		t.Fatal(err)
	}
	// Measures: units, sum(cost − 10000), count(cost), sumsq(cost − 10000)
	// (normalized sums centred at the midpoint of [0, 20000]): ε 0.1 each,
	// L0 4; the distinct count counts a unit whole in min(G, L0·R) =
	// min(7, 4·5) = 7 groups (dpplan.UnitGroups).
	want := map[rewrite.MeasureKind]float64{
		rewrite.MeasureUnits: 7 * 1,
		rewrite.MeasureSum:   4 * 5 * 10000,
		rewrite.MeasureCount: 4 * 5,
		rewrite.MeasureSumSq: 4 * 5 * 10000 * 10000,
	}
	if len(ms) != 4 {
		t.Fatalf("%d measurements, want 4", len(ms))
	}
	for _, m := range ms {
		l1, ok := want[m.measure.Kind]
		if !ok {
			t.Fatalf("unexpected measure %v", m.measure.Kind)
		}
		if math.Abs(m.mech.Epsilon()-0.1) > 1e-12 {
			t.Fatalf("%v: ε = %v, want 0.1", m.measure.Kind, m.mech.Epsilon())
		}
		// P(|Laplace(b)| > h) = e^{−h/b}: the 95% half-width is b·ln 20.
		b := l1 / 0.1
		if h := m.mech.HalfWidth(0.95); math.Abs(h-b*math.Log(20)) > 0.01*b*math.Log(20)+1 {
			t.Fatalf("%v: half-width %v, want about %v (b = %v)", m.measure.Kind, h, b*math.Log(20), b)
		}
	}
	// A plan that claims a smaller sum-of-squares bound than the policy
	// implies is refused, not under-noised.
	bad := *plan
	bad.Measures = append([]rewrite.Measure(nil), plan.Measures...)
	for i := range bad.Measures {
		if bad.Measures[i].Kind == rewrite.MeasureSumSq {
			bad.Measures[i].LInf = 5 * 20000 // the sum's bound, not the square's
		}
	}
	if _, err := r.mechanisms(Request{Dataset: ds, Plan: &bad, Epsilon: 0.4, Mechanism: policy.MechanismLaplace}); err == nil {
		t.Fatal("a plan with an under-stated sum-of-squares bound was accepted")
	}
}

// TestRun_VarianceAndUnits runs a grouped variance/stddev/distinct-units
// query end to end on a fake upstream with large groups and a large ε, so
// the released figures must be close to the truth.
func TestRun_VarianceAndUnits(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.RewriteWith(ds, "SELECT sex, COUNT(DISTINCT patient_id), var_samp(birth_year), stddev_pop(birth_year) FROM patients GROUP BY sex", rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	// Measures in plan order: units, sum, count, sumsq. Group F: 10⁶ patients,
	// half born 1950 and half 1990 (mean 1970, population variance 400).
	// Group M: no rows (noisy zeros: variance NULL or within its bounds).
	n := 1_000_000.0
	sum := n * 1970
	sumsq := n/2*1950*1950 + n/2*1990*1990
	cells := map[rewrite.MeasureKind]string{
		rewrite.MeasureUnits: "1000000", rewrite.MeasureCount: "1000000",
		rewrite.MeasureSum: strconv.FormatFloat(sum, 'f', 0, 64), rewrite.MeasureSumSq: strconv.FormatFloat(sumsq, 'f', 0, 64),
	}
	row := []*string{s("F")}
	for _, m := range plan.Measures {
		row = append(row, s(cells[m.Kind]))
	}
	up := &fakeUpstream{rows: [][]*string{row}}
	r := newTestReleaser(t, &memLedger{limit: 1e6}, 7)
	res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 400, Mechanism: policy.MechanismLaplace, Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 || *res.Rows[0][0] != "F" {
		t.Fatalf("rows = %v", res.Rows)
	}
	// ε 100 per measurement, L0 1, max_rows 1: sumsq b = 2024²/100 ≈ 4.1e4,
	// so |e_q| < 1e6 except with probability e^{−24}; likewise e_s < 1e4,
	// e_c < 1. Then the variance moves by well under 2 (first order:
	// (e_q + 2·1970·e_s + 1970²·e_c)/n ≈ (1e6 + 4e7 + 4e6)/1e6 ≈ 45 at the
	// extreme tails; the test allows 50). False rejection ≤ 3e-10.
	f := func(i int) float64 {
		v, err := strconv.ParseFloat(*res.Rows[0][i], 64)
		if err != nil {
			t.Fatalf("column %d = %v", i, res.Rows[0][i])
		}
		return v
	}
	if got := f(1); math.Abs(got-n) > 1 {
		t.Fatalf("distinct units = %v, want about %v", got, n)
	}
	wantSamp := 400 * n / (n - 1)
	if got := f(2); math.Abs(got-wantSamp) > 50 {
		t.Fatalf("var_samp = %v, want about %v", got, wantSamp)
	}
	if got := f(3); math.Abs(got-20) > math.Sqrt(50) {
		t.Fatalf("stddev_pop = %v, want about 20", got)
	}
	// The empty group: var_samp NULL or within [0, 57²·2], stddev_pop within [0, 57].
	m := res.Rows[1]
	if m[2] != nil {
		if v, _ := strconv.ParseFloat(*m[2], 64); v < 0 || v > 57*57*2 {
			t.Fatalf("var_samp of the empty group = %v, outside its bounds", v)
		}
	}
	if m[3] == nil {
		t.Fatal("stddev_pop of the empty group is NULL; the population form is never NULL")
	}
	if v, _ := strconv.ParseFloat(*m[3], 64); v < 0 || v > 57 {
		t.Fatalf("stddev_pop of the empty group = %v, outside [0, 57]", v)
	}
}
