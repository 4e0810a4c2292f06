//go:build quantilebench

package quantile

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/benchkit"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/internal/upstream"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5"
)

// TestQuantileOfExpression compares, on the PUMS sample, the two ways
// dpproxy answers a percentile of an expression (rewrite/quantile_expr.go):
// the exponential mechanism over a grid on the expression's interval
// (default) and sample-and-aggregate (SET dp.quantile_method = sample; k
// from the noisy unit count, 16 for n = 1000):
//
//	go test -tags quantilebench -run TestQuantileOfExpression -v -timeout 30m ./bench/quantile
//
// For each query, method and ε it runs the emitted SQL once, releases the
// answer `runs` times (fresh noise, and for sample-and-aggregate a fresh
// noisy count choosing k) and reports the median and 90th percentile of
// |released − PostgreSQL's exact percentile of the expression|.
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
	// ranges are SET dp.output_range values an analyst might choose for
	// sample-and-aggregate (public guesses, not read from the data).
	ranges := map[string][2]float64{queries[0]: {0, 5000}, queries[1]: {-20000, 80000}, queries[2]: {60, 216}}
	const sampleRange = "sample+range"
	methods := []string{rewrite.QuantileExponential, rewrite.QuantileSample, sampleRange}
	epsilons := []float64{0.1, 0.5, 1}
	type cell struct{ median, p90 float64 }
	results := map[string]cell{}
	ks := map[string]map[int]int{}
	for _, query := range queries {
		truthRows, err := benchkit.QueryText(ctx, conn, query)
		if err != nil {
			t.Fatal(err)
		}
		truth, _ := strconv.ParseFloat(*truthRows[0][0], 64)
		for _, method := range methods {
			for _, eps := range epsilons {
				var p *rewrite.Plan
				var rows [][]*string
				if method != rewrite.QuantileExponential {
					opts := rewrite.Options{QuantileMethod: rewrite.QuantileSample}
					if method == sampleRange {
						opts.HasOutputRange, opts.OutputLower, opts.OutputUpper = true, ranges[query][0], ranges[query][1]
					}
					p, err = rewrite.RewriteWith(ds, query, opts)
					if err == nil {
						rows, err = queryArgs(ctx, conn, p.SQL, p.QueryArgs(ds)...)
					}
				} else {
					p, err = rewrite.Rewrite(ds, query)
					if err == nil {
						rows, err = benchkit.QueryText(ctx, conn, p.SQL)
					}
				}
				if err != nil {
					t.Fatalf("%s %s: %v", method, query, err)
				}
				r, err := release.New(release.Config{Ledger: &benchkit.MemLedger{}, Planner: rewrite.Replan})
				if err != nil {
					t.Fatal(err)
				}
				key := fmt.Sprint(query, method, eps)
				ks[key] = map[int]int{}
				var errs []float64
				for i := 0; i < runs; i++ {
					res, err := r.Run(ctx, release.Request{Analyst: "bench", Dataset: ds, Plan: p, Epsilon: eps,
						Mechanism: policy.MechanismLaplace, Upstream: benchkit.RowsUpstream{Rows: rows}, NoCache: true})
					if err != nil {
						t.Fatal(err)
					}
					v, _ := strconv.ParseFloat(*res.Rows[0][0], 64)
					errs = append(errs, math.Abs(v-truth))
					if i, j := strings.Index(res.Notice, "over k="), strings.Index(res.Notice, " blocks"); i >= 0 && j > i {
						k, _ := strconv.Atoi(res.Notice[i+len("over k=") : j])
						ks[key][k]++
					}
				}
				sort.Float64s(errs)
				results[key] = cell{errs[len(errs)/2], errs[len(errs)*9/10]}
			}
		}
		t.Logf("%s: PostgreSQL %v", query, truth)
	}
	var b strings.Builder
	b.WriteString("| query (PUMS, n = 1,000) | ε | exponential: median / p90 | sample-and-aggregate: median / p90 (k) | sample-and-aggregate, dp.output_range: median / p90 |\n|---|---|---|---|---|\n")
	for _, query := range queries {
		for _, eps := range epsilons {
			e := results[fmt.Sprint(query, rewrite.QuantileExponential, eps)]
			s := results[fmt.Sprint(query, rewrite.QuantileSample, eps)]
			var kk []string
			counts := ks[fmt.Sprint(query, rewrite.QuantileSample, eps)]
			var levels []int
			for k := range counts {
				levels = append(levels, k)
			}
			sort.Ints(levels)
			for _, k := range levels {
				kk = append(kk, fmt.Sprintf("%d: %d%%", k, 100*counts[k]/runs))
			}
			sr := results[fmt.Sprint(query, sampleRange, eps)]
			fmt.Fprintf(&b, "| `%s` | %g | %s / %s | %s / %s (%s) | %s / %s ('%g,%g') |\n", strings.TrimSuffix(strings.TrimPrefix(query, "SELECT "), " FROM pums"), eps,
				fmtErr(e.median), fmtErr(e.p90), fmtErr(s.median), fmtErr(s.p90), strings.Join(kk, ", "), fmtErr(sr.median), fmtErr(sr.p90), ranges[query][0], ranges[query][1])
		}
	}
	t.Logf("median and 90th percentile of |error| over %d runs each:\n%s", runs, b.String())
}

// queryArgs is queryText with bind parameters (the sample-and-aggregate
// key pads), over the extended protocol.
func queryArgs(ctx context.Context, conn *pgx.Conn, sql string, args ...any) ([][]*string, error) {
	rows, err := conn.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, err
	}
	return upstream.TextRows(rows)
}
