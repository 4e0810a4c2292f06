package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// router holds the rewrite functions the session uses (Server.rt). It is
// a seam for tests that need to drive the wire layer with a scripted
// classifier; the tests in this package use the real rewrite package.
type router struct {
	split        func(sql string) ([]string, error)
	classify     func(ds *policy.Dataset, stmt string) (pgsql.Route, error)
	parseSession func(stmt string) (*pgsql.SessionStmt, error)
	rewrite      func(ds *policy.Dataset, stmt string, opts rewrite.Options) (*rewrite.Plan, error)
	// publicDistinct recognises a SELECT DISTINCT of a column with public
	// values (answered from the policy); nil or a nil result: not one.
	publicDistinct func(ds *policy.Dataset, stmt string) *rewrite.DistinctValues
	// fingerprint is a statement's fingerprint for logs (fingerprint).
	fingerprint func(stmt string) string
}

func defaultRouter() router {
	return router{split: pgsql.Split, classify: pgsql.Classify, parseSession: pgsql.ParseSession,
		rewrite: rewrite.RewriteWith, publicDistinct: rewrite.PublicDistinct, fingerprint: fingerprint}
}

// column is one column of a result the proxy builds itself.
type column struct {
	name string
	oid  uint32
}

// resultSet is a result the proxy builds itself (session statements, DP
// answers): text values, NULL as nil. cols is nil for commands.
type resultSet struct {
	cols    []column
	rows    [][]*string
	tag     string
	notices []*pgproto3.NoticeResponse // sent before the rows
	// formats are the result formats in the simple protocol (nil: text;
	// a BINARY cursor's FETCH: binary).
	formats []int16
	// copy: the COPY … TO STDOUT whose output this is, sent as
	// CopyOutResponse, one CopyData per row of rows (built as it is
	// sent), CopyDone (copy.go); nil otherwise.
	copy        *pgsql.CopyStmt
	copyColumns int
	copyForce   []bool    // FORCE_QUOTE, per column
	copyHeader  []*string // the header line's names (HEADER), or nil
}

// statement is one classified statement.
type statement struct {
	text  string
	route pgsql.Route
	err   error              // the refusal of RouteRefuse, or a parse error
	sess  *pgsql.SessionStmt // RouteSession
}

// classifyCache remembers, per session, the classification of query
// strings that held one statement routed to the shadow catalog or the DP
// path: pgsql.Split and pgsql.Classify are pure functions of the text
// and the dataset's policy, and clients send the same texts again and
// again (pgbench, BI tools' metadata queries, dashboards). Session
// statements are not cached: they are parsed into values the session
// acts on. Not safe for concurrent use.
type classifyCache struct {
	policy *policy.Dataset
	m      map[string]cachedStatement
	bytes  int // of the texts held
}

// cachedStatement is a query string's only statement and, once known,
// its number of parameters (-1: not computed yet).
type cachedStatement struct {
	st      statement
	nParams int
}

// classifyCacheSize and classifyCacheBytes bound the texts a session
// remembers (per cache: classifyCache, dpTextCache); a full cache is
// emptied. maxCachedText: longer texts are classified every time.
const (
	classifyCacheSize  = 256
	classifyCacheBytes = 64 << 10
	maxCachedText      = 4096
)

// lookup returns the cached statement of sql.
func (cc *classifyCache) lookup(ds *policy.Dataset, sql string) (cachedStatement, bool) {
	if cc == nil || cc.policy != ds {
		return cachedStatement{}, false
	}
	cs, ok := cc.m[sql]
	return cs, ok
}

// splitOne splits a query string and classifies its statement when it
// holds exactly one, using and filling the session's cache. ok is false
// when sql holds zero or several statements or does not split; the caller
// then splits it itself.
func (c *conn) splitOne(sql string) (cachedStatement, bool) {
	pol := c.sess.ds.Policy
	if cs, ok := c.classifyCache.lookup(pol, sql); ok {
		return cs, true
	}
	stmts, err := c.srv.rt.split(sql)
	if err != nil || len(stmts) != 1 {
		return cachedStatement{}, false
	}
	cs := cachedStatement{st: c.classify(stmts[0]), nParams: -1}
	if cs.st.err != nil || cs.st.sess != nil || len(sql) > maxCachedText ||
		(cs.st.route != pgsql.RouteCatalog && cs.st.route != pgsql.RouteDP) {
		return cs, true
	}
	cc := c.classifyCache
	if cc == nil || cc.policy != pol || len(cc.m) >= classifyCacheSize || cc.bytes+len(sql) > classifyCacheBytes {
		cc = &classifyCache{policy: pol, m: make(map[string]cachedStatement)}
		c.classifyCache = cc
	}
	cc.m[sql] = cs
	cc.bytes += len(sql)
	return cs, true
}

