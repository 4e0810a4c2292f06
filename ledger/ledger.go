// Ledger-critical: needs review of the reserve-before-read protocol (ledger/doc.go).

package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/share"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// Ledger is the PostgreSQL-backed ledger. Safe for concurrent use; several
// proxy processes may share one ledger database.
type Ledger struct {
	pool   *pgxpool.Pool
	logger *zap.Logger
	// now is the clock of budget windows (accountant.WindowOf); nil: time.Now.
	now func() time.Time
	// pld remembers the pld method's intermediate distributions
	// ([accountant.PLDMemo]).
	pld *accountant.PLDMemo
	// charges lets each analyst hold one ledger connection for charges
	// at a time (Reserve).
	charges *share.PerOwner
	// ownRowsLocked, when set (tests), runs in Reserve once the analyst's
	// own row is locked and before the shared rows are.
	ownRowsLocked func()
}

// Log keys of the budget events.
const (
	logKeyAnalyst     = "analyst"
	logKeyDataset     = "dataset"
	logKeyAccountant  = "accountant"
	logKeyEpsilon     = "epsilon"
	logKeyDelta       = "delta"
	logKeyRemainingE  = "remaining_epsilon"
	logKeyRemainingD  = "remaining_delta"
	logKeyFingerprint = "fingerprint"
	logKeyReservation = "reservation_id"
)

// Open connects to the ledger database and creates or migrates its schema
// (idempotent; safe when several proxies start at once). The pool reconnects
// by itself when the database comes back after an outage.
func Open(ctx context.Context, dsn string, logger *zap.Logger) (*Ledger, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The parse error may quote the DSN (and a password): do not wrap it.
		return nil, errors.New("accountant: cannot parse the ledger DSN")
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "dpproxy-ledger"
	// Ping a connection idle for more than a second before use, so a
	// restarted database costs no failed charge (pgxpool's default too).
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration > time.Second }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("accountant: open ledger: %w", redact(err))
	}
	l := &Ledger{pool: pool, logger: logger.Named("accountant"), pld: accountant.NewPLDMemo(accountant.DefaultPLDMemoPoints), charges: share.New(1)}
	if err := l.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("accountant: migrate ledger schema: %w", redact(err))
	}
	return l, nil
}

// SetClock replaces the clock that decides budget-window renewals
// (accountant.WindowOf); tests use a fake clock. Call it before the ledger is used.
func (l *Ledger) SetClock(now func() time.Time) { l.now = now }

func (l *Ledger) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// Close releases the ledger's connections.
func (l *Ledger) Close() {
	if l != nil && l.pool != nil {
		l.pool.Close()
	}
}

// redact drops connection details (host, user) from connection errors; a
// server-side error is kept.
func redact(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return errors.New("cannot connect to the ledger database")
}

// unavailable is the client-facing error when the ledger cannot be used.
func unavailable(err error) *pgerr.Error {
	return pgerr.New(pgerr.SystemError, "privacy ledger unavailable; DP queries are refused until it is back").
		WithHint("ask the operator to check the ledger database").
		Wrap(fmt.Errorf("%w: %w", accountant.ErrLedgerUnavailable, err))
}

// retryable reports whether a failed transaction (not committed) may be
// retried: serialization failure, deadlock, or a connection that broke
// before COMMIT was sent.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40001" || pe.Code == "40P01"
	}
	return pgconn.SafeToRetry(err)
}

// budgetRow is one locked budget row.
type budgetRow struct {
	analyst    string
	state      []byte
	accountant string
	limitDelta *float64         // NULL: no cap
	spent      accountant.Spent // as stored at the last charge
	granted    [2]string        // steward grants (exact decimal text) on top of the policy's limit
	suspended  bool             // the circuit breaker is open (incident.go)
	// windowStart is the start of the row's current budget window (zero:
	// none); lifetimeState the composition over all windows (nil: none
	// yet). accountant/window.go.
	windowStart   time.Time
	lifetimeState []byte
}

// spentBefore returns the row's spending under method m at total δ delta:
// the stored figure when it was computed by m at the same δ (no need to
// re-run a costly accountant), else recomputed.
func (r budgetRow) spentBefore(m accountant.Method, delta float64) (accountant.Spent, error) {
	if r.accountant == m.Name() && ((r.limitDelta == nil && math.IsInf(delta, 1)) || (r.limitDelta != nil && *r.limitDelta == delta)) {
		return r.spent, nil
	}
	return m.Spent(r.state, delta)
}

// Reserve durably charges c or refuses it; see [accountant.Store]. The check and the
// debit are one transaction holding the budget rows FOR UPDATE (first the
// analyst's, then the dataset's global row and their team's, in that fixed
// order, so that concurrent charges cannot deadlock; see reserveTx), and
// the ledger row is committed before Reserve returns.
func (l *Ledger) Reserve(ctx context.Context, c accountant.Charge) (*accountant.Reservation, error) {
	if err := checkCharge(c); err != nil {
		return nil, err
	}
	m, err := accountant.MethodWithMemo(c.Policy.Budget.Accountant, l.pld.For(c.Analyst))
	if err != nil {
		return nil, pgerr.New(pgerr.InternalError, "the dataset's policy names an unknown accountant").Wrap(err)
	}
	rows := accountant.LimitsFor(c.Policy, c.Analyst)
	events, err := json.Marshal(eventsJSON(c.Events))
	if err != nil {
		return nil, err
	}

	// One charge per analyst at a time holds a ledger connection: their
	// charges wait for each other on their own row anyway, and a charge
	// composing a costly history holds its connection meanwhile (attack
	// round 69: one analyst's charges on two datasets held the whole pool).
	done, err := l.charges.Acquire(ctx, c.Analyst)
	if err != nil {
		return nil, canceled(ctx).
			WithDetail("It waited for the privacy ledger: the DP statements of one analyst are charged one at a time, and another of yours was being charged. Nothing was charged.").
			WithHint("run fewer DP statements at once across your sessions")
	}
	defer done()
	var res *accountant.Reservation
	var refusal *pgerr.Error
	for attempt := 0; ; attempt++ {
		res, refusal, err = l.reserveTx(ctx, m, c, rows, events)
		if err == nil || attempt >= 2 || !retryable(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, canceled(ctx)
		}
		var pe *pgerr.Error
		if errors.As(err, &pe) {
			return nil, err
		}
		l.logger.Error("privacy ledger unavailable; refusing DP query", zap.String(logKeyAnalyst, c.Analyst),
			zap.String(logKeyDataset, c.Dataset), zap.Error(redact(err)))
		return nil, unavailable(redact(err))
	}
	if refusal != nil {
		return nil, refusal
	}
	rem := res.Status.Remaining()
	l.logger.Info("privacy budget charged",
		zap.String(logKeyAnalyst, c.Analyst), zap.String(logKeyDataset, c.Dataset),
		zap.String(logKeyAccountant, m.Name()),
		zap.Float64(logKeyEpsilon, res.Cost.Epsilon), zap.Float64(logKeyDelta, res.Cost.Delta),
		zap.Float64(logKeyRemainingE, rem.Epsilon), zap.Float64(logKeyRemainingD, rem.Delta),
		zap.String(logKeyFingerprint, c.Fingerprint), zap.Int64(logKeyReservation, res.ID))
	return res, nil
}

// canceled is the error of a charge whose context ended: a statement
// timeout when it had a deadline that passed, the client's cancel
// otherwise (both 57014, as PostgreSQL words them).
func canceled(ctx context.Context) *pgerr.Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return pgerr.New(pgerr.QueryCanceled, "canceling statement due to statement timeout").Wrap(ctx.Err())
	}
	return pgerr.New(pgerr.QueryCanceled, "canceling statement due to user request").Wrap(ctx.Err())
}

func checkCharge(c accountant.Charge) error {
	bad := func(format string, args ...any) error {
		return pgerr.New(pgerr.InternalError, "invalid privacy charge").Wrap(fmt.Errorf(format, args...))
	}
	if c.Policy == nil {
		return bad("charge for %q has no policy", c.Dataset)
	}
	if c.Analyst == accountant.GlobalAnalyst {
		return bad("charge has no analyst")
	}
	if c.Dataset == "" {
		return bad("charge has no dataset")
	}
	if len(c.Events) == 0 {
		return bad("charge has no events")
	}
	for _, e := range c.Events {
		if err := accountant.CheckEvent(e); err != nil {
			return bad("%w", err)
		}
	}
	return nil
}

// nullable returns nil for +Inf (stored as NULL: no cap).
func nullable(x float64) any {
	if math.IsInf(x, 1) {
		return nil
	}
	return x
}

type eventJSON struct {
	Mechanism       string  `json:"mechanism,omitempty"`
	Epsilon         float64 `json:"epsilon"`
	Delta           float64 `json:"delta"`
	NoiseMultiplier float64 `json:"noise_multiplier,omitempty"`
}

func eventsJSON(es []accountant.Event) []eventJSON {
	out := make([]eventJSON, len(es))
	for i, e := range es {
		out[i] = eventJSON{Mechanism: e.Mechanism, Epsilon: e.Epsilon, Delta: e.Delta, NoiseMultiplier: e.NoiseMultiplier}
	}
	return out
}

// reserveTx runs one reservation transaction. It returns a refusal (53400)
// when the charge does not fit, or err when the database failed.
//
// The transaction is sent as three pipelined batches (pgx.Batch, one round
// trip each):
//
//  1. BEGIN, create the budget rows if missing, lock the analyst's own row;
//     then compose and check it in Go, with the dataset's method;
//  2. lock the rows the analyst shares with others (the dataset's global
//     row, their team's); compose and check them in Go, with
//     [accountant.SharedMethodName]'s method, whose state is a fixed set
//     of sums;
//  3. the UPDATEs of the rows, the audit rows of window renewals, the
//     INSERT of the charge and COMMIT.
//
// Every charge on the dataset takes the global row, so the shared rows are
// locked last and held only for what does not depend on one analyst's
// history: one round trip, fixed-size compositions and the commit's WAL
// flush. An analyst whose own history is costly to compose (up to pld's
// work bound) holds only their own row meanwhile (attack round 68: every
// other analyst's charge had waited for it). Rows are always locked in the
// same order (the analyst's, then the shared ones by name), so concurrent
// charges cannot deadlock. The charge is committed (synchronous commit)
// before Reserve returns.
//
// The charge must fit in each row (accountant.LimitsFor), per window and
// over its lifetime, or nothing is written.
func (l *Ledger) reserveTx(ctx context.Context, m accountant.Method, c accountant.Charge, rows []accountant.RowLimits, events []byte) (*accountant.Reservation, *pgerr.Error, error) {
	sm, err := accountant.MethodWithMemo(accountant.SharedMethodName(m.Name()), l.pld)
	if err != nil {
		return nil, nil, err
	}
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Release()
	// Whatever happens below, never hand the connection back inside a
	// transaction (a refusal, a failed statement, a failed COMMIT).
	defer rollbackOpen(ctx, conn)

	var names, own, shared []string
	for _, r := range rows {
		names = append(names, r.Name)
		if r.Kind == accountant.RowAnalyst {
			own = append(own, r.Name)
		} else {
			shared = append(shared, r.Name)
		}
	}
	b := &pgx.Batch{}
	// READ COMMITTED whatever the database's default: a row locked by
	// FOR UPDATE is read as the transaction that held it committed it
	// (ledger/doc.go), where a stricter level would fail the charge
	// whenever another analyst's charge committed on the dataset between
	// this one's first batch and its lock of the shared rows (attack
	// round 69).
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(`INSERT INTO dpproxy_ledger.budget (dataset, analyst, accountant)
		SELECT $1, unnest($2::text[]), $3 ON CONFLICT (dataset, analyst) DO NOTHING`,
		c.Dataset, names, m.Name())
	b.Queue(lockRowsSQL, c.Dataset, own)
	locked, err := lockBudgetRows(conn.SendBatch(ctx, b), 2)
	if err != nil {
		return nil, nil, err
	}
	if len(locked) != 1 || locked[0].analyst != c.Analyst {
		return nil, nil, fmt.Errorf("budget row of %s/%s missing after insert", c.Dataset, c.Analyst)
	}
	if locked[0].suspended {
		return nil, l.suspendedError(c), nil
	}
	if l.ownRowsLocked != nil {
		l.ownRowsLocked()
	}

	now := l.clock()
	plans := make([]rowPlan, 0, len(rows))
	for _, lim := range rows {
		if lim.Kind == accountant.RowAnalyst {
			pl, refusal, err := l.planRow(c, m, lim, locked[0], now)
			if refusal != nil || err != nil {
				return nil, refusal, err
			}
			plans = append(plans, pl)
		}
	}
	b = &pgx.Batch{}
	b.Queue(lockRowsSQL, c.Dataset, shared)
	sharedRows, err := lockBudgetRows(conn.SendBatch(ctx, b), 0)
	if err != nil {
		return nil, nil, err
	}
	byName := make(map[string]budgetRow, len(sharedRows))
	for _, r := range sharedRows {
		byName[r.analyst] = r
	}
	if len(sharedRows) != len(shared) || len(byName) != len(shared) {
		return nil, nil, fmt.Errorf("budget rows of %s missing after insert", c.Dataset)
	}
	for _, lim := range rows {
		if lim.Kind == accountant.RowAnalyst {
			continue
		}
		pl, refusal, err := l.planRow(c, sm, lim, byName[lim.Name], now)
		if refusal != nil || err != nil {
			return nil, refusal, err
		}
		plans = append(plans, pl)
	}
	var analystPlan *rowPlan
	for i := range plans {
		if plans[i].lim.Kind == accountant.RowAnalyst {
			analystPlan = &plans[i]
		}
	}
	if analystPlan == nil {
		return nil, pgerr.New(pgerr.InternalError, "cannot check the privacy budget").Wrap(errors.New("no analyst row")), nil
	}

	window := c.Policy.Budget.Window
	b = &pgx.Batch{}
	for _, pl := range plans {
		if pl.renew {
			// A renewal is a budget change: audited like a reset, with the
			// last charge before it, so that Verify recomputes the window
			// from the charges after it.
			b.Queue(`INSERT INTO dpproxy_ledger.audit (actor, action, dataset, analyst,
					before_spent_epsilon, before_spent_delta, before_charges, before_granted_epsilon, before_granted_delta, before_state, last_charge_id)
				SELECT 'dpproxy (window renewal)', 'renew', $1::text, $2::text, spent_epsilon, spent_delta, charges, granted_epsilon, granted_delta, state,
					(SELECT coalesce(max(id), 0) FROM dpproxy_ledger.charge c WHERE c.dataset = $1
						AND ($2 = '' OR c.analyst = $2 OR c.team = substr($2, 6) AND $2 LIKE 'team:%'))
				FROM dpproxy_ledger.budget WHERE dataset = $1 AND analyst = $2`, c.Dataset, pl.lim.Name)
		}
		var limE, limD any = nullable(pl.lim.Window.Epsilon), nullable(pl.lim.Window.Delta)
		var start any
		if window > 0 {
			start = pl.start
		}
		var life any
		if pl.lifeAfter != nil {
			life = pl.lifeAfter
		}
		b.Queue(`UPDATE dpproxy_ledger.budget SET accountant = $3, limit_epsilon = $4, limit_delta = $5,
			spent_epsilon = $6::numeric, spent_delta = $7::numeric, state = $8,
			charges = CASE WHEN $9 THEN 1 ELSE charges + 1 END, updated_at = now(),
			window_start = $10, lifetime_state = $11,
			lifetime_spent_epsilon = coalesce($12::numeric, lifetime_spent_epsilon),
			lifetime_spent_delta = coalesce($13::numeric, lifetime_spent_delta),
			windows = windows + CASE WHEN $9 THEN 1 ELSE 0 END
			WHERE dataset = $1 AND analyst = $2`,
			c.Dataset, pl.lim.Name, pl.method.Name(), limE, limD, pl.spentText[0], pl.spentText[1], pl.after,
			pl.renew, start, life, nullText(pl.lifeText[0]), nullText(pl.lifeText[1]))
	}
	cost := analystPlan.spentAfter.Sub(analystPlan.spentBefore)
	var team any
	if t, ok := c.Policy.TeamOf(c.Analyst); ok {
		team = t.Name
	}
	b.Queue(`INSERT INTO dpproxy_ledger.charge
		(dataset, analyst, status, fingerprint, policy_version, accountant, events, cost_epsilon, cost_delta, team)
		VALUES ($1, $2, 'reserved', $3, $4, $5, $6, $7::numeric, $8::numeric, $9) RETURNING id`,
		c.Dataset, c.Analyst, c.Fingerprint, c.PolicyVersion, m.Name(), events,
		accountant.DecimalText(cost.Epsilon), accountant.DecimalText(cost.Delta), team)
	b.Queue("COMMIT")
	renewals := 0
	for _, pl := range plans {
		if pl.renew {
			renewals++
		}
	}
	id, err := commitCharge(conn.SendBatch(ctx, b), renewals, len(plans))
	if err != nil {
		return nil, nil, err
	}
	for _, pl := range plans {
		if pl.renew {
			l.logger.Info("privacy budget window renewed", zap.String(logKeyAnalyst, pl.lim.Name), zap.String(logKeyDataset, c.Dataset),
				zap.Time("window_start", pl.start), zap.Time("renews", accountant.RenewsAt(pl.start, window)))
		}
	}
	st := accountant.Status{Dataset: c.Dataset, Accountant: m.Name(), Spent: analystPlan.spentAfter, Limit: analystPlan.lim.Window,
		Renews: accountant.RenewsAt(analystPlan.start, window)}
	if window > 0 {
		ls, err := m.Spent(analystPlan.lifeAfter, analystPlan.lim.Lifetime.Delta)
		if err == nil {
			st.Lifetime = &accountant.Lifetime{Spent: ls, Limit: analystPlan.lim.Lifetime}
		}
	}
	res := &accountant.Reservation{ID: id, Analyst: c.Analyst, Cost: cost, Status: st}
	for _, pl := range plans {
		if pl.renew {
			res.Renewed = append(res.Renewed, pl.lim.Name)
		}
	}
	return res, nil, nil
}

// lockRowsSQL reads and locks budget rows of a dataset ($1) by name ($2),
// in name order.
const lockRowsSQL = `SELECT analyst, state, accountant, limit_delta, spent_epsilon::float8, spent_delta::float8,
		granted_epsilon::text, granted_delta::text, suspended_at IS NOT NULL, window_start, lifetime_state
	FROM dpproxy_ledger.budget WHERE dataset = $1 AND analyst = ANY($2::text[]) ORDER BY analyst FOR UPDATE`

// rowPlan is what a charge writes on one budget row.
type rowPlan struct {
	lim                 accountant.RowLimits
	method              accountant.Method // the method that composed the row
	start               time.Time
	renew               bool
	after, lifeAfter    []byte
	spentText, lifeText [2]string
	spentAfter          accountant.Spent
	spentBefore         accountant.Spent
}

// planRow composes the charge c onto the locked row r with method m and
// checks it against the row's caps lim, per window and over its lifetime:
// a refusal when it does not fit, else what to write.
func (l *Ledger) planRow(c accountant.Charge, m accountant.Method, lim accountant.RowLimits, r budgetRow, now time.Time) (rowPlan, *pgerr.Error, error) {
	internal := func(msg string, err error) (rowPlan, *pgerr.Error, error) {
		return rowPlan{}, pgerr.New(pgerr.InternalError, "%s", msg).Wrap(err), nil
	}
	window := c.Policy.Budget.Window
	pl := rowPlan{lim: lim, method: m}
	var err error
	if lim.Kind != accountant.RowGlobal {
		// Steward grants raise a row's window limit (not its lifetime cap).
		if pl.lim.Window, err = accountant.WithGrants(lim.Window, r.granted); err != nil {
			return internal("cannot read the privacy ledger state", err)
		}
	}
	pl.start, pl.renew = accountant.WindowOf(r.windowStart, now, window)
	base := r.state
	if pl.renew {
		base = nil
	}
	if pl.after, err = m.Compose(base, c.Events); err != nil {
		return internal("cannot compose the privacy charge", err)
	}
	cap := pl.lim.Window
	if accountant.HasCap(cap) {
		sp, fits, err := accountant.Evaluate(m, pl.after, cap)
		if err != nil {
			return internal("cannot check the privacy budget", err)
		}
		if !fits {
			before := accountant.Spent{}
			if !pl.renew {
				if before, err = r.spentBefore(m, cap.Delta); err != nil {
					return internal("cannot read the privacy ledger state", err)
				}
			}
			cost := sp.Sub(before)
			st := accountant.Status{Dataset: c.Dataset, Accountant: m.Name(), Spent: before, Limit: cap, Renews: accountant.RenewsAt(pl.start, window)}
			return rowPlan{}, l.refuse(c, m, cost, st, lim, false), nil
		}
		pl.spentAfter = sp
		pl.spentText = [2]string{accountant.DecimalText(sp.Epsilon), accountant.DecimalText(sp.Delta)}
		if !pl.renew {
			if pl.spentBefore, err = r.spentBefore(m, cap.Delta); err != nil {
				return internal("cannot read the privacy ledger state", err)
			}
		}
	} else {
		// Without a cap (the global row by default) the row records
		// the exact basic sums, so a cap added later counts the past.
		e, d, err := accountant.BasicSums(pl.after)
		if err != nil {
			return internal("cannot read the privacy ledger state", err)
		}
		pl.spentText = [2]string{e, d}
	}
	if window > 0 {
		// The lifetime state composes every charge of every window;
		// a row from before the dataset had a window starts from its
		// current state (nothing is refunded).
		lifeBase := r.lifetimeState
		if lifeBase == nil {
			lifeBase = r.state
		}
		if pl.lifeAfter, err = m.Compose(lifeBase, c.Events); err != nil {
			return internal("cannot compose the privacy charge", err)
		}
		if accountant.HasCap(lim.Lifetime) {
			sp, fits, err := accountant.Evaluate(m, pl.lifeAfter, lim.Lifetime)
			if err != nil {
				return internal("cannot check the privacy budget", err)
			}
			if !fits {
				before, err := m.Spent(lifeBase, lim.Lifetime.Delta)
				if err != nil {
					return internal("cannot read the privacy ledger state", err)
				}
				cost := sp.Sub(before)
				st := accountant.Status{Dataset: c.Dataset, Accountant: m.Name(), Spent: before, Limit: lim.Lifetime}
				return rowPlan{}, l.refuse(c, m, cost, st, lim, true), nil
			}
			pl.lifeText = [2]string{accountant.DecimalText(sp.Epsilon), accountant.DecimalText(sp.Delta)}
		} else {
			e, d, err := accountant.BasicSums(pl.lifeAfter)
			if err != nil {
				return internal("cannot read the privacy ledger state", err)
			}
			pl.lifeText = [2]string{e, d}
		}
	}
	return pl, nil, nil
}

// nullText is NULL for "".
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// lockBudgetRows reads the results of a reservation batch that ends in
// lockRowsSQL after skip other statements (BEGIN, INSERT … ON CONFLICT)
// and returns the locked rows.
func lockBudgetRows(br pgx.BatchResults, skip int) (locked []budgetRow, err error) {
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	for range skip {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var r budgetRow
		var ws *time.Time
		if err := rows.Scan(&r.analyst, &r.state, &r.accountant, &r.limitDelta, &r.spent.Epsilon, &r.spent.Delta,
			&r.granted[0], &r.granted[1], &r.suspended, &ws, &r.lifetimeState); err != nil {
			return nil, err
		}
		if ws != nil {
			r.windowStart = *ws
		}
		locked = append(locked, r)
	}
	return locked, rows.Err()
}

// commitCharge reads the results of the second reservation batch (the
// renewals' audit INSERTs, one UPDATE per budget row, INSERT … RETURNING
// id, COMMIT) and returns the charge's id once COMMIT succeeded.
func commitCharge(br pgx.BatchResults, renewals, updates int) (id int64, err error) {
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	for range renewals + updates {
		tag, err := br.Exec()
		if err != nil {
			return 0, err
		}
		if tag.RowsAffected() != 1 {
			return 0, errors.New("budget row not updated")
		}
	}
	if err := br.QueryRow().Scan(&id); err != nil {
		return 0, err
	}
	tag, err := br.Exec()
	if err != nil {
		return 0, err
	}
	if tag.String() != "COMMIT" {
		return 0, fmt.Errorf("reservation not committed (%s)", tag)
	}
	return id, nil
}

// rollbackOpen rolls back a transaction left open on conn, so the pool
// never reuses a connection inside one.
func rollbackOpen(ctx context.Context, conn *pgxpool.Conn) {
	pc := conn.Conn().PgConn()
	if pc.IsClosed() || pc.TxStatus() == 'I' {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(rctx, "ROLLBACK"); err != nil {
		_ = pc.Close(rctx)
	}
}

// fmtBudget formats a budget figure for messages: shortest decimal, "no cap"
// for +Inf.
func fmtBudget(x float64) string {
	if math.IsInf(x, 1) {
		return "unlimited"
	}
	return strconv.FormatFloat(x, 'g', 6, 64)
}

// refuse builds the 53400 error and logs the refusal. The figures are
// budget figures (no data).
func (l *Ledger) refuse(c accountant.Charge, m accountant.Method, cost accountant.Spent, st accountant.Status, row accountant.RowLimits, lifetime bool) *pgerr.Error {
	rem := st.Remaining()
	whose := "your"
	lower := "lower the query's cost (SET dp.epsilon = …, or fewer aggregates), or "
	ask := "ask the data steward for more budget"
	global := row.Kind == accountant.RowGlobal
	switch row.Kind {
	case accountant.RowGlobal:
		whose = "the dataset's global (all analysts)"
		lower = "lower the query's cost (SET dp.epsilon = …), or "
		ask = "ask the data steward to raise budget.global_epsilon"
	case accountant.RowTeam:
		whose = "your team " + strings.TrimPrefix(row.Name, policy.TeamLedgerPrefix) + "'s"
		lower = "lower the query's cost (SET dp.epsilon = …), or "
		ask = "ask the data steward to raise the team's budget (teams: in the policy)"
	}
	if rem.Epsilon <= 0 || rem.Delta < 0 {
		lower = "nothing is left to spend: " // a smaller ε cannot help
	} else {
		// Name what is left where the hint says to lower the cost.
		lower = strings.Replace(lower, "SET dp.epsilon = …", "SET dp.epsilon = …; ε remaining: "+fmtBudget(rem.Epsilon), 1)
	}
	hint := lower + ask
	where := ""
	if lifetime {
		whose += " lifetime"
		where = " over all budget windows"
		hint = "the lifetime cap (budget.lifetime) bounds what can ever be spent on this dataset; only the data steward can raise it in the policy"
	} else if c.Policy.Budget.Window > 0 {
		where = " in this budget window"
		hint += "; the budget renews every " + policy.FormatWindow(c.Policy.Budget.Window)
		if !st.Renews.IsZero() {
			hint += ", next at " + st.Renews.UTC().Format("2006-01-02 15:04 UTC")
		}
	}
	// Debug: a refused charge is free, so at Info an analyst could write
	// lines at any rate; the proxy's statement line (SQLSTATE 53400) and
	// the audit log's refusal line, both limited per analyst
	// (internal/linerate; attack round 86), record it.
	l.logger.Debug("privacy budget refused",
		zap.String(logKeyAnalyst, c.Analyst), zap.String(logKeyDataset, c.Dataset),
		zap.String(logKeyAccountant, m.Name()), zap.Bool("global_cap", global),
		zap.Float64(logKeyEpsilon, cost.Epsilon), zap.Float64(logKeyDelta, cost.Delta),
		zap.Float64(logKeyRemainingE, rem.Epsilon), zap.Float64(logKeyRemainingD, rem.Delta),
		zap.String(logKeyFingerprint, c.Fingerprint))
	return &pgerr.Error{
		Code: pgerr.ConfigurationLimit,
		Message: fmt.Sprintf("privacy budget exhausted on dataset %s: this query needs ε=%s, δ=%s but %s remaining budget%s is ε=%s, δ=%s",
			c.Dataset, fmtBudget(cost.Epsilon), fmtBudget(cost.Delta), whose, where, fmtBudget(rem.Epsilon), fmtBudget(rem.Delta)),
		Detail: fmt.Sprintf("accountant %s; spent ε=%s, δ=%s of ε=%s, δ=%s",
			m.Name(), fmtBudget(st.Spent.Epsilon), fmtBudget(st.Spent.Delta), fmtBudget(st.Limit.Epsilon), fmtBudget(st.Limit.Delta)),
		Hint: hint,
		Err:  accountant.ErrBudgetExhausted,
	}
}

// Release records the released (noisy) answer on the reservation and marks
// it released (a nil answer: released, nothing stored). Releasing twice is
// an error. The answer is stored, never logged.
//
// It takes the analyst's charge share, as Reserve does: an analyst's
// answers are stored one at a time on one ledger connection (attack round
// 84: two sessions per dataset on two datasets stored four large answers
// at once, the whole pool, and another analyst's charges waited 0.7–1.3 s).
func (l *Ledger) Release(ctx context.Context, res *accountant.Reservation, answer []byte) error {
	id := res.ID
	if answer != nil && !json.Valid(answer) {
		return pgerr.New(pgerr.InternalError, "cannot record the released answer").Wrap(fmt.Errorf("answer of reservation %d is not JSON", id))
	}
	done, err := l.charges.Acquire(ctx, res.Analyst)
	if err != nil {
		return canceled(ctx)
	}
	defer done()
	// The charge is already durable; the answer is recorded with an
	// asynchronous commit (one round trip, no wait for the WAL flush). A
	// crash of the ledger database may lose the last few release records:
	// those charges stay charged and read as "charged but unanswered", as
	// after a proxy crash between reserve and release (fail closed), and
	// the answer cache misses them.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL synchronous_commit = off")
	b.Queue(`UPDATE dpproxy_ledger.charge SET status = 'released', answer = $2, released_at = now()
		WHERE id = $1 AND status = 'reserved'`, id, answer)
	b.Queue("COMMIT")
	tag, err := l.releaseBatch(ctx, b)
	if err != nil {
		if ctx.Err() != nil {
			return pgerr.New(pgerr.QueryCanceled, "canceling statement due to user request").Wrap(ctx.Err())
		}
		l.logger.Error("privacy ledger unavailable while recording a release", zap.Int64(logKeyReservation, id), zap.Error(redact(err)))
		return unavailable(redact(err))
	}
	if tag.RowsAffected() != 1 {
		return pgerr.New(pgerr.InternalError, "cannot record the released answer").Wrap(fmt.Errorf("reservation %d is unknown or already released", id))
	}
	l.logger.Info("privacy budget charge released", zap.Int64(logKeyReservation, id))
	return nil
}

// releaseBatch runs the release batch and returns the UPDATE's tag.
func (l *Ledger) releaseBatch(ctx context.Context, b *pgx.Batch) (tag pgconn.CommandTag, err error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return tag, err
	}
	defer conn.Release()
	defer rollbackOpen(ctx, conn)
	br := conn.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return tag, err
		}
	}
	if tag, err = br.Exec(); err != nil {
		return tag, err
	}
	commit, err := br.Exec()
	if err == nil && commit.String() != "COMMIT" {
		err = fmt.Errorf("release not committed (%s)", commit)
	}
	return tag, err
}

