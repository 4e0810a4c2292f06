// Package upstream runs emitted SQL on a dataset's data database: the
// release.Upstream implementation over a pgx pool.
//
// Each query runs in its own READ ONLY transaction with SET LOCAL
// statement_timeout and partitionwise aggregation and joins on (harmless on
// unpartitioned tables; on a table hash-partitioned by its unit column the
// per-unit aggregate of a DP query then runs per partition) and, for a
// private key's plan, hash aggregation off (noHashAggSQL), all sent on to
// Citus workers
// (citusLocalSQL), through the simple query protocol, so every value
// comes back as PostgreSQL's text (NULL as nil). Only SQL from rewrite's emitter may
// be passed here (SECURITY.md G1, analyst text never reaches the data); this package
// neither inspects nor logs it.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// partitionwiseSQL turns on, for one transaction, the planner's
// partitionwise aggregation and joins.
const partitionwiseSQL = "SET LOCAL enable_partitionwise_aggregate = on; SET LOCAL enable_partitionwise_join = on"

// noHashAggSQL turns off, for one transaction, the planner's hash
// aggregation (attack round 108): its hash table is keyed by the data's
// values, and its work is decided by their hashes. PostgreSQL hashes a
// group as murmurhash32 of its columns' hashes combined by rotation and
// XOR, each column's hash a public function without a secret, so one
// person's rows can carry key values whose groups all share one 32-bit
// hash (a birthday search over two int columns; one bigint column, whose
// hashint8 folds its halves together), and every insertion into the
// table then walks all of them: one patient's 20,000 visits with
// colliding (age, length_of_stay) made a GROUP BY of the two private keys
// run 5.4 s against 0.36 s (rewrite TestAttack108_CollidingGroupKeysTime).
// A sorted aggregate's work does not depend on the hashes (nor, sorting
// by pgemit's groupSaltSQL after the unit, on the order a person stored
// their rows in: attack round 113). Hash joins
// stay: a bucket's rows are compared only by the rows that probe it.
//
// Only plans that group by values one person chooses need it (a private
// key, whose values partition selection reads): a public key's values are
// the policy's domain, filtered before any grouping, and the unit is one
// value a person; with hash aggregation off the demo's grouped AVG over
// 1M rows took 1,501 ms against 1,185 (BENCHMARKS.md). The proxy asks for
// it per query (WithSortedAggregation).
const noHashAggSQL = "SET LOCAL enable_hashagg = off"

type sortedAggregationKey struct{}

// WithSortedAggregation returns ctx whose queries run with hash
// aggregation off (noHashAggSQL): for a plan that groups by a private key.
func WithSortedAggregation(ctx context.Context) context.Context {
	return context.WithValue(ctx, sortedAggregationKey{}, true)
}

// ForPlan is ctx for the queries of plan: WithSortedAggregation when it
// groups by a private key (partition selection), ctx otherwise.
func ForPlan(ctx context.Context, plan *dpplan.Plan) context.Context {
	if plan != nil && plan.PrivateGroups() {
		return WithSortedAggregation(ctx)
	}
	return ctx
}

// SortedAggregation reports whether ctx asks for sorted aggregation.
func SortedAggregation(ctx context.Context) bool {
	return ctx.Value(sortedAggregationKey{}) != nil
}

// citusLocalSQL makes Citus send the transaction's SET LOCAL commands that
// follow it to the workers, where a distributed table's per-unit stage
// runs (its default, none, would leave their hash aggregation on and
// their statement_timeout unset). On PostgreSQL without Citus it sets a
// placeholder that nothing reads.
const citusLocalSQL = "SET LOCAL citus.propagate_set_commands = 'local'"

// outputSettings are set on every upstream connection at start-up.
var outputSettings = map[string]string{"DateStyle": "ISO, MDY", "IntervalStyle": "postgres", "extra_float_digits": "1"}

// Config configures a Pool.
type Config struct {
	// DSN of the data database, as the least-privilege reader role.
	DSN string
	// StatementTimeout bounds each query (default 30s).
	StatementTimeout time.Duration
	// MaxConns bounds the pool (dpproxy.yaml's upstream_max_connections;
	// 0: pgxpool's default, max(4, GOMAXPROCS)).
	MaxConns int32
	// Guard, when not empty, is catalog.GuardSQL of the dataset and
	// Fingerprint its value at start-up: every query's transaction reads
	// it again after the query, and a different value withholds the rows
	// (pgerr.ErrCatalogChanged) and makes the pool stale (Stale).
	Guard, Fingerprint string
}

// catalogChanged is the error of a query whose transaction found the
// policy's columns with other types than at start-up (Config.Guard): it
// wraps pgerr.ErrCatalogChanged, names no column and no type (the
// steward's doctor does), and says what to do.
func catalogChanged() error {
	return pgerr.New(pgerr.ObjectNotInPrerequisiteState, "the data database's tables changed since dpproxy started: a column of the policy has another type").
		WithHint("ask the data steward to run dpproxy doctor, fix the policy or the table, and restart dpproxy").
		Wrap(pgerr.ErrCatalogChanged)
}

