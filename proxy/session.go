package proxy

import (
	"context"
	"maps"
	"math"
	"sort"
	"strings"

	"github.com/dpproxy/dpproxy/internal/numfmt"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
)

// execSession answers a session statement (RouteSession) without any
// database: SET/SHOW/RESET, transaction control, DISCARD and DEALLOCATE.
func (c *conn) execSession(ctx context.Context, st *pgsql.SessionStmt) (*resultSet, error) {
	name := canonicalSetting(st.Name)
	switch st.Kind {
	case pgsql.SessionSet:
		return c.execSet(st, name)
	case pgsql.SessionReset:
		if err := c.reset(name); err != nil {
			return nil, err
		}
		return &resultSet{tag: "RESET"}, nil
	case pgsql.SessionShow:
		return c.execShow(ctx, name)
	case pgsql.SessionBegin:
		if c.txStatus != 'I' {
			c.notice(severityWarning, pgerr.ActiveSQLTransaction, "there is already a transaction in progress", "")
			return &resultSet{tag: "BEGIN"}, nil
		}
		c.txStatus = 'T'
		c.txBegin = maps.Clone(c.settings)
		c.txCommit = maps.Clone(c.settings)
		if iso := isolationIn(st.Value); iso != "" {
			c.settings["transaction_isolation"] = iso
		}
		return &resultSet{tag: "BEGIN"}, nil
	case pgsql.SessionSavepoint, pgsql.SessionRelease, pgsql.SessionRollbackTo:
		return c.execSavepoint(st)
	case pgsql.SessionCommit:
		switch c.txStatus {
		case 'I':
			c.notice(severityWarning, pgerr.NoActiveSQLTransaction, "there is no transaction in progress", "")
			return &resultSet{tag: "COMMIT"}, nil
		case 'E':
			// COMMIT of a failed transaction rolls it back.
			c.endTransaction(false)
			return &resultSet{tag: "ROLLBACK"}, nil
		}
		c.endTransaction(true)
		return &resultSet{tag: "COMMIT"}, nil
	case pgsql.SessionRollback:
		if c.txStatus == 'I' {
			c.notice(severityWarning, pgerr.NoActiveSQLTransaction, "there is no transaction in progress", "")
			return &resultSet{tag: "ROLLBACK"}, nil
		}
		c.endTransaction(false)
		return &resultSet{tag: "ROLLBACK"}, nil
	case pgsql.SessionDiscard:
		what := strings.ToUpper(strings.TrimSpace(firstNonEmpty(st.Name, st.Value)))
		if what == "" {
			what = "ALL"
		}
		switch what {
		case "ALL":
			if c.txStatus != 'I' {
				return nil, pgerr.New(pgerr.ActiveSQLTransaction, "DISCARD ALL cannot run inside a transaction block")
			}
			_ = c.reset("all")
			c.stmts = map[string]*preparedStatement{}
			c.portals = map[string]*portal{}
			c.cursors = nil
			// Close a shadow connection pinned to the session (none
			// is, in practice): the next statement gets a pooled one.
			c.closeShadow()
		case "PLANS", "SEQUENCES", "TEMP", "TEMPORARY":
			if what == "TEMPORARY" {
				what = "TEMP"
			}
		default:
			return nil, pgerr.New(pgerr.SyntaxError, "syntax error at or near %q", what).
				WithHint("use DISCARD ALL, PLANS, SEQUENCES or TEMP")
		}
		return &resultSet{tag: "DISCARD " + what}, nil
	case pgsql.SessionDeallocate:
		target := strings.TrimSpace(firstNonEmpty(st.Name, st.Value))
		if strings.EqualFold(target, "all") {
			// Like PostgreSQL, this drops the protocol-level named
			// statements too (they share one namespace).
			for n := range c.stmts {
				if n != "" {
					delete(c.stmts, n)
				}
			}
			return &resultSet{tag: "DEALLOCATE ALL"}, nil
		}
		if _, ok := c.stmts[target]; !ok || target == "" {
			return nil, pgerr.New(invalidSQLStatementName, "prepared statement %q does not exist", target)
		}
		delete(c.stmts, target)
		return &resultSet{tag: "DEALLOCATE"}, nil
	case pgsql.SessionPrepare:
		return c.execPrepare(st)
	case pgsql.SessionExecute:
		return c.execExecute(ctx, st)
	case pgsql.SessionUnlisten:
		return c.execUnlisten(), nil
	case pgsql.SessionUnlockAll:
		return c.execUnlockAll(st), nil
	case pgsql.SessionDeclare:
		return c.execDeclare(ctx, st.Cursor)
	case pgsql.SessionFetch, pgsql.SessionMove:
		return c.execFetch(st.Cursor, st.Kind == pgsql.SessionMove)
	case pgsql.SessionClose:
		return c.execClose(st.Cursor)
	case pgsql.SessionCopy:
		return c.execCopy(ctx, st.Copy)
	case pgsql.SessionCharacteristics:
		// SET SESSION CHARACTERISTICS AS TRANSACTION …: every transaction
		// of the proxy is read-only already; accept and remember.
		v := strings.ToLower(st.Value)
		if iso := isolationIn(v); iso != "" {
			c.settings["default_transaction_isolation"] = iso
		}
		if strings.Contains(v, "read only") {
			c.settings["default_transaction_read_only"] = "on"
		} else if strings.Contains(v, "read write") {
			c.settings["default_transaction_read_only"] = "off"
		}
		return &resultSet{tag: "SET"}, nil
	}
	return nil, pgerr.New(pgerr.FeatureNotSupported, "unsupported session statement")
}