// rememberParams records the number of parameters of a cached text.
func (c *conn) rememberParams(sql string, n int) {
	if cc := c.classifyCache; cc != nil {
		if cs, ok := cc.m[sql]; ok {
			cs.nParams = n
			cc.m[sql] = cs
		}
	}
}

func (c *conn) classify(text string) statement {
	st := statement{text: text}
	st.route, st.err = c.classifyRoute(c.sessCtx, text)
	if st.err != nil {
		st.route = pgsql.RouteRefuse
		return st
	}
	switch st.route {
	case pgsql.RouteSession:
		st.sess, st.err = c.srv.rt.parseSession(text)
		if st.err != nil {
			st.route = pgsql.RouteRefuse
		}
	case pgsql.RouteRefuse:
		st.err = pgerr.New(pgerr.FeatureNotSupported, "this statement is not supported by dpproxy")
	case pgsql.RouteEmpty, pgsql.RouteCatalog, pgsql.RouteDP:
	default:
		st.route = pgsql.RouteRefuse
		st.err = pgerr.New(pgerr.FeatureNotSupported, "this statement is not supported by dpproxy")
	}
	return st
}

// endsFailedTransaction reports whether the statement may run in a failed
// transaction block (only COMMIT and ROLLBACK may).
func (st statement) endsFailedTransaction() bool {
	return st.route == pgsql.RouteSession && st.sess != nil &&
		(st.sess.Kind == pgsql.SessionCommit || st.sess.Kind == pgsql.SessionRollback || st.sess.Kind == pgsql.SessionRollbackTo)
}

// isTransactionControl reports whether the statement is one of
// PostgreSQL's transaction statements, which end the transaction command
// they run in rather than leave it open.
func (st statement) isTransactionControl() bool {
	if st.route != pgsql.RouteSession || st.sess == nil {
		return false
	}
	switch st.sess.Kind {
	case pgsql.SessionBegin, pgsql.SessionCommit, pgsql.SessionRollback,
		pgsql.SessionSavepoint, pgsql.SessionRelease, pgsql.SessionRollbackTo:
		return true
	}
	return false
}

// checkNotFailed refuses st in a failed transaction block unless it ends
// the block (25P02, as PostgreSQL).
func (s *session) checkNotFailed(st statement) error {
	if s.txStatus == 'E' && !st.endsFailedTransaction() {
		return errInFailedTransaction()
	}
	return nil
}

func errInFailedTransaction() error {
	return pgerr.New(pgerr.InFailedTransaction, "current transaction is aborted, commands ignored until end of transaction block").
		WithHint("send ROLLBACK to end the failed transaction")
}

