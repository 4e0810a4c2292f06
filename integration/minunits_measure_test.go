package integration

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"
)

// TestMinUnits_DemoMeasure measures min_units_per_cell: 11 on the demo's
// own policy (examples/policies/hospital.yaml, budget raised for the runs)
// at the demo's default ε: per query, the share of cells suppressed over
// the releases, the truth (distinct patients per cell, read upstream), and
// the COUNT's stated half-width with and without the option. It prints
// figures and asserts nothing; set MINUNITS_MEASURE=1 (and optionally
// MINUNITS_RUNS, MINUNITS_EPSILON) to run it:
//
//	MINUNITS_MEASURE=1 go test -run '^TestMinUnits_DemoMeasure$' -v ./integration
func TestMinUnits_DemoMeasure(t *testing.T) {
	if os.Getenv("MINUNITS_MEASURE") == "" {
		t.Skip("a measurement: set MINUNITS_MEASURE=1")
	}
	requireDemo(t)
	runs := 40
	if s := os.Getenv("MINUNITS_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	eps := "0.1"
	if s := os.Getenv("MINUNITS_EPSILON"); s != "" {
		eps = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	queries := []struct{ q, truth string }{
		{"SELECT department, COUNT(*) FROM visits GROUP BY 1",
			"SELECT department, COUNT(DISTINCT patient_id) FROM visits GROUP BY 1"},
		{"SELECT department, date_trunc('quarter', visit_date), COUNT(*) FROM visits GROUP BY 1, 2",
			"SELECT department, date_trunc('quarter', visit_date), COUNT(DISTINCT patient_id) FROM visits GROUP BY 1, 2"},
		{"SELECT department, COUNT(*) FROM visits WHERE age >= 95 GROUP BY 1",
			"SELECT department, COUNT(DISTINCT patient_id) FROM visits WHERE age >= 95 GROUP BY 1"},
		{"SELECT region, COUNT(*) FROM patients WHERE birth_year <= 1930 GROUP BY 1",
			"SELECT region, COUNT(DISTINCT patient_id) FROM patients WHERE birth_year <= 1930 GROUP BY 1"},
	}
	up := connect(t, ctx, env.upstreamDSN)
	for _, q := range queries {
		rows, err := up.Query(ctx, q.truth)
		if err != nil {
			t.Fatal(err)
		}
		var counts []int
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			n, _ := strconv.Atoi(fmt.Sprint(vals[len(vals)-1]))
			counts = append(counts, n)
		}
		rows.Close()
		sort.Ints(counts)
		below := 0
		for _, n := range counts {
			if n < 11 {
				below++
			}
		}
		t.Logf("truth %q: %d non-empty cells, %d below 11, smallest %v", q.q, len(counts), below, counts[:min(5, len(counts))])
	}
	for _, withMin := range []bool{false, true} {
		edits := [][2]string{{"  epsilon: 3.0 ", "  epsilon: 1000 "}}
		if withMin {
			edits = append(edits, [2]string{"privacy_unit: patient\n", "privacy_unit: patient\nmin_units_per_cell: 11\n"})
		}
		cfgPath, addr := extraConfigPolicy(t, "../examples/policies/hospital.yaml", edits...)
		name := fmt.Sprintf("m%v", withMin)
		withAnalyst(t, cfgPath, name)
		p := startProxy(t, cfgPath, addr)
		c, notices := connectWithNotices(t, ctx, p.dsn(name))
		for _, s := range []string{"SET dp.epsilon = " + eps, "SET dp.cache = off", "SET dp.error_columns = on"} {
			if _, err := c.Exec(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range queries {
			cells, nulls := 0, 0
			var widths []float64
			for range runs {
				rows := textRows2(t, ctx, c, q.q)
				for _, r := range rows {
					cells++
					n := len(r)
					if r[n-2] == nil {
						nulls++
						continue
					}
					w, _ := strconv.ParseFloat(*r[n-1], 64)
					widths = append(widths, w)
				}
			}
			sort.Float64s(widths)
			med := 0.0
			if len(widths) > 0 {
				med = widths[len(widths)/2]
			}
			ns := notices()
			last := ""
			if len(ns) > 0 {
				last = ns[len(ns)-1]
			}
			t.Logf("min_units %v, ε %s, %q: %d releases, %d cells, %d suppressed (%.1f%%), median COUNT half-width %.0f; last NOTICE %q",
				withMin, eps, q.q, runs, cells, nulls, 100*float64(nulls)/float64(cells), med, last)
		}
	}
}
