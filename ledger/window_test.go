package ledger

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
)

// fakeClock is a settable clock. Safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func windowPolicy(t *testing.T, extra string) *policy.Dataset {
	t.Helper()
	ds, err := policy.Parse(strings.NewReader(`dataset: clinic
privacy_unit: patient
budget:
  epsilon: 1
  accountant: pure
  window: 30d
  lifetime: {epsilon: 2.5}
tables:
  visits:
    unit_column: patient_id
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      age: {type: int, lower: 0, upper: 100}
`+extra), "clinic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestLedger_WindowRenewsAndLifetimeBounds: with budget.window 30d, ε 1
// per window and a lifetime cap of 2.5, a fake clock moves past the
// window's end; the budget renews, the renewal is audited, Verify agrees
// with the rows, and the lifetime cap refuses what the window would allow.
func TestLedger_WindowRenewsAndLifetimeBounds(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	l := openLedger(t, dsn)
	clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l.SetClock(clock.now)
	ds := windowPolicy(t, "")

	if _, err := l.Reserve(ctx, charge("alice", ds, laplace(0.6))); err != nil {
		t.Fatal(err)
	}
	st, err := l.Status(ctx, "alice", ds)
	if err != nil {
		t.Fatal(err)
	}
	wantRenews := clock.now().Add(30 * 24 * time.Hour)
	if !st.Renews.Equal(wantRenews) || st.Spent.Epsilon != 0.6 || st.Lifetime == nil || st.Lifetime.Spent.Epsilon != 0.6 || st.Lifetime.Limit.Epsilon != 2.5 {
		t.Fatalf("Status = %+v (lifetime %+v), want renews %v, spent 0.6, lifetime 0.6 of 2.5", st, st.Lifetime, wantRenews)
	}
	// The window's limit refuses 0.6 more (1.2 > 1).
	_, err = l.Reserve(ctx, charge("alice", ds, laplace(0.6)))
	pe := wantCode(t, err, pgerr.ConfigurationLimit)
	if !strings.Contains(pe.Message, "in this budget window") || !strings.Contains(pe.Hint, "renews every 30d, next at "+wantRenews.Format("2006-01-02 15:04 UTC")) {
		t.Errorf("window refusal = %q / %q", pe.Message, pe.Hint)
	}

	// One second before the end: still refused; at the end: renewed.
	clock.advance(30*24*time.Hour - time.Hour - time.Second)
	if _, err := l.Reserve(ctx, charge("alice", ds, laplace(0.6))); err == nil {
		t.Fatal("charge before the window's end was accepted")
	}
	clock.advance(time.Hour + time.Second)
	st, err = l.Status(ctx, "alice", ds)
	if err != nil {
		t.Fatal(err)
	}
	if st.Spent.Epsilon != 0 || !st.Renews.Equal(wantRenews.Add(30*24*time.Hour)) || st.Lifetime.Spent.Epsilon != 0.6 {
		t.Fatalf("Status after the window's end = %+v (lifetime %+v)", st, st.Lifetime)
	}
	res, err := l.Reserve(ctx, charge("alice", ds, laplace(0.6)))
	if err != nil {
		t.Fatalf("charge in the renewed window: %v", err)
	}
	if res.Cost.Epsilon != 0.6 || res.Status.Spent.Epsilon != 0.6 || res.Status.Lifetime.Spent.Epsilon != 1.2 {
		t.Fatalf("Reserve after renewal = %+v (lifetime %+v)", res, res.Status.Lifetime)
	}
	if n := queryOne[int64](t, dsn, `SELECT count(*) FROM dpproxy_ledger.audit WHERE action = 'renew' AND analyst = 'alice'`); n != 1 {
		t.Errorf("renew audit rows of alice = %d, want 1", n)
	}

	// Two more windows: 0.9 each would be 3.0 in all, over the lifetime
	// cap of 2.5; the window allows it, the lifetime refuses.
	clock.advance(30 * 24 * time.Hour)
	if _, err := l.Reserve(ctx, charge("alice", ds, laplace(0.9))); err != nil {
		t.Fatal(err)
	}
	clock.advance(30 * 24 * time.Hour)
	_, err = l.Reserve(ctx, charge("alice", ds, laplace(0.9)))
	pe = wantCode(t, err, pgerr.ConfigurationLimit)
	if !strings.Contains(pe.Message, "lifetime") {
		t.Errorf("lifetime refusal = %q", pe.Message)
	}
	// What is left of the lifetime still fits.
	if _, err := l.Reserve(ctx, charge("alice", ds, laplace(0.4))); err != nil {
		t.Fatalf("charge within the lifetime's rest: %v", err)
	}
	st, _ = l.Status(ctx, "alice", ds)
	if st.Lifetime.Spent.Epsilon != 2.5 || st.Spent.Epsilon != 0.4 {
		t.Errorf("Status = %+v (lifetime %+v), want window 0.4, lifetime 2.5", st, st.Lifetime)
	}

	rep, err := l.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("Verify after renewals: %v", rep.Mismatches)
	}
	// A lifetime state that lost charges is a mismatch.
	if err := pgtest.Exec(ctx, dsn, `UPDATE dpproxy_ledger.budget SET lifetime_state = '{}' WHERE analyst = 'alice'`); err != nil {
		t.Fatal(err)
	}
	if rep, err := l.Verify(ctx); err != nil || rep.OK() {
		t.Errorf("Verify with an emptied lifetime state = %v, %v; want a mismatch", rep, err)
	}
	// A clock that goes back does not reopen an old window.
	clock.advance(-90 * 24 * time.Hour)
	st, _ = l.Status(ctx, "alice", ds)
	if st.Spent.Epsilon != 0.4 {
		t.Errorf("Status with a clock behind = %+v, want the current window's 0.4", st)
	}
}

