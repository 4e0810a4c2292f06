//go:build accuracybench

package accuracy

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/benchkit"
	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5"
)

// TestRegrAccuracy measures the error of covar_pop, covar_samp, regr_slope
// and regr_intercept answered from noisy sufficient statistics
// (rewrite/regrstats.go) on the demo data and the PUMS sample:
//
//	go test -tags accuracybench -run TestRegrAccuracy -v -timeout 30m ./bench/accuracy
//
// For each query and ε it runs the emitted SQL once on a real PostgreSQL,
// releases the answer `runs` times (benchkit.ReleaseErrors: fresh noise,
// an in-memory ledger) and reports the median and 90th percentile of
// |released − PostgreSQL's answer of the analyst's query|, and the share
// of NULL answers. The table goes to BENCHMARKS.md.

// regrPolicy: one row per person; the bounds are those of bench/quantile
// and rewrite's PUMS tests.
const regrPolicy = `dataset: pums
privacy_unit: person
budget: {epsilon: 1.0e9, delta: 1.0e-3, accountant: pure}
defaults: {epsilon: 1, mechanism: laplace}
tables:
  pums:
    unit_column: pid
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      age:     {type: int, lower: 0, upper: 100}
      educ:    {type: int, lower: 1, upper: 16}
      income:  {type: float, lower: 0, upper: 500000}
`

func TestRegrAccuracy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := benchkit.LoadDemo(ctx, conn); err != nil {
		t.Fatal(err)
	}
	load(t, ctx, conn, "PUMS.csv", "pums")
	hospital, err := demo.HospitalPolicy()
	if err != nil {
		t.Fatal(err)
	}
	pums, err := policy.Parse(strings.NewReader(regrPolicy), "pums.yaml")
	if err != nil {
		t.Fatal(err)
	}
	queries := []struct {
		ds    *policy.Dataset
		query string
	}{
		{hospital, "SELECT covar_pop(cost, age) FROM visits"},
		{hospital, "SELECT regr_slope(cost, age) FROM visits"},
		{hospital, "SELECT regr_intercept(cost, age) FROM visits"},
		{pums, "SELECT covar_pop(income, educ) FROM pums"},
		{pums, "SELECT covar_samp(income, age) FROM pums"},
		{pums, "SELECT regr_slope(income, educ) FROM pums"},
	}
	var b strings.Builder
	b.WriteString("| data | query | PostgreSQL | ε = 0.1: median / p90 (NULL) | ε = 0.5 | ε = 1 |\n|---|---|---:|---|---|---|\n")
	for _, q := range queries {
		truthRows, err := benchkit.QueryText(ctx, conn, q.query)
		if err != nil {
			t.Fatal(err)
		}
		truth, _ := strconv.ParseFloat(*truthRows[0][0], 64)
		base, err := rewrite.Rewrite(q.ds, q.query)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "| %s | `%s` | %.4g |", q.ds.Name, q.query, truth)
		rows, err := benchkit.QueryText(ctx, conn, base.SQL)
		if err != nil {
			t.Fatal(err)
		}
		for _, eps := range []float64{0.1, 0.5, 1} {
			errs, nulls, err := benchkit.ReleaseErrors(ctx, q.ds, base, rows, eps, runs, truth)
			if err != nil {
				t.Fatal(err)
			}
			cell := "all NULL"
			if len(errs) > 0 {
				cell = fmt.Sprintf("%s / %s", regrErr(errs[len(errs)/2]), regrErr(errs[len(errs)*9/10]))
			}
			fmt.Fprintf(&b, " %s (%.0f%%) |", cell, 100*float64(nulls)/float64(runs))
		}
		b.WriteString("\n")
	}
	t.Logf("median and 90th percentile of |error| over %d runs each (share of NULL answers):\n%s", runs, b.String())
}

func regrErr(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }
