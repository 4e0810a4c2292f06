package proxy

import (
	"cmp"
	"context"
	"math"
	"sort"
	"strings"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/numfmt"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// execSession answers a session statement (RouteSession) without any
// database: SET/SHOW/RESET, transaction control, DISCARD and DEALLOCATE.
func (c *conn) execSession(ctx context.Context, st *pgsql.SessionStmt) (*resultSet, error) {
	name := canonicalSetting(st.Name)
	switch st.Kind {
	case pgsql.SessionSet:
		w, err := c.sess.setStmt(st, name)
		c.warn(w)
		if err != nil {
			return nil, err
		}
		return &resultSet{tag: "SET"}, nil
	case pgsql.SessionReset:
		if err := c.sess.reset(name); err != nil {
			return nil, err
		}
		return &resultSet{tag: "RESET"}, nil
	case pgsql.SessionShow:
		return c.execShow(ctx, name)
	case pgsql.SessionBegin:
		c.warn(c.sess.begin(st.Value))
		return &resultSet{tag: "BEGIN"}, nil
	case pgsql.SessionSavepoint, pgsql.SessionRelease, pgsql.SessionRollbackTo:
		before := c.sess.savepointsBytes()
		if st.Kind == pgsql.SessionSavepoint {
			if err := c.checkMemory(0); err != nil { // memory.go
				return nil, err
			}
		}
		tag, err := c.sess.savepointStmt(st.Kind, st.Name)
		if err != nil {
			return nil, err
		}
		c.chargeMemoryOwn(c.sess.savepointsBytes() - before)
		return &resultSet{tag: tag}, nil
	case pgsql.SessionCommit:
		tag, w := c.sess.commit()
		c.warn(w)
		return &resultSet{tag: tag}, nil
	case pgsql.SessionRollback:
		c.warn(c.sess.rollback())
		return &resultSet{tag: "ROLLBACK"}, nil
	case pgsql.SessionDiscard:
		what := strings.ToUpper(strings.TrimSpace(cmp.Or(st.Name, st.Value)))
		if what == "" {
			what = "ALL"
		}
		switch what {
		case "ALL":
			if err := c.sess.discardAll(); err != nil {
				return nil, err
			}
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
		tag, err := c.sess.deallocate(strings.TrimSpace(cmp.Or(st.Name, st.Value)))
		if err != nil {
			return nil, err
		}
		return &resultSet{tag: tag}, nil
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
		c.sess.setCharacteristics(st.Value)
		return &resultSet{tag: "SET"}, nil
	}
	return nil, pgerr.New(pgerr.FeatureNotSupported, "unsupported session statement")
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

func (c *conn) execShow(ctx context.Context, name string) (*resultSet, error) {
	switch name {
	case settingBudget:
		return c.showBudget(ctx)
	case settingLastAnswer:
		return c.showLastAnswer(), nil
	case "all":
		names := make([]string, 0, len(c.sess.settings))
		for n := range c.sess.settings {
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
			rs.rows = append(rs.rows, textRow(displayName(n), c.sess.settings[n], desc))
		}
		return rs, nil
	case "transaction":
		name = "transaction_isolation"
	}
	v, ok := c.sess.settings[name]
	if !ok {
		return nil, unknownSetting(name)
	}
	return &resultSet{cols: []column{{displayName(name), oidText}}, rows: [][]*string{textRow(v)}, tag: "SHOW"}, nil
}

// showBudget answers SHOW dp.budget: one row per dataset the analyst may
// query, from the ledger.
func (c *conn) showBudget(ctx context.Context) (*resultSet, error) {
	names := make([]string, 0, len(c.srv.cfg.Datasets))
	analyst := c.srv.cfg.Analysts[c.sess.analyst]
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
		st, err := c.budgetStatus(ctx, ds.Policy)
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

// budgetStatus reads the analyst's budget on ds from the ledger, one read
// of the analyst's at a time (Server.ledgerShare).
func (c *conn) budgetStatus(ctx context.Context, ds *policy.Dataset) (accountant.Status, error) {
	done, err := c.srv.ledgerShare.Acquire(ctx, c.sess.analyst)
	if err != nil {
		return accountant.Status{}, err
	}
	defer done()
	return c.srv.cfg.Ledger.Status(ctx, c.sess.analyst, ds)
}

func textRow(vals ...string) []*string {
	row := make([]*string, len(vals))
	for i := range vals {
		row[i] = &vals[i]
	}
	return row
}

// budgetFigure is a float8 figure of SHOW dp.budget as a person writes it
// (internal/numfmt: 1.6, not 1.5999999999999999); no cap is Infinity, as
// PostgreSQL writes it.
func budgetFigure(x float64) string {
	if math.IsInf(x, 1) {
		return "Infinity"
	}
	return numfmt.Figure(x)
}

// budgetColumns are the columns of SHOW dp.budget (its answer and its
// Describe).
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
	if _, exists := c.sess.stmts[st.Name]; exists {
		return nil, pgerr.New(duplicatePreparedStmt, "prepared statement %q already exists", st.Name).
			WithHint("DEALLOCATE %s first, or choose another name", st.Name)
	}
	if err := c.sess.checkPreparedRoom(st.Name, len(st.Value)); err != nil {
		return nil, err
	}
	if err := c.checkMemory(len(st.Value)); err != nil { // memory.go
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
	if n > 0 && boundFloor(st.Value) > rewrite.MaxStatementBytes {
		return nil, errBoundTooLong() // never bindable (attack round 93)
	}
	if n == 0 {
		if err := c.checkDP(st.Value); err != nil {
			return nil, dpError(context.Background(), err, c.log)
		}
	}
	c.sess.prepare(&preparedStatement{name: st.Name, st: inner, text: st.Value, nParams: n})
	return &resultSet{tag: "PREPARE"}, nil
}

// execExecute answers EXECUTE name [(constants)] of a DP statement: the
// constants are bound as literals into its $n, as Bind binds parameters
// (bind.go), and the statement runs as if sent itself.
func (c *conn) execExecute(ctx context.Context, st *pgsql.SessionStmt) (*resultSet, error) {
	ps, ok := c.sess.stmts[st.Name]
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
	var text string
	err := c.withTextSlot(ctx, ps.text, func() (err error) {
		text, err = bindLiterals(ps.text, st.Args)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.execDP(ctx, text, ps.text)
}
