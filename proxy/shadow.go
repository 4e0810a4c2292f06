package proxy

import (
	"context"
	"errors"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/shadow"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// The shadow catalog connections: each catalog statement borrows one from
// the dataset's pool (internal/shadow, "Connection pooling") and gives it
// back when it ends. They are the only connections analysts' text is sent
// to; they hold the exposed schema and no rows. All analysts of a dataset
// share them, as one shadow role, so what reaches them is bounded three
// ways: the text passes pgsql.CheckCatalog's allow-lists (Classify for
// catalog statements, checkShadowSQL for the outer SQL of post-processed
// DP answers), the connection opens read-only with the catalog route's
// statement_timeout (the pool's; a deadline catalogDeadlineGrace later
// ends the proxy's wait even if the server does not), and each analyst
// holds at most a share of the pool (53300 beyond it).

const (
	// shadowFlushRows is how many forwarded rows the session buffers
	// before writing them to the client.
	shadowFlushRows = 256
	// catalogDeadlineGrace: how long after the catalog statement_timeout,
	// which the shadow server enforces, the proxy stops waiting for a
	// catalog statement itself (a server or network that does not answer).
	catalogDeadlineGrace = 5 * time.Second
)

// maxKeptRelayOut is the largest request buffer (conn.relayOut) a session
// keeps between statements.
const maxKeptRelayOut = 64 << 10

// errCatalogTimeout is the cause of a catalog statement's context when the
// proxy's own deadline (the catalog statement_timeout and
// catalogDeadlineGrace) passed.
var errCatalogTimeout = errors.New("catalog statement timeout")

// checkShadowSQL applies the catalog allow-lists to SQL the proxy runs on
// the shadow that Classify did not route there itself (the outer SQL of a
// post-processed DP answer; the query of a cursor or COPY, checked once
// more), without a position: the text is not the client's statement.
func checkShadowSQL(sql string) error {
	toks, err := pgsql.Lex(sql)
	if err == nil {
		err = pgsql.CheckCatalog(sql, toks)
	}
	if e, ok := pgerr.As(err); ok && e.Position != 0 {
		return e.WithPosition(0)
	}
	return err
}

func errShadowUnavailable(err error) error {
	return pgerr.New(pgerr.SystemError, "the catalog database is unavailable").Wrap(err).
		WithHint("catalog statements (\\d, pg_catalog, SELECT 1, version()) are answered by the shadow catalog; try again, and tell the data steward if it persists")
}

// acquireShadow returns a shadow connection for one statement, with the
// session's settings applied: the one pinned to the session, else one from
// the dataset's pool. releaseShadow must be called after the statement.
func (c *conn) acquireShadow(ctx context.Context) (*shadow.Conn, error) {
	sc := c.shadow
	if sc == nil {
		pool := c.srv.shadowPool(c.sess.ds)
		if pool == nil {
			return nil, errShadowUnavailable(errors.New("no shadow DSN configured"))
		}
		if err := c.churnAllowed(); err != nil {
			return nil, err
		}
		var err error
		if sc, err = pool.Acquire(ctx, c.sess.analyst); err != nil {
			return nil, c.shadowAcquireFailed(ctx, pool, err)
		}
	}
	if c.onNotice == nil {
		c.onNotice = func(n *pgconn.Notice) {
			if c.sess.wantsMessages(n.Severity) {
				c.be.Send(noticeResponse(n))
			}
		}
	}
	sc.OnNotice(c.onNotice)
	if err := c.applySettings(ctx, sc); err != nil {
		// The connection is not in the session's state: it may hold the
		// previous holder's values (another analyst's; attack round 35),
		// so the statement does not run on it.
		var pge *pgconn.PgError
		if errors.As(err, &pge) && ctx.Err() == nil && !sc.PgConn().IsClosed() {
			// A value PostgreSQL refuses that the proxy's own check let
			// through: the session's statements fail until it is set
			// again. The connection holds what Apply recorded (a refused
			// batch is rolled back whole; shadow.Conn.Apply), so it goes
			// back to the pool: closed, each such free statement had
			// cost the shadow server a fork and the other analysts their
			// idle connection (attack round 92: 360 a second from one
			// analyst, another's SELECT 1 from 0.6 ms to 11 ms).
			c.finishShadow(ctx, sc, true)
			c.freeLog().Warn("could not apply a setting to the shadow session", zap.String(logKeySQLState, pge.Code))
			return nil, pgerr.New(pgerr.InvalidParameterValue, "a session setting is not valid for the catalog: %s", pge.Message).
				WithHint("SET the setting named above to a valid value, or RESET it")
		}
		c.dropShadow(sc)
		return nil, c.shadowFailed(ctx, err)
	}
	// While the session holds a shadow connection its writes to the
	// client (relayed rows, notices) have a deadline, cleared when it lets
	// the connection go (finishShadow, dropShadow): PostgreSQL does not
	// cancel a statement blocked sending its result, so a client that
	// does not read would otherwise hold the connection, and its share of
	// the pool, for ever (attack round 35). A write past it ends the
	// session.
	c.be.holdUntil(time.Now().Add(sc.StatementTimeout() + catalogDeadlineGrace))
	return sc, nil
}

// appliedKey is where a shadow connection records (in its pgconn
// CustomData, which lives and dies with it) the settings the last Apply
// on it set in full.
const appliedKey = "dpproxy.applied"

// applySettings brings sc's settings in line with the session's. Apply
// compares them with what the connection last had and sends only the
// difference, but even a no-op Apply costs a few map operations per
// setting; when the connection's last full Apply was of exactly the
// session's values (the common case: sessions rarely change these), it is
// skipped. Apply is the only thing that changes settings on a shadow
// connection (pgsql.Classify refuses SET and set_config), so the record
// stays true until the next Apply, which replaces or removes it.
func (c *conn) applySettings(ctx context.Context, sc *shadow.Conn) error {
	want := c.shadowSettings()
	data := sc.PgConn().CustomData()
	if last, ok := data[appliedKey].([]shadow.Setting); ok && slices.Equal(last, want) {
		return nil
	}
	delete(data, appliedKey)
	if err := sc.Apply(ctx, want); err != nil {
		return err
	}
	data[appliedKey] = slices.Clone(want)
	return nil
}

// releaseShadow ends a statement's use of sc: it stays pinned to the
// session while it holds state (an open transaction on the shadow, which
// the proxy never starts), and else goes back to the pool, unless the
// statement was cancelled or the connection broke (then it is closed).
func (c *conn) releaseShadow(ctx context.Context, sc *shadow.Conn) {
	c.finishShadow(ctx, sc, true)
}

// finishShadow is releaseShadow after a statement that used the socket
// directly (relay.go): reusable false means the connection is not at a
// message boundary, or reported a transaction, and is closed.
func (c *conn) finishShadow(ctx context.Context, sc *shadow.Conn, reusable bool) {
	sc.OnNotice(nil)
	c.be.holdUntil(time.Time{})
	if !reusable {
		c.dropShadow(sc)
		return
	}
	if sc.HasState() && !sc.PgConn().IsClosed() && ctx.Err() == nil {
		c.shadow = sc
		return
	}
	c.shadow = nil
	c.returnShadow(sc, ctx.Err() == nil)
}

// dropShadow closes sc (its slot in the pool is freed).
func (c *conn) dropShadow(sc *shadow.Conn) {
	sc.OnNotice(nil)
	c.be.holdUntil(time.Time{})
	if c.shadow == sc {
		c.shadow = nil
	}
	c.returnShadow(sc, false)
}

// returnShadow gives sc back to the pool; one the pool closes instead
// counts in the analyst's bucket of closed connections (shadowChurned).
func (c *conn) returnShadow(sc *shadow.Conn, reusable bool) {
	if !c.srv.shadowPool(c.sess.ds).Release(sc, reusable) {
		c.srv.shadowChurned(c.sess.analyst)
	}
}

// Shadow connections closed by an analyst's statements (attack round 92).
// A catalog statement the proxy cancels (the session's statement_timeout,
// a CancelRequest) or whose connection is left unusable (a row or error
// too large, a client that does not read) closes its pooled connection
// rather than reuse it, and its cancel is one more connection: each is a
// fork on the shadow server, free to the analyst, and it takes the idle
// connection another analyst's next statement would have reused. The
// analyst's share of the pool bounds how many they hold at once, not how
// many they close a second (about 1,000 from 1 ms statement timeouts,
// another analyst's SELECT 1 from 0.4 ms to 590 ms). So each analyst may
// close shadowChurnPerSecond of them a second (bursts of shadowChurnBurst)
// over all their sessions and datasets on this proxy; past that their
// catalog statements are refused (53000, nothing run) until the bucket
// refills. An honest session closes one when a catalog statement is
// cancelled, rarely.
const (
	shadowChurnPerSecond = 10
	shadowChurnBurst     = 20
)

// churnBucket returns analyst's bucket of closed shadow connections.
func (s *Server) churnBucket(analyst string) *rate.Limiter {
	return s.churn.bucket(analyst, shadowChurnPerSecond, shadowChurnBurst)
}

// shadowChurned counts one shadow connection closed by analyst's
// statement: the bucket may go into debt (a statement at the limit closes
// the connection it holds whatever the count).
func (s *Server) shadowChurned(analyst string) {
	s.churnBucket(analyst).ReserveN(time.Now(), 1)
}

// churnAllowed refuses the analyst's statement that would take a shadow
// connection (a catalog statement; a post-processing one, before its rate
// limit, padding or queue: execPost), before it takes one, while their
// bucket of closed connections is empty.
func (c *conn) churnAllowed() error {
	tokens := c.srv.churnBucket(c.sess.analyst).TokensAt(time.Now())
	if tokens >= 1 {
		return nil
	}
	c.freeLog().Warn("analyst's statements closed too many shadow connections")
	wait := time.Duration((1 - tokens) / shadowChurnPerSecond * float64(time.Second))
	return pgerr.New(insufficientResources, "your statements closed too many catalog connections").
		WithDetail("Catalog statements, and the SQL around DP aggregates (it runs on the catalog), that are cancelled (a statement_timeout, a cancel request) or fail mid-reply close their shadow connection, which all analysts share; each analyst may close %d a second. The statement was not run and nothing was charged.", shadowChurnPerSecond).
		WithHint("retry in %s; raise statement_timeout if your statements are cancelled by it", wait.Round(time.Millisecond))
}

// shadowAcquireFailed turns a failure to get a pooled connection into the
// statement's error.
func (c *conn) shadowAcquireFailed(ctx context.Context, pool *shadow.Pool, err error) error {
	switch {
	case errors.Is(err, shadow.ErrPoolExhausted):
		c.freeLog().Warn("shadow pool exhausted", zap.Int("max_conns", pool.MaxConns()))
		return pgerr.New(pgerr.TooManyConnections, "all %d catalog connections are busy", pool.MaxConns()).Wrap(err).
			WithHint("the statement was not run; retry it (the session is fine), or ask the operator to raise shadow_max_connections in dpproxy.yaml")
	case errors.Is(err, shadow.ErrOwnerLimit):
		c.freeLog().Warn("analyst's share of the shadow pool in use", zap.Int("max_conns_per_analyst", pool.MaxConnsPerOwner()))
		return pgerr.New(pgerr.TooManyConnections, "all %d of your catalog connections are busy", pool.MaxConnsPerOwner()).Wrap(err).
			WithHint("each analyst's sessions may hold %d of the %d catalog connections all analysts share; the statement was not run: retry it when your other catalog statements have ended (each runs at most %s)",
				pool.MaxConnsPerOwner(), pool.MaxConns(), pool.StatementTimeout())
	case ctx.Err() != nil:
		return statementError(ctx, err)
	}
	c.freeLog().Warn("shadow connect failed", zap.Error(err))
	return errShadowUnavailable(err)
}

// shadowSettings are the session's values of the settings that affect
// catalog answers, in a stable order.
// The slice is the session's, reused by the next call.
func (c *conn) shadowSettings() []shadow.Setting {
	out := c.shadowWant[:0]
	for i, n := range shadowSettingNames {
		v, ok := c.sess.settings[n]
		if !ok {
			v = c.sess.defaultSetting(n)
		}
		out = append(out, shadow.Setting{Name: shadowSettingDisplay[i], Value: v})
	}
	c.shadowWant = out
	return out
}

// shadowSettingNames are the keys of settingDefs marked shadow, sorted.
var shadowSettingNames = func() []string {
	var out []string
	for n, d := range settingDefs {
		if d.shadow {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}()

// shadowSettingDisplay are the names of shadowSettingNames as PostgreSQL
// spells them.
var shadowSettingDisplay = func() []string {
	out := make([]string, len(shadowSettingNames))
	for i, n := range shadowSettingNames {
		out[i] = settingDefs[n].name
	}
	return out
}()

// catalogContext bounds a shadow statement that pgconn runs (describe,
// rows for a cursor or post-processing) by the catalog statement_timeout
// and catalogDeadlineGrace, with errCatalogTimeout as the cause.
func (c *conn) catalogContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := shadow.DefaultStatementTimeout
	if pool := c.srv.shadowPool(c.sess.ds); pool != nil {
		d = pool.StatementTimeout()
	}
	return context.WithTimeoutCause(ctx, d+catalogDeadlineGrace, errCatalogTimeout)
}

// closeShadow closes the pinned shadow connection, if any (DISCARD ALL,
// end of session).
func (c *conn) closeShadow() {
	if c.shadow == nil {
		return
	}
	c.returnShadow(c.shadow, false)
	c.shadow = nil
}

// shadowFailed turns an error of the shadow connection into the client's
// error. PostgreSQL errors are forwarded as they are; anything else means
// the shadow connection broke, which the pool closes (the next catalog
// statement gets another) and is reported as 58000.
func (c *conn) shadowFailed(ctx context.Context, err error) error {
	var pge *pgconn.PgError
	if errors.As(err, &pge) {
		if pge.Code == pgerr.QueryCanceled && ctx.Err() != nil {
			// The proxy cancelled it (the session's statement_timeout, a
			// CancelRequest): say why, as PostgreSQL would.
			return statementError(ctx, err)
		}
		return &shadowError{pg: clipShadowError(pge)}
	}
	if ctx.Err() != nil {
		return statementError(ctx, err)
	}
	if tooBig := (*pgproto3.ExceededMaxBodyLenErr)(nil); errors.As(err, &tooBig) {
		// pgconn closed the connection before reading the message's body
		// (the shadow pool's BuildFrontend).
		return pgerr.New(programLimitExceeded, "catalog row too large (over %d bytes)", c.srv.cfg.MaxBufferedResult).
			WithHint("select fewer or shorter columns")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The relay's read deadline (relayShadow): the shadow did not end
		// the statement at its statement_timeout.
		c.freeLog().Warn("shadow statement outlived the catalog statement timeout", zap.Error(err))
		return pgerr.New(pgerr.QueryCanceled, "canceling statement due to statement timeout").Wrap(err).
			WithHint("catalog statements run for at most catalog_statement_timeout")
	}
	if _, ok := pgerr.As(err); ok {
		return err
	}
	c.freeLog().Warn("shadow statement failed", zap.Error(err))
	return errShadowUnavailable(err)
}

// execShadowSimple forwards a catalog statement with the simple protocol
// and relays its results to the client as the shadow wrote them
// (relay.go).
func (c *conn) execShadowSimple(ctx context.Context, text string) error {
	return c.relayShadow(ctx, func(out []byte) ([]byte, error) { return appendQuery(out, text), nil }, nil)
}

// relayShadow is one forwarded statement on a pooled shadow connection:
// the request that build appends is written in one write and the reply
// relayed (to the client, or kept in br for a portal); the connection
// goes back to the pool only when the relay left it idle.
func (c *conn) relayShadow(ctx context.Context, build func([]byte) ([]byte, error), br *bufferedResult) error {
	sc, err := c.acquireShadow(ctx)
	if err != nil {
		return err
	}
	rl, err := openRelay(ctx, sc, c.srv.cfg.MaxBufferedResult)
	if err != nil {
		c.dropShadow(sc)
		return c.shadowFailed(ctx, err)
	}
	if c.admitFn == nil {
		c.admitFn = c.admitRelayed // once per session: a method value allocates
	}
	rl.f.admit = c.admitFn
	defer c.releaseRelayed()
	// The proxy's own bound, should the server not end the statement at
	// its statement_timeout; cleared below (pgconn uses the socket next).
	// (The client's writes have a deadline too: acquireShadow.)
	_ = rl.nc.SetReadDeadline(time.Now().Add(sc.StatementTimeout() + catalogDeadlineGrace))
	unwatch := c.watchShadow(ctx, sc.PgConn())
	c.relayOut, err = build(c.relayOut[:0])
	reusable := false
	if err == nil {
		if err = rl.send(c.relayOut); err != nil {
			err = c.shadowFailed(ctx, relayIOError(err))
		} else {
			err, reusable = c.relayReply(ctx, &rl, br)
		}
	}
	if cap(c.relayOut) > maxKeptRelayOut {
		// Not kept at a long statement's size for the session's life
		// (attack round 93: 2 MiB per idle session, uncounted).
		c.relayOut = nil
	}
	unwatch() // before the connection is released
	_ = rl.nc.SetReadDeadline(time.Time{})
	if rl.close() {
		reusable = false
	}
	c.finishShadow(ctx, sc, reusable)
	return err
}

// toWireFields converts pgconn field descriptions; formats, when given,
// override the format codes (Describe of a statement reports text).
func toWireFields(fds []pgconn.FieldDescription, formats []int16) []pgproto3.FieldDescription {
	out := make([]pgproto3.FieldDescription, len(fds))
	for i, f := range fds {
		format := f.Format
		if formats != nil {
			format = formatFor(formats, i)
		}
		out[i] = pgproto3.FieldDescription{
			Name: []byte(f.Name), TableOID: f.TableOID, TableAttributeNumber: f.TableAttributeNumber,
			DataTypeOID: f.DataTypeOID, DataTypeSize: f.DataTypeSize, TypeModifier: f.TypeModifier,
			Format: format,
		}
	}
	return out
}

// describeShadow asks the shadow to describe a statement: parameter types
// (it infers those the client left unspecified) and result columns.
func (c *conn) describeShadow(ctx context.Context, text string, paramOIDs []uint32) (*pgconn.StatementDescription, error) {
	ctx, cancel := c.catalogContext(ctx)
	defer cancel()
	sc, err := c.acquireShadow(ctx)
	if err != nil {
		return nil, err
	}
	defer c.releaseShadow(ctx, sc)
	sd, err := sc.PgConn().Prepare(ctx, "", text, paramOIDs)
	if err != nil {
		return nil, c.shadowFailed(ctx, err)
	}
	return sd, nil
}

// execShadowExtended runs a catalog statement on the shadow with the
// extended protocol (Parse, Bind, Describe, Execute, Sync in one write)
// and keeps its reply for a portal as the shadow wrote it (bounded by
// MaxBufferedResult).
func (c *conn) execShadowExtended(ctx context.Context, p *portal) (*bufferedResult, error) {
	ps := p.stmt
	oids := ps.parseOIDs
	if ps.desc != nil {
		oids = ps.desc.paramOIDs
	}
	if len(oids) > len(p.params) {
		oids = oids[:len(p.params)] // the rest: the shadow infers the type
	}
	br := &bufferedResult{}
	if err := c.relayShadow(ctx, func(out []byte) ([]byte, error) { return appendExtended(out, ps.text, oids, p) }, br); err != nil {
		return nil, err
	}
	return br, nil
}

// appendExtended appends the unnamed statement and portal's Parse, Bind,
// Describe, Execute and Sync for one run of p's statement text.
func appendExtended(dst []byte, text string, oids []uint32, p *portal) ([]byte, error) {
	var err error
	if dst, err = (&pgproto3.Parse{Query: text, ParameterOIDs: oids}).Encode(dst); err != nil {
		return dst, err
	}
	bind := pgproto3.Bind{ParameterFormatCodes: p.paramFormats, Parameters: p.params, ResultFormatCodes: p.resultFormats}
	if dst, err = bind.Encode(dst); err != nil {
		return dst, err
	}
	if dst, err = (&pgproto3.Describe{ObjectType: 'P'}).Encode(dst); err != nil {
		return dst, err
	}
	if dst, err = (&pgproto3.Execute{}).Encode(dst); err != nil {
		return dst, err
	}
	return (&pgproto3.Sync{}).Encode(dst)
}

func noticeResponse(n *pgconn.Notice) *pgproto3.NoticeResponse {
	return &pgproto3.NoticeResponse{
		Severity: n.Severity, SeverityUnlocalized: n.SeverityUnlocalized, Code: n.Code,
		Message: n.Message, Detail: n.Detail, Hint: n.Hint, Position: n.Position,
		InternalPosition: n.InternalPosition, InternalQuery: n.InternalQuery, Where: n.Where,
		SchemaName: n.SchemaName, TableName: n.TableName, ColumnName: n.ColumnName,
		DataTypeName: n.DataTypeName, ConstraintName: n.ConstraintName,
		File: n.File, Line: n.Line, Routine: n.Routine,
	}
}

// maxShadowErrorField bounds each text field of an error the shadow sent
// that the session keeps to send: PostgreSQL quotes a cast's whole input
// in its message (SELECT repeat('x', 60000000)::int: a 60 MB error, held
// until the client read it; attack round 82), as the DP NOTICE is cut.
const maxShadowErrorField = 8 << 10

// clipShadowError returns a copy of e with its text fields cut to
// maxShadowErrorField bytes.
func clipShadowError(e *pgconn.PgError) *pgconn.PgError {
	c := *e
	for _, f := range []*string{&c.Message, &c.Detail, &c.Hint, &c.Where, &c.InternalQuery, &c.SchemaName, &c.TableName, &c.ColumnName, &c.DataTypeName, &c.ConstraintName, &c.File, &c.Routine} {
		*f = pgerr.Truncate(*f, maxShadowErrorField)
	}
	return &c
}
