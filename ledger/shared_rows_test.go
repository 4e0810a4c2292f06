package ledger

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// TestReserve_GlobalRowFreeWhileOwnRowsCompose (attack round 68, finding
// 1): while one analyst's charge composes their own rows, which may cost up
// to pld's work bound, it holds no lock another analyst's charge needs.
// mallory's charge is stopped (by the ownRowsLocked hook) with her rows
// locked; alice's charge through another proxy must complete meanwhile.
// Before the fix mallory's transaction had locked the dataset's global row
// first, and alice's charge waited for it until mallory's went on.
func TestReserve_GlobalRowFreeWhileOwnRowsCompose(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	proxyA, proxyB := openLedger(t, dsn), openLedger(t, dsn)
	ctx := context.Background()
	ds := testPolicy("hospital", 3, 1e-6, policy.AccountantPLD)
	ds.Budget.GlobalEpsilon = 30 // a global cap: the global row is evaluated too
	reserveN(t, proxyA, charge("mallory", ds, laplace(0.1)), 1)
	reserveN(t, proxyB, charge("alice", ds, laplace(0.1)), 1)

	paused, resume := make(chan struct{}), make(chan struct{})
	proxyA.ownRowsLocked = func() {
		close(paused)
		<-resume
	}
	malloryDone := make(chan error, 1)
	go func() {
		_, err := proxyA.Reserve(ctx, charge("mallory", ds, laplace(0.1)))
		malloryDone <- err
	}()
	<-paused
	aliceDone := make(chan error, 1)
	go func() {
		_, err := proxyB.Reserve(ctx, charge("alice", ds, laplace(0.1)))
		aliceDone <- err
	}()
	select {
	case err := <-aliceDone:
		if err != nil {
			t.Fatalf("alice's charge: %v", err)
		}
	case <-time.After(60 * time.Second): // a hang, not a timing threshold: alice's charge needs no lock of mallory's
		close(resume)
		t.Fatal("alice's charge waited for mallory's, stopped while it composed her own rows")
	}
	close(resume)
	if err := <-malloryDone; err != nil {
		t.Fatalf("mallory's charge: %v", err)
	}
	wantClean(t, proxyA, 3, 4)
}

