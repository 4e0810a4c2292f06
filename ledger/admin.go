// Ledger-critical: needs review of the reserve-before-read protocol (ledger/doc.go).

package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Steward operations on the ledger (dpproxy budget show|grant|reset, dpproxy
// ledger verify).
//
// A grant adds to one analyst's limit on one dataset on top of the policy's
// (budget.epsilon/delta or the analyst's override): the effective limit that
// Reserve and Status use is policy + Σ grants, added in exact decimal. A
// reset sets the analyst's spending, composition state and charge count back
// to zero; it keeps the grants and the charge rows (the ledger never deletes
// a charge), does not touch the dataset's global row (the cap across
// analysts still counts everything), and records the id of the analyst's
// last charge so that [Ledger.Verify] recomputes the row from the charges
// after it. Both write an audit row (who, when, what, the values before)
// in the same transaction, under SELECT … FOR UPDATE of the budget row, so
// they serialise with concurrent Reserve calls.

// BudgetInfo is one budget row as a data steward sees it.
type BudgetInfo struct {
	Dataset string
	// Analyst is "" for the dataset's global row (the cap across analysts).
	Analyst string
	// Status: Limit is the policy's limit plus grants (+Inf: no cap), Spent
	// the composed spending at Limit.Delta. For the global row without a
	// cap, Spent is the exact basic sum.
	Status   accountant.Status
	Granted  accountant.Spent
	Charges  int64 // charges since the last reset
	Reserved int64 // charges still "reserved": charged, answer never recorded
	// Incidents since the last resume, and whether the analyst is
	// suspended (incident.go).
	Incidents int
	Suspended bool
}

// ledgerError maps a database failure of a steward operation.
func (l *Ledger) ledgerError(ctx context.Context, err error) error {
	var pe *pgerr.Error
	if errors.As(err, &pe) {
		return err
	}
	if ctx.Err() != nil {
		return pgerr.New(pgerr.QueryCanceled, "canceling statement due to user request").Wrap(ctx.Err())
	}
	return unavailable(redact(err))
}

// Budgets lists the budget rows, optionally only of one dataset and/or
// analyst ("" for all), sorted by dataset and analyst (the global row
// first). Limits and methods come from policies (by dataset name); a dataset
// without a policy there shows the limits stored at its last charge. If both
// filters are set and the analyst has no row yet, a zero row with the
// policy's limits is returned.
func (l *Ledger) Budgets(ctx context.Context, policies map[string]*policy.Dataset, dataset, analyst string) ([]BudgetInfo, error) {
	rows, err := l.pool.Query(ctx, `SELECT b.dataset, b.analyst, b.accountant, b.limit_epsilon, b.limit_delta,
			b.spent_epsilon::float8, b.spent_delta::float8, b.charges, b.state, b.granted_epsilon::text, b.granted_delta::text,
			(SELECT count(*) FROM dpproxy_ledger.charge c WHERE c.dataset = b.dataset AND c.status = 'reserved'
				AND (b.analyst = '' OR c.analyst = b.analyst)),
			b.incidents, b.suspended_at IS NOT NULL, b.window_start, b.lifetime_state
		FROM dpproxy_ledger.budget b
		WHERE ($1 = '' OR b.dataset = $1) AND ($2 = '' OR b.analyst = $2)
		ORDER BY b.dataset, b.analyst`, dataset, analyst)
	if err != nil {
		return nil, l.ledgerError(ctx, err)
	}
	defer rows.Close()
	var out []BudgetInfo
	for rows.Next() {
		var b BudgetInfo
		var acc string
		var le, ld *float64
		var stored accountant.Spent
		var state []byte
		var granted [2]string
		var ws *time.Time
		var life []byte
		if err := rows.Scan(&b.Dataset, &b.Analyst, &acc, &le, &ld, &stored.Epsilon, &stored.Delta, &b.Charges, &state,
			&granted[0], &granted[1], &b.Reserved, &b.Incidents, &b.Suspended, &ws, &life); err != nil {
			return nil, l.ledgerError(ctx, err)
		}
		if b.Granted, err = accountant.WithGrants(accountant.Spent{}, granted); err != nil {
			return nil, err
		}
		ds := policies[b.Dataset]
		// A steward's own budget (policy init's quantiles) has its own
		// limit and method, stored at its charges, never the policy's.
		steward := strings.HasPrefix(b.Analyst, policy.StewardLedgerPrefix)
		if ds != nil && !steward {
			acc = rowMethodName(ds.Budget.Accountant, b.Analyst)
		}
		m, err := accountant.MethodByName(acc)
		if err != nil {
			return nil, fmt.Errorf("accountant: budget %s/%s: %w", b.Dataset, b.Analyst, err)
		}
		b.Status = accountant.Status{Dataset: b.Dataset, Accountant: m.Name()}
		var lim accountant.RowLimits
		switch {
		case steward:
			b.Status.Limit = storedLimit(le, ld)
		case b.Analyst == accountant.GlobalAnalyst && ds != nil:
			lim = accountant.LimitsFor(ds, "\x00none")[0]
			b.Status.Limit = lim.Window
		case ds != nil && strings.HasPrefix(b.Analyst, policy.TeamLedgerPrefix):
			t := ds.Teams[strings.TrimPrefix(b.Analyst, policy.TeamLedgerPrefix)]
			if t == nil {
				// A team no longer in the policy: its stored limits.
				b.Status.Limit = storedLimit(le, ld)
				lim = accountant.RowLimits{Kind: accountant.RowTeam, Name: b.Analyst, Window: b.Status.Limit, Lifetime: noCap()}
				break
			}
			lim = accountant.LimitsFor(ds, t.Members[0])[2]
			if b.Status.Limit, err = accountant.WithGrants(lim.Window, granted); err != nil {
				return nil, err
			}
		case ds != nil:
			lim = accountant.LimitsFor(ds, b.Analyst)[1]
			if b.Status.Limit, err = accountant.WithGrants(lim.Window, granted); err != nil {
				return nil, err
			}
		default:
			b.Status.Limit = storedLimit(le, ld)
		}
		switch {
		case ds != nil && ds.Budget.Window > 0 && !steward:
			if err := l.windowed(&b.Status, m, ds, lim, ws, state, life); err != nil {
				return nil, err
			}
			if b.Analyst == accountant.GlobalAnalyst && !accountant.HasCap(b.Status.Limit) {
				if _, renew := accountant.WindowOf(derefTime(ws), l.clock(), ds.Budget.Window); !renew {
					b.Status.Spent = stored
				}
			}
		case b.Analyst == accountant.GlobalAnalyst && !accountant.HasCap(b.Status.Limit):
			b.Status.Spent = stored
		default:
			if b.Status.Spent, err = m.Spent(state, b.Status.Limit.Delta); err != nil {
				return nil, err
			}
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, l.ledgerError(ctx, err)
	}
	if dataset != "" && analyst != "" {
		found := false
		for _, b := range out {
			found = found || b.Analyst == analyst
		}
		if ds := policies[dataset]; !found && ds != nil {
			st, err := l.Status(ctx, analyst, ds)
			if err != nil {
				return nil, err
			}
			out = append(out, BudgetInfo{Dataset: dataset, Analyst: analyst, Status: st})
		}
	}
	return out, nil
}

// noCap is a limit of +Inf on both coordinates (no cap).
func noCap() accountant.Spent { return accountant.Spent{Epsilon: math.Inf(1), Delta: math.Inf(1)} }

// storedLimit is the limit stored on a budget row (NULL: no cap).
func storedLimit(le, ld *float64) accountant.Spent {
	l := noCap()
	if le != nil {
		l.Epsilon = *le
	}
	if ld != nil {
		l.Delta = *ld
	}
	return l
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// lockForAdmin creates the analyst's budget row if missing and locks it
// FOR UPDATE; it returns the values an audit row records.
type adminRow struct {
	spent   [2]string
	charges int64
	granted [2]string
	state   []byte
}

func lockForAdmin(ctx context.Context, tx pgx.Tx, ds *policy.Dataset, analyst string, create bool) (adminRow, bool, error) {
	var r adminRow
	if create {
		m, err := accountant.MethodByName(rowMethodName(ds.Budget.Accountant, analyst))
		if err != nil {
			return r, false, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO dpproxy_ledger.budget (dataset, analyst, accountant) VALUES ($1, $2, $3)
			ON CONFLICT (dataset, analyst) DO NOTHING`, ds.Name, analyst, m.Name()); err != nil {
			return r, false, err
		}
	}
	err := tx.QueryRow(ctx, `SELECT spent_epsilon::text, spent_delta::text, charges, granted_epsilon::text, granted_delta::text, state
		FROM dpproxy_ledger.budget WHERE dataset = $1 AND analyst = $2 FOR UPDATE`, ds.Name, analyst).
		Scan(&r.spent[0], &r.spent[1], &r.charges, &r.granted[0], &r.granted[1], &r.state)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

func checkAdmin(ds *policy.Dataset, analyst, actor string) error {
	switch {
	case ds == nil:
		return errors.New("accountant: no policy for the dataset")
	case analyst == accountant.GlobalAnalyst:
		return errors.New("accountant: name an analyst")
	case actor == "":
		return errors.New("accountant: the audit row needs an actor (who runs the command)")
	}
	if _, err := accountant.MethodByName(ds.Budget.Accountant); err != nil {
		return fmt.Errorf("accountant: policy of %s: %w", ds.Name, err)
	}
	return nil
}

// chargesOfRow is the SQL condition selecting the charges of the budget row
// named by the parameter $n (an analyst, or "team:T": the charges made by
// members of T), for audit rows' last_charge_id.
func chargesOfRow(n string) string {
	return "(analyst = $" + n + " OR ($" + n + " LIKE 'team:%' AND team = substr($" + n + ", 6)))"
}

// Grant adds (epsilon, delta) to the analyst's limit on the dataset, on top
// of the policy's, and writes an audit row; it returns the budget after the
// grant. The amounts must be finite and ≥ 0, not both zero, and the
// resulting δ limit must stay below 1. actor names who granted (for the
// audit row).
func (l *Ledger) Grant(ctx context.Context, ds *policy.Dataset, analyst string, add accountant.Spent, actor string) (accountant.Status, error) {
	if err := checkAdmin(ds, analyst, actor); err != nil {
		return accountant.Status{}, err
	}
	if math.IsNaN(add.Epsilon) || math.IsInf(add.Epsilon, 0) || add.Epsilon < 0 ||
		math.IsNaN(add.Delta) || math.IsInf(add.Delta, 0) || add.Delta < 0 || (add.Epsilon == 0 && add.Delta == 0) {
		return accountant.Status{}, fmt.Errorf("accountant: grant ε=%v, δ=%v: both must be finite and ≥ 0, and not both zero", add.Epsilon, add.Delta)
	}
	own, ok := accountant.OwnLimits(ds, analyst)
	if !ok {
		return accountant.Status{}, fmt.Errorf("accountant: %s names no team of the policy of %s", analyst, ds.Name)
	}
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		r, _, err := lockForAdmin(ctx, tx, ds, analyst, true)
		if err != nil {
			return err
		}
		after, err := accountant.WithGrants(own.Window, r.granted)
		if err == nil {
			after, err = accountant.WithGrants(after, [2]string{accountant.DecimalText(add.Epsilon), accountant.DecimalText(add.Delta)})
		}
		if err != nil {
			return err
		}
		if after.Delta >= 1 && !math.IsInf(after.Delta, 1) {
			return refused("accountant: the grant would take %s's δ limit on %s to %v; it must stay below 1", analyst, ds.Name, after.Delta)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO dpproxy_ledger.audit (actor, action, dataset, analyst, epsilon, delta,
				before_spent_epsilon, before_spent_delta, before_charges, before_granted_epsilon, before_granted_delta, before_state, last_charge_id)
			VALUES ($1, 'grant', $2, $3, $4::numeric, $5::numeric, $6::numeric, $7::numeric, $8, $9::numeric, $10::numeric, $11,
				(SELECT coalesce(max(id), 0) FROM dpproxy_ledger.charge WHERE dataset = $2 AND `+chargesOfRow("3")+`))`,
			actor, ds.Name, analyst, accountant.DecimalText(add.Epsilon), accountant.DecimalText(add.Delta), r.spent[0], r.spent[1], r.charges,
			r.granted[0], r.granted[1], stateOrEmpty(r.state)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE dpproxy_ledger.budget SET granted_epsilon = granted_epsilon + $3::numeric,
			granted_delta = granted_delta + $4::numeric, updated_at = now() WHERE dataset = $1 AND analyst = $2`,
			ds.Name, analyst, accountant.DecimalText(add.Epsilon), accountant.DecimalText(add.Delta))
		return err
	})
	if err != nil {
		return accountant.Status{}, l.adminResult(ctx, err)
	}
	l.logger.Info("privacy budget granted", zap.String(logKeyAnalyst, analyst), zap.String(logKeyDataset, ds.Name),
		zap.Float64(logKeyEpsilon, add.Epsilon), zap.Float64(logKeyDelta, add.Delta), zap.String("actor", actor))
	return l.Status(ctx, analyst, ds)
}

// ErrNoBudget is returned by Reset when the analyst has no budget row on
// the dataset (nothing was ever spent).
var ErrNoBudget = errors.New("no budget row")

// Reset sets the analyst's spending on the dataset back to zero and writes
// an audit row with the values before; it returns the status before the
// reset. Charge rows are kept; see the notes at the top of this file.
func (l *Ledger) Reset(ctx context.Context, ds *policy.Dataset, analyst, actor string) (accountant.Status, error) {
	if err := checkAdmin(ds, analyst, actor); err != nil {
		return accountant.Status{}, err
	}
	before, err := l.Status(ctx, analyst, ds)
	if err != nil {
		return accountant.Status{}, err
	}
	err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		r, ok, err := lockForAdmin(ctx, tx, ds, analyst, false)
		if err != nil {
			return err
		}
		if !ok {
			return refused("accountant: %s has no budget on %s (nothing spent): %w", analyst, ds.Name, ErrNoBudget)
		}
		// Status read above without the lock; read the state again under it.
		m, err := accountant.MethodByName(rowMethodName(ds.Budget.Accountant, analyst))
		if err != nil {
			return err
		}
		if before.Spent, err = m.Spent(r.state, before.Limit.Delta); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO dpproxy_ledger.audit (actor, action, dataset, analyst,
				before_spent_epsilon, before_spent_delta, before_charges, before_granted_epsilon, before_granted_delta, before_state, last_charge_id)
			VALUES ($1, 'reset', $2, $3, $4::numeric, $5::numeric, $6, $7::numeric, $8::numeric, $9,
				(SELECT coalesce(max(id), 0) FROM dpproxy_ledger.charge WHERE dataset = $2 AND `+chargesOfRow("3")+`))`,
			actor, ds.Name, analyst, r.spent[0], r.spent[1], r.charges, r.granted[0], r.granted[1], stateOrEmpty(r.state)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE dpproxy_ledger.budget SET spent_epsilon = 0, spent_delta = 0, state = '{}', charges = 0,
			updated_at = now() WHERE dataset = $1 AND analyst = $2`, ds.Name, analyst)
		return err
	})
	if err != nil {
		return accountant.Status{}, l.adminResult(ctx, err)
	}
	l.logger.Info("privacy budget reset", zap.String(logKeyAnalyst, analyst), zap.String(logKeyDataset, ds.Name),
		zap.Float64("before_epsilon", before.Spent.Epsilon), zap.Float64("before_delta", before.Spent.Delta), zap.String("actor", actor))
	return before, nil
}

func stateOrEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}

// adminError is a refusal of a steward operation (bad amount, no row), as
// opposed to a database failure.
type adminError struct{ err error }

func (e adminError) Error() string { return e.err.Error() }
func (e adminError) Unwrap() error { return e.err }

func refused(format string, args ...any) error { return adminError{fmt.Errorf(format, args...)} }

// adminResult maps the error of a steward transaction.
func (l *Ledger) adminResult(ctx context.Context, err error) error {
	var ae adminError
	if errors.As(err, &ae) {
		return ae.err
	}
	return l.ledgerError(ctx, err)
}

// ReservedCharge is a charge whose answer was never recorded: the query was
// sent (or about to be sent) upstream and the proxy failed, was cancelled or
// crashed before releasing. It stays charged (nothing is refunded).
type ReservedCharge struct {
	ID        int64
	Dataset   string
	Analyst   string
	CreatedAt time.Time
	Cost      accountant.Spent
}

// VerifyReport is the result of [Ledger.Verify].
type VerifyReport struct {
	Budgets    int
	Charges    int
	Mismatches []string // one line per difference; empty when the ledger is consistent
	Reserved   []ReservedCharge
	// PLDEarlierOrder counts the pld budget rows whose figures match the
	// composition order of builds before the pld memo, not the current
	// one (accountant/pldlegacy.go): consistent, rewritten by their next charge.
	PLDEarlierOrder int
}

// OK reports whether every budget row matched its charges.
func (r *VerifyReport) OK() bool { return len(r.Mismatches) == 0 }

// Verify recomputes every budget row from its charge rows, in one
// consistent snapshot (REPEATABLE READ, read only): the charges since the
// row's last reset (for the global row: every charge of the dataset since
// its last reset) are composed in id order, each with the method recorded
// on it, or on a shared row (global, team) accountant.SharedMethodName's
// of it (as Reserve did), and the result is compared with the row: the
// number of charges, the composition state, and the stored spending
// (recomputed at the stored limits). It also lists the charges left
// reserved. A difference is a mismatch; reserved charges are not.
func (l *Ledger) Verify(ctx context.Context) (*VerifyReport, error) {
	rep := &VerifyReport{}
	err := pgx.BeginTxFunc(ctx, l.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		cs, err := loadCharges(ctx, tx)
		if err != nil {
			return err
		}
		rep.Mismatches = append(rep.Mismatches, cs.unreadable...)
		rep.Reserved = cs.reserved
		rep.Charges = len(cs.charges)
		budgets, err := loadBudgets(ctx, tx)
		if err != nil {
			return err
		}
		rep.Budgets = len(budgets)
		has := map[[2]string]bool{}
		for _, r := range budgets {
			has[[2]string{r.dataset, r.analyst}] = true
			name := r.dataset + "/" + r.analyst
			if r.analyst == accountant.GlobalAnalyst {
				name = r.dataset + " (global)"
			}
			st, n, errs := cs.compose(r.dataset, r.analyst, cs.resets, rowMethodOf(r.analyst))
			for _, e := range errs {
				rep.Mismatches = append(rep.Mismatches, name+": "+e)
			}
			if n != r.charges {
				rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("%s: %d charges recorded on the budget row, %d in the ledger", name, r.charges, n))
			}
			if diff := accountant.CompareStates(r.state, st); diff != "" {
				rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("%s: composition state differs from the charges: %s", name, diff))
			}
			if r.lifetime != nil {
				// The lifetime state (budget windows, accountant/window.go) composes
				// every charge of every window: it holds at least the
				// current window's events and basic sums.
				if msg := accountant.LifetimeCovers(r.lifetime, r.state); msg != "" {
					rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("%s: lifetime state %s", name, msg))
				}
			}
			m, err := accountant.MethodByName(r.accountant)
			if err != nil {
				rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			want, err := r.spentOf(m, st, n)
			if err != nil {
				rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			if r.accountant == policy.AccountantPLD && !(accountant.SameDecimal(r.spent[0], want[0]) && accountant.SameDecimal(r.spent[1], want[1])) &&
				accountant.MatchesEarlierPLDOrder(st, r.limit(), r.spent) {
				want = r.spent
				rep.PLDEarlierOrder++
			}
			for i, coord := range []string{"ε", "δ"} {
				if !accountant.SameDecimal(r.spent[i], want[i]) {
					rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("%s: spent %s = %s on the budget row, %s recomputed from the charges", name, coord, r.spent[i], want[i]))
				}
			}
		}
		for _, c := range cs.charges {
			if !has[[2]string{c.dataset, c.analyst}] || !has[[2]string{c.dataset, accountant.GlobalAnalyst}] {
				rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("charge %d of %s/%s has no budget row", c.id, c.dataset, c.analyst))
			}
		}
		return nil
	})
	if err != nil {
		return nil, l.ledgerError(ctx, err)
	}
	sort.Strings(rep.Mismatches)
	return rep, nil
}