func (c *conn) execSet(st *pgsql.SessionStmt, name string) (*resultSet, error) {
	if name == settingBudget {
		return nil, pgerr.New(cantChangeRuntimeParam, "parameter %q cannot be changed", settingBudget).
			WithHint("budgets are granted by the data steward (dpproxy budget grant)")
	}
	if name == settingLastAnswer {
		return nil, pgerr.New(cantChangeRuntimeParam, "parameter %q cannot be changed", settingLastAnswer).
			WithHint("SHOW dp.last_answer shows the session's last DP answer")
	}
	// SET TRANSACTION … arrives as a setting of the current transaction.
	if name == "transaction" || name == "transaction_isolation" {
		if c.txStatus == 'I' {
			c.notice(severityWarning, pgerr.NoActiveSQLTransaction, "SET TRANSACTION can only be used in transaction blocks", "")
			return &resultSet{tag: "SET"}, nil
		}
		if name == "transaction" {
			if iso := isolationIn(st.Value); iso != "" {
				c.settings["transaction_isolation"] = iso
			}
			return &resultSet{tag: "SET"}, nil
		}
		v, err := checkIsolation(c, st.Value)
		if err != nil {
			return nil, err
		}
		c.settings["transaction_isolation"] = v
		return &resultSet{tag: "SET"}, nil
	}
	if st.Local && c.txStatus == 'I' {
		c.notice(severityWarning, pgerr.NoActiveSQLTransaction, "SET LOCAL can only be used in transaction blocks", "")
		// Validate anyway, as PostgreSQL does, but keep no effect.
		if _, ok := settingDefs[name]; !ok && strings.HasPrefix(name, "dp.") {
			return nil, unknownSetting(name)
		}
		if d, ok := settingDefs[name]; ok && d.check != nil && !st.Default {
			if _, err := d.check(c, st.Value); err != nil {
				return nil, named(d.name, st.Value, err)
			}
		}
		return &resultSet{tag: "SET"}, nil
	}
	if err := c.set(name, st.Value, st.Default, st.Local); err != nil {
		return nil, err
	}
	return &resultSet{tag: "SET"}, nil
}

// isolationIn finds an isolation level in transaction modes text
// ("ISOLATION LEVEL SERIALIZABLE, READ ONLY").
func isolationIn(v string) string {
	l := strings.ToLower(v)
	for _, iso := range []string{"read uncommitted", "read committed", "repeatable read", "serializable"} {
		if strings.Contains(l, iso) {
			return iso
		}
	}
	return ""
}

// savepoint is one SAVEPOINT of the transaction block: the session's
// settings then, which ROLLBACK TO restores.
type savepoint struct {
	name             string
	settings, commit map[string]string
}

