package proxy

import (
	"context"
	"errors"
	"sort"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/shadow"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"
)

// The shadow catalog connections: each catalog statement borrows one from
// the dataset's pool (internal/shadow, "Connection pooling") and gives it
// back when it ends. They are the only connections analysts' text is sent
// to; they hold the exposed schema and no rows.

const (
	// shadowFlushRows is how many forwarded rows the session buffers
	// before writing them to the client.
	shadowFlushRows = 256
)

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
		pool := c.srv.shadowPool(c.ds)
		if pool == nil {
			return nil, errShadowUnavailable(errors.New("no shadow DSN configured"))
		}
		var err error
		if sc, err = pool.Acquire(ctx); err != nil {
			return nil, c.shadowAcquireFailed(ctx, pool, err)
		}
	}
	sc.OnNotice(func(n *pgconn.Notice) {
		if c.wantsMessages(n.Severity) {
			c.be.Send(noticeResponse(n))
		}
	})
	if err := sc.Apply(ctx, c.shadowSettings()); err != nil {
		if sc.PgConn().IsClosed() || ctx.Err() != nil || !isPgError(err) {
			c.releaseShadow(ctx, sc)
			return nil, c.shadowFailed(ctx, err)
		}
		// A value PostgreSQL refuses: the proxy's own value stays
		// authoritative, as for any setting.
		c.log.Warn("could not apply a setting to the shadow session", zap.Error(err))
	}
	return sc, nil
}

// releaseShadow ends a statement's use of sc: it stays pinned to the
// session while it holds state (an open transaction on the shadow, which
// the proxy never starts), and else goes back to the pool, unless the
// statement was cancelled or the connection broke (then it is closed).
func (c *conn) releaseShadow(ctx context.Context, sc *shadow.Conn) {
	sc.OnNotice(nil)
	if sc.HasState() && !sc.PgConn().IsClosed() && ctx.Err() == nil {
		c.shadow = sc
		return
	}
	c.shadow = nil
	c.srv.shadowPool(c.ds).Release(sc, ctx.Err() == nil)
}

// shadowAcquireFailed turns a failure to get a pooled connection into the
// statement's error.
func (c *conn) shadowAcquireFailed(ctx context.Context, pool *shadow.Pool, err error) error {
	switch {
	case errors.Is(err, shadow.ErrPoolExhausted):
		c.log.Warn("shadow pool exhausted", zap.Int("max_conns", pool.MaxConns()))
		return pgerr.New(pgerr.TooManyConnections, "all %d catalog connections are busy", pool.MaxConns()).Wrap(err).
			WithHint("the statement was not run; retry it (the session is fine), or ask the operator to raise shadow_max_connections in dpproxy.yaml")
	case ctx.Err() != nil:
		return statementError(ctx, err)
	}
	c.log.Warn("shadow connect failed", zap.Error(err))
	return errShadowUnavailable(err)
}

// shadowSettings are the session's values of the settings that affect
// catalog answers, in a stable order.
func (c *conn) shadowSettings() []shadow.Setting {
	out := make([]shadow.Setting, 0, len(shadowSettingNames))
	for _, n := range shadowSettingNames {
		v, ok := c.settings[n]
		if !ok {
			v = c.defaultSetting(n)
		}
		out = append(out, shadow.Setting{Name: settingDefs[n].name, Value: v})
	}
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

// closeShadow closes the pinned shadow connection, if any (DISCARD ALL,
// end of session).
func (c *conn) closeShadow() {
	if c.shadow == nil {
		return
	}
	c.srv.shadowPool(c.ds).Release(c.shadow, false)
	c.shadow = nil
}

func isPgError(err error) bool {
	var pge *pgconn.PgError
	return errors.As(err, &pge)
}

// shadowFailed turns an error of the shadow connection into the client's
// error. PostgreSQL errors are forwarded as they are; anything else means
// the shadow connection broke, which the pool closes (the next catalog
// statement gets another) and is reported as 58000.
func (c *conn) shadowFailed(ctx context.Context, err error) error {
	var pge *pgconn.PgError
	if errors.As(err, &pge) {
		return &shadowError{pg: pge}
	}
	if ctx.Err() != nil {
		return statementError(ctx, err)
	}
	if _, ok := pgerr.As(err); ok {
		return err
	}
	c.log.Warn("shadow statement failed", zap.Error(err))
	return errShadowUnavailable(err)
}

// execShadowSimple forwards a catalog statement with the simple protocol
// and streams its results to the client.
func (c *conn) execShadowSimple(ctx context.Context, text string) error {
	sc, err := c.acquireShadow(ctx)
	if err != nil {
		return err
	}
	defer c.releaseShadow(ctx, sc)
	qctx, done := c.shadowCtx(ctx, sc.PgConn())
	defer done() // runs before releaseShadow
	mrr := sc.PgConn().Exec(qctx, text)
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		if fds := rr.FieldDescriptions(); fds != nil {
			c.be.Send(&pgproto3.RowDescription{Fields: toWireFields(fds, nil)})
		}
		n := 0
		for rr.NextRow() {
			c.be.Send(&pgproto3.DataRow{Values: rr.Values()})
			if n++; n%shadowFlushRows == 0 {
				if err := c.be.Flush(); err != nil {
					_ = mrr.Close()
					return err
				}
			}
		}
		tag, err := rr.Close()
		if err != nil {
			_ = mrr.Close()
			return c.shadowFailed(ctx, err)
		}
		c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(tag.String())})
	}
	if err := mrr.Close(); err != nil {
		return c.shadowFailed(ctx, err)
	}
	return nil
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
// extended protocol and buffers its result for a portal (bounded by
// MaxBufferedResult).
func (c *conn) execShadowExtended(ctx context.Context, p *portal) (*bufferedResult, error) {
	sc, err := c.acquireShadow(ctx)
	if err != nil {
		return nil, err
	}
	defer c.releaseShadow(ctx, sc)
	ps := p.stmt
	oids := make([]uint32, len(p.params)) // 0: the shadow infers the type
	if ps.desc != nil {
		copy(oids, ps.desc.paramOIDs)
	} else {
		copy(oids, ps.parseOIDs)
	}
	qctx, done := c.shadowCtx(ctx, sc.PgConn())
	defer done() // runs before releaseShadow
	rr := sc.PgConn().ExecParams(qctx, ps.text, p.params, oids, p.paramFormats, p.resultFormats)
	br := &bufferedResult{}
	if fds := rr.FieldDescriptions(); fds != nil {
		br.fields = toWireFields(fds, nil)
	}
	size := 0
	for rr.NextRow() {
		vals := rr.Values()
		row := make([][]byte, len(vals))
		for i, v := range vals {
			if v != nil {
				row[i] = append([]byte{}, v...)
				size += len(v)
			}
		}
		size += 8 * len(vals)
		if size > c.srv.cfg.MaxBufferedResult {
			_, _ = rr.Close()
			return nil, pgerr.New(programLimitExceeded, "catalog result too large (over %d bytes)", c.srv.cfg.MaxBufferedResult).
				WithHint("add a LIMIT or use the simple query protocol")
		}
		br.rows = append(br.rows, row)
	}
	tag, err := rr.Close()
	if err != nil {
		return nil, c.shadowFailed(ctx, err)
	}
	br.tag = tag.String()
	return br, nil
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
