package ledger

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

func connectDB(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func mustVerify(t *testing.T, l *Ledger) *VerifyReport {
	t.Helper()
	rep, err := l.Verify(context.Background())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return rep
}

func wantClean(t *testing.T, l *Ledger, budgets, charges int) *VerifyReport {
	t.Helper()
	rep := mustVerify(t, l)
	if !rep.OK() || rep.Budgets != budgets || rep.Charges != charges {
		t.Fatalf("Verify = %d budgets, %d charges, mismatches %q; want %d, %d, none", rep.Budgets, rep.Charges, rep.Mismatches, budgets, charges)
	}
	return rep
}

func reserveN(t *testing.T, l *Ledger, c accountant.Charge, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := l.Reserve(context.Background(), c); err != nil {
			t.Fatalf("charge %d: %v", i+1, err)
		}
	}
}

func TestLedger_GrantRaisesLimit(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	l := openLedger(t, dsn)
	ctx := context.Background()
	ds := testPolicy("hospital", 1, 1e-6, policy.AccountantPure)
	c := charge("alice", ds, laplace(0.1))
	reserveN(t, l, c, 10) // exactly 1 in exact decimal
	_, err := l.Reserve(ctx, c)
	if !errors.Is(err, accountant.ErrBudgetExhausted) {
		t.Fatalf("11th charge of 0.1 on a budget of 1: %v, want exhausted", err)
	}
	st, err := l.Grant(ctx, ds, "alice", accountant.Spent{Epsilon: 0.5}, "steward@test")
	if err != nil {
		t.Fatal(err)
	}
	if st.Limit != (accountant.Spent{Epsilon: 1.5, Delta: 1e-6}) || st.Spent.Epsilon != 1 {
		t.Fatalf("Status after granting 0.5 = %+v, want limit (1.5, 1e-6), spent 1", st)
	}
	reserveN(t, l, c, 5)
	if _, err := l.Reserve(ctx, c); !errors.Is(err, accountant.ErrBudgetExhausted) {
		t.Fatalf("charge beyond 1 + 0.5: %v, want exhausted", err)
	}
	// A second grant adds up; a grant of a fresh analyst creates the row.
	if st, err = l.Grant(ctx, ds, "alice", accountant.Spent{Epsilon: 0.2, Delta: 1e-7}, "steward@test"); err != nil || st.Limit != (accountant.Spent{Epsilon: 1.7, Delta: 1.1e-6}) {
		t.Fatalf("second grant: %+v, %v; want limit (1.7, 1.1e-6)", st, err)
	}
	if st, err = l.Grant(ctx, ds, "carol", accountant.Spent{Epsilon: 2}, "steward@test"); err != nil || st.Limit.Epsilon != 3 || st.Spent.Epsilon != 0 {
		t.Fatalf("grant to carol: %+v, %v", st, err)
	}
	// Other analysts are not affected.
	if st, _ := l.Status(ctx, "bob", ds); st.Limit.Epsilon != 1 {
		t.Fatalf("bob's limit = %v, want the policy's 1", st.Limit.Epsilon)
	}
	if n := queryOne[int64](t, dsn, `SELECT count(*) FROM dpproxy_ledger.audit WHERE action = 'grant' AND actor = 'steward@test'`); n != 3 {
		t.Fatalf("%d grant audit rows, want 3", n)
	}
	if s := queryOne[string](t, dsn, `SELECT before_granted_epsilon::text || ' ' || epsilon::text || ' ' || before_spent_epsilon::text
		FROM dpproxy_ledger.audit WHERE analyst = 'alice' ORDER BY id DESC LIMIT 1`); s != "0.5 0.2 1.5" {
		t.Fatalf("second grant's audit row = %q, want before-grant 0.5, amount 0.2, spent 1.5", s)
	}
	// Bad grants.
	for _, g := range []accountant.Spent{{}, {Epsilon: -1}, {Delta: 1}} {
		if _, err := l.Grant(ctx, ds, "alice", g, "steward@test"); err == nil {
			t.Errorf("Grant(%+v) succeeded, want an error", g)
		}
	}
	if _, err := l.Grant(ctx, ds, "alice", accountant.Spent{Epsilon: 1}, ""); err == nil {
		t.Error("Grant without an actor succeeded")
	}
	wantClean(t, l, 3, 15)

	infos, err := l.Budgets(ctx, map[string]*policy.Dataset{"hospital": ds}, "hospital", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 3 || infos[0].Analyst != "" || infos[1].Analyst != "alice" || infos[2].Analyst != "carol" {
		t.Fatalf("Budgets = %+v, want global, alice, carol", infos)
	}
	a := infos[1]
	if a.Charges != 15 || a.Reserved != 15 || a.Granted != (accountant.Spent{Epsilon: 0.7, Delta: 1e-7}) || a.Status.Limit != (accountant.Spent{Epsilon: 1.7, Delta: 1.1e-6}) || a.Status.Spent.Epsilon != 1.5 {
		t.Fatalf("alice's row = %+v", a)
	}
	if g := infos[0]; g.Charges != 15 || g.Status.Spent.Epsilon != 1.5 {
		t.Fatalf("global row = %+v", g)
	}
	// An analyst with no row yet, named with both filters: zero row.
	infos, err = l.Budgets(ctx, map[string]*policy.Dataset{"hospital": ds}, "hospital", "dave")
	if err != nil || len(infos) != 1 || infos[0].Analyst != "dave" || infos[0].Status.Spent != (accountant.Spent{}) || infos[0].Status.Limit.Epsilon != 1 {
		t.Fatalf("Budgets(dave) = %+v, %v", infos, err)
	}
}

func TestLedger_ResetKeepsChargesAndVerifies(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	l := openLedger(t, dsn)
	ctx := context.Background()
	ds := testPolicy("hospital", 1, 1e-6, policy.AccountantRDP)
	a := charge("alice", ds, laplace(0.3))
	b := charge("bob", ds, laplace(0.2))
	reserveN(t, l, a, 3)
	reserveN(t, l, b, 2)
	if _, err := l.Reset(ctx, ds, "carol", "steward@test"); !errors.Is(err, ErrNoBudget) {
		t.Fatalf("Reset of an analyst without a row: %v, want ErrNoBudget", err)
	}
	before, err := l.Reset(ctx, ds, "alice", "steward@test")
	if err != nil {
		t.Fatal(err)
	}
	if before.Spent.Epsilon <= 0.3 || before.Spent.Epsilon > 0.9 {
		t.Fatalf("status before reset = %+v, want rdp spending of 3 × 0.3 in (0.3, 0.9]", before)
	}
	if st, _ := l.Status(ctx, "alice", ds); st.Spent != (accountant.Spent{}) {
		t.Fatalf("alice after reset = %+v, want nothing spent", st)
	}
	if n := queryOne[int64](t, dsn, `SELECT count(*) FROM dpproxy_ledger.charge WHERE analyst = 'alice'`); n != 3 {
		t.Fatalf("%d charge rows of alice after reset, want the 3 kept", n)
	}
	if s := queryOne[string](t, dsn, `SELECT action || ' ' || before_charges || ' ' || (before_state->>'events') || ' ' || last_charge_id
		FROM dpproxy_ledger.audit WHERE analyst = 'alice'`); s != "reset 3 3 3" {
		t.Fatalf("reset audit row = %q, want reset with 3 charges before, last charge id 3", s)
	}
	// The global row still counts alice's charges.
	infos, err := l.Budgets(ctx, map[string]*policy.Dataset{"hospital": ds}, "hospital", "")
	if err != nil || infos[0].Analyst != "" || infos[0].Charges != 5 {
		t.Fatalf("Budgets after reset = %+v, %v; want the global row with 5 charges", infos, err)
	}
	wantClean(t, l, 3, 5)
	// Alice charges again from zero; verify replays only the new charges.
	reserveN(t, l, a, 3)
	wantClean(t, l, 3, 8)

	// Tampering is caught: each of these is a mismatch.
	tamper := []struct{ name, sql, want string }{
		{"spent", `UPDATE dpproxy_ledger.budget SET spent_epsilon = spent_epsilon - 0.1 WHERE analyst = 'bob'`, "hospital/bob: spent ε"},
		{"count", `UPDATE dpproxy_ledger.budget SET charges = charges + 1 WHERE analyst = 'alice'`, "hospital/alice: 4 charges recorded"},
		{"state", `UPDATE dpproxy_ledger.budget SET state = jsonb_set(state, '{basic_epsilon}', '"0.1"') WHERE analyst = ''`, "hospital (global): composition state differs"},
		{"deleted charge", `DELETE FROM dpproxy_ledger.charge WHERE id = (SELECT max(id) FROM dpproxy_ledger.charge WHERE analyst = 'bob')`, "hospital/bob: 2 charges recorded on the budget row, 1 in the ledger"},
	}
	for _, tc := range tamper {
		t.Run(tc.name, func(t *testing.T) {
			db := connectDB(t, dsn)
			tx, err := db.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, tc.sql); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			rep := mustVerify(t, l)
			if rep.OK() || !strings.Contains(strings.Join(rep.Mismatches, "\n"), tc.want) {
				t.Fatalf("Verify after tampering with %s: %q, want a mismatch %q", tc.name, rep.Mismatches, tc.want)
			}
		})
	}
}

