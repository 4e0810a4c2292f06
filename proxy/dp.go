package proxy

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
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
	if ps, ok := err.(*postStatement); ok {
		return c.execPost(ctx, ps.q, ps.explain, logText)
	}
	if err != nil {
		return nil, dpError(ctx, err, c.log)
	}
	if explain {
		// EXPLAIN: the plan, sensitivities, noise scales and cost, computed
		// from the policy and the session's settings; no data is read and
		// no budget spent.
		cols, rows, err := release.Explain(c.ds.Policy, plan, c.params(plan))
		if err != nil {
			return nil, dpError(ctx, err, c.log)
		}
		slot, err := c.timeSlot(plan)
		line := ""
		switch {
		case err != nil:
			pe, _ := pgerr.As(err)
			line = "  Time slot: refused before the charge: " + pe.Message
		case slot > 0:
			line = fmt.Sprintf("  Time slot: the answer is released %s after its release starts (response_time %s", slot, c.ds.ResponseTime)
			if plan.Work.Rows > 0 {
				line += fmt.Sprintf(", doubled until it covers %d rows at work_rate %g rows/s", plan.Work.Rows, c.ds.WorkRate)
			}
			line += ")"
		default:
			line = "  Time slot: none (response_time is 0: the time of the answer shows the work the data made upstream)"
		}
		rows = append(rows[:len(rows)-1:len(rows)-1], []*string{&line}, rows[len(rows)-1])
		rs, err := dpResultSet(&release.Result{Columns: cols, Rows: rows})
		if err != nil {
			return nil, err
		}
		rs.tag = "EXPLAIN"
		c.log.Info("dp plan explained", zap.String(logKeyFingerprint, fingerprint(logText)), zap.String(logKeyPlanHash, plan.Fingerprint))
		return rs, nil
	}
	req := c.dpRequest(plan)
	if err := c.srv.allowDP(c.analyst); err != nil {
		c.log.Warn("dp query refused by the rate limit")
		return nil, err
	}
	res, err := c.release(ctx, req)
	if err != nil {
		return nil, dpError(ctx, err, c.log)
	}
	if res == nil {
		return nil, fmt.Errorf("releaser returned no result and no error")
	}
	if c.srv.cfg.Observer != nil {
		c.lastDP = &DPEvent{Cached: res.Cached, CostEpsilon: res.Cost.Epsilon, CostDelta: res.Cost.Delta, ChargeFingerprint: res.Fingerprint}
	}
	// A new release is logged at Info; a cached answer, which spends
	// nothing and repeats an answer already logged, at Debug: the line
	// (and the statement's fingerprint) cost more CPU than serving it
	// (BENCHMARKS.md, issue 15). The Observer (audit log, metrics) sees
	// every answer either way.
	level := zap.InfoLevel
	if res.Cached {
		level = zap.DebugLevel
	}
	if ce := c.log.Check(level, "dp answer released"); ce != nil {
		ce.Write(
			zap.String(logKeyFingerprint, fingerprint(logText)),
			zap.String(logKeyPlanHash, plan.Fingerprint),
			zap.Float64(logKeyEpsilon, req.Epsilon),
			zap.Float64(logKeyDelta, req.Delta),
			zap.String(logKeyMechanism, req.Mechanism),
			zap.Bool(logKeyCached, res.Cached))
	}
	return dpResultSet(res)
}

