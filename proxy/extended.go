package proxy

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"
)

// The extended query protocol: Parse, Bind, Describe, Execute, Close,
// Sync, Flush. Statements are classified at Parse; catalog statements are
// described and run by the shadow (with pgconn's extended protocol), DP
// statements are described from their plan (no data read, no budget spent)
// and run at the first Execute of a portal, whose rows are then kept for
// row-limited Executes (PortalSuspended).

// preparedStatement is a parsed (named or unnamed) statement.
type preparedStatement struct {
	name      string
	st        statement
	text      string
	parseOIDs []uint32 // as given in Parse (0: unspecified)
	nParams   int
	// desc is filled by the first Describe (or Bind of a DP statement).
	desc *statementDesc
	// told are the result columns a Describe of the statement sent the
	// client, which decodes its portals' rows by them (described.go).
	told []column
	// descBytes is what desc holds, counted in the session's stmtBytes
	// (and so in the analyst's account) while the statement is kept.
	descBytes int
}

// statementDesc is a statement's parameter types and result columns.
type statementDesc struct {
	paramOIDs []uint32
	// Exactly one of cols (proxy-built results), fields (shadow) or
	// neither (no rows: NoData) is set.
	cols   []column
	fields []pgconn.FieldDescription
}

// portal is a bound statement.
type portal struct {
	name          string
	stmt          *preparedStatement
	params        [][]byte
	paramFormats  []int16
	resultFormats []int16
	// told are the result columns a Describe of the portal sent.
	told   []column
	result *bufferedResult // after the first Execute
	// bytes is what the portal's parameters hold (paramBytes), counted
	// once at Bind, and the columns told (toldBytes), counted at Describe.
	bytes     int
	toldBytes int
}

// paramBytes is about what a Bind's parameters hold in memory: each
// value, a slice header for each (a NULL holds one too) and the format
// codes (attack round 38: 65,535 NULL parameters counted 0 bytes and held
// 1.8 MiB a portal).
func paramBytes(params [][]byte, paramFormats, resultFormats []int16) int {
	n := 24*len(params) + 2*(len(paramFormats)+len(resultFormats))
	for _, v := range params {
		n += len(v)
	}
	return n
}

// statementBytes is about what a named statement holds: its text and its
// parameter types (as given, and once described).
func statementBytes(text string, paramOIDs int) int { return len(text) + 8*paramOIDs }

// size is what the statement holds (statementBytes).
func (ps *preparedStatement) size() int {
	return statementBytes(ps.text, len(ps.parseOIDs)) + ps.descBytes
}

// bytes is about what a statement's description holds: its parameter
// types, and per result column a pgconn FieldDescription (about 40 bytes
// and its name's allocation) or a column (attack round 93: a 131-byte
// SELECT *,*,…,* FROM pg_class described 1,650 columns, about 97 KB kept
// uncounted per named statement).
func (d *statementDesc) bytes() int {
	n := 64 + 4*len(d.paramOIDs)
	for _, f := range d.fields {
		n += 56 + len(f.Name)
	}
	return n + columnsBytes(d.cols)
}

// columnsBytes is about what a slice of columns holds.
func columnsBytes(cols []column) int {
	n := 0
	for _, c := range cols {
		n += 24 + len(c.name)
	}
	return n
}

// keepTold keeps the columns a Describe of a DP portal tells the client in
// the portal, counted in its bytes (and the analyst's account) before they
// are kept: a portal of no parameters had counted 0 bytes and kept 450
// columns, 11 KB, and a session 1,024 such portals (attack round 93).
func (c *conn) keepTold(p *portal, cols []column) error {
	n := columnsBytes(cols)
	grow := n - p.toldBytes
	if grow > 0 {
		if err := c.sess.checkPortalRoom(p.name, p.bytes+grow); err != nil {
			return err
		}
		if err := c.checkMemory(grow); err != nil {
			return err
		}
	}
	p.told, p.bytes, p.toldBytes = cols, p.bytes+grow, n
	return nil
}

// keepDesc keeps d as ps's description when the session and the
// analyst's account have room for it, counted as its text is. Without
// room it is not kept: the next Describe or Bind asks for it again.
func (c *conn) keepDesc(ps *preparedStatement, d *statementDesc) {
	if c.sess.stmts[ps.name] != ps {
		return // deallocated since (a portal still refers to it)
	}
	n := d.bytes()
	if c.sess.stmtBytes+n > maxPreparedBytes || c.checkMemory(n) != nil {
		return
	}
	ps.desc, ps.descBytes = d, n
	c.sess.stmtBytes += n
}

// bufferedResult is a result held for a portal, already encoded in the
// portal's result formats: a proxy-built result's rows as values, a shadow
// result's as the DataRow messages the shadow sent (relay.go).
type bufferedResult struct {
	fields []pgproto3.FieldDescription // proxy-built; nil: no rows (unless rawDesc)
	rows   [][][]byte                  // proxy-built
	// A shadow result: its RowDescription message (nil: NoData), its
	// DataRow messages back to back, and where each ends in raw.
	rawDesc []byte
	raw     []byte
	ends    []int
	tag     string
	pos     int
}

// size is about what the result holds in memory, in bytes.
func (r *bufferedResult) size() int {
	n := len(r.rawDesc) + len(r.raw) + 8*len(r.ends)
	for _, row := range r.rows {
		for _, v := range row {
			n += len(v) + 24
		}
	}
	return n
}

// numRows is the number of rows of the result.
func (r *bufferedResult) numRows() int {
	if r.ends != nil {
		return len(r.ends)
	}
	return len(r.rows)
}

// sendRows sends rows [from, to).
func (c *conn) sendRows(r *bufferedResult, from, to int) {
	if r.ends == nil {
		for _, row := range r.rows[from:to] {
			c.be.Send(&pgproto3.DataRow{Values: row})
		}
		return
	}
	if from == to {
		return
	}
	start := 0
	if from > 0 {
		start = r.ends[from-1]
	}
	c.be.sendRaw(r.raw[start:r.ends[to-1]])
}

// sendDescription sends the result's RowDescription, or NoData.
func (c *conn) sendDescription(r *bufferedResult) {
	switch {
	case r.rawDesc != nil:
		c.be.sendRaw(r.rawDesc)
	case r.fields != nil:
		c.be.Send(&pgproto3.RowDescription{Fields: r.fields})
	default:
		c.be.Send(&pgproto3.NoData{})
	}
}

// extended handles one message of the extended protocol.
func (c *conn) extended(ctx context.Context, msg pgproto3.FrontendMessage) {
	switch msg.(type) {
	case *pgproto3.Sync:
		c.sess.sync()
		c.readyForQuery()
		return
	case *pgproto3.Flush:
		return // the loop flushes
	}
	if c.sess.extFailed {
		return // an error earlier in this batch: skip until Sync
	}
	var err error
	switch m := msg.(type) {
	case *pgproto3.Parse:
		err = c.parse(m)
	case *pgproto3.Bind:
		err = c.bind(ctx, m)
	case *pgproto3.Describe:
		err = c.describe(ctx, m)
	case *pgproto3.Execute:
		err = c.execute(ctx, m)
	case *pgproto3.Close:
		err = c.closeObject(m)
	}
	if err != nil {
		// PostgreSQL sends an error at once (elog.c flushes it), without
		// waiting for Sync or Flush: a client that sent Parse/Describe/Flush
		// (asyncpg) waits for it.
		c.sendError(err)
		c.sess.skipUntilSync()
		if ferr := c.be.Flush(); ferr != nil {
			c.log.Debug("write failed", zap.Error(ferr))
		}
	}
}

// needsFlush reports whether a message asks for the reply to be written
// now (the others are answered in one write at Sync or Flush).
func needsFlush(msg pgproto3.FrontendMessage) bool {
	switch msg.(type) {
	case *pgproto3.Parse, *pgproto3.Bind, *pgproto3.Describe, *pgproto3.Execute, *pgproto3.Close:
		return false
	}
	return true
}

func (c *conn) parse(m *pgproto3.Parse) error {
	if _, exists := c.sess.stmts[m.Name]; exists && m.Name != "" {
		return pgerr.New(duplicatePreparedStmt, "prepared statement %q already exists", m.Name)
	}
	size := statementBytes(m.Query, len(m.ParameterOIDs))
	if err := c.sess.checkPreparedRoom(m.Name, size); err != nil {
		return err
	}
	// The unnamed statement replaces itself, but a portal bound from the
	// one it replaces keeps that alive (memoryHeld): charged too.
	if err := c.checkMemory(size); err != nil { // memory.go
		return err
	}
	var st statement
	n := -1
	release, err := c.textSlot(c.sessCtx, m.Query) // query.go
	if err != nil {
		return err
	}
	defer release()
	if cs, ok := c.splitOne(m.Query); ok {
		st, n = cs.st, cs.nParams
	} else {
		stmts, err := c.srv.rt.split(m.Query)
		if err != nil {
			return err
		}
		if len(stmts) > 1 {
			return pgerr.New(pgerr.SyntaxError, "cannot insert multiple commands into a prepared statement")
		}
		text := ""
		if len(stmts) == 1 {
			text = stmts[0]
		}
		st = c.classify(text)
	}
	text := st.text
	if n < 0 && st.err == nil {
		// Lexes the whole text: in the slot, as its classification.
		n = maxParam(text)
		c.rememberParams(m.Query, n)
	}
	release() // planning (checkDP) takes the slot itself
	if err := c.sess.checkNotFailed(st); err != nil {
		return err
	}
	if st.err != nil {
		c.logStatement(st, st.err)
		c.observe(st, st.err, 0)
		return st.err
	}
	if len(m.ParameterOIDs) > n {
		n = len(m.ParameterOIDs)
	}
	if st.route == pgsql.RouteSession && st.sess.Kind == pgsql.SessionCopy {
		// COPY's output messages are sent in the simple protocol only
		// (refused here, before the query could run and be charged). A
		// DP query the proxy would refuse anyway is refused as itself.
		if r, err := c.classifyRoute(c.sessCtx, st.sess.Copy.Query); err == nil && r == pgsql.RouteDP {
			if err := c.checkDP(st.sess.Copy.Query); err != nil {
				return dpError(context.Background(), err, c.log)
			}
		}
		return pgerr.New(pgerr.FeatureNotSupported, "COPY is supported in the simple query protocol only").
			WithHint("send COPY (…) TO STDOUT as a simple query (psql, pgx CopyTo, psycopg copy, JDBC CopyManager do)")
	}
	if st.route == pgsql.RouteSession && st.sess.Kind == pgsql.SessionExecute {
		// Its rows would need a Describe of the statement it names.
		return pgerr.New(pgerr.FeatureNotSupported, "EXECUTE is supported in the simple query protocol only").
			WithHint("bind the prepared statement by its name through the protocol (your driver's prepared statements), or send EXECUTE as a simple query")
	}
	if st.route == pgsql.RouteSession && st.sess.Kind == pgsql.SessionPrepare {
		n = 0 // the $n are the prepared statement's
	}
	if st.route == pgsql.RouteSession && n > 0 && st.sess.Kind != pgsql.SessionDeclare {
		return pgerr.New(pgerr.SyntaxError, "parameters ($n) are not allowed in %s", strings.Fields(text)[0]).
			WithHint("write the value into the statement")
	}
	if n > 0 && (st.route == pgsql.RouteDP || st.route == pgsql.RouteSession && st.sess.Kind == pgsql.SessionDeclare) &&
		boundFloor(text) > rewrite.MaxStatementBytes {
		// No values can bind it within a DP statement's length: refused
		// now, as one without parameters is, rather than kept and
		// refused at every Execute (attack round 93).
		return errBoundTooLong()
	}
	if st.route == pgsql.RouteDP && n == 0 {
		// Like PostgreSQL's parse analysis: a statement that cannot be
		// answered fails at Parse (nothing is read, nothing spent).
		if err := c.checkDP(text); err != nil {
			c.logStatement(st, err)
			err = dpError(context.Background(), err, c.log)
			c.observe(st, err, 0)
			return err
		}
	}
	c.sess.prepare(&preparedStatement{
		name: m.Name, st: st, text: text, nParams: n,
		parseOIDs: append([]uint32(nil), m.ParameterOIDs...),
	})
	c.be.Send(&pgproto3.ParseComplete{})
	return nil
}

