//go:build quantilebench

package quantile

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/benchkit"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5"
)

// TestQuantileOfExpression measures, on the PUMS sample, how dpproxy
// answers a percentile of an expression (rewrite/quantile_expr.go): the
// exponential mechanism over a grid on the expression's interval. (It also
// measured sample-and-aggregate, SET dp.quantile_method = sample, until
// that was removed on 2026-12-06, issue 28; BENCHMARKS.md keeps the
// comparison.)
//
//	go test -tags quantilebench -run TestQuantileOfExpression -v -timeout 30m ./bench/quantile
//
// For each query and ε it runs the emitted SQL once, releases the answer
// `runs` times (fresh noise) and reports the median and 90th percentile
// of |released − PostgreSQL's exact percentile of the expression|.
func TestQuantileOfExpression(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	loadPUMS(t, ctx, conn)
	ds, err := policy.Parse(strings.NewReader(pumsPolicy), "pums.yaml")
	if err != nil {
		t.Fatal(err)
	}
	queries := []string{
		"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY income / NULLIF(age, 0)) FROM pums",
		"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY income - 20000) FROM pums",
		"SELECT percentile_disc(0.9) WITHIN GROUP (ORDER BY age * 2 + educ) FROM pums",
	}
	epsilons := []float64{0.1, 0.5, 1}
	var b strings.Builder
	b.WriteString("| query (PUMS, n = 1,000) | ε | exponential: median / p90 |\n|---|---|---|\n")
	for _, query := range queries {
		truthRows, err := benchkit.QueryText(ctx, conn, query)
		if err != nil {
			t.Fatal(err)
		}
		truth, _ := strconv.ParseFloat(*truthRows[0][0], 64)
		p, err := rewrite.Rewrite(ds, query)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		rows, err := benchkit.QueryText(ctx, conn, p.SQL)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		for _, eps := range epsilons {
			errs, _, err := benchkit.ReleaseErrors(ctx, ds, p, rows, eps, runs, truth)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "| `%s` | %g | %s / %s |\n", strings.TrimSuffix(strings.TrimPrefix(query, "SELECT "), " FROM pums"), eps,
				fmtErr(errs[len(errs)/2]), fmtErr(errs[len(errs)*9/10]))
		}
		t.Logf("%s: PostgreSQL %v", query, truth)
	}
	t.Logf("median and 90th percentile of |error| over %d runs each:\n%s", runs, b.String())
}
