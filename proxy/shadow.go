package proxy

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"
)

// The shadow catalog connection: one per session, opened on the first
// catalog statement. It is the only connection analysts' text is sent to;
// it holds the exposed schema and no rows.

const (
	shadowConnectTimeout = 10 * time.Second
	// shadowFlushRows is how many forwarded rows the session buffers
	// before writing them to the client.
	shadowFlushRows = 256
)

func errShadowUnavailable(err error) error {
	return pgerr.New(pgerr.SystemError, "the catalog database is unavailable").Wrap(err).
		WithHint("catalog statements (\\d, pg_catalog, SELECT 1, version()) are answered by the shadow catalog; try again, and tell the data steward if it persists")
}

// shadowConn returns the session's shadow connection, opening it if needed.
func (c *conn) shadowConn(ctx context.Context) (*pgconn.PgConn, error) {
	if c.shadow != nil && !c.shadow.IsClosed() {
		return c.shadow, nil
	}
	c.shadow = nil
	if c.ds.ShadowDSN == "" {
		return nil, errShadowUnavailable(errors.New("no shadow DSN configured"))
	}
	cfg, err := pgconn.ParseConfig(c.ds.ShadowDSN)
	if err != nil {
		return nil, errShadowUnavailable(err)
	}
	cfg.RuntimeParams["application_name"] = "dpproxy"
	cfg.RuntimeParams["client_encoding"] = "UTF8"
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		// Called from within the session's own reads of the shadow.
		if c.wantsMessages(n.Severity) {
			c.be.Send(noticeResponse(n))
		}
	}
	// On cancel (CancelRequest, statement_timeout) send a real cancel to
	// the shadow server and keep the connection.
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, CancelRequestDelay: 0, DeadlineDelay: 5 * time.Second}
	}
	cctx, cancel := context.WithTimeout(ctx, shadowConnectTimeout)
	defer cancel()
	pc, err := pgconn.ConnectConfig(cctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		c.log.Warn("shadow connect failed", zap.Error(err))
		return nil, errShadowUnavailable(err)
	}
	c.shadow = pc
	// Bring the shadow session in line with the client's settings.
	names := make([]string, 0, len(c.settings))
	for n := range c.settings {
		if d, ok := settingDefs[n]; ok && d.shadow && c.settings[n] != c.defaultSetting(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		c.pushShadowSetting(n, c.settings[n])
	}
	return pc, nil
}

// pushShadowSetting applies one setting to the shadow session with
// set_config (the value is a bound parameter, never spliced into SQL). A
// failure is logged; the proxy's own value stays authoritative.
func (c *conn) pushShadowSetting(name, value string) {
	if c.shadow == nil || c.shadow.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rr := c.shadow.ExecParams(ctx, "SELECT pg_catalog.set_config($1, $2, false)",
		[][]byte{[]byte(name), []byte(value)}, nil, nil, nil)
	if _, err := rr.Close(); err != nil {
		c.log.Warn("could not apply a setting to the shadow session", zap.String("setting", name), zap.Error(err))
		if c.shadow.IsClosed() {
			c.shadow = nil
		}
	}
}

func (c *conn) closeShadow() {
	if c.shadow == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.shadow.Close(ctx)
	c.shadow = nil
}

// shadowFailed turns an error of the shadow connection into the client's
// error. PostgreSQL errors are forwarded as they are; anything else means
// the shadow connection broke, which is closed (the next catalog statement
// reconnects) and reported as 58000.
func (c *conn) shadowFailed(ctx context.Context, err error) error {
	var pge *pgconn.PgError
	if errors.As(err, &pge) {
		if c.shadow != nil && c.shadow.IsClosed() {
			c.shadow = nil
		}
		return &shadowError{pg: pge}
	}
	if c.shadow != nil && c.shadow.IsClosed() {
		c.shadow = nil
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
	pc, err := c.shadowConn(ctx)
	if err != nil {
		return err
	}
	mrr := pc.Exec(ctx, text)
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
	pc, err := c.shadowConn(ctx)
	if err != nil {
		return nil, err
	}
	sd, err := pc.Prepare(ctx, "", text, paramOIDs)
	if err != nil {
		return nil, c.shadowFailed(ctx, err)
	}
	return sd, nil
}

// execShadowExtended runs a catalog statement on the shadow with the
// extended protocol and buffers its result for a portal (bounded by
// MaxBufferedResult).
func (c *conn) execShadowExtended(ctx context.Context, p *portal) (*bufferedResult, error) {
	pc, err := c.shadowConn(ctx)
	if err != nil {
		return nil, err
	}
	ps := p.stmt
	oids := make([]uint32, len(p.params)) // 0: the shadow infers the type
	if ps.desc != nil {
		copy(oids, ps.desc.paramOIDs)
	} else {
		copy(oids, ps.parseOIDs)
	}
	rr := pc.ExecParams(ctx, ps.text, p.params, oids, p.paramFormats, p.resultFormats)
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
