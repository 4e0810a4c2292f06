package integration

import (
	"context"
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestPgx_QuantileOfExpression asks quantiles of expressions of the demo's
// visits through a real `dpproxy serve` with pgx (an analyst of its own, so
// the budget is the test's): by the default exponential method the median
// of cost * 2 + 1 is within 312.5 (two buckets of a 256-bucket grid; the
// grid is now 2¹⁴ buckets of 2.44140625) of PostgreSQL's
// own median over all rows (as TestPgx_QuantileMethods for cost), and MAX
// of an integer expression decodes as int8; with SET dp.quantile_method =
// sample, EXPLAIN and the NOTICE name sample-and-aggregate and k (1024 for
// the demo's 50 000 patients by the noisy-count rule, 64 when set), the
// median at ε = 1 is close to PostgreSQL's (the mean of 1024 block
// medians, each over about 49 patients, plus Laplace noise of scale
// 40000/(1024·0.9) ≈ 43: 12 scales are exceeded with probability
// e^−12 < 10⁻⁵, and 3% of the median covers the block medians' deviation
// from the overall median), and FILTER is refused with a hint.
func TestPgx_QuantileOfExpression(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var truth float64
	if err := connect(t, ctx, env.upstreamDSN).QueryRow(ctx, "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost * 2 + 1) FROM visits").Scan(&truth); err != nil {
		t.Fatal(err)
	}
	cfgPath, addr := extraConfig(t)
	withAnalyst(t, cfgPath, "quinn")
	p := startProxy(t, cfgPath, addr)
	c, notices := connectWithNotices(t, ctx, p.dsn("quinn"))
	if _, err := c.Exec(ctx, "SET dp.epsilon = 0.5"); err != nil {
		t.Fatal(err)
	}

	// Exponential (default).
	var median float64
	var maxLOS int64
	if err := c.QueryRow(ctx, "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost * 2 + 1) AS m, MAX(length_of_stay * 2 + 1) FROM visits").Scan(&median, &maxLOS); err != nil {
		t.Fatal(err)
	}
	if math.Abs(median-truth) > 2*156.25 {
		t.Errorf("exponential median of cost * 2 + 1 = %v, PostgreSQL %v: further than two buckets", median, truth)
	}
	if maxLOS < 1 || maxLOS > 121 {
		t.Errorf("MAX(length_of_stay * 2 + 1) = %d, want an integer of [1, 121]", maxLOS)
	}
	if ns := notices(); len(ns) == 0 || !strings.Contains(ns[len(ns)-1], "exponential mechanism") || !regexp.MustCompile(`to the bucket width 2\.44140625(, or anywhere in \[1, 40001\] in a group of fewer than [0-9]+ rows)? \(m, `).MatchString(ns[len(ns)-1]) {
		t.Fatalf("notices %q, want the exponential NOTICE with the expression's bucket width", ns)
	}

	// Sample-and-aggregate.
	if _, err := c.Exec(ctx, "SET dp.quantile_method = sample"); err != nil {
		t.Fatal(err)
	}
	const q = "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost * 2 + 1) FROM visits"
	rows, err := c.Query(ctx, "EXPLAIN "+q)
	if err != nil {
		t.Fatal(err)
	}
	var explain []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		explain = append(explain, line)
	}
	rows.Close()
	if all := strings.Join(explain, "\n"); !strings.Contains(all, "DP Sample-and-aggregate on hospital.visits") ||
		!strings.Contains(all, "percentile_cont(0.5) of expression per block, clipped to [1, 40001]") || !strings.Contains(all, "k chosen at run time") {
		t.Fatalf("EXPLAIN = %s", all)
	}
	if _, err := c.Exec(ctx, "SET dp.epsilon = 1"); err != nil {
		t.Fatal(err)
	}
	var sa float64
	if err := c.QueryRow(ctx, q).Scan(&sa); err != nil {
		t.Fatal(err)
	}
	ns := notices()
	last := ns[len(ns)-1]
	if !strings.Contains(last, "sample-and-aggregate over k=1024 blocks (chosen from a noisy unit count") {
		t.Fatalf("NOTICE %q does not name sample-and-aggregate with k=1024", last)
	}
	if tol := 12*40000/(1024*0.9) + 0.03*truth; math.Abs(sa-truth) > tol {
		t.Errorf("sample-and-aggregate median = %v, PostgreSQL %v: further than %v", sa, truth, tol)
	}
	t.Logf("median of cost * 2 + 1: PostgreSQL %v, exponential %v, sample-and-aggregate %v", truth, median, sa)

	if _, err := c.Exec(ctx, "SET dp.sample_blocks = 64"); err != nil {
		t.Fatal(err)
	}
	var mx int64
	if err := c.QueryRow(ctx, "SELECT MAX(length_of_stay * 2 + 1) FROM visits").Scan(&mx); err != nil {
		t.Fatal(err)
	}
	if last := notices(); mx < 1 || mx > 121 || !strings.Contains(last[len(last)-1], "k=64 blocks (fixed by dp.sample_blocks") {
		t.Fatalf("MAX by sample-and-aggregate = %d, NOTICE %q; want an integer of [1, 121] with k=64", mx, last[len(last)-1])
	}
	_, err = c.Exec(ctx, "SELECT MAX(cost * 2) FILTER (WHERE age > 30) FROM visits")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "0A000" || !strings.Contains(pe.Hint, "dp.quantile_method = exponential") {
		t.Fatalf("FILTER with the sample method: %v, want 0A000 with a hint", err)
	}
	// The charges: answered queries at ε = 0.5, 1 and 1.
	ledger := connect(t, ctx, ledgerDSN())
	var spent string
	if err := ledger.QueryRow(ctx, "SELECT COALESCE(sum(cost_epsilon), 0)::text FROM dpproxy_ledger.charge WHERE analyst = 'quinn'").Scan(&spent); err != nil {
		t.Fatal(err)
	}
	if f, _ := strconv.ParseFloat(spent, 64); math.Abs(f-2.5) > 1e-9 {
		t.Errorf("quinn was charged ε = %s, want 2.5 (queries at 0.5, 1 and 1)", spent)
	}
}
