package ledger

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// TestMigration5_RechargesRDPLaplace: rdp rows as a build before schema 5
// wrote them (Laplace composed as continuous, below the discrete
// sampler's loss) are recharged when this build opens the ledger: their
// state becomes the recomposition of their charges (Verify is clean), their
// spending rises, a lifetime state never drops, each rewritten row has an
// audit row 'migrate' holding the row as it was, rows of other methods
// and rows without Laplace releases are untouched, and opening again
// changes nothing.
func TestMigration5_RechargesRDPLaplace(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	l := openLedger(t, dsn)
	ctx := context.Background()
	d := testPolicy("d", 50, 1e-5, policy.AccountantRDP)
	d.Budget.Window = 30 * 24 * time.Hour // lifetime states too
	d.Budget.Lifetime = policy.Lifetime{Epsilon: 500, Delta: 1e-4}
	g := testPolicy("g", 50, 1e-5, policy.AccountantRDP)
	p := testPolicy("p", 50, 1e-5, policy.AccountantPure)
	reserveN(t, l, charge("alice", d, laplace(1), laplace(0.5)), 6)
	if _, err := l.Reset(ctx, d, "alice", "steward"); err != nil {
		t.Fatal(err)
	}
	reserveN(t, l, charge("alice", d, laplace(1)), 4)
	reserveN(t, l, charge("bob", g, gaussian(2, 1, 1e-7)), 3) // no Laplace: unchanged
	reserveN(t, l, charge("carol", p, laplace(1)), 2)         // pure: unchanged
	wantClean(t, l, 6, 15)

	// Write every rdp row as the earlier build would have: its charges
	// composed by RDPBeforeSchema5, the lifetime over all of the row's
	// charges, the spending at the stored limits.
	type before struct {
		state, lifetime []byte
		spent           [2]string
	}
	was := map[[2]string]before{}
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		cs, err := loadCharges(ctx, tx)
		if err != nil {
			return err
		}
		budgets, err := loadBudgets(ctx, tx)
		if err != nil {
			return err
		}
		earlierOf := methodBeforeSchema5
		for _, r := range budgets {
			st, n, errs := cs.compose(r.dataset, r.analyst, cs.resets, earlierOf)
			if len(errs) > 0 {
				t.Fatalf("%v", errs)
			}
			life := r.lifetime
			if life != nil {
				life, _, _ = cs.compose(r.dataset, r.analyst, map[[2]string]int64{}, earlierOf)
			}
			m, _ := earlierOf(r.accountant)
			spent, err := r.spentOf(m, st, n)
			if err != nil {
				return err
			}
			was[[2]string{r.dataset, r.analyst}] = before{st, life, spent}
			if _, err := tx.Exec(ctx, `UPDATE dpproxy_ledger.budget SET state = $3, lifetime_state = $4, spent_epsilon = $5::numeric, spent_delta = $6::numeric
				WHERE dataset = $1 AND analyst = $2`, r.dataset, r.analyst, st, life, spent[0], spent[1]); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `DELETE FROM dpproxy_ledger.schema_version WHERE version >= 5`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	alice := was[[2]string{"d", "alice"}].spent[0]
	rep := mustVerify(t, l)
	if rep.OK() {
		t.Fatal("Verify is clean on rows written with the continuous Laplace: the test would prove nothing")
	}

	l2 := openLedger(t, dsn) // migrates to 5
	wantClean(t, l2, 6, 15)
	after := queryOne[string](t, dsn, `SELECT spent_epsilon::text FROM dpproxy_ledger.budget WHERE dataset = 'd' AND analyst = 'alice'`)
	if !(parseF(t, after) > parseF(t, alice)) {
		t.Errorf("alice's ε after migration %s, before %s: want it to rise", after, alice)
	}
	// The lifetime state holds every charge (10 of them on alice's row):
	// its ε at δ 1e-5 is at least the recomposition's of all of them.
	lifeAfter := queryOne[[]byte](t, dsn, `SELECT lifetime_state FROM dpproxy_ledger.budget WHERE dataset = 'd' AND analyst = 'alice'`)
	rdp, _ := accountant.MethodByName(policy.AccountantRDP)
	var all []accountant.Event
	for i := 0; i < 6; i++ {
		all = append(all, laplace(1), laplace(0.5))
	}
	for i := 0; i < 4; i++ {
		all = append(all, laplace(1))
	}
	want, _ := rdp.Compose(nil, all)
	gotE, _ := rdp.Spent(lifeAfter, 1e-5)
	wantE, _ := rdp.Spent(want, 1e-5)
	if gotE.Epsilon < wantE.Epsilon*(1-1e-12) {
		t.Errorf("alice's lifetime ε after migration %v, below the recomposition of every charge %v", gotE.Epsilon, wantE.Epsilon)
	}
	type audit struct {
		dataset, analyst string
		state            []byte
	}
	rows, err := l2.pool.Query(ctx, `SELECT dataset, analyst, before_state FROM dpproxy_ledger.audit WHERE action = 'migrate' ORDER BY dataset, analyst`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (audit, error) {
		var a audit
		return a, r.Scan(&a.dataset, &a.analyst, &a.state)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].dataset != "d" || got[0].analyst != "" || got[1].analyst != "alice" {
		t.Fatalf("migrate audit rows %+v, want d's global row and d/alice only", got)
	}
	if !jsonEqual(t, got[1].state, was[[2]string{"d", "alice"}].state) {
		t.Errorf("audit before_state %s, want the row as it was %s", got[1].state, was[[2]string{"d", "alice"}].state)
	}

	// Opening again (schema 5 in place) rewrites nothing.
	openLedger(t, dsn)
	if n := queryOne[int64](t, dsn, `SELECT count(*) FROM dpproxy_ledger.audit WHERE action = 'migrate'`); n != 2 {
		t.Errorf("%d migrate audit rows after a second open, want 2", n)
	}
}

func parseF(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