func (c *conn) bind(ctx context.Context, m *pgproto3.Bind) error {
	ps, ok := c.sess.stmts[m.PreparedStatement]
	if !ok {
		return pgerr.New(invalidSQLStatementName, "prepared statement %q does not exist", m.PreparedStatement)
	}
	if c.sess.cursorExists(m.DestinationPortal) {
		return pgerr.New(duplicateCursor, "cursor %q already exists", m.DestinationPortal)
	}
	if err := c.sess.checkNotFailed(ps.st); err != nil {
		return err
	}
	if len(m.Parameters) != ps.nParams {
		return pgerr.New(pgerr.ProtocolViolation, "bind message supplies %d parameters, but prepared statement %q requires %d",
			len(m.Parameters), ps.name, ps.nParams)
	}
	if n := len(m.ParameterFormatCodes); n > 1 && n != len(m.Parameters) {
		return pgerr.New(pgerr.ProtocolViolation, "bind message has %d parameter formats but %d parameters", n, len(m.Parameters))
	}
	size := paramBytes(m.Parameters, m.ParameterFormatCodes, m.ResultFormatCodes)
	if err := c.sess.checkPortalRoom(m.DestinationPortal, size); err != nil { // session.go
		return err
	}
	if err := c.checkMemory(size); err != nil { // memory.go
		return err
	}
	p := &portal{
		name: m.DestinationPortal, stmt: ps,
		paramFormats:  append([]int16(nil), m.ParameterFormatCodes...),
		resultFormats: append([]int16(nil), m.ResultFormatCodes...),
		params:        make([][]byte, len(m.Parameters)),
		bytes:         size,
	}
	for _, f := range p.resultFormats {
		if f != formatText && f != formatBinary {
			return pgerr.New(pgerr.ProtocolViolation, "unsupported format code: %d", f)
		}
	}
	for i, v := range m.Parameters {
		if v != nil {
			p.params[i] = append([]byte{}, v...)
		}
	}
	c.sess.bindPortal(p)
	c.be.Send(&pgproto3.BindComplete{})
	return nil
}

func (c *conn) describe(ctx context.Context, m *pgproto3.Describe) error {
	switch m.ObjectType {
	case 'S':
		ps, ok := c.sess.stmts[m.Name]
		if !ok {
			return pgerr.New(invalidSQLStatementName, "prepared statement %q does not exist", m.Name)
		}
		if err := c.sess.checkNotFailed(ps.st); err != nil {
			return err
		}
		d, err := c.describeStatement(ctx, ps)
		if err != nil {
			return err
		}
		c.be.Send(&pgproto3.ParameterDescription{ParameterOIDs: d.paramOIDs})
		c.sendRowDescription(d, nil)
		if ps.st.route == pgsql.RouteDP {
			ps.told = d.cols
		}
		return nil
	case 'P':
		p, ok := c.sess.portals[m.Name]
		if !ok {
			if c.sess.txStatus == 'E' {
				return errInFailedTransaction()
			}
			if rd, ok := c.describeCursor(m.Name, nil); ok {
				c.be.Send(rd)
				return nil
			}
			return pgerr.New(invalidCursorName, "portal %q does not exist", m.Name)
		}
		if err := c.sess.checkNotFailed(p.stmt.st); err != nil {
			return err
		}
		if p.result == nil && p.stmt.st.route == pgsql.RouteCatalog {
			// A catalog portal is run now and its result kept for Execute:
			// the shadow's reply to one Parse/Bind/Describe/Execute carries
			// the row description, so Describe + Execute cost one shadow
			// round trip instead of two (libpq and pgbench send Describe
			// portal before every Execute). The result is kept, so it
			// counts against the session's held rows as a row-limited
			// Execute's does (issue 34's attack: 200 Describes held 226 MiB).
			if err := c.sess.checkHeldRoom(p.name, c.srv.cfg.MaxBufferedResult); err != nil {
				return err
			}
			if err := c.runKept(ctx, p); err != nil {
				return err
			}
		}
		if p.result != nil {
			c.sendDescription(p.result)
			return nil
		}
		d, err := c.describePortal(ctx, p)
		if err != nil {
			return err
		}
		if p.stmt.st.route == pgsql.RouteDP {
			if err := c.keepTold(p, d.cols); err != nil {
				return err
			}
		}
		c.sendRowDescription(d, p.resultFormats)
		return nil
	}
	return pgerr.New(pgerr.ProtocolViolation, "invalid DESCRIBE message subtype %d", m.ObjectType)
}

