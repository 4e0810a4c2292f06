//go:build quantilebench

// Package quantile measures the error of dpproxy's quantiles (the
// exponential mechanism) on the demo data and on the PUMS sample:
//
//	go test -tags quantilebench -run TestQuantileMethods -v -timeout 30m ./bench/quantile
//
// For each query and ε it runs the emitted SQL once on a real PostgreSQL,
// releases the answer `runs` times through release.Releaser (fresh noise
// each time; an in-memory ledger), and reports the median and 90th
// percentile of |released − PostgreSQL's exact answer| over all runs. The
// table goes to BENCHMARKS.md. (It also compared the smooth and ptr
// methods until they were removed, issue 28.)
package quantile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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

func TestMain(m *testing.M) { pgtest.Main(m) }

const runs = 200

const pumsPolicy = `dataset: pums
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
      sex:     {type: int, lower: 0, upper: 1}
      educ:    {type: int, lower: 1, upper: 16}
      race:    {type: int, lower: 1, upper: 6}
      income:  {type: numeric, lower: 0, upper: 500000}
      married: {type: int, lower: 0, upper: 1}
`

func loadPUMS(t *testing.T, ctx context.Context, conn *pgx.Conn) {
	t.Helper()
	if err := benchkit.LoadPUMS(ctx, conn, "PUMS.csv", "pums"); err != nil {
		if errors.Is(err, fs.ErrNotExist) && !pgtest.InCI() {
			t.Skipf("PUMS sample not found: %v", err)
		}
		t.Fatal(err)
	}
}

type result struct {
	dataset, query string
	eps            float64
	median, p90    float64
}

func TestQuantileMethods(t *testing.T) {
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
	loadPUMS(t, ctx, conn)
	hospital, err := demo.HospitalPolicy()
	if err != nil {
		t.Fatal(err)
	}
	pums, err := policy.Parse(strings.NewReader(pumsPolicy), "pums.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type q struct {
		ds    *policy.Dataset
		query string
	}
	queries := []q{
		{hospital, "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits"},
		{hospital, "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY age) FROM visits"},
		{hospital, "SELECT percentile_disc(0.9) WITHIN GROUP (ORDER BY length_of_stay) FROM visits"},
		{pums, "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY income) FROM pums"},
		{pums, "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY age) FROM pums"},
	}
	var results []result
	for _, qq := range queries {
		truthRows, err := benchkit.QueryText(ctx, conn, qq.query)
		if err != nil {
			t.Fatal(err)
		}
		truth, _ := strconv.ParseFloat(*truthRows[0][0], 64)
		base, err := rewrite.Rewrite(qq.ds, qq.query)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := benchkit.QueryText(ctx, conn, base.SQL)
		if err != nil {
			t.Fatal(err)
		}
		for _, eps := range []float64{0.1, 0.5, 1} {
			errs, _, err := benchkit.ReleaseErrors(ctx, qq.ds, base, rows, eps, runs, truth)
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, result{qq.ds.Name, qq.query, eps, errs[len(errs)/2], errs[len(errs)*9/10]})
		}
	}
	var b strings.Builder
	b.WriteString("| data | query | ε | exponential: median / p90 |\n|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | `%s` | %g | %s / %s |\n", r.dataset, r.query, r.eps, fmtErr(r.median), fmtErr(r.p90))
	}
	t.Logf("median and 90th percentile of |error| over %d runs each:\n%s", runs, b.String())
}

func fmtErr(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }
