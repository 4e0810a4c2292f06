// Ledger-critical: needs review of the reserve-before-read protocol (ledger/doc.go).

package ledger

import (
	"context"
	"fmt"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// recomposeSharedRows is schema 6's data step. Builds before it composed
// the rows several analysts share (a dataset's global row, a team's) with
// the dataset's method; this one composes them with
// accountant.SharedMethodName's (rdp for pld), whose state is a fixed set
// of sums. The step recomposes each shared row whose recorded method maps
// to another from its charges, as Reserve and Verify now do: the window
// state from the charges after the row's last reset or renewal, the
// lifetime state from every charge since its last reset (a superset of
// what it held). Each rewritten row
// gets an audit row 'migrate' holding the row as it was; its spending is
// re-evaluated at its stored limits (the lifetime spending is rewritten by
// its next charge). Rows whose charges do not compose are left for
// `dpproxy ledger verify` to report.
//
// It runs in the migration's transaction under the migration lock, and a
// build before schema 6 refuses a ledger at schema 6 (migrate): stop
// proxies of an earlier build before starting this one.
func recomposeSharedRows(ctx context.Context, tx pgx.Tx, logger *zap.Logger) error {
	if _, err := tx.Exec(ctx, `LOCK TABLE dpproxy_ledger.budget, dpproxy_ledger.charge IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return err
	}
	cs, err := loadCharges(ctx, tx)
	if err != nil {
		return err
	}
	budgets, err := loadBudgets(ctx, tx)
	if err != nil {
		return err
	}
	rewritten := 0
	for _, r := range budgets {
		name := accountant.SharedMethodName(r.accountant)
		if !isShared(r.analyst) || name == r.accountant {
			continue
		}
		state, n, errs := cs.compose(r.dataset, r.analyst, cs.resets, sharedMethodByName)
		lifetime := r.lifetime
		if lifetime != nil {
			var lerrs []string
			lifetime, _, lerrs = cs.compose(r.dataset, r.analyst, cs.fullResets, sharedMethodByName)
			errs = append(errs, lerrs...)
		}
		if len(errs) > 0 {
			logger.Warn("shared budget row not recomposed: its charges do not compose; run dpproxy ledger verify",
				zap.String(logKeyDataset, r.dataset), zap.String(logKeyAnalyst, r.analyst), zap.String("error", errs[0]))
			continue
		}
		m, err := accountant.MethodByName(name)
		if err != nil {
			return fmt.Errorf("budget %s/%s: %w", r.dataset, r.analyst, err)
		}
		spent, err := r.spentOf(m, state, n)
		if err != nil {
			return fmt.Errorf("budget %s/%s: %w", r.dataset, r.analyst, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO dpproxy_ledger.audit (actor, action, dataset, analyst,
				before_spent_epsilon, before_spent_delta, before_charges, before_granted_epsilon, before_granted_delta, before_state, last_charge_id)
			SELECT 'dpproxy ledger migration 6', 'migrate', dataset, analyst, spent_epsilon, spent_delta, charges,
				granted_epsilon, granted_delta, state, (SELECT coalesce(max(id), 0) FROM dpproxy_ledger.charge)
			FROM dpproxy_ledger.budget WHERE dataset = $1 AND analyst = $2`, r.dataset, r.analyst); err != nil {
			return err
		}
		var life any
		if lifetime != nil {
			life = stateOrEmpty(lifetime)
		}
		if _, err := tx.Exec(ctx, `UPDATE dpproxy_ledger.budget SET accountant = $3, state = $4, lifetime_state = $5,
				spent_epsilon = $6::numeric, spent_delta = $7::numeric, updated_at = now()
			WHERE dataset = $1 AND analyst = $2`, r.dataset, r.analyst, name, stateOrEmpty(state), life, spent[0], spent[1]); err != nil {
			return err
		}
		rewritten++
	}
	if rewritten > 0 {
		logger.Info("shared budget rows recomposed with a fixed-size state (ledger schema 6)", zap.Int("rows", rewritten))
	}
	return nil
}
