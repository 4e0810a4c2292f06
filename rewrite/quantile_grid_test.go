package rewrite

import (
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// TestFitQuantileGrids: a grouped quantile's grid shrinks until the plan's
// worst exponential-mechanism work fits dpplan.MaxAnswerCells (attack
// round 64), as a power of two for a numeric column and with whole-number
// widths for a date column; an ungrouped one keeps the full grid, and one
// whose groups leave less than minQuantileBuckets keeps it too (release
// refuses it before the charge).
func TestFitQuantileGrids(t *testing.T) {
	ds, err := policy.Load("../internal/testdata/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		query        string
		buckets, max int // want exactly buckets, or at most max
		fits         bool
	}{
		{"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits", maxQuantileBuckets, 0, true},
		{"SELECT department, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits GROUP BY department", maxQuantileBuckets, 0, true},
		{"SELECT width_bucket(cost, 0, 20000, 598), percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits GROUP BY 1", 1024, 0, true},
		{"SELECT date_trunc('week', visit_date), percentile_disc(0.5) WITHIN GROUP (ORDER BY visit_date) FROM visits GROUP BY 1", 0, 2500, true},
		{"SELECT date_trunc('day', visit_date), percentile_cont(0.5) WITHIN GROUP (ORDER BY cost), percentile_cont(0.9) WITHIN GROUP (ORDER BY cost) FROM visits GROUP BY 1", 128, 0, true},
		{"SELECT date_trunc('day', visit_date), department, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits GROUP BY 1, 2", maxQuantileBuckets, 0, false},
	} {
		p, err := RewriteWith(ds, c.query, Options{NoBias: true})
		if err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		groups, weight := 1, 0
		for _, k := range p.Keys {
			groups *= len(k.Domain)
		}
		for _, m := range p.Measures {
			if m.Quantile == nil {
				weight++
				continue
			}
			weight += dpplan.QuantileCellWeight(m.Quantile.Buckets)
			if c.buckets > 0 && m.Quantile.Buckets != c.buckets || c.max > 0 && m.Quantile.Buckets > c.max {
				t.Errorf("%s: %d buckets, want %d (at most %d)", c.query, m.Quantile.Buckets, c.buckets, c.max)
			}
			if m.Quantile.Type == policy.TypeDate && m.Quantile.Width != float64(int(m.Quantile.Width)) {
				t.Errorf("%s: a date grid of width %v", c.query, m.Quantile.Width)
			}
		}
		if fits := groups*weight <= dpplan.MaxAnswerCells; fits != c.fits {
			t.Errorf("%s: %d groups × %d cells fit %v, want %v", c.query, groups, weight, fits, c.fits)
		}
	}
}
