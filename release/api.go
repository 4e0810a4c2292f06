// Not in the privacy-critical set (docs/ARCHITECTURE.md): the Releaser's
// configuration and result types; every number they carry was computed by
// the critical files, so a bug here makes an answer wrong or unhelpful,
// never a release larger than its charge.

package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/share"
	"github.com/dpproxy/dpproxy/policy"
)

// Upstream runs emitted SQL on the data database and returns every value as
// text (NULL as nil). Implementations run it in a READ ONLY transaction with
// a statement timeout. args, when given, are the values of the SQL's bind
// parameters $1, $2, … (Plan.QueryArgs: the sample-and-aggregate key,
// which is never part of the SQL text); implementations must send them as
// parameters of the extended protocol, never interpolate them into the
// text, and never log them.
type Upstream interface {
	Query(ctx context.Context, sql string, args ...any) ([][]*string, error)
}

// Staler is an Upstream that knows, before the charge, that it would
// withhold every answer: internal/upstream.Pool once a transaction found
// the policy's columns with other types than at start-up (an error
// wrapping pgerr.ErrCatalogChanged). Release asks it before every charge.
type Staler interface {
	Stale() error
}

// RowStreamer is an Upstream that also hands a query's rows one at a time
// (internal/upstream.Pool does). Partition selection reads its candidate
// groups through it and keeps only those it selects, so a GROUP BY of a
// private key with many distinct values holds one candidate at a time
// rather than all of them (attack round 53: 20,000 keys of 4,000 bytes
// had been held at once, 82 MB). each may keep the row it is given.
type RowStreamer interface {
	QueryEach(ctx context.Context, sql string, each func(row []*string) error, args ...any) error
}

// Planner plans a statement again with the clamping bounds release chose
// by DP (dp.clipping = auto): the statement and options of p.Clip
// (dpplan.AutoClip.Statement), under ds with the chosen bounds
// (dpplan.WithClipBounds). rewrite.Replan implements it; release itself
// never sees the parser.
type Planner func(ds *policy.Dataset, p *dpplan.Plan, bounds []dpplan.ClipBounds) (*dpplan.Plan, error)

// Config configures a Releaser.
type Config struct {
	Ledger accountant.Store
	// Planner, when not nil, lets automatic clipping answer with the
	// bounds it chose; without it the declared bounds are kept (the
	// choice is still charged and reported).
	Planner Planner
	// CacheBytes bounds the in-memory answer cache in front of the
	// ledger's (cache.go); 0 means 32 MiB, a negative value turns the
	// in-memory cache off (the ledger's cache still answers).
	CacheBytes int
}

// Releaser is the one path that turns a plan into released numbers:
// reserve → run → noise → record. Safe for concurrent use.
type Releaser struct {
	ledger  accountant.Store
	planner Planner
	// answers (nil when off) and statuses: see cache.go.
	answers  *answerCache
	statuses *statusCache
	// ledgerShare bounds each analyst's ledger reads for cached answers
	// to one at a time (internal/share); the proxy's budget reads take
	// the same share (LedgerShare).
	ledgerShare *share.PerOwner
	// unrecorded counts, per analyst and dataset (suspensionKey), the
	// incidents the ledger has not taken yet (incident.go); under
	// unrecordedMu.
	unrecordedMu sync.Mutex
	unrecorded   map[string]int
	// pending counts the incidents waiting for their publish time before
	// they are written (afterCharge); stopping, once closed, has them
	// written at once (Stop).
	pending  atomic.Int64
	stopping chan struct{}
	stopOnce sync.Once
	// testOnlyRand, when set, replaces crypto/rand in every mechanism.
	testOnlyRand io.Reader
}

// LedgerShare is the per-analyst share of the ledger's pool that cached
// answers' reads take: the proxy's reads for SHOW dp.budget take the same
// one, so an analyst holds one ledger connection at a time for free
// statements, not one in each (review of 6 Dec).
func (r *Releaser) LedgerShare() *share.PerOwner { return r.ledgerShare }

// New returns a Releaser.
func New(cfg Config) (*Releaser, error) {
	if cfg.Ledger == nil {
		return nil, errors.New("release: a ledger is required")
	}
	r := &Releaser{ledger: cfg.Ledger, planner: cfg.Planner, statuses: newStatusCache(), ledgerShare: share.New(1),
		stopping: make(chan struct{})}
	switch {
	case cfg.CacheBytes == 0:
		r.answers = newAnswerCache(defaultCacheBytes)
	case cfg.CacheBytes > 0:
		r.answers = newAnswerCache(cfg.CacheBytes)
	}
	return r, nil
}

// Params are the privacy parameters of one query, as the session set
// them (Explain; Run reads the same fields of its Request).
type Params struct {
	Epsilon, Delta float64
	Mechanism      string
}

// Column is one result column.
type Column struct {
	Name   string
	PGType string // "int8", "numeric", "text", "int4", "date", "bool"
}

// Result is a released answer.
type Result struct {
	Columns []Column
	Rows    [][]*string // text values, NULL as nil
	// Notice is the text of the NOTICE sent with the rows: cost, remaining
	// budget, 95% error half-width per column.
	Notice string
	// Errors is the NOTICE's part on the answer's error: the half-widths,
	// the bias, the bounds chosen, as "; "-separated parts.
	Errors string
	// Widths is the 95% half-width of each cell, aligned with Rows (nil
	// where there is none: group keys, NULL cells, expressions without a
	// bound, the exponential quantile method's ranks); nil for answers
	// recorded before widths were kept.
	Widths [][]*string
	// ReservationID is the ledger row of this answer (of the earlier
	// answer, when Cached).
	ReservationID int64
	// Cached is true when the answer is an earlier released answer of the
	// same query, returned at no cost.
	Cached bool
	// Cost is what the answer added to the analyst's composed spending
	// (zero when Cached), and Fingerprint the charge's fingerprint in the
	// ledger (the answer cache key): for the audit log and metrics.
	Cost        accountant.Spent
	Fingerprint string
	// ReadyAt is when the answer was computed, before it waited for its
	// publish time (Request.PublishAt): the proxy pads the answer to the
	// step of the time ladder this moment reached (PadUntil), not to the
	// moment Run returned, which is after the publish time and the ledger
	// write. Zero for a cached answer.
	ReadyAt time.Time
}

// String formats a Result for debugging (column names and row count only).
func (r *Result) String() string {
	return fmt.Sprintf("release.Result{%d columns, %d rows}", len(r.Columns), len(r.Rows))
}
