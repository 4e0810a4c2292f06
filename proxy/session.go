package proxy

import (
	"maps"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
)

// session is one client session's state, apart from its connection: who
// it is, its settings and the values the client was last told of them,
// its transaction block (status, the settings at BEGIN and those COMMIT
// keeps, savepoints), its prepared statements, portals and cursors, the
// skip after an extended-protocol error, and its last DP answer. Its
// methods change that state and do no I/O: conn (conn.go) reads the
// messages, runs the statements and sends what these methods decide,
// including the WARNINGs they return (PostgreSQL warns and goes on where
// a statement has nothing to do), as CockroachDB keeps its session apart
// from pgwire. Not safe for concurrent use.
type session struct {
	analyst       string
	ds            *Dataset
	serverVersion string
	// grantedLimit returns the analyst's budget limit on ds when a
	// steward's grant in the ledger may have raised it above the
	// policy's (conn.grantedLimit); nil: the policy's limit.
	grantedLimit func() accountant.Spent

	settings map[string]string // current values by lower-case name
	reported map[string]string // last value sent in ParameterStatus
	txStatus byte              // 'I', 'T' or 'E'
	// The transaction PostgreSQL would have open, implicit or a block
	// (endXact): txBegin holds the settings at its start, which an abort
	// restores, and txCommit those its commit keeps (without SET LOCAL).
	// Both are nil until the transaction first changes a setting
	// (changingSettings) or BEGIN. An implicit transaction is a Query
	// message's statements, or an extended batch's messages up to Sync or
	// to a COMMIT, ROLLBACK or Query among them.
	txBegin  map[string]string
	txCommit map[string]string
	// pipelined: an Execute completed in the open implicit transaction
	// (PostgreSQL's XACT_FLAGS_PIPELINING): DISCARD ALL refuses to run.
	pipelined bool
	// savepoints of the transaction block, oldest first.
	savepoints []savepoint
	stmts      map[string]*preparedStatement
	stmtBytes  int // what stmts hold (preparedStatement.size; prepare, closeStatement, deallocate, discardAll)
	portals    map[string]*portal
	extFailed  bool // an extended-protocol error: skip until Sync
	// cursors declared with DECLARE (cursor.go); implicitTx: a
	// multi-statement simple query outside a transaction block is running
	// (PostgreSQL's implicit transaction block, where DECLARE works).
	cursors    map[string]*cursor
	implicitTx bool

	// lastDP describes the DP answer of the running statement for the
	// Observer (set by execDP, cleared by observe).
	lastDP *DPEvent
	// lastAnswer is the session's last DP answer, for SHOW
	// dp.last_answer (dp.go).
	lastAnswer *lastAnswer
	// stmtStart is the start of the running statement (zero between
	// statements): its relative dates are folded at it (rewrite/reldate.go).
	stmtStart time.Time
}

// warning is a WARNING a transition asks the connection to send: the
// statement succeeds with nothing to do, as in PostgreSQL. The zero value
// is none.
type warning struct{ code, msg string }

// Warnings of transaction control outside or inside a block.
var (
	warnInTransaction = warning{pgerr.ActiveSQLTransaction, "there is already a transaction in progress"}
	warnNoTransaction = warning{pgerr.NoActiveSQLTransaction, "there is no transaction in progress"}
)

// newSession returns the state of a session of analyst on ds before its
// start-up parameters are applied (initSettings): the default settings,
// no transaction block, nothing prepared.
func newSession(analyst string, ds *Dataset, serverVersion string) session {
	s := session{
		analyst: analyst, ds: ds, serverVersion: serverVersion,
		settings: make(map[string]string, len(settingDefs)),
		reported: map[string]string{},
		txStatus: 'I',
		stmts:    map[string]*preparedStatement{},
		portals:  map[string]*portal{},
	}
	for name := range settingDefs {
		s.settings[name] = s.defaultSetting(name)
	}
	return s
}

// begin starts a transaction block (BEGIN or START TRANSACTION with its
// modes text). Inside one it only warns. The block continues the
// implicit transaction it starts in: a ROLLBACK undoes the SETs an
// extended batch or a Query string made before its BEGIN, as in
// PostgreSQL.
func (s *session) begin(modes string) warning {
	if s.txStatus != 'I' {
		return warnInTransaction
	}
	s.txStatus = 'T'
	s.changingSettings()
	if iso := isolationIn(modes); iso != "" {
		s.settings["transaction_isolation"] = iso
	}
	return warning{}
}