// execSavepoint emulates SAVEPOINT, RELEASE and ROLLBACK TO (issue 17:
// psycopg 3, SQLAlchemy's begin_nested, JDBC setSavepoint, pgx nested
// Begin and psql's ON_ERROR_ROLLBACK use them). dpproxy's transactions
// never write, so a savepoint is only the point to return to: the session
// settings made since are undone, and a failed transaction is usable
// again, with PostgreSQL's messages and SQLSTATEs.
func (c *conn) execSavepoint(st *pgsql.SessionStmt) (*resultSet, error) {
	if c.txStatus == 'I' {
		what := map[pgsql.SessionKind]string{pgsql.SessionSavepoint: "SAVEPOINT",
			pgsql.SessionRelease: "RELEASE SAVEPOINT", pgsql.SessionRollbackTo: "ROLLBACK TO SAVEPOINT"}[st.Kind]
		return nil, pgerr.New(pgerr.NoActiveSQLTransaction, "%s can only be used in transaction blocks", what).
			WithHint("start a transaction with BEGIN first")
	}
	if st.Kind == pgsql.SessionSavepoint {
		c.savepoints = append(c.savepoints, savepoint{name: st.Name, settings: maps.Clone(c.settings), commit: maps.Clone(c.txCommit)})
		return &resultSet{tag: "SAVEPOINT"}, nil
	}
	i := len(c.savepoints) - 1
	for i >= 0 && c.savepoints[i].name != st.Name {
		i--
	}
	if i < 0 {
		return nil, pgerr.New("3B001", "savepoint %q does not exist", st.Name).WithHint("name a savepoint set with SAVEPOINT in this transaction")
	}
	if st.Kind == pgsql.SessionRelease {
		c.savepoints = c.savepoints[:i]
		c.releaseCursors(i)
		return &resultSet{tag: "RELEASE"}, nil
	}
	// ROLLBACK TO: the savepoint stays; the later ones go.
	sp := c.savepoints[i]
	c.savepoints = c.savepoints[:i+1]
	c.rollbackCursors(i)
	c.restoreSettings(maps.Clone(sp.settings))
	c.txCommit = maps.Clone(sp.commit)
	c.txStatus = 'T'
	return &resultSet{tag: "ROLLBACK"}, nil
}

// endTransaction ends the transaction block: COMMIT keeps the settings made
// with SET (not SET LOCAL); ROLLBACK restores those at BEGIN. Portals end
// with the transaction.
func (c *conn) endTransaction(commit bool) {
	keep := c.txBegin
	if commit {
		keep = c.txCommit
	}
	if keep != nil {
		keep["transaction_isolation"] = keep["default_transaction_isolation"]
		c.restoreSettings(keep)
	}
	c.txBegin, c.txCommit = nil, nil
	c.savepoints = nil
	c.txStatus = 'I'
	c.endCursors(commit)
	for n := range c.portals {
		delete(c.portals, n)
	}
}

// restoreSettings replaces the session's settings (at the end of a
// transaction); the shadow connection of the next catalog statement gets
// them (acquireShadow).
func (c *conn) restoreSettings(keep map[string]string) {
	c.settings = keep
}

func (c *conn) execShow(ctx context.Context, name string) (*resultSet, error) {
	switch name {
	case settingBudget:
		return c.showBudget(ctx)
	case settingLastAnswer:
		return c.showLastAnswer(), nil
	case "all":
		names := make([]string, 0, len(c.settings))
		for n := range c.settings {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool { return displayName(names[i]) < displayName(names[j]) })
		rs := &resultSet{
			cols: []column{{"name", oidText}, {"setting", oidText}, {"description", oidText}},
			tag:  "SHOW",
		}
		for _, n := range names {
			desc := ""
			if d, ok := settingDefs[n]; ok {
				desc = d.desc
			}
			rs.rows = append(rs.rows, textRow(displayName(n), c.settings[n], desc))
		}
		return rs, nil
	case "transaction":
		name = "transaction_isolation"
	}
	v, ok := c.settings[name]
	if !ok {
		return nil, unknownSetting(name)
	}
	return &resultSet{cols: []column{{displayName(name), oidText}}, rows: [][]*string{textRow(v)}, tag: "SHOW"}, nil
}