// simpleQuery runs a Query message: every statement of the string in turn,
// one CommandComplete (or error) each, and one ReadyForQuery. After an
// error the rest of the string is skipped, as PostgreSQL does.
func (c *conn) simpleQuery(ctx context.Context, sql string) {
	defer c.readyForQuery()
	release, err := c.textSlot(ctx, sql)
	if err != nil {
		c.sendError(err)
		c.sess.endQuery(true)
		return
	}
	defer release()
	if cs, ok := c.splitOne(sql); ok && cs.st.route != pgsql.RouteEmpty {
		release() // planning takes the slot itself (prepare)
		// One statement (the common case): no implicit transaction block.
		offset := strings.Index(sql, cs.st.text)
		if cs.st.text == "" {
			offset = -1
		}
		err := c.runSimple(ctx, cs.st)
		if err != nil {
			c.sendError(shiftPosition(err, sql, offset))
		}
		c.sess.endQuery(err != nil)
		return
	}
	failed := false
	defer func() { c.sess.endQuery(failed) }()
	stmts, err := c.srv.rt.split(sql)
	if err != nil {
		failed = true
		c.sendError(err)
		return
	}
	if len(stmts) == 0 || (len(stmts) == 1 && strings.TrimSpace(stmts[0]) == "") {
		c.be.Send(&pgproto3.EmptyQueryResponse{})
		return
	}
	// PostgreSQL parses the whole string before it runs any of it: a
	// syntax error anywhere runs nothing (and charges nothing). Where the
	// string may release a DP answer (mayRelease), its DP statements are
	// planned and its catalog statements parsed by the shadow first, and
	// so are the queries of its DECLAREs and COPYs (attack rounds 51, 52).
	sts := make([]statement, len(stmts))
	offsets := make([]int, len(stmts))
	cursor := 0
	hasDP := false
	for i, text := range stmts {
		offsets[i] = -1
		if j := strings.Index(sql[cursor:], text); j >= 0 && text != "" {
			offsets[i] = cursor + j
			cursor = offsets[i] + len(text)
		}
		sts[i] = c.classify(text)
		hasDP = hasDP || mayRelease(sts[i])
		if isSyntaxError(sts[i].err) {
			failed = true
			c.refuseQuery(sts[i], sts[i].err, sql, offsets[i])
			return
		}
	}
	release()
	if hasDP && len(sts) > 1 {
		if i, err := c.firstSyntaxError(ctx, sts); err != nil {
			failed = true
			c.refuseQuery(sts[i], err, sql, offsets[i])
			return
		}
	}
	// A multi-statement string outside a transaction block runs as one
	// implicit transaction block: an error undoes the SETs made before it
	// (endQuery).
	if len(stmts) > 1 {
		c.sess.beginImplicit()
	}
	for i, st := range sts {
		offset := offsets[i]
		if st.route == pgsql.RouteEmpty {
			if len(stmts) == 1 {
				c.be.Send(&pgproto3.EmptyQueryResponse{})
			}
			continue
		}
		if err := c.runSimple(ctx, st); err != nil {
			failed = true
			c.sendError(shiftPosition(err, sql, offset))
			return
		}
	}
}

// firstSyntaxError returns the first of sts (and the query a DECLARE or
// COPY wraps) whose planning, or the shadow's parse, finds a syntax
// error, or the cancellation or time-out that ended the pass: run before
// any of a Query string that may release a DP answer.
func (c *conn) firstSyntaxError(ctx context.Context, sts []statement) (int, error) {
	// One statement's context for the whole pass: a CancelRequest or
	// statement_timeout ends it (and the string, of which nothing ran).
	ctx, done := c.statementContext(ctx)
	defer done()
	for i, st := range sts {
		q := st
		if st.sess != nil && st.sess.Cursor != nil {
			q = c.classify(st.sess.Cursor.Query) // DECLARE's query
		} else if st.sess != nil && st.sess.Copy != nil && st.sess.Copy.Query != "" {
			q = c.classify(st.sess.Copy.Query) // COPY's
		}
		err := q.err
		switch {
		case err != nil:
		case q.route == pgsql.RouteDP:
			err = c.checkDPIn(ctx, q.text)
		case q.route == pgsql.RouteCatalog:
			_, err = c.describeShadow(ctx, q.text, nil)
		}
		if isSyntaxError(err) {
			return i, err
		}
		if ctx.Err() != nil {
			return i, statementError(ctx, ctx.Err())
		}
	}
	return 0, nil
}

// refuseQuery refuses a whole Query string for st's syntax error err (at
// offset in sql), before any of its statements ran.
func (c *conn) refuseQuery(st statement, err error, sql string, offset int) {
	c.logStatement(st, nil)
	c.observe(st, err, 0)
	c.sendError(shiftPosition(err, sql, offset))
}

// isSyntaxError reports whether err is a syntax error (42601), the
// proxy's or the shadow's.
func isSyntaxError(err error) bool {
	if pe, ok := pgerr.As(err); ok {
		return pe.Code == pgerr.SyntaxError
	}
	var se *shadowError
	return errors.As(err, &se) && se.pg.Code == pgerr.SyntaxError
}

// shiftPosition makes an error position relative to the whole query string
// (PostgreSQL counts characters from the start of the Query message).
func shiftPosition(err error, sql string, offset int) error {
	pe, ok := pgerr.As(err)
	if !ok || pe.Position <= 0 || offset <= 0 || offset > len(sql) {
		return err
	}
	return pe.WithPosition(pe.Position + utf8.RuneCountInString(sql[:offset]))
}