// commit ends the transaction block and returns the command tag: COMMIT
// of a failed block rolls it back. Outside a block it warns and commits
// the implicit transaction.
func (s *session) commit() (string, warning) {
	switch s.txStatus {
	case 'I':
		s.endXact(true)
		return "COMMIT", warnNoTransaction
	case 'E':
		s.endXact(false)
		return "ROLLBACK", warning{}
	}
	s.endXact(true)
	return "COMMIT", warning{}
}

// rollback ends the transaction block as ROLLBACK does. Outside a block it
// warns and aborts the implicit transaction (its SETs are undone).
func (s *session) rollback() warning {
	w := warning{}
	if s.txStatus == 'I' {
		w = warnNoTransaction
	}
	s.endXact(false)
	return w
}

// fail records a statement's error: an explicit transaction block becomes
// failed ('E'), where every statement but ROLLBACK (and COMMIT, which
// rolls back) gets 25P02.
func (s *session) fail() {
	if s.txStatus == 'T' {
		s.txStatus = 'E'
	}
}

// inBlock reports whether a transaction block is open, explicit or a
// multi-statement Query's implicit one (where SET LOCAL and SET
// TRANSACTION do not warn).
func (s *session) inBlock() bool { return s.txStatus != 'I' || s.implicitTx }

// changingSettings is called before the settings change: the first
// change of a transaction keeps the settings before it, for endXact.
func (s *session) changingSettings() {
	if s.txBegin == nil {
		s.txBegin = maps.Clone(s.settings)
		s.txCommit = maps.Clone(s.settings)
	}
}

// endXact ends the open transaction, implicit or a block: a commit keeps
// the settings made with SET (not SET LOCAL), an abort restores those at
// its start. Portals end with it, cursors unless WITH HOLD (endCursors).
func (s *session) endXact(commit bool) {
	keep := s.txBegin
	if commit {
		keep = s.txCommit
	}
	if keep != nil {
		keep["transaction_isolation"] = keep["default_transaction_isolation"]
		s.settings = keep
	}
	s.txBegin, s.txCommit = nil, nil
	s.savepoints = nil
	s.pipelined = false
	s.txStatus = 'I'
	s.endCursors(commit)
	clear(s.portals)
}

// setStmt runs SET (SET LOCAL, SET … TO DEFAULT, SET TRANSACTION) of the
// setting name. Outside a transaction block SET LOCAL and SET TRANSACTION
// only warn (SET LOCAL still checks its value, as PostgreSQL does: the
// warning comes with its error).
func (s *session) setStmt(st *pgsql.SessionStmt, name string) (warning, error) {
	if name == settingBudget {
		return warning{}, pgerr.New(cantChangeRuntimeParam, "parameter %q cannot be changed", settingBudget).
			WithHint("budgets are granted by the data steward (dpproxy budget grant)")
	}
	if name == settingLastAnswer {
		return warning{}, pgerr.New(cantChangeRuntimeParam, "parameter %q cannot be changed", settingLastAnswer).
			WithHint("SHOW dp.last_answer shows the session's last DP answer")
	}
	// SET TRANSACTION … arrives as a setting of the current transaction.
	if name == "transaction" || name == "transaction_isolation" {
		// Outside a block it warns and lasts until the implicit
		// transaction ends (an extended batch's Sync), as SET LOCAL.
		var w warning
		if !s.inBlock() {
			w = warning{pgerr.NoActiveSQLTransaction, "SET TRANSACTION can only be used in transaction blocks"}
		}
		v := isolationIn(st.Value)
		if name == "transaction_isolation" {
			var err error
			if v, err = checkIsolation(s, st.Value); err != nil {
				return w, err
			}
		}
		if v != "" {
			s.put("transaction_isolation", v, true)
		}
		return w, nil
	}
	var w warning
	if st.Local && !s.inBlock() {
		w = warning{pgerr.NoActiveSQLTransaction, "SET LOCAL can only be used in transaction blocks"}
	}
	return w, s.set(name, st.Value, st.Default, st.Local)
}