// Pool runs emitted SQL upstream. Safe for concurrent use.
type Pool struct {
	pool    *pgxpool.Pool
	timeout time.Duration
	guard   string
	want    string
	stale   atomic.Bool // a transaction read another fingerprint
}

// New connects (lazily) to the data database and checks that it answers.
func New(ctx context.Context, cfg Config) (*Pool, error) {
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("upstream DSN: %w", err)
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	// The texts release reads do not depend on the data server's or the
	// role's configuration: dates in ISO, floats in their shortest exact
	// form (with extra_float_digits 0 or less two different floats can
	// print alike, and two groups then one text: an error after the
	// charge; attack round 56's note).
	for k, v := range outputSettings {
		pc.ConnConfig.RuntimeParams[k] = v
	}
	timeout := cfg.StatementTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("upstream pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect upstream %s@%s/%s: %w", pc.ConnConfig.User, pc.ConnConfig.Host, pc.ConnConfig.Database, err)
	}
	return &Pool{pool: pool, timeout: timeout, guard: cfg.Guard, want: cfg.Fingerprint}, nil
}

// Query runs sql in a READ ONLY transaction with the statement timeout and
// returns every value as text, NULL as nil. It implements release.Upstream.
//
// Without args the SQL goes through the simple query protocol. With args
// (the bind parameters $1, $2, … of a sample-and-aggregate plan: its
// secret key) it goes through the extended protocol with text parameters
// and text results (pgx's QueryExecModeExec): the values travel in the
// Bind message, never in the SQL text, so they appear neither in the
// statement PostgreSQL parses nor in pg_stat_statements. (PostgreSQL's
// own log_statement/log_min_duration_statement can print bind values; see
// SECURITY.md, "Sample-and-aggregate key".)
func (p *Pool) Query(ctx context.Context, sql string, args ...any) ([][]*string, error) {
	var out [][]*string
	err := p.run(ctx, sql, args, func(row []*string) error {
		out = append(out, row)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// QueryEach is Query with the rows handed to each one at a time, as they
// arrive (each may keep them): the caller holds only what it keeps. It
// implements release.RowStreamer.
func (p *Pool) QueryEach(ctx context.Context, sql string, each func(row []*string) error, args ...any) error {
	return p.run(ctx, sql, args, each)
}

// run runs sql as Query does and hands each row to each.
//
// One connection serves the query and, when it failed on the server, the
// fingerprint's re-read (recheck): a second connection taken from the pool
// while this one is held had hung the dataset when every connection of the
// pool held a failing query (review of 6 Dec).
func (p *Pool) run(ctx context.Context, sql string, args []any, each func(row []*string) error) error {
	if p.stale.Load() {
		return catalogChanged()
	}
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("upstream begin: %w", err)
	}
	defer conn.Release()
	err = p.runOn(ctx, conn, sql, args, each)
	var pe *pgconn.PgError
	if err != nil && p.guard != "" && errors.As(err, &pe) {
		return p.recheck(conn, err)
	}
	return err
}

// runOn runs sql on conn in a READ ONLY, READ COMMITTED transaction, and
// the guard after it. READ COMMITTED is set, not left to the server's
// default_transaction_isolation: the guard's argument needs the snapshot
// of a statement that starts after the query took its locks, and under
// REPEATABLE READ the snapshot is the query's own, taken before it waited
// for a type change's lock (review of 6 Dec: the old fingerprint read
// under it, with the new type's answer released).
func (p *Pool) runOn(ctx context.Context, conn *pgxpool.Conn, sql string, args []any, each func(row []*string) error) error {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("upstream begin: %w", err)
	}
	defer tx.Rollback(context.Background())
	// One round trip (simple protocol, no arguments) for the transaction's
	// settings: its time limit, and partitionwise aggregation and joins
	// (off by default in PostgreSQL), so that on a table partitioned by its
	// unit the per-unit aggregate and the unit joins finish inside each
	// partition; on other tables the planner has nothing to do with them.
	settings := fmt.Sprintf("%s; SET LOCAL statement_timeout = %d; %s", citusLocalSQL, p.timeout.Milliseconds(), partitionwiseSQL)
	if SortedAggregation(ctx) {
		settings += "; " + noHashAggSQL
	}
	if _, err := tx.Exec(ctx, settings); err != nil {
		return fmt.Errorf("upstream transaction settings: %w", err)
	}
	mode := pgx.QueryExecModeSimpleProtocol
	if len(args) > 0 {
		mode = pgx.QueryExecModeExec
	}
	rows, err := tx.Query(ctx, sql, append([]any{mode}, args...)...)
	if err != nil {
		return err
	}
	if err := eachTextRow(rows, each); err != nil {
		return err
	}
	if p.guard != "" {
		// After the query, under its locks (catalog.GuardSQL).
		var got string
		if err := tx.QueryRow(ctx, p.guard, pgx.QueryExecModeSimpleProtocol).Scan(&got); err != nil {
			return err
		}
		if got != p.want {
			p.stale.Store(true)
			return catalogChanged()
		}
	}
	if err := tx.Commit(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return err
	}
	return nil
}

// recheckTimeout bounds the fingerprint's re-read after a failed query.
const recheckTimeout = 5 * time.Second

// recheck reads the fingerprint again on conn after a query failed on the
// server (runOn has rolled its transaction back): SQL planned for the
// start-up's types can fail on the new ones (trim_scale of a unit made
// text), and that failure is the schema's, not a row's, so it gets the
// guard's error rather than becoming the analyst's incident. Any other
// failure, or a re-read that fails itself, returns err as is.
func (p *Pool) recheck(conn *pgxpool.Conn, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), recheckTimeout)
	defer cancel()
	var got string
	if conn.QueryRow(ctx, p.guard, pgx.QueryExecModeSimpleProtocol).Scan(&got) == nil && got != p.want {
		p.stale.Store(true)
		return catalogChanged()
	}
	return err
}

