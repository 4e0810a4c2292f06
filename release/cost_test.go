package release

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestOutputMeasures checks which measurements each value rests on, on a
// real plan: a count, a standard deviation (three measurements), an
// expression over two aggregates, and an aggregate only HAVING uses.
func TestOutputMeasures(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.RewriteWith(ds, "SELECT department, COUNT(*), STDDEV(cost), SUM(cost) / COUNT(*) AS r "+
		"FROM visits GROUP BY department HAVING SUM(age) > 0", rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	measureOf := func(kind rewrite.MeasureKind, col string) int {
		for i, m := range plan.Measures {
			if m.Kind == kind && m.Column == col {
				return i
			}
		}
		t.Fatalf("no %s(%s) measure in %+v", kind, col, plan.Measures)
		return -1
	}
	count := measureOf(rewrite.MeasureCount, "")
	sum := measureOf(rewrite.MeasureSum, "cost")
	countCost := measureOf(rewrite.MeasureCount, "cost")
	sumSq := measureOf(rewrite.MeasureSumSq, "cost")
	sumAge := measureOf(rewrite.MeasureSum, "age")
	sorted := func(xs ...int) string {
		for i := range xs {
			for j := i + 1; j < len(xs); j++ {
				if xs[j] < xs[i] {
					xs[i], xs[j] = xs[j], xs[i]
				}
			}
		}
		return fmt.Sprint(xs)
	}
	tests := []struct {
		output int
		want   string
	}{
		{0, "[]"},
		{1, sorted(count)},
		{2, sorted(sum, countCost, sumSq)},
		// SUM(cost) next to STDDEV(cost) is derived from the normalized
		// sum and COUNT(cost) (rewrite/centre.go): S̃_c + c·C̃.
		{3, sorted(sum, countCost, count)},
	}
	for _, tc := range tests {
		if got := fmt.Sprint(outputMeasures(plan, tc.output)); got != tc.want {
			t.Errorf("outputMeasures(%s) = %s, want %s", plan.Outputs[tc.output].Name, got, tc.want)
		}
	}
	if got, want := fmt.Sprint(havingOnly(plan)), sorted(sumAge); got != want {
		t.Errorf("havingOnly = %s, want %s", got, want)
	}
	// A SUM next to an AVG of the same column is derived from AVG's
	// normalized sum and count (S̃ = S̃_c + c·C̃): it rests on both.
	shared, err := rewrite.RewriteWith(ds, "SELECT SUM(cost), AVG(cost) FROM visits", rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(outputMeasures(shared, 0)); len(shared.Measures) != 2 || got != "[0 1]" {
		t.Errorf("outputMeasures(SUM next to AVG) = %s over %d measures, want [0 1] of 2", got, len(shared.Measures))
	}
}

// TestRun_NoticePerOutputCost runs the plan above with the Gaussian
// mechanism, ε = 0.6 and δ = 6e-6 split over its 5 measurements (0.12 and
// 1.2e-6 each), and checks the NOTICE: each output's half-width with the
// ε and δ of its measurements, and the cost of the HAVING-only one.
func TestRun_NoticePerOutputCost(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.RewriteWith(ds, "SELECT department, COUNT(*), STDDEV(cost), SUM(cost) / COUNT(*) AS r "+
		"FROM visits GROUP BY department HAVING SUM(age) > 0", rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Measures) != 5 {
		t.Fatalf("plan has %d measures, want 5: %+v", len(plan.Measures), plan.Measures)
	}
	up := &fakeUpstream{}
	row := []*string{s("oncology")}
	for range plan.Measures {
		row = append(row, s("1000"))
	}
	up.rows = [][]*string{row}
	led := &memLedger{limit: 3}
	r := newTestReleaser(t, led, 2)
	req := Request{Analyst: "alice", Dataset: ds, Plan: plan, Epsilon: 0.6, Delta: 6e-6,
		Mechanism: policy.MechanismGaussian, Upstream: up}
	res, err := r.Run(context.Background(), req)
	if err != nil {
		t.Fatalf("Run() = %v", err)
	}
	ms, err := r.mechanisms(req)
	if err != nil {
		t.Fatal(err)
	}
	hCount := num(countHalfWidth(ms[0].mech)) // the noise's, plus 1/2 for rounding a weighted count
	for _, want := range []string{
		"; 95% error ±" + hCount + " (count, epsilon 0.12, delta 1.2e-06), ±",
		" (stddev, epsilon 0.36, delta 3.6e-06; per group: cardiology ±",
		"), no bound (r, epsilon 0.36, delta 3.6e-06), HAVING epsilon 0.12, delta 1.2e-06",
	} {
		if !strings.Contains(res.Notice, want) {
			t.Errorf("Notice = %q, want it to contain %q", res.Notice, want)
		}
	}
	if !strings.HasSuffix(res.Notice, "HAVING epsilon 0.12, delta 1.2e-06") {
		t.Errorf("Notice = %q, want the HAVING cost last", res.Notice)
	}
}