// setCharacteristics runs SET SESSION CHARACTERISTICS AS TRANSACTION
// modes: every transaction of the proxy is read-only already; the modes
// are accepted and remembered.
func (s *session) setCharacteristics(modes string) {
	v := strings.ToLower(modes)
	if iso := isolationIn(v); iso != "" {
		s.put("default_transaction_isolation", iso, false)
	}
	if strings.Contains(v, "read only") {
		s.put("default_transaction_read_only", "on", false)
	} else if strings.Contains(v, "read write") {
		s.put("default_transaction_read_only", "off", false)
	}
}

// savepoint is one SAVEPOINT of the transaction block: the session's
// settings then, which ROLLBACK TO restores.
type savepoint struct {
	name             string
	settings, commit map[string]string
	// bytes: what it and the savepoints before it hold of the proxy's
	// memory (their own copies, when they have them; maxSavepointMemory).
	bytes int
}

// A transaction's savepoints hold at most maxSavepointMemory of the
// proxy's memory (each keeps a copy of the settings when they changed
// since the one before) and number at most maxSavepoints: each SAVEPOINT
// had copied the whole settings map, so 400 twelve-byte SAVEPOINTs held
// 501 MiB (attack round 35). settingEntryBytes and savepointBytes are
// the estimated overheads of a map entry and of a savepoint.
const (
	maxSavepoints      = 100000
	maxSavepointMemory = 16 << 20
	settingEntryBytes  = 48
	savepointBytes     = 64
)

// savepointStmt runs SAVEPOINT, RELEASE and ROLLBACK TO (issue 17:
// psycopg 3, SQLAlchemy's begin_nested, JDBC setSavepoint, pgx nested
// Begin and psql's ON_ERROR_ROLLBACK use them) and returns the command
// tag. dpproxy's transactions never write, so a savepoint is only the
// point to return to: the session settings made since are undone, and a
// failed transaction is usable again, with PostgreSQL's messages and
// SQLSTATEs.
func (s *session) savepointStmt(kind pgsql.SessionKind, name string) (string, error) {
	if s.txStatus == 'I' {
		what := map[pgsql.SessionKind]string{pgsql.SessionSavepoint: "SAVEPOINT",
			pgsql.SessionRelease: "RELEASE SAVEPOINT", pgsql.SessionRollbackTo: "ROLLBACK TO SAVEPOINT"}[kind]
		return "", pgerr.New(pgerr.NoActiveSQLTransaction, "%s can only be used in transaction blocks", what).
			WithHint("start a transaction with BEGIN first")
	}
	if kind == pgsql.SessionSavepoint {
		sp := savepoint{name: name}
		if n := len(s.savepoints); n > 0 && maps.Equal(s.savepoints[n-1].settings, s.settings) && maps.Equal(s.savepoints[n-1].commit, s.txCommit) {
			// Nothing changed since the last savepoint: share its copies
			// (they are never written; ROLLBACK TO copies them).
			sp.settings, sp.commit = s.savepoints[n-1].settings, s.savepoints[n-1].commit
		} else {
			sp.settings, sp.commit = maps.Clone(s.settings), maps.Clone(s.txCommit)
			sp.bytes = settingsBytes(sp.settings) + settingsBytes(sp.commit) + (len(sp.settings)+len(sp.commit))*settingEntryBytes
		}
		sp.bytes += len(name) + savepointBytes
		if n := len(s.savepoints); n > 0 {
			sp.bytes += s.savepoints[n-1].bytes
		}
		if len(s.savepoints) >= maxSavepoints || sp.bytes > maxSavepointMemory {
			return "", pgerr.New(programLimitExceeded, "too many savepoints in this transaction").
				WithHint("RELEASE the savepoints you no longer need, or end the transaction")
		}
		s.savepoints = append(s.savepoints, sp)
		return "SAVEPOINT", nil
	}
	i := len(s.savepoints) - 1
	for i >= 0 && s.savepoints[i].name != name {
		i--
	}
	if i < 0 {
		return "", pgerr.New("3B001", "savepoint %q does not exist", name).WithHint("name a savepoint set with SAVEPOINT in this transaction")
	}
	if kind == pgsql.SessionRelease {
		s.savepoints = s.savepoints[:i]
		s.releaseCursors(i)
		return "RELEASE", nil
	}
	// ROLLBACK TO: the savepoint stays; the later ones go.
	sp := s.savepoints[i]
	s.savepoints = s.savepoints[:i+1]
	s.rollbackCursors(i)
	s.settings = maps.Clone(sp.settings)
	s.txCommit = maps.Clone(sp.commit)
	s.txStatus = 'T'
	return "ROLLBACK", nil
}

