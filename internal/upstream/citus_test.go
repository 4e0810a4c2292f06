package upstream

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/citus"
)

// TestCitus_SettingsReachWorkers: on Citus a distributed table's per-unit
// stage runs on the workers, which see the transaction's SET LOCAL
// commands only when citus.propagate_set_commands is local
// (citusLocalSQL): without it their GROUP BY kept its hash aggregation
// (attack round 108's collisions) and ran with no statement_timeout. The
// worker's plan of a per-unit GROUP BY, which Citus's EXPLAIN shows, sorts.
// Runs under make test-citus (DPPROXY_CITUS=1).
func TestCitus_SettingsReachWorkers(t *testing.T) {
	if os.Getenv("DPPROXY_CITUS") != "1" {
		t.Skip("DPPROXY_CITUS is not 1: the Citus tests run under make test-citus")
	}
	if err := citus.Check(""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := citus.Start(ctx, citus.Options{Workers: 1, NoFsync: true, Settings: map[string]string{"citus.shard_count": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	if err := c.CreateDatabase(ctx, "dp"); err != nil {
		t.Fatal(err)
	}
	p := poolOn(t, ctx, c.Coordinator.DSN("dp"),
		"CREATE TABLE g (u bigint, a int, l int)",
		"SELECT create_distributed_table('g', 'u')",
		"INSERT INTO g SELECT i % 500, i % 7, i % 11 FROM generate_series(1, 20000) i",
		"ANALYZE g",
	)
	plan := planOf(t, WithSortedAggregation(ctx), p, "SELECT u, a, l, count(*) FROM g GROUP BY u, a, l")
	if !strings.Contains(plan, "Task Count") {
		t.Fatalf("the query was not distributed:\n%s", plan)
	}
	if strings.Contains(plan, "HashAggregate") || !strings.Contains(plan, "GroupAggregate") {
		t.Errorf("a worker plans the per-unit GROUP BY with a hash table keyed by the data:\n%s", plan)
	}
}
