package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// boundedAnalyst runs TestBoundedWork on its own proxy, so its budget and
// charges are its own.
const boundedAnalyst = "bounded"

// TestBoundedWork is issue 14's "free hangs", end to end through a real
// `dpproxy serve` on the demo's clusters and ledger: SET dp.epsilon = 1e-16
// (where EXPLAIN SELECT COUNT(*) never returned) is refused with 22023 and
// a hint naming the floor, with SHOW dp.budget and the ledger unchanged,
// and SUM(age * 100000000000000000000) at the floor ε 0.001 (which hung
// after charging) is answered at once, in both protocols and as EXPLAIN.
// A query at the floor is still answered and charged. The proxy must then
// stop on SIGTERM (startProxy's cleanup fails the test otherwise).
func TestBoundedWork(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		cfg["analysts"].(map[string]any)[boundedAnalyst] = map[string]any{"password": "plain:" + boundedAnalyst}
	})
	p := startProxy(t, cfgPath, addr)
	ledger := connect(t, ctx, ledgerDSN())
	c, err := pgconn.Connect(ctx, p.dsn(boundedAnalyst))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	budget0, charges0 := analystBudgetState(t, ctx, c, ledger, boundedAnalyst)

	// SET below the floor.
	_, err = c.Exec(ctx, "SET dp.epsilon = 1e-16").ReadAll()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22023" || !strings.Contains(pe.Hint, "min_epsilon_per_query") || !strings.Contains(pe.Hint, "0.001") {
		t.Fatalf("SET dp.epsilon = 1e-16: %v (hint %q), want 22023 with a hint naming the floor 0.001 and min_epsilon_per_query", err, hintOf(err))
	}
	if rs, err := c.Exec(ctx, "SHOW dp.epsilon").ReadAll(); err != nil || string(rs[0].Rows[0][0]) != "0.1" {
		t.Fatalf("SHOW dp.epsilon after the refused SET: %v %v", rs, err)
	}
	// The multi-statement form of the measured hang.
	_, err = c.Exec(ctx, "SET dp.epsilon = 1e-16; EXPLAIN SELECT COUNT(*) FROM patients").ReadAll()
	if !errors.As(err, &pe) || pe.Code != "22023" {
		t.Fatalf("SET dp.epsilon = 1e-16; EXPLAIN …: %v, want 22023", err)
	}

	if budget1, charges1 := analystBudgetState(t, ctx, c, ledger, boundedAnalyst); budget1 != budget0 || charges1 != charges0 {
		t.Fatalf("refusals changed the budget: SHOW dp.budget %s → %s, %d new charges", budget0, budget1, charges1-charges0)
	}

	// SUM(age·1e20) at the floor hung after charging when sums were noised
	// on the integers with Δ₁ ≈ 2.2e23 > 2⁵³. Sums are now noised on the
	// real grid (dpplan/bounds.go weights a unit's sum), whose scale
	// limit (2¹⁰⁰⁰) no bounded expression reaches: answered at once, in
	// both protocols (one charge each), and EXPLAIN too (none).
	if _, err := c.Exec(ctx, "SET dp.epsilon = 0.001; SET dp.cache = off").ReadAll(); err != nil {
		t.Fatal(err)
	}
	const sum = "SELECT SUM(age * 100000000000000000000) FROM visits"
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"simple", func() error { _, err := c.Exec(ctx, sum).ReadAll(); return err }},
		{"extended", func() error { return c.ExecParams(ctx, sum, nil, nil, nil, nil).Read().Err }},
		{"explain", func() error { _, err := c.Exec(ctx, "EXPLAIN "+sum).ReadAll(); return err }},
	} {
		start := time.Now()
		if err := tc.run(); err != nil {
			t.Fatalf("%s %s at ε 0.001: %v, want an answer", tc.name, sum, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: answered after %v, want at once", tc.name, d)
		}
	}
	budget0, charges0 = analystBudgetState(t, ctx, c, ledger, boundedAnalyst)

	// The session still answers at the floor, and that is charged (the
	// check above could not have passed by nothing ever being charged).
	if _, err := c.Exec(ctx, "SELECT COUNT(*) FROM patients").ReadAll(); err != nil {
		t.Fatalf("COUNT(*) at ε 0.001: %v", err)
	}
	if budget2, charges2 := analystBudgetState(t, ctx, c, ledger, boundedAnalyst); budget2 == budget0 || charges2 != charges0+1 {
		t.Fatalf("COUNT(*) at ε 0.001: SHOW dp.budget %s → %s, %d new charges; want one charge", budget0, budget2, charges2-charges0)
	}
}

func hintOf(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Hint
	}
	return ""
}