// beginImplicit starts a multi-statement Query. Outside a transaction
// block PostgreSQL runs it as one implicit transaction block, where
// DECLARE works.
func (s *session) beginImplicit() {
	s.implicitTx = s.txStatus == 'I'
}

// endQuery ends the statements of a Query message: outside a transaction
// block their implicit transaction (with the extended messages before it
// in the batch, if any) commits, or aborts when one failed.
func (s *session) endQuery(failed bool) {
	s.implicitTx = false
	if s.txStatus == 'I' {
		s.endXact(!failed)
	}
}

// skipUntilSync records an extended-protocol error: the messages of the
// batch are skipped until Sync, and outside a block its implicit
// transaction aborts.
func (s *session) skipUntilSync() {
	s.extFailed = true
	if s.txStatus == 'I' {
		s.endXact(false)
	}
}

// sync ends an extended-protocol batch at Sync: outside a transaction
// block its implicit transaction commits (an error already aborted it).
func (s *session) sync() {
	if s.txStatus == 'I' && !s.extFailed {
		s.endXact(true)
	}
	s.extFailed = false
}

// Bounds of a session's named prepared statements (protocol-level and
// SQL PREPARE share them), so that one analyst cannot hold the proxy's
// memory with statements it never runs: far above the statement caches
// drivers keep (pgjdbc 256, pgx 512, psycopg 100).
const (
	maxPreparedStatements = 2048
	maxPreparedBytes      = 32 << 20
)

// checkPreparedRoom refuses one more named statement of size bytes when
// the session's would exceed the bounds above (54000, before anything is
// kept).
func (s *session) checkPreparedRoom(name string, size int) error {
	if name == "" {
		return nil // the unnamed statement replaces itself
	}
	total := size + s.stmtBytes
	if len(s.stmts) >= maxPreparedStatements || total > maxPreparedBytes {
		return pgerr.New(pgerr.ProgramLimitExceeded, "too many prepared statements in this session (at most %d, %d MiB of text)", maxPreparedStatements, maxPreparedBytes>>20).
			WithHint("DEALLOCATE statements the session no longer uses, or lower the driver's statement cache size")
	}
	return nil
}

// prepare keeps a prepared statement under its name (Parse, or SQL
// PREPARE), replacing the unnamed one; the caller checked the name is
// free and checkPreparedRoom.
func (s *session) prepare(ps *preparedStatement) {
	if old, ok := s.stmts[ps.name]; ok {
		s.stmtBytes -= old.size()
	}
	s.stmts[ps.name] = ps
	s.stmtBytes += ps.size()
}

// Bounds of a session's portals: each holds its Bind's parameters (a
// message may carry 1 MiB) and, once run, possibly its whole result until
// its transaction ends, so their number and bytes are bounded as the
// prepared statements' are (issue 33's attack: 200 suspended portals of
// 0.9 MiB each held 226 MiB of the proxy's heap, with no bound). Far above
// what drivers hold: pgjdbc keeps one portal per open ResultSet.
const (
	maxPortals     = 1024
	maxPortalBytes = 32 << 20
)

// checkPortalRoom refuses a Bind of size parameter bytes to portal name
// when the session's portals would exceed the bounds above (54000,
// before anything is kept).
func (s *session) checkPortalRoom(name string, size int) error {
	n, total := 0, size
	for pn, p := range s.portals {
		if pn == name {
			continue // replaced
		}
		n++
		total += p.bytes
	}
	if n >= maxPortals || total > maxPortalBytes {
		return pgerr.New(pgerr.ProgramLimitExceeded, "too many open portals in this session (at most %d, %d MiB of parameters)", maxPortals, maxPortalBytes>>20).
			WithHint("close portals the session no longer reads (Close, or Sync outside a transaction block)")
	}
	return nil
}

