package integration

import (
	"context"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPgx_QuantileOfExpression asks quantiles of expressions of the demo's
// visits through a real `dpproxy serve` with pgx (an analyst of its own, so
// the budget is the test's): by the exponential method the median of
// cost * 2 + 1 is within 312.5 (two buckets of a 256-bucket grid; the grid
// is now 2¹⁴ buckets of 2.44140625) of PostgreSQL's own median over all
// rows (as TestPgx_QuantileMethods for cost), and MAX of an integer
// expression decodes as int8; MAX of an expression with FILTER is
// answered too, and each answer is charged its ε.
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

	// FILTER (WHERE …) of a quantile of an expression.
	var mx float64
	if err := c.QueryRow(ctx, "SELECT MAX(cost * 2) FILTER (WHERE age > 30) FROM visits").Scan(&mx); err != nil {
		t.Fatalf("MAX(cost * 2) FILTER: %v", err)
	}
	if mx < 0 || mx > 40000 {
		t.Errorf("MAX(cost * 2) FILTER (WHERE age > 30) = %v, want a value of [0, 40000]", mx)
	}
	// The charges: two answered queries at ε = 0.5.
	ledger := connect(t, ctx, ledgerDSN())
	var spent string
	if err := ledger.QueryRow(ctx, "SELECT COALESCE(sum(cost_epsilon), 0)::text FROM dpproxy_ledger.charge WHERE analyst = 'quinn'").Scan(&spent); err != nil {
		t.Fatal(err)
	}
	if f, _ := strconv.ParseFloat(spent, 64); math.Abs(f-1) > 1e-9 {
		t.Errorf("quinn was charged ε = %s, want 1 (two queries at 0.5)", spent)
	}
}