// sendRowDescription sends the result columns of d in the given formats (nil:
// text, as for Describe of a statement), or NoData.
func (c *conn) sendRowDescription(d *statementDesc, formats []int16) {
	switch {
	case d.cols != nil:
		c.be.Send(rowDescription(d.cols, formats))
	case d.fields != nil:
		if formats == nil {
			formats = []int16{formatText}
		}
		c.be.Send(&pgproto3.RowDescription{Fields: toWireFields(d.fields, formats)})
	default:
		c.be.Send(&pgproto3.NoData{})
	}
}

// describeStatement describes a prepared statement without running it.
func (c *conn) describeStatement(ctx context.Context, ps *preparedStatement) (*statementDesc, error) {
	if ps.desc != nil {
		return ps.desc, nil
	}
	sctx, done := c.statementContext(ctx)
	defer done()
	d := &statementDesc{paramOIDs: make([]uint32, ps.nParams)}
	copy(d.paramOIDs, ps.parseOIDs)
	switch ps.st.route {
	case pgsql.RouteEmpty:
	case pgsql.RouteSession:
		switch ps.st.sess.Kind {
		case pgsql.SessionFetch:
			// The columns of the cursor as it is now (not cached: the
			// name may be declared again with another query).
			cur, ok := c.sess.cursors[ps.st.sess.Cursor.Name]
			if !ok {
				return nil, errNoCursor(ps.st.sess.Cursor.Name)
			}
			d.cols = cur.cols
			return d, nil
		case pgsql.SessionDeclare:
			if ps.nParams > 0 {
				// The parameters are the wrapped query's: the shadow has
				// its schema and infers the types left unspecified.
				if sd, err := c.describeShadow(sctx, ps.st.sess.Cursor.Query, ps.parseOIDs); err == nil {
					d.paramOIDs = sd.ParamOIDs
				} else {
					c.log.Debug("shadow could not describe a DECLARE's query", zap.Error(err))
				}
			}
		}
		d.cols = sessionColumns(ps.st.sess)
	case pgsql.RouteCatalog:
		sd, err := c.describeShadow(sctx, ps.text, ps.parseOIDs)
		if err != nil {
			return nil, statementError(sctx, err)
		}
		d.paramOIDs, d.fields = sd.ParamOIDs, sd.Fields
	case pgsql.RouteDP:
		var shadowFields []pgconn.FieldDescription
		var shadowErr error
		if ps.nParams > 0 {
			// The shadow has the same schema: let PostgreSQL infer the
			// types of the parameters the client left unspecified.
			if sd, err := c.describeShadow(sctx, ps.text, ps.parseOIDs); err == nil {
				d.paramOIDs, shadowFields = sd.ParamOIDs, sd.Fields
			} else {
				shadowErr = err
				c.log.Debug("shadow could not describe a DP statement", zap.Error(err))
				for i, o := range d.paramOIDs {
					if o == 0 {
						d.paramOIDs[i] = oidText
					}
				}
			}
		}
		lits := make([]string, ps.nParams)
		for i := range lits {
			lits[i] = dummyLiteral(d.paramOIDs[i])
		}
		var text string
		err := c.withTextSlot(sctx, ps.text, func() (err error) {
			text, err = bindLiterals(ps.text, lits)
			return err
		})
		if err != nil {
			return nil, err
		}
		cols, err := c.describeDP(sctx, text)
		switch {
		case err == nil:
			d.cols = cols
		case shadowFields != nil:
			// The plan depends on the values; describe by the shadow's
			// column types, mapped to the types DP answers use.
			d.cols = make([]column, len(shadowFields))
			for i, f := range shadowFields {
				d.cols[i] = column{name: f.Name, oid: dpTypeOf(f.DataTypeOID)}
			}
		case invalidInPostgres(shadowErr):
			// PostgreSQL itself rejects the statement (the shadow has the
			// schema and no rows): its error, not the plan's error about
			// the placeholder values above, which the client never sent
			// (SQLAlchemy's asyncpg dialect binds date_trunc($1, …) and
			// GROUP BY date_trunc($4, …): 42803, not 22007 about '').
			return nil, statementError(sctx, shadowErr)
		default:
			return nil, dpError(sctx, err, c.log)
		}
	}
	c.keepDesc(ps, d)
	return d, nil
}