// heldBytes is what the session's run portals other than except and its
// cursors hold in the proxy's memory.
func (s *session) heldBytes(except string) int {
	n := 0
	for name, p := range s.portals {
		if name != except && p.result != nil {
			n += p.result.size()
		}
	}
	for _, c := range s.cursors {
		n += c.bytes
	}
	return n
}

// rowsBytes is about what text rows hold in memory, counted once when a
// cursor is declared.
func rowsBytes(rows [][]*string) int {
	n := 0
	for _, row := range rows {
		n += rowBytes(row)
	}
	return n
}

// rowBytes is about what one text row holds: its slice, and per value a
// pointer, a string header and the bytes (attack round 39: counting 8
// bytes a value had undercounted about 6 times).
func rowBytes(row []*string) int {
	n := 32 + 40*len(row)
	for _, v := range row {
		if v != nil {
			n += len(*v)
		}
	}
	return n
}

// checkHeldRoom refuses to run one more portal or cursor whose result the
// session would keep (54000, before it runs) when its suspended portals
// and cursors already hold limit bytes: a session then holds at most
// twice one result's limit (MaxBufferedResult), however many portals and
// cursors it opens.
func (s *session) checkHeldRoom(except string, limit int) error {
	if s.heldBytes(except) >= limit {
		return pgerr.New(pgerr.ProgramLimitExceeded, "this session holds too many unread rows in portals and cursors (over %d MiB)", limit>>20).
			WithDetail("The query was not run and nothing was charged.").
			WithHint("read suspended portals to the end or close them, and CLOSE cursors you no longer need")
	}
	return nil
}

// bindPortal keeps a portal under its name (Bind), replacing one of the
// same name. Portals end at the end of their transaction (Sync outside a
// block, COMMIT or ROLLBACK), with their statement, or at Close.
func (s *session) bindPortal(p *portal) { s.portals[p.name] = p }

// closePortal drops a portal (Close of a portal; none is not an error).
func (s *session) closePortal(name string) { delete(s.portals, name) }

// closeStatement drops a prepared statement and the portals bound from
// it (Close of a statement).
func (s *session) closeStatement(name string) {
	ps, ok := s.stmts[name]
	if !ok {
		return
	}
	delete(s.stmts, name)
	s.stmtBytes -= ps.size()
	for n, p := range s.portals {
		if p.stmt == ps {
			delete(s.portals, n)
		}
	}
}

// deallocate runs DEALLOCATE target (or DEALLOCATE ALL) and returns the
// command tag. Like PostgreSQL, it drops the protocol-level named
// statements too (they share one namespace), but not the unnamed one.
func (s *session) deallocate(target string) (string, error) {
	if strings.EqualFold(target, "all") {
		for n, ps := range s.stmts {
			if n != "" {
				delete(s.stmts, n)
				s.stmtBytes -= ps.size()
			}
		}
		return "DEALLOCATE ALL", nil
	}
	ps, ok := s.stmts[target]
	if !ok || target == "" {
		return "", pgerr.New(invalidSQLStatementName, "prepared statement %q does not exist", target)
	}
	delete(s.stmts, target)
	s.stmtBytes -= ps.size()
	return "DEALLOCATE", nil
}

// discardAll runs DISCARD ALL: settings to their defaults, no prepared
// statement, portal or cursor left. It cannot run in a transaction block.
func (s *session) discardAll() error {
	if s.txStatus != 'I' || s.implicitTx {
		// A multi-statement Query is an implicit transaction block, as
		// in PostgreSQL (attack round 54).
		return pgerr.New(pgerr.ActiveSQLTransaction, "DISCARD ALL cannot run inside a transaction block").
			WithHint("send DISCARD ALL as a statement of its own")
	}
	if s.pipelined {
		return pgerr.New(pgerr.ActiveSQLTransaction, "DISCARD ALL cannot be executed within a pipeline").
			WithHint("send Sync before DISCARD ALL")
	}
	_ = s.reset("all")
	s.stmts = map[string]*preparedStatement{}
	s.stmtBytes = 0
	s.portals = map[string]*portal{}
	s.cursors = nil
	return nil
}
