package proxy

import (
	"context"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Server-side cursors over released answers (issue 17: psycopg2 and
// psycopg 3 named cursors, SQLAlchemy's stream_results, hand-written
// DECLARE/FETCH). DECLARE runs its query once, as any statement of the
// session would run it — a DP query is released (charged) then, a catalog
// statement runs on the shadow — and the cursor holds the rows in the
// session; FETCH and MOVE page over them and never run anything. So a DP
// query costs one charge per DECLARE however it is fetched, and the
// cursor's text never reaches a database.
//
// Lifetime as in PostgreSQL: a cursor ends with its transaction unless
// declared WITH HOLD (one declared WITH HOLD in a transaction that rolls
// back ends too); ROLLBACK TO a savepoint ends the cursors declared after
// it; CLOSE, CLOSE ALL and DISCARD ALL end them at once.

// Cursor SQLSTATEs (PostgreSQL's errcodes.txt).
const (
	objectNotInPrerequisiteState = "55000"
	invalidColumnReference       = "42P10"
)

// maxCursors bounds the cursors a session holds at once: each holds its
// rows in the proxy's memory (a catalog cursor up to MaxBufferedResult).
const maxCursors = 64

// oidVoid is the type of pg_advisory_unlock_all()'s result.
const oidVoid uint32 = 2278

// cursor is a declared cursor: the released rows and a position, as
// PostgreSQL counts it (0: before the first row, 1…n: on row k, n+1:
// after the last).
type cursor struct {
	name     string
	cols     []column
	rows     [][]*string
	bytes    int // what rows hold in memory, about (rowsBytes)
	pos      int64
	binary   bool // DECLARE … BINARY: the simple protocol's FETCH sends binary values
	noScroll bool // NO SCROLL: only forward
	hold     bool // WITH HOLD: survives the transaction's commit
	inTx     bool // declared in the current transaction (block or implicit)
	depth    int  // how many savepoints were set when it was declared
}

// execUnlisten answers UNLISTEN: sessions of the proxy cannot LISTEN
// (refused), so there is nothing to stop listening to.
func (c *conn) execUnlisten() *resultSet { return &resultSet{tag: "UNLISTEN"} }

// execUnlockAll answers SELECT pg_advisory_unlock_all(): sessions of the
// proxy take no advisory lock (pg_advisory_lock and the others are
// refused), so there is none to release. The answer is PostgreSQL's: one
// row with the void value (empty text).
func (c *conn) execUnlockAll(st *pgsql.SessionStmt) *resultSet {
	name := st.Alias
	if name == "" {
		name = "pg_advisory_unlock_all"
	}
	return &resultSet{cols: []column{{name, oidVoid}}, rows: [][]*string{textRow("")}, tag: "SELECT 1"}
}

// materialize runs the query a DECLARE or COPY wraps, once, on the route
// Classify gives it (the DP path or the shadow), and returns its rows.
//
// The caller keeps copies of a DP answer: room for them is checked before
// it is released (execDP, keepAnswer), so the caller charges what it keeps
// without a check once released is true: refused after its charge, it
// was paid for and lost (attack round 52).
func (c *conn) materialize(ctx context.Context, query string, copies int) (rs *resultSet, released bool, err error) {
	route, err := c.classifyRoute(ctx, query)
	if err != nil {
		return nil, false, err
	}
	switch route {
	case pgsql.RouteDP:
		prev := c.keepAnswer
		c.keepAnswer = copies
		rs, err := c.execDP(ctx, query, query)
		c.keepAnswer = prev
		return rs, err == nil, err
	case pgsql.RouteCatalog:
		rs, err := c.shadowResult(ctx, query)
		return rs, false, err
	}
	return nil, false, pgerr.New(pgerr.FeatureNotSupported, "this statement cannot be used in a cursor or COPY").
		WithHint("DECLARE and COPY wrap a query: SELECT, VALUES or TABLE")
}

// shadowResult runs one catalog query on the shadow and returns its rows
// as text (at most MaxBufferedResult bytes).
func (c *conn) shadowResult(ctx context.Context, query string) (*resultSet, error) {
	return c.shadowRows(ctx, query, nil, true, func() error {
		return pgerr.New(programLimitExceeded, "catalog result too large for a cursor or COPY (over %d bytes)", c.srv.cfg.MaxBufferedResult).
			WithHint("add a LIMIT, or run the query without DECLARE or COPY")
	})
}

// shadowRows runs one statement with text parameters on the shadow (the
// extended protocol: one statement only) and returns its rows as text; a
// result over MaxBufferedResult bytes fails with tooLarge's error. The
// statement must pass the catalog allow-lists (checkShadowSQL): it may be
// the outer SQL of a post-processed DP answer, which Classify did not
// check as a catalog statement.
func (c *conn) shadowRows(ctx context.Context, sql string, params [][]byte, bounded bool, tooLarge func() error) (*resultSet, error) {
	if err := c.withTextSlot(ctx, sql, func() error { return checkShadowSQL(sql) }); err != nil { // as classifyRoute
		return nil, err
	}
	ctx, cancel := c.catalogContext(ctx)
	defer cancel()
	sc, err := c.acquireShadow(ctx)
	if err != nil {
		return nil, err
	}
	defer c.releaseShadow(ctx, sc)
	// The rows are reserved from the analyst's memory bound as they come
	// (memory.go; attack round 39: charged only after they were read, they
	// had passed it); the caller charges what it keeps (a cursor's rows, a
	// COPY's lines, a post-processed answer until it is sent). Not
	// bounded: the outer result of charged leaves, kept whatever the bound
	// (shadowRun); MaxBufferedResult still holds.
	if bounded {
		if err := c.reserveResult(); err != nil {
			return nil, err
		}
	}
	size := 0
	defer c.settleResult(0)
	rr := sc.PgConn().ExecParams(ctx, sql, params, nil, nil, nil)
	rs := &resultSet{}
	for _, f := range rr.FieldDescriptions() {
		rs.cols = append(rs.cols, column{name: f.Name, oid: f.DataTypeOID})
	}
	for rr.NextRow() {
		vals := rr.Values()
		row := make([]*string, len(vals))
		for i, v := range vals {
			if v != nil {
				s := string(v)
				row[i] = &s
			}
		}
		size += rowBytes(row)
		if size > c.srv.cfg.MaxBufferedResult {
			_, _ = rr.Close()
			return nil, tooLarge()
		}
		if err := c.growResult(size); err != nil {
			_, _ = rr.Close()
			return nil, err
		}
		rs.rows = append(rs.rows, row)
	}
	tag, err := rr.Close()
	if err != nil {
		return nil, c.shadowFailed(ctx, err)
	}
	rs.tag = tag.String()
	return rs, nil
}

// execDeclare declares a cursor: the checks PostgreSQL makes before it
// runs anything (a transaction block unless WITH HOLD, a free name), then
// the query, once.
func (c *conn) execDeclare(ctx context.Context, cs *pgsql.CursorStmt) (*resultSet, error) {
	// The query first, as PostgreSQL's parse analysis does: a query the
	// proxy refuses is refused as itself (planned or described, nothing
	// run or charged).
	cols, err := c.queryColumns(ctx, cs.Query)
	if err != nil {
		return nil, err
	}
	if cs.Binary {
		// Before the query runs: a DP query is charged when it runs
		// (attack round 44).
		if err := binaryFormats(cols, nil, c.sess.settings["datestyle"]); err != nil {
			return nil, err
		}
	}
	if err := c.sess.checkDeclare(cs); err != nil {
		return nil, err
	}
	if err := c.sess.checkHeldRoom("", c.srv.cfg.MaxBufferedResult); err != nil { // session.go
		return nil, err
	}
	if err := c.checkMemory(0); err != nil { // memory.go
		return nil, err
	}
	rs, _, err := c.materialize(ctx, cs.Query, 1)
	if err != nil {
		return nil, err
	}
	if rs.cols == nil {
		return nil, pgerr.New(pgerr.FeatureNotSupported, "the query of a cursor must return rows")
	}
	if cs.Binary {
		// The columns described are those run (materialize checks a DP
		// answer's against its plan); a catalog query's could differ.
		if err := binaryFormats(rs.cols, nil, c.sess.settings["datestyle"]); err != nil {
			return nil, err
		}
	}
	c.chargeMemoryOwn(c.sess.declare(cs, rs).bytes)
	return &resultSet{tag: "DECLARE CURSOR", notices: rs.notices}, nil
}

// checkDeclare makes the checks of DECLARE that PostgreSQL makes before
// it runs the query: a transaction block (or an implicit one) unless WITH
// HOLD, room for one more cursor, a free name.
func (s *session) checkDeclare(cs *pgsql.CursorStmt) error {
	if !cs.Hold && s.txStatus == 'I' && !s.implicitTx {
		return pgerr.New(pgerr.NoActiveSQLTransaction, "DECLARE CURSOR can only be used in transaction blocks").
			WithHint("start a transaction with BEGIN first, or declare the cursor WITH HOLD")
	}
	if len(s.cursors) >= maxCursors {
		return pgerr.New(programLimitExceeded, "too many open cursors (at most %d per session)", maxCursors).
			WithHint("CLOSE the cursors you no longer need")
	}
	if s.cursorExists(cs.Name) {
		return pgerr.New(duplicateCursor, "cursor %q already exists", cs.Name).
			WithHint("CLOSE it first, or choose another name")
	}
	return nil
}

// declare keeps the rows of a DECLARE that checkDeclare let through as a
// cursor, before its first row, in the current transaction and savepoint,
// and returns it. Its bytes count its columns' descriptions too (attack
// round 93's note: 1,650 columns of SELECT *,*,… FROM pg_class are about
// 53 KB a cursor, and a session keeps 64).
func (s *session) declare(cs *pgsql.CursorStmt, rs *resultSet) *cursor {
	if s.cursors == nil {
		s.cursors = map[string]*cursor{}
	}
	cur := &cursor{
		name: cs.Name, cols: rs.cols, rows: rs.rows, bytes: rowsBytes(rs.rows) + columnsBytes(rs.cols),
		binary: cs.Binary, noScroll: cs.NoScroll, hold: cs.Hold,
		inTx: true, depth: len(s.savepoints),
	}
	s.cursors[cs.Name] = cur
	return cur
}

// cursorExists reports whether name is taken by a cursor or a protocol
// portal (PostgreSQL keeps both in one namespace).
func (s *session) cursorExists(name string) bool {
	if _, ok := s.cursors[name]; ok {
		return true
	}
	_, ok := s.portals[name]
	return ok && name != ""
}

func errNoCursor(name string) error {
	return pgerr.New(invalidCursorName, "cursor %q does not exist", name).
		WithHint("DECLARE it in this transaction first (cursors end with their transaction unless declared WITH HOLD)")
}

// binaryFormats checks, before anything is charged, that the columns
// asked for in binary (formats as in Bind; nil: every column) can be
// encoded by encodeBinary: its types, and dates and times written in the
// ISO style it parses (dateStyle, the session's DateStyle; "" for ISO)
// (attack round 75: a post-processed answer's columns of other types had
// been sent as text in a binary column, and its dates under DateStyle
// German failed after the charge).
func binaryFormats(cols []column, formats []int16, dateStyle string) error {
	for i, col := range cols {
		if formats != nil && formatFor(formats, i) != formatBinary {
			continue
		}
		switch col.oid {
		case oidDate, oidTimestamp, oidTimestamptz:
			if dateStyle != "" && !strings.HasPrefix(strings.ToUpper(dateStyle), "ISO") {
				return pgerr.New(pgerr.FeatureNotSupported, "binary output of column %q under DateStyle %s is not supported by dpproxy", col.name, dateStyle).
					WithHint("SET DateStyle = ISO, or read the column in text format")
			}
		case oidBool, oidInt2, oidInt4, oidInt8, oidText, oidVarchar, oidFloat4, oidFloat8, oidNumeric, oidVoid: // encodeBinary's types
		default:
			return pgerr.New(pgerr.FeatureNotSupported, "binary output of column %q (type %d) is not supported by dpproxy", col.name, col.oid).
				WithHint("read the column in text format (or declare the cursor without BINARY)")
		}
	}
	return nil
}

// execFetch answers FETCH and MOVE.
func (c *conn) execFetch(cs *pgsql.CursorStmt, move bool) (*resultSet, error) {
	cur, ok := c.sess.cursors[cs.Name]
	if !ok {
		return nil, errNoCursor(cs.Name)
	}
	idx, err := cur.step(cs.Direction, cs.Count)
	if err != nil {
		return nil, err
	}
	if move {
		return &resultSet{tag: "MOVE " + strconv.Itoa(len(idx))}, nil
	}
	rs := &resultSet{cols: cur.cols, rows: make([][]*string, len(idx)), tag: "FETCH " + strconv.Itoa(len(idx))}
	for i, k := range idx {
		rs.rows[i] = cur.rows[k]
	}
	if cur.binary {
		rs.formats = []int16{formatBinary}
	}
	return rs, nil
}

// step moves the cursor as FETCH/MOVE direction count does in PostgreSQL
// (pquery.c DoPortalRunFetch) and returns the indices (0-based) of the
// rows it passes, in order.
func (cur *cursor) step(dir pgsql.FetchDirection, count int64) ([]int, error) {
	n := int64(len(cur.rows))
	switch dir {
	case pgsql.FetchForward, pgsql.FetchBackward:
		if count < 0 {
			count = -count
			if dir == pgsql.FetchForward {
				dir = pgsql.FetchBackward
			} else {
				dir = pgsql.FetchForward
			}
		}
		if count == 0 {
			dir = pgsql.FetchRelative // FETCH FORWARD 0: the current row again
		}
	}
	backward := func() error {
		if cur.noScroll {
			return pgerr.New(objectNotInPrerequisiteState, "cursor can only scan forward").
				WithHint("Declare it with SCROLL option to enable backward scan.")
		}
		return nil
	}
	var idx []int
	switch dir {
	case pgsql.FetchForward:
		for k := int64(0); k < count; k++ {
			if cur.pos >= n {
				cur.pos = n + 1
				break
			}
			cur.pos++
			idx = append(idx, int(cur.pos-1))
		}
	case pgsql.FetchBackward:
		if err := backward(); err != nil {
			return nil, err
		}
		for k := int64(0); k < count; k++ {
			if cur.pos <= 1 {
				cur.pos = 0
				break
			}
			cur.pos--
			idx = append(idx, int(cur.pos-1))
		}
	case pgsql.FetchAbsolute:
		target := count
		switch {
		case count < 0 && -count > n:
			target = 0
		case count < 0:
			target = n + 1 + count
		case count > n:
			target = n + 1
		}
		if target <= cur.pos {
			if err := backward(); err != nil {
				return nil, err
			}
		}
		cur.pos = target
		if target >= 1 && target <= n && count != 0 {
			idx = append(idx, int(target-1))
		}
	case pgsql.FetchRelative:
		if count <= 0 {
			if err := backward(); err != nil {
				return nil, err
			}
		}
		switch {
		case count == 0:
		case count > 0 && count > n-cur.pos:
			cur.pos = n + 1
		case count < 0 && -count >= cur.pos:
			cur.pos = 0
		default:
			cur.pos += count
		}
		if cur.pos >= 1 && cur.pos <= n {
			idx = append(idx, int(cur.pos-1))
		}
	}
	return idx, nil
}

// execClose answers CLOSE name and CLOSE ALL.
func (c *conn) execClose(cs *pgsql.CursorStmt) (*resultSet, error) {
	tag, err := c.sess.closeCursor(cs)
	if err != nil {
		return nil, err
	}
	return &resultSet{tag: tag}, nil
}

// closeCursor runs CLOSE name or CLOSE ALL and returns the command tag.
func (s *session) closeCursor(cs *pgsql.CursorStmt) (string, error) {
	if cs.All {
		s.cursors = nil
		return "CLOSE CURSOR ALL", nil
	}
	if _, ok := s.cursors[cs.Name]; !ok {
		return "", errNoCursor(cs.Name)
	}
	delete(s.cursors, cs.Name)
	return "CLOSE CURSOR", nil
}

// endCursors ends the cursors at the end of a transaction: all but the
// WITH HOLD ones; on rollback also those declared in it.
func (s *session) endCursors(commit bool) {
	for n, cur := range s.cursors {
		if !cur.hold || (!commit && cur.inTx) {
			delete(s.cursors, n)
			continue
		}
		cur.inTx = false
	}
}

// rollbackCursors ends the cursors declared after savepoint i (ROLLBACK
// TO it).
func (s *session) rollbackCursors(i int) {
	for n, cur := range s.cursors {
		if cur.inTx && cur.depth > i {
			delete(s.cursors, n)
		}
	}
}

// releaseCursors moves the cursors declared after savepoint i to the
// enclosing level (RELEASE of it).
func (s *session) releaseCursors(i int) {
	for _, cur := range s.cursors {
		if cur.inTx && cur.depth > i {
			cur.depth = i
		}
	}
}

// describeCursor answers Describe of a portal that is a cursor declared
// with DECLARE (psycopg 3 describes its named cursors so).
func (c *conn) describeCursor(name string, formats []int16) (*pgproto3.RowDescription, bool) {
	cur, ok := c.sess.cursors[name]
	if !ok {
		return nil, false
	}
	if formats == nil && cur.binary {
		formats = []int16{formatBinary}
	}
	return rowDescription(cur.cols, formats), true
}
