package proxy

import (
	"context"
	"testing"
)

// TestAttack108_PrivateKeySortedAggregation: a plan that groups by a
// private key runs upstream with hash aggregation off (attack round 108:
// one person's key values with colliding hashes made its GROUP BY
// quadratic; rewrite TestAttack108_CollidingGroupKeysTime), and other
// plans keep it (with it off the demo's grouped AVG over 1M rows took
// 1,501 ms against 1,185). A post-processing statement's leaves go
// through the same upstreamCtx (post.go).
func TestAttack108_PrivateKeySortedAggregation(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	defer pc.Close(context.Background())
	ctx := context.Background()
	for _, c := range []struct {
		sql    string
		sorted bool
	}{
		{"SELECT department, COUNT(*) FROM visits GROUP BY department", false},
		{"SELECT COUNT(*) FROM visits", false},
		{"SET dp.delta = 1e-7; SELECT diagnosis, COUNT(*) FROM visits GROUP BY diagnosis", true},
	} {
		ts.releaser.mu.Lock()
		before := len(ts.releaser.sorted)
		ts.releaser.mu.Unlock()
		if _, err := pc.Exec(ctx, c.sql).ReadAll(); err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		ts.releaser.mu.Lock()
		got := append([]bool(nil), ts.releaser.sorted[before:]...)
		ts.releaser.mu.Unlock()
		if len(got) == 0 {
			t.Fatalf("%s: not released", c.sql)
		}
		for _, s := range got {
			if s != c.sorted {
				t.Errorf("%s: sorted aggregation %v, want %v", c.sql, s, c.sorted)
			}
		}
	}
}