// runSimple runs one statement of the simple protocol and sends its reply.
func (c *conn) runSimple(ctx context.Context, st statement) error {
	if err := c.sess.checkNotFailed(st); err != nil {
		return err
	}
	if st.err != nil {
		c.logStatement(st, nil)
		c.observe(st, st.err, 0)
		return st.err
	}
	sctx, done := c.statementContext(ctx)
	defer done()
	start := time.Now()
	var err error
	logged := st
	switch st.route {
	case pgsql.RouteSession:
		switch {
		case st.sess.Kind == pgsql.SessionExecute:
			// An EXECUTE of a prepared DP statement is logged and
			// observed as that statement, as its Bind and Execute are
			// (runPortal): route dp, the prepared text's fingerprint.
			if ps, ok := c.sess.stmts[st.sess.Name]; ok && ps.st.route == pgsql.RouteDP {
				logged = ps.st
			}
		case st.sess.Kind == pgsql.SessionDeclare && st.sess.Cursor != nil,
			st.sess.Kind == pgsql.SessionCopy && st.sess.Copy != nil:
			// DECLARE … CURSOR FOR and COPY ( … ) TO STDOUT of a DP
			// query release (and charge) it here: observed as it.
			q := ""
			if st.sess.Cursor != nil {
				q = st.sess.Cursor.Query
			} else {
				q = st.sess.Copy.Query
			}
			if inner := c.classify(q); inner.route == pgsql.RouteDP {
				logged = inner
			}
		}
		var rs *resultSet
		if rs, err = c.execSession(sctx, st.sess); err == nil {
			err = c.sendResultSet(rs)
		}
	case pgsql.RouteCatalog:
		err = c.execShadowSimple(sctx, st.text)
	case pgsql.RouteDP:
		var rs *resultSet
		if rs, err = c.execDP(sctx, st.text, st.text); err == nil {
			err = c.sendResultSet(rs)
		}
	}
	// A DP answer (or an EXECUTE's) has been written but for the last
	// buffer: its room goes back (execDP).
	c.endSending()
	err = statementError(sctx, err)
	d := time.Since(start)
	c.logStatement(logged, err, zap.Duration(logKeyDuration, d))
	c.observe(logged, err, d)
	return err
}

// sendResultSet sends a proxy-built result in the simple protocol: notices,
// RowDescription, DataRows, CommandComplete. A row a BINARY cursor's FETCH
// cannot encode ends the result with its error, as in PostgreSQL (the
// rows before it are sent; the session goes on).
func (c *conn) sendResultSet(rs *resultSet) error {
	for _, n := range rs.notices {
		if c.sess.wantsMessages(n.Severity) {
			c.be.Send(n)
		}
	}
	if rs.copy != nil {
		c.sendCopyOut(rs)
	} else if rs.cols != nil {
		c.be.Send(rowDescription(rs.cols, rs.formats))
		for _, row := range rs.rows {
			vals, err := encodeRow(rs.cols, row, rs.formats)
			if err != nil {
				return err
			}
			c.be.Send(&pgproto3.DataRow{Values: vals})
		}
	}
	c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(rs.tag)})
	return nil
}

// logStatement logs one statement: route and fingerprint, with the
// (truncated) text at Debug only. Failed and refused statements are logged
// at Info; statements that succeed at Debug, since a line per `SELECT 1`
// costs more CPU than forwarding it (BENCHMARKS.md, item 1); a new DP
// release has its own Info line ("dp answer released", execDP). The
// fingerprint is computed only when the line is written.
func (c *conn) logStatement(st statement, err error, extra ...zap.Field) {
	// At Debug every statement is written with its text (and takes no
	// line of the analyst's rate); else a refused or failed one at Info,
	// within the rate (freeLog).
	debug := c.log.Core().Enabled(zap.DebugLevel)
	var ce *zapcore.CheckedEntry
	if !debug {
		if err == nil && st.route != pgsql.RouteRefuse {
			return
		}
		if ce = c.freeLog().Check(zap.InfoLevel, "statement"); ce == nil {
			return
		}
	}
	fields := append([]zap.Field{
		zap.String(logKeyRoute, routeName(st.route)),
		zap.String(logKeyFingerprint, c.fingerprintOf(st.text)),
	}, extra...)
	if err != nil {
		fields = append(fields, zap.String(logKeySQLState, errorResponse(err, severityError, zap.NewNop()).Code))
	}
	if debug {
		if ce = c.log.Check(zap.DebugLevel, "statement"); ce != nil {
			ce.Write(append(fields, zap.String(logKeyQuery, pgerr.Truncate(st.text, maxDebugQuery)))...)
		}
		return
	}
	ce.Write(fields...)
}

