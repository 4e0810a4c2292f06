package shadow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Connection pooling.
//
// Analysts' sessions share a bounded pool of shadow connections per
// dataset, so the shadow cluster sees at most PoolConfig.MaxConns backends
// from a proxy however many client sessions there are (issue: 200 client
// sessions used to hold 200 shadow backends, over PostgreSQL's default
// max_connections of 100). A session acquires a connection for one catalog
// statement (one Describe, one Execute) and releases it right after, as
// PgBouncer's transaction pooling does, which is correct here only because
// a shadow connection carries no session state but its settings:
//
//   - transactions: BEGIN/COMMIT/ROLLBACK are answered by the proxy and
//     never sent to the shadow, so every statement there runs in its own
//     implicit transaction. Should a connection ever be released inside a
//     transaction (HasState), it is not pooled: the proxy keeps it pinned
//     to the session until the transaction ends, and Release closes it
//     otherwise;
//   - settings: the proxy keeps every session setting itself (SET, RESET,
//     SET LOCAL, ROLLBACK), and Apply replays, before each statement, the
//     session's values of the settings that affect catalog answers
//     (TimeZone, DateStyle, search_path, extra_float_digits,
//     application_name…), sending only those that differ from what the
//     connection last had (so nothing, usually). JDBC's start-up
//     parameters (extra_float_digits = 3, application_name) are session
//     settings like any other and so survive pooling;
//   - prepared statements and portals: the proxy uses only the unnamed
//     statement and portal on the shadow, and reads each result whole
//     before releasing, so nothing named lives there; clients' named
//     statements and portals are the proxy's own;
//   - temporary objects, LISTEN, advisory locks, large objects, cursors,
//     PREPARE, set_config, setseed and every other statement or function
//     that leaves server-side state are refused before reaching the shadow:
//     a catalog statement must pass pgsql.CheckCatalog's allow-lists
//     (SELECT, WITH, VALUES, TABLE or EXPLAIN, calling only read-only
//     catalog and scalar functions), so none of them can be written, not
//     even through a function that runs SQL text (query_to_xml), and the
//     shadow role cannot create anything.
//
// Each connection is also opened in a known state that statements cannot
// leave (startupParams): default_transaction_read_only on (whatever a
// statement calls, it cannot write), and the catalog route's own
// statement_timeout, lock_timeout and idle_in_transaction_session_timeout,
// which bound what one statement can hold, and a client connection check,
// so that a backend the pool closed does not run on outside its bound. Apply never changes these
// (pinnedSettings): an analyst's statement_timeout is enforced by the
// proxy, as for DP statements. On Release the pool checks what is cheap
// to check: the connection is idle outside a transaction, and every
// setting PostgreSQL reports (ParameterStatus: TimeZone, DateStyle,
// IntervalStyle, application_name, default_transaction_read_only…) still
// has the value it had after the last Apply; the proxy's byte-level relay
// reports any ParameterStatus or notification it meets during a
// statement, which also makes the connection unreusable. Anything else is
// closed, not pooled.
//
// A connection whose statement was cancelled is closed rather than pooled
// (a late cancel request could otherwise hit the next session's
// statement), as is one that broke. When all MaxConns are in use, Acquire
// waits up to AcquireTimeout for one to come back and then fails with
// ErrPoolExhausted, which the proxy reports as 53300 for that statement
// only: the session goes on.
//
// Analysts share the pool, so one of them (however many sessions) holds
// at most MaxConnsPerOwner connections at once: Acquire names the owner,
// and an owner at its share waits (within the same AcquireTimeout) for one
// of its own connections to come back, then fails with ErrOwnerLimit,
// while other owners' statements keep getting connections. With the
// statement_timeout above, an analyst who fills their share with slow
// statements holds it for at most that long.

// Defaults of PoolConfig.
const (
	// DefaultMaxConns is a fifth of PostgreSQL's default max_connections
	// (100): catalog statements take milliseconds, so a few connections
	// serve hundreds of sessions, and other clients of the shadow cluster
	// (the shadow build, psql, monitoring, a second proxy) keep room.
	DefaultMaxConns       = 20
	DefaultAcquireTimeout = 5 * time.Second
	// DefaultStatementTimeout is the catalog route's statement_timeout:
	// psql's, pgjdbc's and BI tools' catalog statements take
	// milliseconds; anything that runs for seconds on a schema with no
	// protected rows is a runaway or an attempt to hold connections.
	DefaultStatementTimeout = 10 * time.Second
	defaultConnectTimeout   = 10 * time.Second
	// idlePing: a connection idle longer is pinged before it is handed out.
	idlePing = time.Second
)

// ErrPoolExhausted is returned by Acquire when every connection of the pool
// stayed in use for PoolConfig.AcquireTimeout.
var ErrPoolExhausted = errors.New("all shadow catalog connections are in use")

// ErrPoolClosed is returned by Acquire after Close.
var ErrPoolClosed = errors.New("the shadow catalog pool is closed")

// ErrOwnerLimit is returned by Acquire when the owner held
// PoolConfig.MaxConnsPerOwner connections for all of AcquireTimeout.
var ErrOwnerLimit = errors.New("the analyst holds their share of the shadow catalog connections")

// PoolConfig configures a Pool.
type PoolConfig struct {
	// DSN of the shadow database, as the shadow role.
	DSN string
	// MaxConns bounds the connections the pool opens (default
	// DefaultMaxConns).
	MaxConns int
	// AcquireTimeout bounds how long Acquire waits for a connection when
	// all MaxConns are in use, or all of its owner's share (default
	// DefaultAcquireTimeout).
	AcquireTimeout time.Duration
	// MaxConnsPerOwner bounds the connections one owner holds at once
	// (default max(1, MaxConns/4); at most MaxConns).
	MaxConnsPerOwner int
	// StatementTimeout is every connection's statement_timeout (default
	// DefaultStatementTimeout); its lock_timeout is half of it, and its
	// idle_in_transaction_session_timeout the same.
	StatementTimeout time.Duration
	// Configure, when set, adjusts the configuration of each new
	// connection (e.g. its BuildContextWatcherHandler). The pool sets
	// OnNotice itself.
	Configure func(*pgconn.Config)
}

// Pool is a bounded pool of connections to one shadow database. A Conn is
// acquired for one statement and released after it, so the number of
// shadow backends is bounded by MaxConns however many client sessions
// there are. Safe for concurrent use.
type Pool struct {
	cfg      *pgconn.Config
	timeout  time.Duration
	perOwner int
	stmtTime time.Duration
	// slots holds one token per open (or opening) connection: its
	// capacity is MaxConns.
	slots chan struct{}
	// idle holds released connections, oldest first; never more than
	// MaxConns, so sending never blocks.
	idle chan *Conn

	mu     sync.Mutex
	closed bool
	// held counts the connections each owner holds (under mu); waiting
	// are the owners' Acquires that wait for one of them, oldest first:
	// a release by an owner with waiters hands its share to the oldest
	// (one wake-up, not one per waiter).
	held    map[string]int
	waiting map[string][]chan struct{}

	opened, waited, exhausted, ownerLimited atomic.Int64
}

// NewPool parses cfg; it opens no connection (the first Acquire does).
func NewPool(cfg PoolConfig) (*Pool, error) {
	pc, err := pgconn.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("shadow DSN: %w", err)
	}
	if cfg.MaxConns < 0 || cfg.AcquireTimeout < 0 || cfg.MaxConnsPerOwner < 0 || cfg.StatementTimeout < 0 {
		return nil, errors.New("shadow pool: limits must not be negative")
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.AcquireTimeout == 0 {
		cfg.AcquireTimeout = DefaultAcquireTimeout
	}
	if cfg.MaxConnsPerOwner == 0 {
		cfg.MaxConnsPerOwner = max(1, cfg.MaxConns/4)
	}
	cfg.MaxConnsPerOwner = min(cfg.MaxConnsPerOwner, cfg.MaxConns)
	if cfg.StatementTimeout == 0 {
		cfg.StatementTimeout = DefaultStatementTimeout
	}
	if cfg.StatementTimeout < 2*time.Millisecond {
		return nil, errors.New("shadow pool: statement timeout must be at least 2ms")
	}
	if pc.ConnectTimeout == 0 {
		pc.ConnectTimeout = defaultConnectTimeout
	}
	if cfg.Configure != nil {
		cfg.Configure(pc)
	}
	// After Configure: the known state is the pool's.
	for k, v := range startupParams(cfg.StatementTimeout) {
		pc.RuntimeParams[k] = v
	}
	return &Pool{
		cfg:      pc,
		timeout:  cfg.AcquireTimeout,
		perOwner: cfg.MaxConnsPerOwner,
		stmtTime: cfg.StatementTimeout,
		slots:    make(chan struct{}, cfg.MaxConns),
		idle:     make(chan *Conn, cfg.MaxConns),
		held:     map[string]int{},
		waiting:  map[string][]chan struct{}{},
	}, nil
}