// TestLedger_TeamSharesOneBudget: alice and bob share a team budget of 1
// (each may spend 1 alone); carol is outside the team.
func TestLedger_TeamSharesOneBudget(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	l := openLedger(t, dsn)
	ds, err := policy.Parse(strings.NewReader(`dataset: clinic
privacy_unit: patient
budget: {epsilon: 1}
teams:
  cardio: {members: [alice, bob], epsilon: 1}
tables:
  visits:
    unit_column: patient_id
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      age: {type: int, lower: 0, upper: 100}
`), "clinic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(ctx, charge("alice", ds, laplace(0.7))); err != nil {
		t.Fatal(err)
	}
	_, err = l.Reserve(ctx, charge("bob", ds, laplace(0.5)))
	pe := wantCode(t, err, pgerr.ConfigurationLimit)
	if !strings.Contains(pe.Message, "team cardio") {
		t.Errorf("team refusal = %q", pe.Message)
	}
	if _, err := l.Reserve(ctx, charge("bob", ds, laplace(0.3))); err != nil {
		t.Fatalf("bob within the team's rest: %v", err)
	}
	if _, err := l.Reserve(ctx, charge("carol", ds, laplace(0.9))); err != nil {
		t.Fatalf("carol (no team): %v", err)
	}
	if got := queryOne[string](t, dsn, `SELECT spent_epsilon::text FROM dpproxy_ledger.budget WHERE analyst = 'team:cardio'`); got != "1" {
		t.Errorf("team row spent = %s, want 1", got)
	}
	bs, err := l.Budgets(ctx, map[string]*policy.Dataset{"clinic": ds}, "clinic", "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range bs {
		if b.Analyst == "team:cardio" {
			found = true
			if b.Status.Spent.Epsilon != 1 || b.Status.Limit.Epsilon != 1 {
				t.Errorf("Budgets team row = %+v", b.Status)
			}
		}
	}
	if !found {
		t.Error("Budgets lists no team row")
	}
	rep, err := l.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("Verify with a team: %v", rep.Mismatches)
	}
	// The steward resets and grants the team's row like an analyst's.
	if st, err := l.Grant(ctx, ds, "team:cardio", accountant.Spent{Epsilon: 0.5}, "tester"); err != nil || st.Limit.Epsilon != 1.5 {
		t.Fatalf("Grant(team) = %+v, %v; want limit 1.5", st, err)
	}
	if before, err := l.Reset(ctx, ds, "team:cardio", "tester"); err != nil || before.Spent.Epsilon != 1 {
		t.Fatalf("Reset(team) = %+v, %v; want 1 spent before", before, err)
	}
	if _, err := l.Reserve(ctx, charge("bob", ds, laplace(0.6))); err != nil {
		t.Fatalf("bob after the team's reset: %v", err)
	}
	if rep, err = l.Verify(ctx); err != nil || !rep.OK() {
		t.Errorf("Verify after a team reset: %v %v", rep, err)
	}
}

// TestLedger_WindowAddedLaterRefundsNothing: a dataset whose policy gains a
// window keeps what its analysts spent: the first window and the lifetime
// both start from the row's spending so far.
func TestLedger_WindowAddedLaterRefundsNothing(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	l := openLedger(t, dsn)
	clock := &fakeClock{t: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}
	l.SetClock(clock.now)
	plain := windowPolicy(t, "")
	plain.Budget.Window, plain.Budget.Lifetime = 0, policy.Lifetime{}
	if _, err := l.Reserve(ctx, charge("alice", plain, laplace(0.8))); err != nil {
		t.Fatal(err)
	}
	windowed := windowPolicy(t, "")
	if _, err := l.Reserve(ctx, charge("alice", windowed, laplace(0.3))); err == nil {
		t.Fatal("0.8 + 0.3 fit a window of 1: the window refunded the spending before it")
	}
	res, err := l.Reserve(ctx, charge("alice", windowed, laplace(0.2)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status.Spent.Epsilon != 1 || res.Status.Lifetime == nil || res.Status.Lifetime.Spent.Epsilon != 1 {
		t.Errorf("after the window was added: %+v (lifetime %+v), want 1 spent in the window and 1 in the lifetime", res.Status, res.Status.Lifetime)
	}
	clock.advance(31 * 24 * time.Hour)
	res, err = l.Reserve(ctx, charge("alice", windowed, laplace(1)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status.Spent.Epsilon != 1 || res.Status.Lifetime.Spent.Epsilon != 2 {
		t.Errorf("next window: %+v (lifetime %+v), want 1 and 2", res.Status, res.Status.Lifetime)
	}
	if rep, err := l.Verify(ctx); err != nil || !rep.OK() {
		t.Errorf("Verify: %v %v", rep, err)
	}
}