// release runs the DP release of req under the session's own context, so
// that no client setting or message decides when the DP query stops: the
// client's statement_timeout and cancel requests (which end ctx) do not
// reach the upstream query, whose time is bounded by the proxy's own
// statement_timeout (internal/upstream). When ctx ends first, the client
// gets 57014 at once — the same reply whether the upstream had finished or
// not, at a moment the client chose — and the release finishes in the
// background: its answer is recorded and cached (it has been paid for), so
// asking again returns it at no cost. The answer (or error) is padded to
// the dataset's response_time under the session's context, so a cancel
// during the padding also gets 57014.
func (c *conn) release(ctx context.Context, req release.Request) (*release.Result, error) {
	c.waitPendingDP(ctx)
	if ctx.Err() != nil {
		return nil, statementError(ctx, ctx.Err())
	}
	if res, ok := c.remembered(ctx, req); ok {
		return res, nil
	} else if ctx.Err() != nil {
		return nil, statementError(ctx, ctx.Err())
	}
	// The answer's time slot, fixed from the plan before anything waits
	// or is charged (a plan that cannot fit is refused here).
	slotLen, err := c.timeSlot(req.Plan)
	if err != nil {
		return nil, err
	}
	var res *release.Result
	err = c.paced(ctx, slotLen, func(rctx context.Context, publishAt time.Time, contended func() bool) (time.Time, error) {
		if slotLen > 0 {
			req.PublishAt, req.PadStep = publishAt, slotLen
		}
		req.Contended = contended
		var err error
		res, err = c.srv.cfg.Releaser.Run(rctx, req)
		if res != nil && !res.ReadyAt.IsZero() {
			return res.ReadyAt, err
		}
		return time.Now(), err
	})
	if err != nil {
		// When the client cancelled, the release goes on in the
		// background and still writes res: never read it then.
		return nil, err
	}
	return res, nil
}

// paced runs a release (run) with what every DP release gets from the
// proxy: a ticket of the dataset's DP admission (admission.go), taken
// before the charge unless the statement holds one (post.go); the
// session's own context, so that no client setting or message decides
// when it stops; the answer padded to the end of its time slot (slotLen
// from the plan's work; publishAt is its end, before which release never
// records the answer); and, when the client cancels, 57014 at once while
// the release finishes in the background. run returns when its answer was
// ready. When paced returns an error, run may still be running: the
// caller must not read what run writes.
func (c *conn) paced(ctx context.Context, slotLen time.Duration, run func(rctx context.Context, publishAt time.Time, contended func() bool) (time.Time, error)) error {
	tk, own := c.ticket, false
	if tk == nil {
		var err error
		if tk, err = c.srv.admissions[c.ds].admit(ctx, c.analyst); err != nil {
			return err
		}
		own = true
	}
	rctx := c.sessCtx
	if rctx == nil {
		rctx = context.WithoutCancel(ctx)
	}
	var err error
	done := make(chan struct{})
	// One start for the publish time (release waits for it before the
	// answer enters the cache) and the client's padding, so that an
	// answer computed within its slot is released at the slot's end, not
	// at the next doubling.
	start := time.Now()
	go func() {
		defer close(done)
		if own {
			defer tk.done()
		}
		defer func() {
			// The session's own recover (Server.handle) does not see
			// this goroutine: contain a panic here.
			if p := recover(); p != nil {
				c.log.Error("panic in dp release", zap.Any(logKeyPanic, p), zap.ByteString(logKeyStack, debug.Stack()))
				err = pgerr.New(pgerr.InternalError, internalErrorMessage)
			}
		}()
		var ready time.Time
		ready, err = run(rctx, start.Add(slotLen), tk.contended.Load)
		c.padResponse(rctx, start, ready, slotLen)
	}()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		c.pendingDP = done
		c.log.Info("dp statement cancelled by the client; its release finishes in the background")
		return statementError(ctx, ctx.Err())
	}
}

// rememberer is the part of a Releaser (release.Releaser has it) that
// answers a query from its in-memory answer cache, or reports false.
type rememberer interface {
	Remembered(req release.Request) (*release.Result, bool)
}

// remembered answers req on the session's goroutine when the releaser has
// its answer in memory: a cached answer spends nothing and reads nothing,
// so it needs neither the release goroutine nor the session context. It
// is padded to the dataset's response_time like every other answer; a
// cancel during the padding ends it (false, ctx done) with 57014, as in
// release.
func (c *conn) remembered(ctx context.Context, req release.Request) (*release.Result, bool) {
	rm, ok := c.srv.cfg.Releaser.(rememberer)
	if !ok {
		return nil, false
	}
	start := time.Now()
	res, ok := rm.Remembered(req)
	if !ok {
		return nil, false
	}
	c.padResponse(ctx, start, time.Now(), c.ds.ResponseTime)
	return res, ctx.Err() == nil
}

// waitPendingDP waits for a DP release left running by a cancelled
// statement (at most the proxy's statement_timeout plus padding), or until
// ctx ends.
func (c *conn) waitPendingDP(ctx context.Context) {
	if c.pendingDP == nil {
		return
	}
	select {
	case <-c.pendingDP:
		c.pendingDP = nil
	case <-ctx.Done():
	}
}

// publicDistinct answers a SELECT DISTINCT of a column whose values the
// policy declares public (rewrite.PublicDistinct) from the policy: no data
// is read and no budget spent. It returns nil for any other statement.
func (c *conn) publicDistinct(text string) *resultSet {
	if c.srv.rt.publicDistinct == nil {
		return nil
	}
	d, _ := c.dpTexts.get(c.ds.Policy, text)
	if d.notDistinct {
		return nil
	}
	dv := c.srv.rt.publicDistinct(c.ds.Policy, text)
	if dv == nil {
		d.notDistinct = true
		c.dpTexts = c.dpTexts.put(c.ds.Policy, text, d)
		return nil
	}
	names := dv.Names
	if len(names) == 0 {
		names = []string{dv.Name}
	}
	rs := &resultSet{
		rows: make([][]*string, len(dv.Values)),
		tag:  "SELECT " + strconv.Itoa(len(dv.Values)),
		notices: []*pgproto3.NoticeResponse{{
			Severity: severityNotice, SeverityUnlocalized: severityNotice, Code: successfulCompletion,
			Message: fmt.Sprintf("dp: the public values of %s.%s declared in the policy; no budget spent", dv.Table, dv.Column),
		}},
	}
	for _, n := range names {
		rs.cols = append(rs.cols, column{name: n, oid: oidOf(dv.PGType)})
	}
	for i := range dv.Values {
		rs.rows[i] = make([]*string, len(names))
		for j := range names {
			rs.rows[i][j] = &dv.Values[i]
		}
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
//
// A post-processing statement (rewrite.Post) that flattens into one DP
// aggregate is planned as that aggregate; one with DP leaves and outer SQL
// has every leaf planned and is returned as a *postStatement error, which
// callers answer with execPost or describePost.
func (c *conn) planFor(text string) (plan *rewrite.Plan, explain bool, err error) {
	key := text
	d, known := c.dpTexts.get(c.ds.Policy, key)
	if known && d.planText != "" {
		text, explain = d.planText, d.explain
	} else {
		if q, ex, err := c.postQuery(text); err != nil {
			return nil, false, err
		} else if q != nil {
			if q.Flat == "" {
				if _, err := c.planPost(q); err != nil {
					return nil, false, err
				}
				return nil, ex, &postStatement{q: q, explain: ex}
			}
			text = flatText(q, ex)
		}
		inner, ex, err := rewrite.ExplainTarget(text)
		if err != nil {
			return nil, false, err
		}
		if explain = ex; explain {
			text = inner
		}
		d.planText, d.explain = text, explain
		c.dpTexts = c.dpTexts.put(c.ds.Policy, key, d)
	}
	// Session options (dp.output_range, dp.contribution, the TimeZone, …)
	// are part of the plan cache's key.
	plan, err = c.srv.plans.plan(c.ds.Policy, text, c.rewriteOptions(), c.srv.rt.rewrite)
	return plan, explain, err
}

// dpTextCache remembers, per session, what planFor and publicDistinct
// derive from a DP statement's text alone (rewrite.HasPostSyntax, Post,
// ExplainTarget, PublicDistinct are pure functions of the policy and the
// text), so a repeated statement (a dashboard's, a cached answer) goes
// straight to the plan cache. Nothing derived from session settings or
// data is kept. Not safe for concurrent use.
type dpTextCache struct {
	policy *policy.Dataset
	m      map[string]dpText
	bytes  int // of the texts held
}

// dpText is what is known of one statement text.
type dpText struct {
	// planText is the text planned for it (a flattened post-processing
	// statement's, EXPLAIN looked through; "" not known yet), explain
	// whether it was an EXPLAIN.
	planText string
	explain  bool
	// notDistinct: rewrite.PublicDistinct does not answer it.
	notDistinct bool
}

func (tc *dpTextCache) get(ds *policy.Dataset, text string) (dpText, bool) {
	if tc == nil || tc.policy != ds {
		return dpText{}, false
	}
	d, ok := tc.m[text]
	return d, ok
}

// put records d for text and returns the cache to keep (a new one when
// the policy changed or the cache was full).
func (tc *dpTextCache) put(ds *policy.Dataset, text string, d dpText) *dpTextCache {
	if len(text) > maxCachedText {
		return tc
	}
	size := len(text) + len(d.planText)
	if old, ok := tc.get(ds, text); ok {
		size = len(d.planText) - len(old.planText) // replaced
	}
	if tc == nil || tc.policy != ds || len(tc.m) >= classifyCacheSize || tc.bytes+size > classifyCacheBytes {
		tc = &dpTextCache{policy: ds, m: make(map[string]dpText)}
		size = len(text) + len(d.planText)
	}
	tc.m[text] = d
	tc.bytes += size
	return tc
}

// params are the privacy parameters of a DP query under the session's
// settings (release.QueryDelta picks δ when the session set none).
func (c *conn) params(plan *rewrite.Plan) release.Params {
	p := release.Params{Epsilon: c.epsilon(), Delta: c.delta(), Mechanism: c.mechanism(), QuantileMethod: c.quantileMethod()}
	p.Delta = release.QueryDelta(c.ds.Policy, c.analyst, plan, p, c.deltaExplicit)
	return p
}

// dpRequest is the release of plan for the session's analyst, settings
// and dataset.
func (c *conn) dpRequest(plan *rewrite.Plan) release.Request {
	p := c.params(plan)
	return release.Request{
		Analyst:        c.analyst,
		Dataset:        c.ds.Policy,
		Plan:           plan,
		Epsilon:        p.Epsilon,
		Delta:          p.Delta,
		Mechanism:      p.Mechanism,
		QuantileMethod: p.QuantileMethod,
		Upstream:       c.ds.Upstream,
		NoCache:        c.noCache(),
	}
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

// timeSlot is how long the release of plan takes, fixed before its charge
// from public quantities only (issue 27, SECURITY.md "Time"): the dataset's
// response_time, or the first doubling of it that covers the plan's work
// bound (rewrite's dpplan.Work: the rows its upstream queries may process,
// from the policy's max_rows) at the dataset's work_rate. The answer, or
// the error after its charge, is released at the end of the slot
// (padResponse; a slot overrun under load goes to the next doubling). 0:
// no padding (response_time 0). Whatever the padding, a plan whose work
// bound needs longer than the upstream statement_timeout at work_rate is
// refused here, uncharged: it could time out however its data is made.
func (c *conn) timeSlot(plan *rewrite.Plan) (time.Duration, error) {
	if plan == nil {
		return 0, nil
	}
	w := plan.Work
	var need time.Duration
	if w.Rows > 0 && c.ds.WorkRate > 0 {
		need = time.Duration(float64(w.Rows) / c.ds.WorkRate * float64(time.Second))
		if st := c.srv.cfg.StatementTimeout; st > 0 && need > st {
			return 0, pgerr.New(pgerr.ProgramLimitExceeded, "this query may process up to %d rows upstream, %s of work at %g rows/s, over the statement_timeout of %s", w.Rows, need.Round(time.Millisecond), c.ds.WorkRate, st).
				WithDetail("The bound comes from the policy's max_rows, the query's joins and its automatic bounds, not from the data. The query was not run and nothing was charged.").
				WithHint("join fewer tables, or use fixed bounds (SET dp.contribution = fixed; SET dp.clipping = off); the data steward sets max_rows, work_rate and statement_timeout")
		}
	}
	d := c.ds.ResponseTime
	if d <= 0 {
		return 0, nil
	}
	var zero time.Time
	return release.PadUntil(zero, d, zero.Add(need)).Sub(zero), nil
}
