package upstream

import (
	"context"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgtest"
)

// TestAttack108_NoHashAggregation: a query whose context asks for it
// (WithSortedAggregation: a plan with a private key) plans without hash
// aggregation (noHashAggSQL; rewrite TestAttack108_CollidingGroupKeysTime
// measures why), others with it, and the setting ends with the
// transaction.
func TestAttack108_NoHashAggregation(t *testing.T) {
	ctx := context.Background()
	p := poolOn(t, ctx, pgtest.NewDatabase(t),
		"CREATE TABLE g (u bigint, a int, l int)",
		"INSERT INTO g SELECT i % 500, i % 7, i % 11 FROM generate_series(1, 20000) i",
		"ANALYZE g",
	)
	setting := func(ctx context.Context) string {
		t.Helper()
		rows, err := p.Query(ctx, "SELECT current_setting('enable_hashagg')")
		if err != nil || len(rows) != 1 || rows[0][0] == nil {
			t.Fatalf("enable_hashagg in the query's transaction: %v, %v", rows, err)
		}
		return *rows[0][0]
	}
	// Other plans keep hash aggregation (it is faster where one person's
	// values cannot choose the groups).
	if got := setting(ctx); got != "on" {
		t.Errorf("enable_hashagg without WithSortedAggregation = %s, want on", got)
	}
	sorted := WithSortedAggregation(ctx)
	if got := setting(sorted); got != "off" {
		t.Errorf("enable_hashagg with WithSortedAggregation = %s, want off", got)
	}
	if plan := planOf(t, sorted, p, "SELECT u, a, l, count(*) FROM g GROUP BY u, a, l"); strings.Contains(plan, "HashAggregate") || strings.Contains(plan, "MixedAggregate") {
		t.Fatalf("a per-unit GROUP BY is planned with a hash table keyed by the data:\n%s", plan)
	}
	var after string
	if err := p.pool.QueryRow(ctx, "SHOW enable_hashagg").Scan(&after); err != nil || after != "on" {
		t.Errorf("enable_hashagg after the transaction = %q, %v; want on (SET LOCAL)", after, err)
	}
}