// Stale returns, before a charge, the error of a query the pool could
// not answer for a reason known before anything is sent upstream, else
// nil: release asks it before every charge (release.Staler), so no query
// is charged for an answer the pool would withhold or could not read.
//
//   - pgerr.ErrCatalogChanged once a transaction has read another
//     fingerprint than the start-up's (Config.Guard);
//   - 58000 when the data server cannot be reached (attack round 98: with
//     the data server down for a restart or a failover, every DP
//     statement was charged and only then found the connection refused,
//     "the budget stays charged", so each retry of a client spent ε again
//     for an answer nothing was read for). Whether the server answers a
//     connection does not depend on any row: it is asked before the
//     charge, by taking a connection from the pool (or opening one),
//     pinging it and giving it back. A pool whose connections are all held by running statements
//     is not unreachable: the statement then waits for one after its
//     charge, as before. A failure after this check (the server going down
//     between the check and the query) is still the charge's availability
//     failure (release/incident.go).
func (p *Pool) Stale() error {
	if p.stale.Load() {
		return catalogChanged()
	}
	return p.reachable()
}

// reachTimeout bounds Stale's connection check.
var reachTimeout = 5 * time.Second

// reachable takes a connection from the pool, pings it and gives it back
// (pgxpool pings only a connection idle for over a second: one the server
// closed less than a second before, in a quick crash-and-restart, would
// otherwise pass here and fail the query after its charge; a broken one is
// closed, and the next one tried). The error says, without the server's
// text (which names its host and role), that the data server cannot be
// reached and nothing was charged.
func (p *Pool) reachable() error {
	busy := func() bool { st := p.pool.Stat(); return st.AcquiredConns() >= st.MaxConns() }
	if busy() {
		return nil // not down: the query waits for a connection
	}
	ctx, cancel := context.WithTimeout(context.Background(), reachTimeout)
	defer cancel()
	var err error
	for range p.pool.Config().MaxConns + 1 {
		var conn *pgxpool.Conn
		if conn, err = p.pool.Acquire(ctx); err != nil {
			break
		}
		err = conn.Ping(ctx)
		conn.Release() // a connection the ping found broken is closed, not pooled
		if err == nil {
			return nil
		}
	}
	if errors.Is(err, context.DeadlineExceeded) && busy() {
		return nil
	}
	return pgerr.New(pgerr.SystemError, "the data database is unavailable").
		WithDetail("The DP query was not run and nothing was charged.").
		WithHint("retry later; if it persists, ask the operator to check the data database").
		Wrap(fmt.Errorf("upstream unreachable: %w", err))
}

// TextRows reads every row of rows as text, NULL as nil, and closes rows.
// The rows must have been queried in a mode that returns text (the simple
// protocol, or QueryExecModeExec, which asks for text results).
func TextRows(rows pgx.Rows) ([][]*string, error) {
	var out [][]*string
	err := eachTextRow(rows, func(row []*string) error {
		out = append(out, row)
		return nil
	})
	return out, err
}

// eachTextRow hands every row of rows to each as text, NULL as nil, and
// closes rows; an error of each stops it.
func eachTextRow(rows pgx.Rows, each func(row []*string) error) error {
	defer rows.Close()
	for rows.Next() {
		raw := rows.RawValues()
		row := make([]*string, len(raw))
		for i, b := range raw {
			if b != nil {
				s := string(b)
				row[i] = &s
			}
		}
		if err := each(row); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Close closes the pool.
func (p *Pool) Close() { p.pool.Close() }

// Stat returns the pool's statistics (for the admin endpoint's metrics).
func (p *Pool) Stat() *pgxpool.Stat { return p.pool.Stat() }

// Ping checks that the data database answers (the admin endpoint's
// /healthz).
func (p *Pool) Ping(ctx context.Context) error { return p.pool.Ping(ctx) }