func TestLedger_VerifyAcrossMethodsAndReserved(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	l := openLedger(t, dsn)
	ctx := context.Background()
	ds := testPolicy("d", 50, 1e-5, policy.AccountantPLD)
	ds.Budget.GlobalEpsilon = 100
	g := accountant.Event{Mechanism: policy.MechanismGaussian, Epsilon: 1, Delta: 1e-7, NoiseMultiplier: 5}
	var released []int64
	for i, m := range []string{policy.AccountantPLD, policy.AccountantRDP, policy.AccountantZCDP, policy.AccountantAdvanced, policy.AccountantPure, policy.AccountantPLD} {
		ds.Budget.Accountant = m
		for j := 0; j < 3; j++ {
			res, err := l.Reserve(ctx, charge("alice", ds, laplace(0.1), g))
			if err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			if (i+j)%2 == 0 {
				if err := l.Release(ctx, res, []byte(`{}`)); err != nil {
					t.Fatal(err)
				}
				released = append(released, res.ID)
			}
		}
	}
	rep := wantClean(t, l, 2, 18)
	if len(rep.Reserved) != 18-len(released) {
		t.Fatalf("%d reserved charges reported, want %d", len(rep.Reserved), 18-len(released))
	}
	for _, r := range rep.Reserved {
		for _, id := range released {
			if r.ID == id {
				t.Fatalf("released charge %d reported as reserved", id)
			}
		}
		if r.Analyst != "alice" || r.Dataset != "d" || r.Cost.Epsilon < 0 {
			t.Fatalf("reserved charge = %+v", r)
		}
	}
}