// describePortal describes a bound statement. For DP statements the plan of
// the bound values gives the columns.
func (c *conn) describePortal(ctx context.Context, p *portal) (*statementDesc, error) {
	ps := p.stmt
	if ps.st.route != pgsql.RouteDP {
		return c.describeStatement(ctx, ps)
	}
	// Planned now, not the statement's description, even without
	// parameters: a SET since (dp.error_columns) may change the columns.
	text, err := c.boundText(ctx, p)
	if err != nil {
		return nil, err
	}
	cols, err := c.describeDP(ctx, text)
	if err != nil {
		return nil, dpError(ctx, err, c.log)
	}
	return &statementDesc{cols: cols}, nil
}

// boundText returns a DP statement's text with its parameters as literals.
func (c *conn) boundText(ctx context.Context, p *portal) (string, error) {
	ps := p.stmt
	if ps.nParams == 0 {
		return ps.text, nil
	}
	oids := ps.parseOIDs
	if ps.desc != nil {
		oids = ps.desc.paramOIDs
	} else if hasUnspecified(oids, ps.nParams) {
		if d, err := c.describeStatement(ctx, ps); err == nil {
			oids = d.paramOIDs
		}
	}
	// Only the values the text uses are decoded, as it uses them; the
	// others are checked, as PostgreSQL's Bind checks every value
	// (review 74), one at a time and without writing out a binary
	// numeric's digits (attack round 72).
	used := make([]bool, len(p.params))
	var text string
	err := c.withTextSlot(ctx, ps.text, func() (err error) {
		text, err = bindWith(ps.text, len(p.params), func(i int) (string, error) {
			used[i] = true
			return literalOf(p.params, p.paramFormats, oids, i)
		})
		return err
	})
	if err != nil {
		return "", err
	}
	for i, u := range used {
		if !u {
			if err := checkValue(p.params, p.paramFormats, oids, i); err != nil {
				return "", err
			}
		}
	}
	return text, nil
}

func hasUnspecified(oids []uint32, n int) bool {
	if len(oids) < n {
		return true
	}
	for _, o := range oids[:n] {
		if o == 0 {
			return true
		}
	}
	return false
}

// dummyLiteral is a value of the type used to plan a statement whose
// parameters are not bound yet (the plan's columns do not depend on it).
// Text is 'month': a date_trunc or date_part unit (pgx, asyncpg:
// date_trunc($1, visit_date)) plans with it, where the empty string planned nothing and
// the statement fell back to the shadow's guessed types (an int8 SUM is
// numeric in a DP answer, and dp.error_columns adds columns); as any other
// text it is just a string.
func dummyLiteral(oid uint32) string {
	switch oid {
	case oidInt2, oidInt4, oidInt8, oidFloat4, oidFloat8, oidNumeric:
		return "0"
	case oidBool:
		return "TRUE"
	case oidDate:
		return "'2000-01-01'"
	}
	return "'month'"
}

// invalidInPostgres reports whether err is PostgreSQL's rejection of a
// statement's text by its schema alone (class 42: syntax, names, grouping;
// privileges aside, which the shadow's role does not share).
func invalidInPostgres(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && strings.HasPrefix(pe.Code, "42") && pe.Code != "42501"
}

// dpTypeOf maps a column type to the type a DP answer of it has.
func dpTypeOf(oid uint32) uint32 {
	switch oid {
	case oidInt2, oidInt4:
		return oidInt4
	case oidInt8:
		return oidInt8
	case oidNumeric, oidFloat4, oidFloat8:
		return oidNumeric
	case oidBool, oidDate, oidTimestamp, oidTimestamptz:
		// date_trunc of a date column is a timestamptz key, as in
		// PostgreSQL: described as text, its binary value was read as
		// text (asyncpg, date_trunc($1::varchar, visit_date) … GROUP BY 1).
		return oid
	}
	return oidText
}