// Status returns the analyst's budget on the dataset: limits from ds (the
// current policy), spending from the ledger. It creates nothing: an analyst
// with no row has spent nothing.
func (l *Ledger) Status(ctx context.Context, analyst string, ds *policy.Dataset) (accountant.Status, error) {
	if ds == nil {
		return accountant.Status{}, pgerr.New(pgerr.InternalError, "budget status without a policy")
	}
	m, err := accountant.MethodWithMemo(rowMethodName(ds.Budget.Accountant, analyst), l.pld.For(analyst))
	if err != nil {
		return accountant.Status{}, pgerr.New(pgerr.InternalError, "the dataset's policy names an unknown accountant").Wrap(err)
	}
	own, ok := accountant.OwnLimits(ds, analyst)
	if !ok {
		return accountant.Status{}, pgerr.New(pgerr.InternalError, "budget status of an unknown team").Wrap(fmt.Errorf("%s is not a team of %s", analyst, ds.Name))
	}
	st := accountant.Status{Dataset: ds.Name, Accountant: m.Name(), Limit: own.Window}
	var state, life []byte
	var granted [2]string
	var ws *time.Time
	err = l.pool.QueryRow(ctx, `SELECT state, granted_epsilon::text, granted_delta::text, window_start, lifetime_state
		FROM dpproxy_ledger.budget WHERE dataset = $1 AND analyst = $2`,
		ds.Name, analyst).Scan(&state, &granted[0], &granted[1], &ws, &life)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		granted = [2]string{"0", "0"}
	case err != nil:
		if ctx.Err() != nil {
			return accountant.Status{}, pgerr.New(pgerr.QueryCanceled, "canceling statement due to user request").Wrap(ctx.Err())
		}
		return accountant.Status{}, unavailable(redact(err))
	}
	if st.Limit, err = accountant.WithGrants(st.Limit, granted); err != nil {
		return accountant.Status{}, pgerr.New(pgerr.InternalError, "cannot read the privacy ledger state").Wrap(err)
	}
	if err := l.windowed(&st, m, ds, own, ws, state, life); err != nil {
		return accountant.Status{}, pgerr.New(pgerr.InternalError, "cannot read the privacy ledger state").Wrap(err)
	}
	return st, nil
}

