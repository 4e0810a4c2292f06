// Ledger-critical: needs review of the reserve-before-read protocol (ledger/doc.go).

package ledger

import (
	"bytes"
	"context"
	"fmt"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// rechargeRDPLaplace is schema 5's data step. Builds before it composed a
// Laplace release in the rdp accountant as continuous Laplace, below the
// discrete sampler's loss (randomized response's, accountant/rdp.go) by
// up to a third at some orders: their rdp states understate what was
// spent. The step recomposes each budget row from its charges twice, as
// those builds did and as this one does, and stores
// accountant.RDPCatchUp of the two: the recomposition itself when the
// row matches its charges, else the row plus the difference. A lifetime
// state (windows) outlives resets and renewals and may start with a row's
// state from before its first window, so its difference is taken over
// every charge of the row, a superset of its own: never less than it
// holds. The row's spending is re-evaluated at its stored limits, as
// Reserve writes it (the lifetime spending is rewritten by its next
// charge), and every rewritten row gets an audit row 'migrate' holding
// the row as it was. Rows of other methods are not touched; rows whose
// charges do not compose are left for `dpproxy ledger verify` to report.
//
// The step holds the migration lock and runs in the migration's
// transaction, and a build before schema 5 refuses a ledger at schema 5
// (migrate), so no earlier build charges an rdp row after it. Proxies of
// an earlier build already running keep their open ledgers: stop them
// before starting this build.
func rechargeRDPLaplace(ctx context.Context, tx pgx.Tx, logger *zap.Logger) error {
	cs, budgets, err := lockAndLoad(ctx, tx)
	if err != nil {
		return err
	}
	everything := map[[2]string]int64{}
	rewritten := 0
	for _, r := range budgets {
		state, err := recharged(cs, r, r.state, cs.resets, methodBeforeSchema5)
		if err != nil {
			logger.Warn("rdp budget row not recharged: its charges do not compose; run dpproxy ledger verify",
				zap.String(logKeyDataset, r.dataset), zap.String(logKeyAnalyst, r.analyst), zap.Error(err))
			continue
		}
		lifetime := r.lifetime
		if lifetime != nil {
			if lifetime, err = recharged(cs, r, r.lifetime, everything, methodBeforeSchema5); err != nil {
				logger.Warn("rdp lifetime state not recharged: its charges do not compose; run dpproxy ledger verify",
					zap.String(logKeyDataset, r.dataset), zap.String(logKeyAnalyst, r.analyst), zap.Error(err))
				continue
			}
		}
		if bytes.Equal(state, r.state) && bytes.Equal(lifetime, r.lifetime) {
			continue
		}
		if err := rewriteRow(ctx, tx, 5, r, r.accountant, state, lifetime, r.charges); err != nil {
			return err
		}
		rewritten++
	}
	if rewritten > 0 {
		logger.Info("rdp budget rows recharged with the discrete Laplace's loss (ledger schema 5)", zap.Int("rows", rewritten))
	}
	return nil
}

// recharged is RDPCatchUp of one stored state against the row's charges
// after resets, composed as earlier builds did and as this one does.
func recharged(cs *chargeSet, r budgetRecord, stored []byte, resets map[[2]string]int64, earlierOf func(string) (accountant.Method, error)) ([]byte, error) {
	earlier, _, errs := cs.compose(r.dataset, r.analyst, resets, earlierOf)
	now, _, errs2 := cs.compose(r.dataset, r.analyst, resets, accountant.MethodByName)
	if errs = append(errs, errs2...); len(errs) > 0 {
		return nil, fmt.Errorf("%s", errs[0])
	}
	return accountant.RDPCatchUp(stored, earlier, now)
}

// methodBeforeSchema5 is the method a build before schema 5 composed a
// charge recorded with name by.
func methodBeforeSchema5(name string) (accountant.Method, error) {
	if name == policy.AccountantRDP {
		return accountant.RDPBeforeSchema5(), nil
	}
	return accountant.MethodByName(name)
}
