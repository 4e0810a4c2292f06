package proxy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestDP_BoundedWork: issue 14's free hangs at the proxy. SET dp.epsilon
// below the floor is refused (22023, the hint names the floor and the
// policy key), in SET and in the start-up options; with the floor lowered
// by the steward, EXPLAIN at ε 1e-16 — which never returned — is refused
// at once for its noise scale, without calling the releaser.
func TestDP_BoundedWork(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	_, err := execAll(t, pc, "SET dp.epsilon = 1e-16")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22023" || !strings.Contains(pe.Hint, "0.001") || !strings.Contains(pe.Hint, "budget.min_epsilon_per_query") {
		t.Fatalf("SET dp.epsilon = 1e-16: %v, want 22023 with a hint naming the floor", err)
	}
	if got := show(t, pc, "dp.epsilon"); got != "0.1" {
		t.Fatalf("SHOW dp.epsilon after the refusal = %q", got)
	}
	if _, err := pgconnConnect(t, ts.dsn("alice", "alice", "hospital")+"&options=-c%20dp.epsilon%3D1e-16"); sqlstate(err) != "22023" {
		t.Fatalf("start-up option dp.epsilon=1e-16: %v, want 22023", err)
	}

	low := startServer(t, serverOpts{mutate: func(c *Config) {
		p := *c.Datasets["hospital"].Policy
		p.Budget.MinEpsilonPerQuery = 1e-20
		c.Datasets["hospital"].Policy = &p
	}})
	lc := low.connect(t)
	for _, q := range []string{"EXPLAIN SELECT COUNT(*) FROM patients", "EXPLAIN SELECT department, COUNT(*) FROM visits GROUP BY department"} {
		start := time.Now()
		_, err := execAll(t, lc, "SET dp.epsilon = 1e-16; "+q)
		if !errors.As(err, &pe) || pe.Code != "22023" || !strings.Contains(pe.Hint, "narrow the clipping bounds") {
			t.Fatalf("%s at ε 1e-16: %v, want 22023 with the scale hint", q, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s refused after %v", q, d)
		}
	}
	if n := len(low.releaser.requests()) + len(ts.releaser.requests()); n != 0 {
		t.Fatalf("the releaser was called %d times", n)
	}
}