// showBudget answers SHOW dp.budget: one row per dataset the analyst may
// query, from the ledger.
func (c *conn) showBudget(ctx context.Context) (*resultSet, error) {
	names := make([]string, 0, len(c.srv.cfg.Datasets))
	analyst := c.srv.cfg.Analysts[c.analyst]
	for n := range c.srv.cfg.Datasets {
		if analyst.MayQuery(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	rs := &resultSet{
		cols: budgetColumns(),
	}
	for _, n := range names {
		ds := c.srv.cfg.Datasets[n]
		st, err := c.srv.cfg.Ledger.Status(ctx, c.analyst, ds.Policy)
		if err != nil {
			if _, ok := pgerr.As(err); ok {
				return nil, err
			}
			return nil, pgerr.New(pgerr.SystemError, "the budget ledger is unavailable").Wrap(err).
				WithHint("try again later; if it persists, tell the data steward")
		}
		acct := st.Accountant
		if acct == "" {
			acct = ds.Policy.Budget.Accountant
		}
		rem := st.Remaining()
		row := textRow(n, acct,
			budgetFigure(st.Spent.Epsilon), budgetFigure(rem.Epsilon),
			budgetFigure(st.Spent.Delta), budgetFigure(rem.Delta), "")
		// window_renews: when the budget window renews (NULL: the dataset
		// has no window, or it starts at the next charge).
		row[len(row)-1] = nil
		if !st.Renews.IsZero() {
			t := st.Renews.UTC().Format("2006-01-02 15:04:05+00")
			row[len(row)-1] = &t
		}
		rs.rows = append(rs.rows, row)
	}
	rs.tag = "SHOW"
	return rs, nil
}

func textRow(vals ...string) []*string {
	row := make([]*string, len(vals))
	for i := range vals {
		row[i] = &vals[i]
	}
	return row
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// budgetColumns are the columns of SHOW dp.budget (its answer and its
// Describe).
// budgetFigure is a float8 figure of SHOW dp.budget as a person writes it
// (internal/numfmt: 1.6, not 1.5999999999999999); no cap is Infinity, as
// PostgreSQL writes it.
func budgetFigure(x float64) string {
	if math.IsInf(x, 1) {
		return "Infinity"
	}
	return numfmt.Figure(x)
}

func budgetColumns() []column {
	return []column{
		{"dataset", oidText}, {"accountant", oidText},
		{"epsilon_spent", oidFloat8}, {"epsilon_remaining", oidFloat8},
		{"delta_spent", oidFloat8}, {"delta_remaining", oidFloat8},
		{"window_renews", oidText},
	}
}

// execPrepare answers SQL-level PREPARE name [(types)] AS query for a DP
// query: the statement is kept under its name with the protocol-level
// ones (one namespace, as in PostgreSQL: DEALLOCATE drops it, a Bind may
// name it). A query without parameters is planned now, so that one the
// proxy cannot answer fails here, as PostgreSQL's PREPARE fails on parse
// analysis; nothing is read or spent.
func (c *conn) execPrepare(st *pgsql.SessionStmt) (*resultSet, error) {
	if _, exists := c.stmts[st.Name]; exists {
		return nil, pgerr.New(duplicatePreparedStmt, "prepared statement %q already exists", st.Name).
			WithHint("DEALLOCATE %s first, or choose another name", st.Name)
	}
	if err := c.checkPreparedRoom(st.Name, len(st.Value)); err != nil {
		return nil, err
	}
	inner := c.classify(st.Value)
	if inner.err != nil {
		return nil, inner.err
	}
	if inner.route != pgsql.RouteDP {
		return nil, pgerr.New(pgerr.FeatureNotSupported, "PREPARE is supported for DP statements (aggregates over protected tables) only").
			WithHint("send this statement itself, or prepare it through your driver (the extended protocol)")
	}
	n := max(maxParam(st.Value), len(st.Args))
	if n == 0 {
		if err := c.checkDP(st.Value); err != nil {
			return nil, dpError(context.Background(), err, c.log)
		}
	}
	c.stmts[st.Name] = &preparedStatement{name: st.Name, st: inner, text: st.Value, nParams: n}
	return &resultSet{tag: "PREPARE"}, nil
}

// execExecute answers EXECUTE name [(constants)] of a DP statement: the
// constants are bound as literals into its $n, as Bind binds parameters
// (bind.go), and the statement runs as if sent itself.
func (c *conn) execExecute(ctx context.Context, st *pgsql.SessionStmt) (*resultSet, error) {
	ps, ok := c.stmts[st.Name]
	if !ok || st.Name == "" {
		return nil, pgerr.New(invalidSQLStatementName, "prepared statement %q does not exist", st.Name).
			WithHint("PREPARE %s AS SELECT … first", st.Name)
	}
	if ps.st.route != pgsql.RouteDP {
		return nil, pgerr.New(pgerr.FeatureNotSupported, "EXECUTE is supported for prepared DP statements only").
			WithHint("execute this statement through the extended protocol (Bind and Execute), or send it itself")
	}
	if len(st.Args) != ps.nParams {
		return nil, pgerr.New(pgerr.SyntaxError, "wrong number of parameters for prepared statement %q", st.Name).
			WithDetail("Expected %d parameters but got %d.", ps.nParams, len(st.Args)).
			WithHint("pass one constant per parameter, e.g. EXECUTE %s(…)", st.Name)
	}
	text, err := bindLiterals(ps.text, st.Args)
	if err != nil {
		return nil, err
	}
	return c.execDP(ctx, text, ps.text)
}
