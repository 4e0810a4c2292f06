// Ledger-critical: needs review of the reserve-before-read protocol (ledger/doc.go).

package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// Recomposing budget rows from the charge rows: what Verify checks and
// what the migration to schema 5 (rdp_schema5.go) rewrites.

type verifyCharge struct {
	id         int64
	dataset    string
	analyst    string
	team       string
	accountant string
	events     []accountant.Event
}

// chargeSet is every charge of the ledger, in id order, with where each
// budget row's current composition starts.
type chargeSet struct {
	charges []verifyCharge
	// resets holds, per (dataset, row), the last charge id before its last
	// reset or window renewal: the row's state composes the charges after.
	resets map[[2]string]int64
	// fullResets holds the same for resets alone: a lifetime state
	// (windows) outlives renewals.
	fullResets map[[2]string]int64
	byDataset  map[string][]*verifyCharge
	byRow      map[[2]string][]*verifyCharge
	unreadable []string // charges whose events could not be read
	reserved   []ReservedCharge
}

func loadCharges(ctx context.Context, tx pgx.Tx) (*chargeSet, error) {
	cs := &chargeSet{resets: map[[2]string]int64{}, fullResets: map[[2]string]int64{},
		byDataset: map[string][]*verifyCharge{}, byRow: map[[2]string][]*verifyCharge{}}
	rows, err := tx.Query(ctx, `SELECT dataset, analyst, action, max(last_charge_id) FROM dpproxy_ledger.audit
		WHERE action IN ('reset', 'renew') GROUP BY dataset, analyst, action`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k [2]string
		var action string
		var id int64
		if err := rows.Scan(&k[0], &k[1], &action, &id); err != nil {
			rows.Close()
			return nil, err
		}
		cs.resets[k] = max(cs.resets[k], id)
		if action == "reset" {
			cs.fullResets[k] = id
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	rows, err = tx.Query(ctx, `SELECT id, dataset, analyst, coalesce(team, ''), accountant, events, status, created_at,
			cost_epsilon::float8, cost_delta::float8
		FROM dpproxy_ledger.charge ORDER BY id`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var c verifyCharge
		var raw []byte
		var status string
		var at time.Time
		var cost accountant.Spent
		if err := rows.Scan(&c.id, &c.dataset, &c.analyst, &c.team, &c.accountant, &raw, &status, &at, &cost.Epsilon, &cost.Delta); err != nil {
			rows.Close()
			return nil, err
		}
		var ej []eventJSON
		if err := json.Unmarshal(raw, &ej); err != nil {
			cs.unreadable = append(cs.unreadable, fmt.Sprintf("charge %d: events are not readable: %v", c.id, err))
		}
		for _, e := range ej {
			c.events = append(c.events, accountant.Event{Mechanism: e.Mechanism, Epsilon: e.Epsilon, Delta: e.Delta, NoiseMultiplier: e.NoiseMultiplier})
		}
		if status == "reserved" {
			cs.reserved = append(cs.reserved, ReservedCharge{ID: c.id, Dataset: c.dataset, Analyst: c.analyst, CreatedAt: at, Cost: cost})
		}
		cs.charges = append(cs.charges, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Charges by dataset and by (dataset, row), in id order; a team's row
	// holds the charges of its analysts.
	for i := range cs.charges {
		c := &cs.charges[i]
		cs.byDataset[c.dataset] = append(cs.byDataset[c.dataset], c)
		k := [2]string{c.dataset, c.analyst}
		cs.byRow[k] = append(cs.byRow[k], c)
		if c.team != "" {
			k := [2]string{c.dataset, policy.TeamLedgerPrefix + c.team}
			cs.byRow[k] = append(cs.byRow[k], c)
		}
	}
	return cs, nil
}

// compose composes, in id order, the charges of a budget row after its
// entry in resets, each with the method methodOf gives for the name
// recorded on it (as Reserve did). It returns the state, the number of
// charges composed and one line per charge that could not be.
//
// Consecutive charges recorded with the same method are composed in one
// Compose call, which is the same composition as one call per charge
// (every method folds events in order, and its state's JSON round-trips
// exactly: TestCompose_RunsEqualOneByOne), without a JSON round trip per
// charge (attack round 69: 100,000 charges took schema 6's data step 53 s
// with the ledger's tables locked). A run that fails is composed again one
// charge at a time, to name the charges that do not compose.
func (cs *chargeSet) compose(dataset, analyst string, resets map[[2]string]int64, methodOf func(string) (accountant.Method, error)) ([]byte, int64, []string) {
	mine := cs.byRow[[2]string{dataset, analyst}]
	if analyst == accountant.GlobalAnalyst {
		mine = cs.byDataset[dataset]
	}
	after := resets[[2]string{dataset, analyst}]
	var st []byte
	var n int64
	var errs []string
	one := func(c *verifyCharge) {
		m, err := methodOf(c.accountant)
		if err == nil {
			var next []byte
			if next, err = m.Compose(st, c.events); err == nil {
				st = next
			}
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("charge %d: %v", c.id, err))
			return
		}
		n++
	}
	var run []*verifyCharge
	flush := func() {
		if len(run) == 0 {
			return
		}
		var events []accountant.Event
		for _, c := range run {
			events = append(events, c.events...)
		}
		m, err := methodOf(run[0].accountant)
		if err == nil && len(events) > 0 {
			var next []byte
			if next, err = m.Compose(st, events); err == nil {
				st, n = next, n+int64(len(run))
			}
		}
		if err != nil || len(events) == 0 {
			for _, c := range run {
				one(c)
			}
		}
		run = run[:0]
	}
	for _, c := range mine {
		if c.id <= after {
			continue
		}
		if len(run) > 0 && run[0].accountant != c.accountant {
			flush()
		}
		run = append(run, c)
	}
	flush()
	return st, n, errs
}

// rowMethodOf returns how Reserve chose the method composing a charge
// onto the budget row named analyst, from the method recorded on the
// charge: a shared row's (the global row, a team's) is
// [accountant.SharedMethodName]'s (since ledger schema 6), an analyst's the
// recorded one.
func rowMethodOf(analyst string) func(string) (accountant.Method, error) {
	if isShared(analyst) {
		return sharedMethodByName
	}
	return accountant.MethodByName
}

// isShared reports whether the budget row named analyst is shared by
// several analysts: the dataset's global row or a team's.
func isShared(analyst string) bool {
	return analyst == accountant.GlobalAnalyst || strings.HasPrefix(analyst, policy.TeamLedgerPrefix)
}

// rowMethodName is the name of the method that composes the budget row
// named analyst on a dataset whose accountant is method.
func rowMethodName(method, analyst string) string {
	if isShared(analyst) {
		return accountant.SharedMethodName(method)
	}
	return method
}

func sharedMethodByName(name string) (accountant.Method, error) {
	return accountant.MethodByName(accountant.SharedMethodName(name))
}

// budgetRecord is one budget row as Verify and the migrations read it.
type budgetRecord struct {
	dataset, analyst, accountant string
	le, ld                       *float64
	spent                        [2]string
	charges                      int64
	state, lifetime              []byte
}

func loadBudgets(ctx context.Context, tx pgx.Tx) ([]budgetRecord, error) {
	rows, err := tx.Query(ctx, `SELECT dataset, analyst, accountant, limit_epsilon, limit_delta,
			spent_epsilon::text, spent_delta::text, charges, state, lifetime_state
		FROM dpproxy_ledger.budget ORDER BY dataset, analyst`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []budgetRecord
	for rows.Next() {
		var r budgetRecord
		if err := rows.Scan(&r.dataset, &r.analyst, &r.accountant, &r.le, &r.ld, &r.spent[0], &r.spent[1], &r.charges, &r.state, &r.lifetime); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// limit is the row's stored cap (+Inf where none).
func (r budgetRecord) limit() accountant.Spent {
	limit := accountant.Spent{Epsilon: math.Inf(1), Delta: math.Inf(1)}
	if r.le != nil {
		limit.Epsilon = *r.le
	}
	if r.ld != nil {
		limit.Delta = *r.ld
	}
	return limit
}

// spentOf is the spending a row with state st (of n charges) records, as
// Reserve writes it: the exact basic sums on a global row without a cap,
// else the method's spending at the stored limits.
func (r budgetRecord) spentOf(m accountant.Method, st []byte, n int64) ([2]string, error) {
	limit := r.limit()
	switch {
	case n == 0:
		return [2]string{"0", "0"}, nil
	case r.analyst == accountant.GlobalAnalyst && !accountant.HasCap(limit):
		e, d, err := accountant.BasicSums(st)
		return [2]string{e, d}, err
	}
	sp, _, err := accountant.Evaluate(m, st, limit)
	if err != nil {
		return [2]string{}, err
	}
	return [2]string{accountant.DecimalText(sp.Epsilon), accountant.DecimalText(sp.Delta)}, nil
}

// lockAndLoad locks the ledger's budget and charge tables against every
// writer (a migration's data step rewrites rows from the charges) and reads
// them.
func lockAndLoad(ctx context.Context, tx pgx.Tx) (*chargeSet, []budgetRecord, error) {
	if _, err := tx.Exec(ctx, `LOCK TABLE dpproxy_ledger.budget, dpproxy_ledger.charge IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return nil, nil, err
	}
	cs, err := loadCharges(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	budgets, err := loadBudgets(ctx, tx)
	return cs, budgets, err
}

// rewriteRow is a migration's rewrite of budget row r: an audit row
// 'migrate' holding the row as it was, then the row composed with method
// (state over n charges, lifetime), its spending re-evaluated at its stored
// limits as Reserve writes it (the lifetime spending is rewritten by its
// next charge).
func rewriteRow(ctx context.Context, tx pgx.Tx, schema int, r budgetRecord, method string, state, lifetime []byte, n int64) error {
	m, err := accountant.MethodByName(method)
	if err != nil {
		return fmt.Errorf("budget %s/%s: %w", r.dataset, r.analyst, err)
	}
	spent, err := r.spentOf(m, state, n)
	if err != nil {
		return fmt.Errorf("budget %s/%s: %w", r.dataset, r.analyst, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO dpproxy_ledger.audit (actor, action, dataset, analyst,
			before_spent_epsilon, before_spent_delta, before_charges, before_granted_epsilon, before_granted_delta, before_state, last_charge_id)
		SELECT 'dpproxy ledger migration ' || $3::text, 'migrate', dataset, analyst, spent_epsilon, spent_delta, charges,
			granted_epsilon, granted_delta, state, (SELECT coalesce(max(id), 0) FROM dpproxy_ledger.charge)
		FROM dpproxy_ledger.budget WHERE dataset = $1 AND analyst = $2`, r.dataset, r.analyst, strconv.Itoa(schema)); err != nil {
		return err
	}
	var life any
	if lifetime != nil {
		life = lifetime
	}
	_, err = tx.Exec(ctx, `UPDATE dpproxy_ledger.budget SET accountant = $3, state = $4, lifetime_state = $5,
			spent_epsilon = $6::numeric, spent_delta = $7::numeric, updated_at = now()
		WHERE dataset = $1 AND analyst = $2`, r.dataset, r.analyst, method, state, life, spent[0], spent[1])
	return err
}