// pldTeamPolicy is a pld dataset with a global cap and a team of a and b,
// with a budget window when windowed.
func pldTeamPolicy(t *testing.T, name string, windowed bool) *policy.Dataset {
	t.Helper()
	budget, team := "", ""
	if windowed {
		budget = ", window: 30d, lifetime: {epsilon: 500, delta: 1.0e-4, global_epsilon: 5000}"
		team = ", lifetime_epsilon: 700"
	}
	ds, err := policy.Parse(strings.NewReader(`dataset: `+name+`
privacy_unit: patient
budget: {epsilon: 100, delta: 1.0e-5, accountant: pld, global_epsilon: 1000`+budget+`}
teams:
  cardio: {members: [a, b], epsilon: 150`+team+`}
tables:
  visits:
    unit_column: patient_id
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      age: {type: int, lower: 0, upper: 100}
`), name+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestReserve_SharedRowStateBounded (attack round 68, finding 3): on a pld
// dataset the rows several analysts share (the global row, a team's)
// compose with rdp, so their state does not grow with the number of
// distinct ε values the analysts choose (a pld state keeps one entry per
// value), and Verify recomposes them the same way.
func TestReserve_SharedRowStateBounded(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	l := openLedger(t, dsn)
	ds := pldTeamPolicy(t, "hospital", false)
	stateOf := func(row string) []byte {
		return queryOne[[]byte](t, dsn, `SELECT state FROM dpproxy_ledger.budget WHERE dataset = 'hospital' AND analyst = $1`, row)
	}
	reserveN(t, l, charge("a", ds, accountant.Event{Mechanism: policy.MechanismLaplace, Epsilon: 0.001}), 1)
	first := map[string]int{"": len(stateOf("")), "team:cardio": len(stateOf("team:cardio"))}
	for i := 1; i < 60; i++ {
		analyst := []string{"a", "b", "c"}[i%3]
		reserveN(t, l, charge(analyst, ds, accountant.Event{Mechanism: policy.MechanismLaplace, Epsilon: float64(1000+i) * 1e-6}), 1)
	}
	for row, n := range first {
		if last := len(stateOf(row)); last > 2*n {
			t.Errorf("row %q: its state grew from %d to %d bytes over 60 distinct ε values", row, n, last)
		}
		if acc := queryOne[string](t, dsn, `SELECT accountant FROM dpproxy_ledger.budget WHERE dataset = 'hospital' AND analyst = $1`, row); acc != policy.AccountantRDP {
			t.Errorf("row %q composed with %q, want rdp", row, acc)
		}
	}
	// Each analyst's own row keeps the dataset's method.
	if acc := queryOne[string](t, dsn, `SELECT accountant FROM dpproxy_ledger.budget WHERE dataset = 'hospital' AND analyst = 'a'`); acc != policy.AccountantPLD {
		t.Errorf("analyst row composed with %q, want pld", acc)
	}
	wantClean(t, l, 5, 60)
}

// TestMigration6_RecomposesSharedRows: a pld dataset's global and team
// rows as a build before schema 6 wrote them (composed with pld) are
// recomposed with rdp when this build opens the ledger: Verify is clean,
// an audit row 'migrate' holds each row as it was, the analysts' rows and
// other datasets' rows are untouched, and opening again changes nothing.
func TestMigration6_RecomposesSharedRows(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	l := openLedger(t, dsn)
	d := pldTeamPolicy(t, "d", true)
	z := testPolicy("z", 50, 1e-5, policy.AccountantZCDP)
	reserveN(t, l, charge("a", d, laplace(1), laplace(0.5)), 3)
	reserveN(t, l, charge("b", d, laplace(0.25)), 2)
	reserveN(t, l, charge("c", d, laplace(0.5)), 1)
	reserveN(t, l, charge("carol", z, gaussian(2, 1, 1e-7)), 2)
	wantClean(t, l, 7, 8)
	analystRows := queryOne[string](t, dsn, `SELECT string_agg(analyst || state::text, ';' ORDER BY analyst) FROM dpproxy_ledger.budget
		WHERE analyst <> '' AND analyst NOT LIKE 'team:%'`)

	// Write d's shared rows as the earlier build did: their charges
	// composed with pld.
	was := writeBeforeSchema6(t, l, "d", map[string]int64{"": 6, "team:cardio": 5})
	if rep := mustVerify(t, l); rep.OK() {
		t.Fatal("Verify is clean on shared rows composed with pld: the test would prove nothing")
	}

	l2 := openLedger(t, dsn) // migrates to 6
	wantClean(t, l2, 7, 8)
	for row, st := range was {
		if acc := queryOne[string](t, dsn, `SELECT accountant FROM dpproxy_ledger.budget WHERE dataset = 'd' AND analyst = $1`, row); acc != policy.AccountantRDP {
			t.Errorf("d's row %q composed with %q after the migration, want rdp", row, acc)
		}
		life := queryOne[[]byte](t, dsn, `SELECT lifetime_state FROM dpproxy_ledger.budget WHERE dataset = 'd' AND analyst = $1`, row)
		var lifeMethod struct{ Method string }
		if err := json.Unmarshal(life, &lifeMethod); err != nil || lifeMethod.Method != policy.AccountantRDP {
			t.Errorf("d's row %q: lifetime state composed with %q after the migration (%v), want rdp", row, lifeMethod.Method, err)
		}
		if msg := accountant.LifetimeCovers(life, st); msg != "" {
			t.Errorf("d's row %q: lifetime state %s", row, msg)
		}
		before := queryOne[[]byte](t, dsn, `SELECT before_state FROM dpproxy_ledger.audit WHERE action = 'migrate' AND dataset = 'd' AND analyst = $1`, row)
		if !jsonEqual(t, before, st) {
			t.Errorf("row %q: audit before_state %s, want the row as it was %s", row, before, st)
		}
	}
	if got := queryOne[string](t, dsn, `SELECT string_agg(analyst || state::text, ';' ORDER BY analyst) FROM dpproxy_ledger.budget
		WHERE analyst <> '' AND analyst NOT LIKE 'team:%'`); got != analystRows {
		t.Errorf("analyst rows changed by the migration:\n%s\nwas\n%s", got, analystRows)
	}
	openLedger(t, dsn)
	if n := queryOne[int64](t, dsn, `SELECT count(*) FROM dpproxy_ledger.audit WHERE action = 'migrate'`); n != 2 {
		t.Errorf("%d migrate audit rows after a second open, want 2", n)
	}
	// Charging goes on from the recomposed rows.
	reserveN(t, l2, charge("b", d, laplace(0.25)), 1)
	wantClean(t, l2, 7, 9)
}

// writeBeforeSchema6 rewrites the shared rows of dataset (with the number
// of charges each must compose, -1: any) as a build before ledger schema 6 wrote
// them, the charges composed with the method recorded on each, state and
// lifetime state, and forgets schema 6, so the next Open migrates again.
// It returns the states written.
func writeBeforeSchema6(t *testing.T, l *Ledger, dataset string, rows map[string]int64) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	was := map[string][]byte{}
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		cs, err := loadCharges(ctx, tx)
		if err != nil {
			return err
		}
		for row, charges := range rows {
			st, n, errs := cs.compose(dataset, row, cs.resets, accountant.MethodByName)
			life, _, lerrs := cs.compose(dataset, row, cs.fullResets, accountant.MethodByName)
			if len(errs)+len(lerrs) > 0 || (charges >= 0 && n != charges) {
				t.Fatalf("compose %q: %v %v, %d charges, want %d", row, errs, lerrs, n, charges)
			}
			was[row] = st
			if _, err := tx.Exec(ctx, `UPDATE dpproxy_ledger.budget SET accountant = 'pld', state = $3, lifetime_state = $4
				WHERE dataset = $1 AND analyst = $2`, dataset, row, st, life); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `DELETE FROM dpproxy_ledger.schema_version WHERE version >= 6`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return was
}