// windowed fills st.Spent from a row's state, as of the ledger's clock: a
// row whose window has ended has spent nothing in the current one
// (the renewal itself is written by the next charge). With a window it
// also fills Renews and Lifetime.
func (l *Ledger) windowed(st *accountant.Status, m accountant.Method, ds *policy.Dataset, lim accountant.RowLimits, ws *time.Time, state, life []byte) error {
	var start time.Time
	if ws != nil {
		start = *ws
	}
	window := ds.Budget.Window
	begin, renew := accountant.WindowOf(start, l.clock(), window)
	cur := state
	if renew {
		cur = nil
	}
	var err error
	if st.Spent, err = m.Spent(cur, st.Limit.Delta); err != nil {
		return err
	}
	if window <= 0 {
		return nil
	}
	if start.IsZero() {
		// No charge under the window yet: it starts at the next charge.
		st.Renews = time.Time{}
	} else {
		st.Renews = accountant.RenewsAt(begin, window)
	}
	if life == nil {
		life = state
	}
	ls, err := m.Spent(life, lim.Lifetime.Delta)
	if err != nil {
		return err
	}
	st.Lifetime = &accountant.Lifetime{Spent: ls, Limit: lim.Lifetime}
	return nil
}

// Cached returns the released answer of an earlier charge of the same plan
// (fingerprint) under the same policy version on the dataset, if any: the
// answer cache (the same noisy answer again costs nothing). The newest one
// wins.
func (l *Ledger) Cached(ctx context.Context, dataset, fingerprint, policyVersion string) ([]byte, bool, error) {
	var answer []byte
	err := l.pool.QueryRow(ctx, `SELECT answer FROM dpproxy_ledger.charge
		WHERE dataset = $1 AND fingerprint = $2 AND policy_version = $3 AND status = 'released'
		ORDER BY id DESC LIMIT 1`, dataset, fingerprint, policyVersion).Scan(&answer)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		if ctx.Err() != nil {
			return nil, false, pgerr.New(pgerr.QueryCanceled, "canceling statement due to user request").Wrap(ctx.Err())
		}
		return nil, false, unavailable(redact(err))
	}
	return answer, true, nil
}
