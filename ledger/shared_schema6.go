// Ledger-critical: needs review of the reserve-before-read protocol (ledger/doc.go).

package ledger

import (
	"context"

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
	cs, budgets, err := lockAndLoad(ctx, tx)
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
		var life []byte
		if lifetime != nil {
			life = stateOrEmpty(lifetime)
		}
		if err := rewriteRow(ctx, tx, 6, r, name, stateOrEmpty(state), life, n); err != nil {
			return err
		}
		rewritten++
	}
	if rewritten > 0 {
		logger.Info("shared budget rows recomposed with a fixed-size state (ledger schema 6)", zap.Int("rows", rewritten))
	}
	return nil
}