// sessionColumns are the result columns of a session statement.
func sessionColumns(st *pgsql.SessionStmt) []column {
	if st == nil || st.Kind != pgsql.SessionShow {
		return nil
	}
	switch name := canonicalSetting(st.Name); name {
	case settingBudget:
		return budgetColumns()
	case settingLastAnswer:
		return lastAnswerColumns()
	case "all":
		return []column{{"name", oidText}, {"setting", oidText}, {"description", oidText}}
	case "transaction":
		return []column{{"transaction_isolation", oidText}}
	default:
		return []column{{displayName(name), oidText}}
	}
}

func (c *conn) execute(ctx context.Context, m *pgproto3.Execute) error {
	p, ok := c.sess.portals[m.Portal]
	if !ok {
		return pgerr.New(invalidCursorName, "portal %q does not exist", m.Portal)
	}
	if err := c.sess.checkNotFailed(p.stmt.st); err != nil {
		return err
	}
	if p.stmt.st.route == pgsql.RouteEmpty {
		c.be.Send(&pgproto3.EmptyQueryResponse{})
		return nil
	}
	if p.result == nil {
		if m.MaxRows > 0 {
			// The result may be kept for later Executes: refused before
			// it runs (nothing charged) when the session already holds
			// its share of the proxy's memory.
			if err := c.sess.checkHeldRoom(p.name, c.srv.cfg.MaxBufferedResult); err != nil {
				return err
			}
		}
		if err := c.runKept(ctx, p); err != nil {
			return err
		}
	}
	r := p.result
	total := r.numRows()
	n := total - r.pos
	if m.MaxRows > 0 && int(m.MaxRows) < n {
		n = int(m.MaxRows)
	}
	c.sendRows(r, r.pos, r.pos+n)
	suspended := r.pos > 0 || r.pos+n < total
	r.pos += n
	if r.pos < total {
		c.be.Send(&pgproto3.PortalSuspended{})
		return nil
	}
	tag := r.tag
	if suspended && strings.HasPrefix(tag, "SELECT ") {
		// Like PostgreSQL: the tag counts the rows of this Execute.
		tag = "SELECT " + strconv.Itoa(n)
	}
	c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
	if !p.stmt.st.isTransactionControl() {
		c.sess.pipelined = true // until the transaction ends
	}
	// Re-executing a finished portal returns no more rows.
	r.rows, r.raw, r.ends, r.pos = nil, nil, nil, 0
	if strings.HasPrefix(r.tag, "SELECT ") {
		r.tag = "SELECT 0"
	}
	return nil
}

// runKept runs a portal's statement and keeps its result in the portal,
// charged to the analyst's memory (memory.go): any result is held until
// the client has read it, which one that does not read never does (attack
// round 38), so room is reserved before it runs and grows with a relayed
// result; a result the proxy built (a FETCH of a cursor, a DP or
// post-processed answer) is checked against the bound the same way once
// built (attack round 40). Its size stays charged until the next
// ReadyForQuery.
func (c *conn) runKept(ctx context.Context, p *portal) error {
	if err := c.reserveResult(); err != nil {
		return err
	}
	answered := c.sess.lastAnswer
	c.keepAnswer = 1 // a DP answer's room is checked before its charge (execDP)
	br, err := c.runPortal(ctx, p)
	c.keepAnswer = 0
	if err == nil && c.sess.lastAnswer == answered {
		err = c.growResult(br.size())
	}
	// A DP answer was released (and charged): kept even where it outgrows
	// the room execDP checked for it (answerRoom), rather than refused
	// after its charge.
	if err != nil {
		c.settleResult(0)
		return err
	}
	p.result = br
	c.settleResult(br.size())
	return nil
}