// startupParams are the settings every connection opens with
// ("Connection pooling"); Apply never changes them (pinnedSettings).
func startupParams(statementTimeout time.Duration) map[string]string {
	ms := func(d time.Duration) string { return fmt.Sprint(d.Milliseconds()) }
	return map[string]string{
		"default_transaction_read_only":       "on",
		"statement_timeout":                   ms(statementTimeout),
		"lock_timeout":                        ms(statementTimeout / 2),
		"idle_in_transaction_session_timeout": ms(statementTimeout),
		// A backend whose connection the pool gave up on (closed at the
		// proxy's deadline while its statement runs) notices within a
		// second and ends, rather than running on outside the pool's
		// bound (attack round 78; PostgreSQL 14+, Linux).
		"client_connection_check_interval": ms(clientCheckInterval),
	}
}

// clientCheckInterval is how often a shadow backend running a statement
// checks that the proxy is still connected.
const clientCheckInterval = time.Second

// pinnedSettings are the settings of startupParams (and what would undo
// them), which Apply refuses to change.
var pinnedSettings = map[string]bool{
	"default_transaction_read_only": true, "transaction_read_only": true,
	"statement_timeout": true, "lock_timeout": true, "idle_in_transaction_session_timeout": true,
	"client_connection_check_interval": true, "role": true, "session_authorization": true,
}

// reportedSettings are the settings PostgreSQL reports with ParameterStatus
// whenever they change (GUC_REPORT, PostgreSQL 15).
var reportedSettings = [...]string{
	"application_name", "client_encoding", "DateStyle", "default_transaction_read_only",
	"in_hot_standby", "integer_datetimes", "IntervalStyle", "is_superuser", "server_encoding",
	"server_version", "session_authorization", "standard_conforming_strings", "TimeZone",
}

// StatementTimeout is the statement_timeout of the pool's connections.
func (p *Pool) StatementTimeout() time.Duration { return p.stmtTime }

// MaxConnsPerOwner is the bound on the connections one owner holds.
func (p *Pool) MaxConnsPerOwner() int { return p.perOwner }

// MaxConns is the bound on the pool's connections.
func (p *Pool) MaxConns() int { return cap(p.slots) }

// PoolStats are counters of a Pool since it was made.
type PoolStats struct {
	Open         int   // connections open now (idle or in use)
	Idle         int   // of which idle
	Opened       int64 // connections opened
	Waited       int64 // acquisitions that had to wait for a connection
	Exhausted    int64 // acquisitions that failed with ErrPoolExhausted
	OwnerLimited int64 // acquisitions that failed with ErrOwnerLimit
}

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	return PoolStats{
		Open: len(p.slots), Idle: len(p.idle),
		Opened: p.opened.Load(), Waited: p.waited.Load(), Exhausted: p.exhausted.Load(),
		OwnerLimited: p.ownerLimited.Load(),
	}
}

// Acquire returns a connection for one statement of owner (the analyst;
// "" for a caller that is none, which is not counted): an idle one, a new
// one while fewer than MaxConns are open, or else the first one released
// within AcquireTimeout (ErrPoolExhausted after it). An owner that holds
// MaxConnsPerOwner connections first waits, within the same
// AcquireTimeout, for one of them (ErrOwnerLimit after it). The caller
// must Release it. A connection error of a new connection is returned as
// it is.
func (p *Pool) Acquire(ctx context.Context, owner string) (*Conn, error) {
	if p.isClosed() {
		return nil, ErrPoolClosed
	}
	timer := &acquireTimer{d: p.timeout}
	defer timer.stop()
	if owner != "" {
		if err := p.takeShare(ctx, owner, timer); err != nil {
			return nil, err
		}
	}
	c, err := p.acquire(ctx, timer)
	if err != nil {
		if owner != "" {
			p.giveShare(owner)
		}
		return nil, err
	}
	c.owner = owner
	return c, nil
}

