package proxy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"
)

// execDP answers a DP statement: rewrite (validate and plan), then release
// (reserve, run the emitted SQL upstream, add noise, record). The analyst's
// text goes to rewrite only; the upstream sees the plan's emitted SQL.
//
// logText is the statement as the analyst wrote it (with $n placeholders),
// for the fingerprint; text has parameters bound as literals.
func (c *conn) execDP(ctx context.Context, text, logText string) (*resultSet, error) {
	if rs := c.publicDistinct(text); rs != nil {
		c.log.Info("answered from the policy's public values", zap.String(logKeyFingerprint, fingerprint(logText)))
		return rs, nil
	}
	plan, explain, err := c.planFor(text)
	if err != nil {
		return nil, dpError(ctx, err, c.log)
	}
	if explain {
		// EXPLAIN: the plan, sensitivities, noise scales and cost, computed
		// from the policy and the session's settings; no data is read and
		// no budget spent.
		cols, rows, err := release.Explain(c.ds.Policy, plan, c.epsilon(), c.delta(), c.mechanism())
		if err != nil {
			return nil, dpError(ctx, err, c.log)
		}
		rs, err := dpResultSet(&release.Result{Columns: cols, Rows: rows})
		if err != nil {
			return nil, err
		}
		rs.tag = "EXPLAIN"
		c.log.Info("dp plan explained", zap.String(logKeyFingerprint, fingerprint(logText)), zap.String(logKeyPlanHash, plan.Fingerprint))
		return rs, nil
	}
	req := release.Request{
		Analyst:   c.analyst,
		Dataset:   c.ds.Policy,
		Plan:      plan,
		Epsilon:   c.epsilon(),
		Delta:     c.delta(),
		Mechanism: c.mechanism(),
		Upstream:  c.ds.Upstream,
		NoCache:   c.noCache(),
	}
	if err := c.srv.allowDP(c.analyst); err != nil {
		c.log.Warn("dp query refused by the rate limit")
		return nil, err
	}
	start := time.Now()
	res, err := c.srv.cfg.Releaser.Run(ctx, req)
	c.padResponse(ctx, start, c.ds.ResponseTime)
	if err != nil {
		return nil, dpError(ctx, err, c.log)
	}
	if res == nil {
		return nil, fmt.Errorf("releaser returned no result and no error")
	}
	c.log.Info("dp answer released",
		zap.String(logKeyFingerprint, fingerprint(logText)),
		zap.String(logKeyPlanHash, plan.Fingerprint),
		zap.Float64(logKeyEpsilon, req.Epsilon),
		zap.Float64(logKeyDelta, req.Delta),
		zap.String(logKeyMechanism, req.Mechanism))
	return dpResultSet(res)
}

// publicDistinct answers a SELECT DISTINCT of a column whose values the
// policy declares public (rewrite.PublicDistinct) from the policy: no data
// is read and no budget spent. It returns nil for any other statement.
func (c *conn) publicDistinct(text string) *resultSet {
	if c.srv.rt.publicDistinct == nil {
		return nil
	}
	dv := c.srv.rt.publicDistinct(c.ds.Policy, text)
	if dv == nil {
		return nil
	}
	rs := &resultSet{
		cols: []column{{name: dv.Name, oid: oidOf(dv.PGType)}},
		rows: make([][]*string, len(dv.Values)),
		tag:  "SELECT " + strconv.Itoa(len(dv.Values)),
		notices: []*pgproto3.NoticeResponse{{
			Severity: severityNotice, SeverityUnlocalized: severityNotice, Code: successfulCompletion,
			Message: fmt.Sprintf("dp: the public values of %s.%s declared in the policy; no budget spent", dv.Table, dv.Column),
		}},
	}
	for i := range dv.Values {
		rs.rows[i] = []*string{&dv.Values[i]}
	}
	return rs
}

// dpResultSet turns a released answer into rows for the client.
func dpResultSet(res *release.Result) (*resultSet, error) {
	rs := &resultSet{
		cols: make([]column, len(res.Columns)),
		rows: res.Rows,
		tag:  "SELECT " + strconv.Itoa(len(res.Rows)),
	}
	for i, col := range res.Columns {
		rs.cols[i] = column{name: col.Name, oid: oidOf(col.PGType)}
	}
	for _, row := range res.Rows {
		if len(row) != len(rs.cols) {
			return nil, fmt.Errorf("released row has %d values for %d columns", len(row), len(rs.cols))
		}
	}
	if res.Notice != "" {
		rs.notices = []*pgproto3.NoticeResponse{{
			Severity: severityNotice, SeverityUnlocalized: severityNotice,
			Code: successfulCompletion, Message: res.Notice,
		}}
	}
	return rs, nil
}

// planFor validates and plans a DP statement. For EXPLAIN <query> it plans
// the query and reports explain = true.
func (c *conn) planFor(text string) (plan *rewrite.Plan, explain bool, err error) {
	inner, explain, err := rewrite.ExplainTarget(text)
	if err != nil {
		return nil, false, err
	}
	if explain {
		text = inner
	}
	if opts := c.rewriteOptions(); opts != (rewrite.Options{}) {
		// Session options (dp.output_range, dp.sample_blocks) change the
		// plan; the plan cache is keyed by text only, so plan afresh.
		plan, err = c.srv.rt.rewrite(c.ds.Policy, text, opts)
	} else {
		plan, err = c.srv.plans.plan(c.ds.Policy, text, func(ds *policy.Dataset, t string) (*rewrite.Plan, error) {
			return c.srv.rt.rewrite(ds, t, opts)
		})
	}
	if err == nil {
		// The quantile method (SET dp.quantile_method) and the privacy
		// parameters it needs shape the emitted SQL (plans without
		// quantiles are returned as they are).
		plan, err = plan.WithQuantiles(c.quantileMethod(), c.epsilon(), c.delta(), c.mechanism())
	}
	return plan, explain, err
}

// resultColumns returns the columns a DP statement will answer with, for
// Describe in the extended protocol (no data is read, no budget spent).
func resultColumns(plan *rewrite.Plan, explain bool) []column {
	if explain {
		return []column{{name: release.ExplainColumn.Name, oid: oidOf(release.ExplainColumn.PGType)}}
	}
	return planColumns(plan)
}

// planColumns returns the result columns a plan will produce.
func planColumns(plan *rewrite.Plan) []column {
	cols := make([]column, len(plan.Outputs))
	for i, o := range plan.Outputs {
		cols[i] = column{name: o.Name, oid: oidOf(o.PGType)}
	}
	return cols
}

// dpError keeps the DP path's error channel clean: client-facing
// *pgerr.Errors pass, cancellation becomes 57014, and anything else (which
// might carry the text of an upstream error) becomes XX000 with no detail.
func dpError(ctx context.Context, err error, log *zap.Logger) error {
	if _, ok := pgerr.As(err); ok {
		return err
	}
	if ctx.Err() != nil {
		return statementError(ctx, err)
	}
	// The text of err may quote upstream values: log its type and code only.
	var st interface{ SQLState() string }
	code := ""
	if errors.As(err, &st) {
		code = st.SQLState()
	}
	log.Error("dp path failed", zap.String("error_type", fmt.Sprintf("%T", err)), zap.String(logKeySQLState, code))
	return pgerr.New(pgerr.InternalError, internalErrorMessage).Wrap(err)
}