// mayRelease reports whether running st may release a DP answer: a DP
// statement, or DECLARE, COPY or EXECUTE, which may wrap one.
func mayRelease(st statement) bool {
	if st.route == pgsql.RouteDP {
		return true
	}
	return st.route == pgsql.RouteSession && st.sess != nil &&
		(st.sess.Kind == pgsql.SessionDeclare || st.sess.Kind == pgsql.SessionCopy || st.sess.Kind == pgsql.SessionExecute)
}

// runPortal runs a portal's statement once and returns its whole result.
func (c *conn) runPortal(ctx context.Context, p *portal) (*bufferedResult, error) {
	ps := p.stmt
	sctx, done := c.statementContext(ctx)
	defer done()
	start := time.Now()
	var br *bufferedResult
	var err error
	switch ps.st.route {
	case pgsql.RouteSession:
		sess := ps.st.sess
		if ps.nParams > 0 {
			// DECLARE … FOR a query with parameters (psycopg 3 binds
			// its named cursors' parameters so): bind them as literals,
			// as for a DP statement, and parse the statement again.
			var text string
			if text, err = c.boundText(sctx, p); err == nil {
				sess, err = c.srv.rt.parseSession(text)
			}
		}
		var rs *resultSet
		if err == nil {
			if rs, err = c.execSession(sctx, sess); err == nil {
				br, err = c.encodeResult(rs, p.resultFormats)
			}
		}
	case pgsql.RouteCatalog:
		br, err = c.execShadowExtended(sctx, p)
	case pgsql.RouteDP:
		var text string
		if text, err = c.boundText(sctx, p); err == nil {
			told := p.told
			if told == nil {
				told = ps.told
			}
			binary := slices.Contains(p.resultFormats, formatBinary)
			if told != nil || binary {
				// Check the bound plan's columns against those described
				// before anything is charged: the bound values and the
				// session's settings (dp.error_columns adds columns) may
				// have changed them since; and that those asked for in
				// binary have a binary form here.
				if got, perr := c.describeDP(sctx, text); perr == nil {
					if told != nil && !describedFits(told, got) {
						err = errResultTypeChanged()
					} else if binary {
						err = binaryFormats(got, p.resultFormats, c.sess.settings["datestyle"])
					}
				}
			}
			var rs *resultSet
			if err == nil {
				rs, err = c.execDP(sctx, text, ps.text)
			}
			if err == nil && told != nil {
				if !describedFits(told, rs.cols) {
					err = errResultTypeChanged()
				} else {
					err = asDescribed(rs, told)
				}
			}
			if err == nil {
				br, err = c.encodeResult(rs, p.resultFormats)
			}
		}
	default:
		err = ps.st.err
	}
	err = statementError(sctx, err)
	d := time.Since(start)
	c.logStatement(ps.st, err, zap.Duration(logKeyDuration, d))
	c.observe(ps.st, err, d)
	return br, err
}

// encodeResult sends a proxy-built result's notices and encodes its rows
// in the portal's result formats.
func (c *conn) encodeResult(rs *resultSet, formats []int16) (*bufferedResult, error) {
	for _, n := range rs.notices {
		if c.sess.wantsMessages(n.Severity) {
			c.be.Send(n)
		}
	}
	br := &bufferedResult{tag: rs.tag}
	if rs.copy != nil {
		return nil, pgerr.New(pgerr.FeatureNotSupported, "COPY is supported in the simple query protocol only")
	}
	if rs.cols == nil {
		return br, nil
	}
	br.fields = rowDescription(rs.cols, formats).Fields
	br.rows = make([][][]byte, 0, len(rs.rows))
	for _, row := range rs.rows {
		vals, err := encodeRow(rs.cols, row, formats)
		if err != nil {
			return nil, err
		}
		br.rows = append(br.rows, vals)
	}
	return br, nil
}

func (c *conn) closeObject(m *pgproto3.Close) error {
	switch m.ObjectType {
	case 'S':
		c.sess.closeStatement(m.Name)
	case 'P':
		c.sess.closePortal(m.Name)
	default:
		return pgerr.New(pgerr.ProtocolViolation, "invalid CLOSE message subtype %d", m.ObjectType)
	}
	// Closing something that does not exist is not an error.
	c.be.Send(&pgproto3.CloseComplete{})
	return nil
}