// acquireTimer is the one AcquireTimeout of an Acquire, started when it
// first waits (most acquisitions never do, and pay for no timer).
type acquireTimer struct {
	d time.Duration
	t *time.Timer
}

func (a *acquireTimer) c() <-chan time.Time {
	if a.t == nil {
		a.t = time.NewTimer(a.d)
	}
	return a.t.C
}

func (a *acquireTimer) stop() {
	if a.t != nil {
		a.t.Stop()
	}
}

// takeShare counts one more connection for owner, waiting while it holds
// its share (in line behind the owner's earlier waiters).
func (p *Pool) takeShare(ctx context.Context, owner string, timer *acquireTimer) error {
	p.mu.Lock()
	if p.held[owner] < p.perOwner {
		p.held[owner]++
		p.mu.Unlock()
		return nil
	}
	w := make(chan struct{}, 1)
	p.waiting[owner] = append(p.waiting[owner], w)
	p.mu.Unlock()
	var err error
	select {
	case <-w:
		return nil
	case <-timer.c():
		err = ErrOwnerLimit
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	p.mu.Lock()
	q := p.waiting[owner]
	i := slices.Index(q, w)
	if i < 0 {
		// Handed a share while giving up: pass it on.
		p.mu.Unlock()
		p.giveShare(owner)
	} else {
		if q = slices.Delete(q, i, i+1); len(q) == 0 {
			delete(p.waiting, owner)
		} else {
			p.waiting[owner] = q
		}
		p.mu.Unlock()
	}
	if errors.Is(err, ErrOwnerLimit) {
		p.ownerLimited.Add(1)
	}
	return err
}

// giveShare counts one connection less for owner, or hands it to the
// owner's oldest waiter.
func (p *Pool) giveShare(owner string) {
	p.mu.Lock()
	if q := p.waiting[owner]; len(q) > 0 {
		q[0] <- struct{}{} // buffered, and sent to once: never blocks
		if len(q) == 1 {
			delete(p.waiting, owner)
		} else {
			p.waiting[owner] = slices.Delete(q, 0, 1)
		}
	} else if p.held[owner]--; p.held[owner] <= 0 {
		delete(p.held, owner)
	}
	p.mu.Unlock()
}

// acquire is Acquire once the owner has its share.
func (p *Pool) acquire(ctx context.Context, timer *acquireTimer) (*Conn, error) {
	// An idle connection, or a free slot, without waiting. A caller
	// whose statement has ended takes neither: usable's ping under its
	// context would fail at once and close a healthy connection, every
	// idle one in turn (review round 95), and open would make one for
	// nothing.
	for {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		select {
		case c := <-p.idle:
			if c, err := p.fromIdle(ctx, c); c != nil || err != nil {
				return c, err
			}
			continue
		default:
		}
		break
	}
	select {
	case p.slots <- struct{}{}:
		return p.open(ctx)
	default:
	}
	// All MaxConns in use: wait for one to be released.
	p.waited.Add(1)
	timeout := timer.c()
	for {
		select {
		case c := <-p.idle:
			if c, err := p.fromIdle(ctx, c); c != nil || err != nil {
				return c, err
			}
			// Its slot is free now: the next iteration may take it.
		case p.slots <- struct{}{}:
			if ctx.Err() != nil {
				<-p.slots
				return nil, context.Cause(ctx)
			}
			return p.open(ctx)
		case <-timeout:
			p.exhausted.Add(1)
			return nil, ErrPoolExhausted
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// fromIdle hands out c, just taken from the idle set, when it is usable;
// else it closes it and returns nil (its slot is free). A caller whose
// statement has ended, before or during the ping, gets its context's
// error and c goes back to the idle set: the ping is not under that
// context, which would fail it and close a healthy connection, another
// analyst's as often as not, uncounted by the caller's churn (review
// rounds 95 and 100).
func (p *Pool) fromIdle(ctx context.Context, c *Conn) (*Conn, error) {
	if ctx.Err() == nil && !c.usable() {
		p.discard(c)
		return nil, nil
	}
	if ctx.Err() != nil {
		p.toIdle(c)
		return nil, context.Cause(ctx)
	}
	return c, nil
}

// toIdle puts c, whose slot it holds, in the idle set (never blocks),
// and closes it at once when Close drained the set just before.
func (p *Pool) toIdle(c *Conn) {
	p.idle <- c
	if p.isClosed() {
		p.drain()
	}
}

// open connects a new connection in a slot already taken.
func (p *Pool) open(ctx context.Context) (*Conn, error) {
	if p.isClosed() {
		<-p.slots
		return nil, ErrPoolClosed
	}
	c := &Conn{pool: p, settings: map[string]string{}}
	cfg := p.cfg.Copy()
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		// Called only from within the holder's own reads.
		if c.notice != nil {
			c.notice(n)
		}
	}
	// Not under ctx: a connection is opened whole (ConnectTimeout bounds
	// it) and pooled if the statement it was for has ended meanwhile.
	// Abandoned under a statement's own short statement_timeout, each
	// half-open connection had cost the shadow server a fork for nothing,
	// about a thousand a second from one analyst's free statements, and
	// the other analysts' catalog statements waited for their own
	// connections among them (attack round 92).
	pc, err := pgconn.ConnectConfig(context.WithoutCancel(ctx), cfg)
	if err != nil {
		<-p.slots
		return nil, err
	}
	p.opened.Add(1)
	c.pg = pc
	if v := pc.ParameterStatus("default_transaction_read_only"); v != "on" {
		// Something between the proxy and the server (a pooler) dropped
		// the start-up parameters.
		p.discard(c)
		return nil, fmt.Errorf("shadow connection opened with default_transaction_read_only = %q, not on", v)
	}
	c.snapshot()
	if ctx.Err() != nil {
		c.idleSince = time.Now()
		p.toIdle(c)
		return nil, context.Cause(ctx)
	}
	return c, nil
}

// Release gives a connection back. It goes back to the idle set when it can
// serve another session as it is: open, not busy, with no transaction open
// on it, and with the reported settings it had after the last Apply;
// otherwise, or when reusable is false (e.g. the statement was
// cancelled, and a late cancel request could hit the next statement run on
// it), it is closed.
//
// It reports whether the connection was kept (false: it was closed, and
// the next Acquire that finds no idle connection opens a new one).
func (p *Pool) Release(c *Conn, reusable bool) (kept bool) {
	c.notice = nil
	if c.owner != "" {
		p.giveShare(c.owner)
		c.owner = ""
	}
	if !p.keeps(c, reusable) {
		p.discard(c)
		return false
	}
	c.idleSince = time.Now()
	p.toIdle(c)
	return true
}

func (p *Pool) discard(c *Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.pg.Close(ctx)
	<-p.slots
}

// Close closes the idle connections and makes Acquire fail; connections in
// use are closed when they are released. Safe to call more than once.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.drain()
}

func (p *Pool) drain() {
	for {
		select {
		case c := <-p.idle:
			p.discard(c)
		default:
			return
		}
	}
}

func (p *Pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Conn is one pooled shadow connection, held by one session at a time. Not
// safe for concurrent use.
type Conn struct {
	pool *Pool
	pg   *pgconn.PgConn
	// settings are the values Apply set on this connection, by lower-case
	// name. Nothing else changes settings on a shadow connection: SET and
	// set_config never reach it from analysts (pgsql.Classify).
	settings map[string]string
	// reported are the values of reportedSettings after the connection
	// opened or the last Apply, which Release compares.
	reported  [len(reportedSettings)]string
	owner     string // who holds it ("" when idle, or not counted)
	notice    func(*pgconn.Notice)
	idleSince time.Time
}

// StatementTimeout is the connection's statement_timeout (the pool's).
func (c *Conn) StatementTimeout() time.Duration { return c.pool.stmtTime }

// PgConn is the underlying connection, for one statement.
func (c *Conn) PgConn() *pgconn.PgConn { return c.pg }

// OnNotice sets the function that receives the notices of the holder's
// statements (nil: drop them). Release clears it.
func (c *Conn) OnNotice(f func(*pgconn.Notice)) { c.notice = f }

// snapshot records the reported settings as they are now.
func (c *Conn) snapshot() {
	for i, n := range reportedSettings {
		c.reported[i] = c.pg.ParameterStatus(n)
	}
}

// Changed reports whether a setting PostgreSQL reports has a value other
// than after the connection opened or the last Apply: something other
// than Apply changed it.
func (c *Conn) Changed() bool {
	for i, n := range reportedSettings {
		if c.reported[i] != c.pg.ParameterStatus(n) {
			return true
		}
	}
	return false
}

// HasState reports whether the connection holds state that ties it to its
// session, so that it must stay with the session (pinned) rather than
// return to the pool: an open transaction on the shadow.
func (c *Conn) HasState() bool { return c.pg.TxStatus() != 'I' }

// usable reports whether an idle connection can be handed out: it is open
// and, when it has been idle for over a second (as pgxpool does), answers
// a ping within pingTimeout, so one the server closed meanwhile (a shadow
// restart, an administrator) is replaced rather than failing the
// statement. Not CheckConn: its 1ms context would go through the
// connection's context watcher, which may send a cancel request and wait
// for its deadline.
func (c *Conn) usable() bool {
	if c.pg.IsClosed() {
		return false
	}
	if time.Since(c.idleSince) > idlePing {
		ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
		defer cancel()
		if c.pg.Ping(ctx) != nil {
			return false
		}
		c.idleSince = time.Now()
	}
	return true
}

// pingTimeout bounds usable's ping (a round trip on an idle connection).
const pingTimeout = 2 * time.Second

// Setting is one session setting to apply on a shadow connection.
type Setting struct{ Name, Value string }

// Apply brings the connection's settings in line with want, the values of
// the holder's session, with set_config for those that differ from what
// this connection last had set (none when the previous holder's agreed:
// then Apply sends nothing). Names and values are bound parameters, never
// spliced into SQL. Settings this connection had set that want does not
// name are reset (set_config with NULL). When the batch fails, each
// setting is tried alone; the ones PostgreSQL refuses are returned as a
// joined error (the connection keeps its previous value for them), and a
// broken connection's error is returned as it is.
func (c *Conn) Apply(ctx context.Context, want []Setting) error {
	var names []string
	var values [][]byte // nil: reset
	seen := make(map[string]bool, len(want))
	for _, s := range want {
		k := strings.ToLower(s.Name)
		if pinnedSettings[k] {
			return fmt.Errorf("shadow: %s is the pool's and is not applied", s.Name)
		}
		seen[k] = true
		if v, ok := c.settings[k]; !ok || v != s.Value {
			names = append(names, s.Name)
			values = append(values, []byte(s.Value))
		}
	}
	for k := range c.settings {
		if !seen[k] {
			names = append(names, k)
			values = append(values, nil)
		}
	}
	if len(names) == 0 {
		return nil
	}
	if err := c.setConfig(ctx, names, values); err == nil {
		return nil
	} else if !isPgError(err) || c.pg.IsClosed() {
		return err
	}
	var errs []error
	for i := range names {
		if err := c.setConfig(ctx, names[i:i+1], values[i:i+1]); err != nil {
			if !isPgError(err) || c.pg.IsClosed() {
				return err
			}
			errs = append(errs, fmt.Errorf("%s: %w", names[i], err))
		}
	}
	return errors.Join(errs...)
}

// setConfig runs one SELECT of set_config calls and records the values.
func (c *Conn) setConfig(ctx context.Context, names []string, values [][]byte) error {
	var sb strings.Builder
	params := make([][]byte, 0, 2*len(names))
	sb.WriteString("SELECT ")
	for i := range names {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "pg_catalog.set_config($%d, $%d, false)", 2*i+1, 2*i+2)
		params = append(params, []byte(names[i]), values[i])
	}
	_, err := c.pg.ExecParams(ctx, sb.String(), params, nil, nil, nil).Close()
	// What PostgreSQL now reports is what Apply set (even when it refused
	// a value: the others in the batch were rolled back with it).
	c.snapshot()
	if err != nil {
		return err
	}
	for i, n := range names {
		if values[i] == nil {
			delete(c.settings, strings.ToLower(n))
		} else {
			c.settings[strings.ToLower(n)] = string(values[i])
		}
	}
	return nil
}

func isPgError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// keeps reports whether a released connection goes back to the idle set:
// reusable by its holder's account, open, not busy, with no transaction,
// its reported settings as Apply left them, and the pool open.
func (p *Pool) keeps(c *Conn, reusable bool) bool {
	return reusable && !c.pg.IsClosed() && !c.HasState() && !c.pg.IsBusy() && !c.Changed() && !p.isClosed()
}
