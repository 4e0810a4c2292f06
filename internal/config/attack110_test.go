package config

import (
	"fmt"
	"testing"
)

// TestAttack110_SmallPoolPerAnalystDefault: dp_concurrency_per_analyst
// defaulted to min(2, dp_concurrency), so with upstream_max_connections
// 2 (or dp_concurrency 2) one analyst's two statements took every DP slot
// of the dataset and another analyst's query waited dp_queue_timeout and
// was refused (53000, 30.3 s in the demo under two 32 s statements of
// bob). The default now leaves at least half the slots to the others
// whenever there are two or more.
func TestAttack110_SmallPoolPerAnalystDefault(t *testing.T) {
	for _, tc := range []struct{ pool, want int }{{1, 1}, {2, 1}, {3, 1}, {4, 2}, {10, 2}, {50, 2}} {
		c, err := Parse([]byte(minimal+fmt.Sprintf("upstream_max_connections: %d\n", tc.pool)), "c.yaml")
		if err != nil {
			t.Fatalf("pool %d: %v", tc.pool, err)
		}
		if c.DPConcurrency != tc.pool || c.DPConcurrencyPerAnalyst != tc.want {
			t.Errorf("upstream_max_connections %d: dp_concurrency %d, per analyst %d; want %d, %d",
				tc.pool, c.DPConcurrency, c.DPConcurrencyPerAnalyst, tc.pool, tc.want)
		}
	}
}
