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

// TestSmallProxyPerAnalystSessions: round 110's shape for client sessions.
// max_connections_per_analyst defaulted to max(2, max_connections/4), so
// with max_connections 2 one analyst's two idle sessions took every
// session of the proxy. The default now leaves the others at least one
// whenever there are two or more, and keeps 2 (psql plus a BI tool's
// metadata connection) wherever that leaves one.
func TestSmallProxyPerAnalystSessions(t *testing.T) {
	for _, tc := range []struct{ total, want int }{{1, 1}, {2, 1}, {3, 2}, {8, 2}, {12, 3}, {200, 50}} {
		c, err := Parse([]byte(minimal+fmt.Sprintf("max_connections: %d\n", tc.total)), "c.yaml")
		if err != nil {
			t.Fatalf("max_connections %d: %v", tc.total, err)
		}
		if c.MaxConnectionsPerAnalyst != tc.want {
			t.Errorf("max_connections %d: per analyst %d, want %d", tc.total, c.MaxConnectionsPerAnalyst, tc.want)
		}
		if tc.total >= 2 && c.MaxConnectionsPerAnalyst >= tc.total {
			t.Errorf("max_connections %d: one analyst may hold all %d", tc.total, c.MaxConnectionsPerAnalyst)
		}
	}
}