// Grants and resets take the budget row FOR UPDATE: run against concurrent
// charges, the ledger still verifies and nothing is charged beyond the
// limit in force.
func TestLedger_AdminConcurrentWithReserve(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	l := openLedger(t, dsn)
	ctx := context.Background()
	ds := testPolicy("hospital", 1, 1e-6, policy.AccountantPure)
	c := charge("alice", ds, laplace(0.1))
	var wg sync.WaitGroup
	var mu sync.Mutex
	charged := 0
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				_, err := l.Reserve(ctx, c)
				var pe *pgerr.Error
				switch {
				case err == nil:
					mu.Lock()
					charged++
					mu.Unlock()
				case errors.As(err, &pe) && errors.Is(err, accountant.ErrBudgetExhausted):
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := 0; i < 3; i++ {
		if _, err := l.Grant(ctx, ds, "alice", accountant.Spent{Epsilon: 0.5}, "steward"); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	// Limit 1 + 3 × 0.5 = 2.5: at most 25 charges of 0.1.
	if charged > 25 {
		t.Fatalf("%d charges of 0.1 against a limit of 2.5", charged)
	}
	wantClean(t, l, 2, charged)
	if _, err := l.Reset(ctx, ds, "alice", "steward"); err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 10; i++ {
			if _, err := l.Reserve(ctx, c); err != nil {
				t.Error(err)
			}
		}
	}()
	if _, err := l.Reset(ctx, ds, "alice", "steward"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	wantClean(t, l, 2, charged+10)
}