func routeName(r pgsql.Route) string {
	switch r {
	case pgsql.RouteEmpty:
		return "empty"
	case pgsql.RouteSession:
		return "session"
	case pgsql.RouteCatalog:
		return "catalog"
	case pgsql.RouteDP:
		return "dp"
	}
	return "refuse"
}

// fingerprint hashes a statement with its literals and comments removed
// and its whitespace and case folded, so that logs can group statements
// without recording their values.
func fingerprint(stmt string) string {
	var b strings.Builder
	toks, err := pgsql.Lex(stmt) // the one lexer (pgsql/lex.go)
	if err != nil {
		// No tokens to keep apart from values: the length only.
		b.WriteString("unlexable " + strconv.Itoa(len(stmt)))
	}
	for _, tok := range toks {
		switch tok.Kind {
		case pgsql.TokString, pgsql.TokNumber, pgsql.TokBitString, pgsql.TokParam:
			b.WriteString("?")
		default:
			b.WriteString(strings.ToLower(stmt[tok.Pos:tok.End]))
		}
		b.WriteByte(' ')
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// fingerprintOf is fingerprint(text), lexing it holding the analyst's
// planning slot when it is over bigText (textSlot): a log line's, an audit
// line's and SHOW dp.last_answer's fingerprint lex the whole text again
// after the slot that checked the statement was given back (attack round
// 105's lead: 172 ms of CPU for a 1 MiB text, on every statement once the
// audit log is on, a refused or a cached one too, in every session of the
// analyst at once).
func (c *conn) fingerprintOf(text string) string {
	ctx := c.sessCtx
	if ctx == nil {
		ctx = context.Background()
	}
	if release, err := c.textSlot(ctx, text); err == nil {
		defer release()
	}
	return c.srv.rt.fingerprint(text)
}

// bigText is the size of a query string from which splitting and
// classifying it takes the analyst's planning slot (textSlot).
const bigText = 16 << 10

// textSlot takes the analyst's planning slot (prepare) for splitting and
// classifying a query string of more than bigText bytes, and returns what
// gives it back (safe to call more than once). Checking a string costs the
// proxy's CPU in proportion to its size, up to about 0.2 s for the 1 MiB a
// message may hold, whatever its route, and costs the analyst nothing when
// it is refused: without the slot, 24 sessions of one analyst sending such
// strings slowed another analyst's DP answer 12 times (attack round 82).
// With it one analyst's sessions keep at most one core checking and
// planning; the short strings real clients send do not wait for it. Binding
// values into a stored statement's text (Execute, Describe, SQL EXECUTE)
// lexes the whole text and takes it too: sent once, at Parse or PREPARE, a
// 1 MiB text had been lexed again outside the slot at every few-byte
// Execute (attack round 93: 4 sessions kept both cores busy).
func (c *conn) textSlot(ctx context.Context, text string) (func(), error) {
	if len(text) <= bigText {
		return func() {}, nil
	}
	return c.takePlanSlot(ctx) // dp.go
}

// withTextSlot runs f holding the planning slot when text is over bigText
// (textSlot), given back however f ends (a panic too: the session's end
// recovers it, and a slot kept would stop the analyst's every statement).
func (c *conn) withTextSlot(ctx context.Context, text string, f func() error) error {
	release, err := c.textSlot(ctx, text)
	if err != nil {
		return err
	}
	defer release()
	return f()
}

// classifyRoute classifies text holding the planning slot when it is over
// bigText (textSlot): the query a DECLARE or COPY wraps is classified
// again where it runs or is described, after the slot that checked the
// statement was given back (attack round 105: four sessions of one
// analyst checked four 1 MiB queries at once, each lexed three more times
// outside the slot).
func (c *conn) classifyRoute(ctx context.Context, text string) (pgsql.Route, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	release, err := c.textSlot(ctx, text)
	if err != nil {
		return pgsql.RouteRefuse, err
	}
	defer release()
	return c.srv.rt.classify(c.sess.ds.Policy, text)
}
