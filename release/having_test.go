package release

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestRun_HavingAndArithmetic runs HAVING and arithmetic over aggregates on
// a fake upstream: HAVING filters on the noisy values, hidden values are
// never returned, and expressions are computed from noisy values.
func TestRun_HavingAndArithmetic(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.Rewrite(ds, "SELECT department, SUM(cost) / COUNT(*) AS per_visit, COUNT(*) * 2 AS twice "+
		"FROM visits GROUP BY department HAVING COUNT(*) > 1000 AND AVG(cost) < 15000 ORDER BY twice DESC")
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Hidden) == 0 || plan.Having == nil {
		t.Fatalf("plan has no hidden values or HAVING: %+v", plan)
	}
	// count(*), sum(cost), count(cost) per department. cardiology: count
	// 500 (fails COUNT > 1000); emergency: avg 16000 (fails AVG < 15000);
	// oncology and pediatrics pass; the others have no rows (noisy zeros).
	truth := map[string][3]float64{
		"cardiology": {500, 500 * 1000, 500},
		"emergency":  {100000, 100000 * 16000, 100000},
		"oncology":   {200000, 200000 * 1000, 200000},
		"pediatrics": {100000, 100000 * 2000, 100000},
	}
	up := &fakeUpstream{}
	for k, v := range truth {
		row := []*string{s(k)}
		for _, m := range plan.Measures {
			var x float64
			switch {
			case m.Kind == rewrite.MeasureSum && m.Centre != "":
				// The normalized sum Σ (cost − c) of AVG(cost).
				c, _ := strconv.ParseFloat(m.Centre, 64)
				x = v[1] - c*v[2]
			case m.Kind == rewrite.MeasureSum:
				x = v[1]
			case m.Column == "":
				x = v[0]
			default:
				x = v[2]
			}
			row = append(row, s(strconv.FormatFloat(x, 'f', 0, 64)))
		}
		up.rows = append(up.rows, row)
	}
	r := newTestReleaser(t, &memLedger{limit: 1e6}, 3)
	// ε 30 over 3 measurements: count b = 4·5/10 = 2, sum b = 4·1e5/10 = 4e4.
	// |noise| < 30·b except with probability e^{−30} per cell, so: counts
	// within 60, sums within 1.2e6, which keeps every HAVING decision
	// above (false rejection < 1e-11).
	res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 30, Mechanism: policy.MechanismLaplace, Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Columns) != 3 {
		t.Fatalf("columns = %+v, want the 3 select-list columns only", res.Columns)
	}
	if len(res.Rows) != 2 || *res.Rows[0][0] != "oncology" || *res.Rows[1][0] != "pediatrics" {
		t.Fatalf("rows = %v, want oncology then pediatrics", rowsText(res.Rows))
	}
	for _, row := range res.Rows {
		if len(row) != 3 {
			t.Fatalf("row %v has hidden values", rowsText([][]*string{row}))
		}
		want := truth[*row[0]]
		pv, _ := strconv.ParseFloat(*row[1], 64)
		if math.Abs(pv-want[1]/want[0]) > 10 {
			t.Fatalf("per_visit(%s) = %v, want about %v", *row[0], pv, want[1]/want[0])
		}
		tw, err := strconv.ParseInt(*row[2], 10, 64)
		if err != nil || tw%2 != 0 || math.Abs(float64(tw)-2*want[0]) > 120 {
			t.Fatalf("twice(%s) = %s, want an even integer about %v", *row[0], *row[2], 2*want[0])
		}
	}
}

func rowsText(rows [][]*string) [][]string {
	var out [][]string
	for _, r := range rows {
		var x []string
		for _, v := range r {
			if v == nil {
				x = append(x, "NULL")
			} else {
				x = append(x, *v)
			}
		}
		out = append(out, x)
	}
	return out
}
