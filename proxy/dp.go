package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/numfmt"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/upstream"
	"github.com/dpproxy/dpproxy/pipeline"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"
)

// execDP answers a DP statement through the pipeline (package pipeline:
// prepare, then release: reserve, run the emitted SQL upstream, add noise,
// record). The analyst's text goes to the planner only; the upstream sees
// the plan's emitted SQL.
//
// logText is the statement as the analyst wrote it (with $n placeholders),
// for the fingerprint; text has parameters bound as literals.
func (c *conn) execDP(ctx context.Context, text, logText string) (*resultSet, error) {
	env, s := c.dpEnv(), c.dpSettings()
	st, err := c.prepare(ctx, env, s, text)
	if err != nil {
		return nil, dpError(ctx, err, c.log)
	}
	switch {
	case st.Kind == pipeline.KindDistinct:
		c.freeLog().Info("answered from the policy's public values", zap.String(logKeyFingerprint, c.fingerprintOf(logText)))
		return answerSet(pipeline.FromDistinct(st.Distinct))
	case st.Kind == pipeline.KindPost:
		return c.execPost(ctx, env, s, st, logText)
	case st.Explain:
		a, err := pipeline.Explain(env, s, st)
		if err != nil {
			return nil, dpError(ctx, err, c.log)
		}
		c.freeLog().Info("dp plan explained", zap.String(logKeyFingerprint, c.fingerprintOf(logText)), zap.String(logKeyPlanHash, st.Plan.Fingerprint))
		return answerSet(a)
	}
	plan := st.Plan
	req := pipeline.Request(env, s, plan)
	// Room for the answer before the charge: kept (a portal, a cursor,
	// COPY: keepAnswer copies, given back once it is built and the caller
	// charges what it keeps), or sent at once (the simple protocol) but
	// held until the client has read it: a cached answer is free, so
	// without its room one analyst's sessions whose clients stop reading
	// had held any number of copies (attack round 66; given back by
	// endSending).
	room := max(c.keepAnswer, 1) * answerRoom(plan, s.ErrorColumns)
	if int64(room) > c.srv.cfg.MaxMemoryPerAnalyst {
		return nil, pgerr.New(pgerr.ProgramLimitExceeded, "this answer could hold %d MiB of the proxy's memory, more than one analyst's sessions may hold (%d MiB)", (room+1<<20-1)>>20, c.srv.cfg.MaxMemoryPerAnalyst>>20).
			WithDetail("The room is reserved before the charge from the query's shape: its columns, and its groups (a private key's at most the first groups the answer keeps). The query was not run and nothing was charged.").
			WithHint("ask for fewer columns, group by columns with public values, or ask the operator to raise max_memory_per_analyst_mb")
	}
	if err := c.checkMemory(room); err != nil {
		return nil, err
	}
	// In a session field, which syncMemory counts: a local variable
	// given back by a defer would be dropped by a sync in between and
	// given back twice (review round 100's finding in post.go).
	c.sendingRoom += room
	if c.keepAnswer > 0 {
		defer func() {
			c.sendingRoom -= room
			c.chargeMemoryOwn(-room)
		}()
	}
	if err := c.srv.allowDP(c.sess.analyst); err != nil {
		c.freeLog().Warn("dp query refused by the rate limit")
		return nil, err
	}
	res, err := c.release(ctx, env, req)
	if err != nil {
		return nil, dpError(ctx, err, c.log)
	}
	a, err := pipeline.FromResult(st, s, res)
	if err != nil {
		return nil, err
	}
	// The fingerprint is computed when SHOW asks: on every cached answer
	// it would cost more CPU than serving it (issue 15).
	c.sess.lastAnswer = c.newLastAnswer(logText, req, res, 0)
	if c.srv.cfg.Observer != nil {
		c.sess.lastDP = &DPEvent{Cached: res.Cached, CostEpsilon: res.Cost.Epsilon, CostDelta: res.Cost.Delta, ChargeFingerprint: res.Fingerprint}
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
			zap.String(logKeyFingerprint, c.fingerprintOf(logText)),
			zap.String(logKeyPlanHash, plan.Fingerprint),
			zap.Float64(logKeyEpsilon, req.Epsilon),
			zap.Float64(logKeyDelta, req.Delta),
			zap.String(logKeyMechanism, req.Mechanism),
			zap.Bool(logKeyCached, res.Cached))
	}
	return answerSet(a)
}

// answerRoom is the memory of a plan's answer, reserved before it is
// released: release.AnswerBytes, its groups (the product of its public key
// domains, or dpplan.MaxSelectedGroups of a private key's: both bounded
// by release's checkAnswerCells) times the width of a row, with
// dp.error_columns' columns.
func answerRoom(p *rewrite.Plan, errorColumns bool) int {
	extra := 0
	if errorColumns {
		extra = len(p.Outputs)
	}
	return release.AnswerBytes(p, extra)
}

// dpEnv is the pipeline's view of the session's dataset.
func (c *conn) dpEnv() *pipeline.Env {
	return &pipeline.Env{
		Policy:           c.sess.ds.Policy,
		Upstream:         c.sess.ds.Upstream,
		ResponseTime:     c.sess.ds.ResponseTime,
		WorkRate:         c.sess.ds.WorkRate,
		StatementTimeout: c.srv.cfg.StatementTimeout,
		Plan: func(ds *policy.Dataset, text string, opts rewrite.Options) (*rewrite.Plan, error) {
			return c.srv.plans.plan(c.sess.analyst, ds, text, opts, c.srv.rt.rewrite)
		},
		PublicDistinct: c.srv.rt.publicDistinct,
	}
}

// dpSettings are the session's settings a DP statement depends on.
func (c *conn) dpSettings() *pipeline.Settings {
	return &pipeline.Settings{
		Analyst:      c.sess.analyst,
		Epsilon:      c.sess.epsilon(),
		Delta:        c.sess.delta(),
		Mechanism:    c.sess.mechanism(),
		NoCache:      c.sess.noCache(),
		ErrorColumns: c.sess.settings[settingErrorColumns] == "on",
		Options:      c.rewriteOptions(),
	}
}

// describeDP returns the columns a DP statement will answer with, for
// Describe (nothing is read or charged; a post-processing statement's
// outer SQL is described by the shadow).
func (c *conn) describeDP(ctx context.Context, text string) ([]column, error) {
	env, s := c.dpEnv(), c.dpSettings()
	st, err := c.prepare(ctx, env, s, text)
	if err != nil {
		return nil, err
	}
	if st.Kind == pipeline.KindPost {
		return c.describePost(ctx, st)
	}
	return columnsOf(st.Columns(s)), nil
}

// checkDP plans a DP statement and reports its refusal, if any, as
// PostgreSQL's parse analysis would (nothing is read or charged).
func (c *conn) checkDP(text string) error {
	return c.checkDPIn(c.sessCtx, text)
}

// checkDPIn is checkDP waiting for the planning slot under ctx.
func (c *conn) checkDPIn(ctx context.Context, text string) error {
	_, err := c.prepare(ctx, c.dpEnv(), c.dpSettings(), text)
	return err
}

// prepare plans a DP statement (pipeline.Prepare) holding the analyst's
// planning slot: one statement of an analyst is planned at a time, over
// all their sessions. Planning runs on the proxy's CPU before admission
// and the charge; rewrite.CheckText bounds one statement's planning (under
// 0.1 s at the limits), and the slot bounds how many cores one analyst's
// sessions can keep planning at once (one), so that another analyst's
// statements still find a core (issue 33's attack).
func (c *conn) prepare(ctx context.Context, env *pipeline.Env, s *pipeline.Settings, text string) (*pipeline.Statement, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	release, err := c.takePlanSlot(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return pipeline.Prepare(env, s, &c.dpTexts, text)
}

// takePlanSlot waits under ctx for the analyst's planning slot and returns
// what gives it back (safe to call more than once).
//
// A session that already holds the slot gets it again at once, with a
// release that leaves it held (a DECLARE's or COPY's query is checked
// while the statement that wraps it may hold it).
func (c *conn) takePlanSlot(ctx context.Context) (func(), error) {
	if c.planHeld {
		return func() {}, nil
	}
	slot := c.srv.planSlot(c.sess.analyst)
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		return nil, statementError(ctx, ctx.Err())
	}
	c.planHeld = true
	held := true
	return func() {
		if held {
			held = false
			c.planHeld = false
			<-slot
		}
	}, nil
}

// answerSet is a pipeline's answer as rows for the client.
func answerSet(a *pipeline.Answer) (*resultSet, error) {
	rs := &resultSet{cols: columnsOf(a.Columns), rows: a.Rows, tag: "SELECT " + strconv.Itoa(len(a.Rows))}
	if a.Explain {
		rs.tag = "EXPLAIN"
	}
	for _, n := range a.Notices {
		rs.notices = append(rs.notices, notice(n))
	}
	return rs, nil
}

// notice is a NOTICE with PostgreSQL's successful-completion code.
func notice(msg string) *pgproto3.NoticeResponse {
	return &pgproto3.NoticeResponse{Severity: severityNotice, SeverityUnlocalized: severityNotice, Code: successfulCompletion, Message: msg}
}

// columnsOf types released columns for the wire.
func columnsOf(cols []release.Column) []column {
	out := make([]column, len(cols))
	for i, col := range cols {
		out[i] = column{name: col.Name, oid: oidOf(col.PGType)}
	}
	return out
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
func (c *conn) release(ctx context.Context, env *pipeline.Env, req release.Request) (*release.Result, error) {
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
	slotLen, err := pipeline.TimeSlot(env, req.Plan)
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
		res, err = c.srv.cfg.Releaser.Run(upstreamCtx(rctx, req), req)
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
		if tk, err = c.srv.admissions[c.sess.ds].admit(ctx, c.sess.analyst); err != nil {
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
		if err != nil {
			// An incident's error returns at its publish time, after its
			// ledger write; it is padded from when it happened.
			ready, err = release.ErrorReadyAt(err)
		}
		c.padResponse(rctx, start, ready, slotLen)
	}()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		c.pendingDP = done
		if !own {
			// The caller's ticket (a post-processing statement's one slot
			// for all its leaves) is held until the release ends, not
			// until the caller returns (attack round 37: a cancelled
			// batch read the data server with no slot, and another
			// analyst's time-out meanwhile counted as an incident).
			c.ticketKept = true
			go func() { <-done; tk.done() }()
		}
		c.freeLog().Info("dp statement cancelled by the client; its release finishes in the background")
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
	c.padResponse(ctx, start, time.Now(), c.sess.ds.ResponseTime)
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

// lastAnswer is what SHOW dp.last_answer shows of the session's last DP
// answer (never its values).
type lastAnswer struct {
	at time.Time
	// text is the statement as the analyst wrote it when short (its
	// fingerprint is computed when SHOW asks), else fp is its fingerprint.
	text, fp       string
	epsilon, delta float64
	mechanism      string
	cached         bool
	cost           accountant.Spent
	errors         string // the NOTICE's text on the error (release caps it)
	// leaves, for a post-processing statement, is its number of DP
	// answers (this one is the last); 0 otherwise.
	leaves int
}

// newLastAnswer keeps what SHOW dp.last_answer shows of an answer, not its
// rows (attack round 73: each session had kept its whole last answer,
// uncounted: 78 MiB for 6 idle sessions of a 14 MB one).
func (c *conn) newLastAnswer(text string, req release.Request, res *release.Result, leaves int) *lastAnswer {
	la := &lastAnswer{at: time.Now(), epsilon: req.Epsilon, delta: req.Delta, mechanism: req.Mechanism,
		cached: res.Cached, cost: res.Cost, errors: res.Errors, leaves: leaves}
	// Not a piece of the client's message, which it would keep whole
	// (review 74: 1 MB a session).
	if len(text) > lastAnswerText {
		la.fp = c.fingerprintOf(text)
	} else {
		la.text = strings.Clone(text)
	}
	return la
}

// lastAnswerText is the longest statement text kept for SHOW
// dp.last_answer; a longer one is kept as its fingerprint.
const lastAnswerText = 1024

// showLastAnswer answers SHOW dp.last_answer: the session's last DP answer
// as rows of (item, value): when, which statement (its fingerprint), its
// ε and δ, the cost it added, whether it came from the cache, then each
// part of its NOTICE on the error (each column's 95% half-width, the bias,
// the bounds chosen, partition selection) as a row of its own, for
// clients that show no NOTICE.
func (c *conn) showLastAnswer() *resultSet {
	rs := &resultSet{cols: lastAnswerColumns(), tag: "SHOW"}
	la := c.sess.lastAnswer
	if la == nil {
		rs.rows = append(rs.rows, textRow("answer", "none yet in this session"))
		return rs
	}
	cached := "off"
	if la.cached {
		cached = "on"
	}
	rs.rows = append(rs.rows,
		textRow("answered_at", la.at.UTC().Format("2006-01-02 15:04:05.000Z")),
		textRow("statement_fingerprint", cmp.Or(la.fp, fingerprint(la.text))), // la.text is at most lastAnswerText
		textRow("epsilon", formatFloat(la.epsilon)),
		textRow("delta", formatFloat(la.delta)),
		textRow("mechanism", la.mechanism),
		textRow("cached", cached),
		textRow("cost_epsilon", numfmt.Figure(la.cost.Epsilon)),
		textRow("cost_delta", numfmt.Figure(la.cost.Delta)))
	if la.leaves > 0 {
		rs.rows = append(rs.rows, textRow("note", fmt.Sprintf("the last of %d DP answers of a post-processing statement (the NOTICEs give each)", la.leaves)))
	}
	for i, part := range noticeParts(la.errors) {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		item := "note"
		if i == 0 {
			item = "intervals_95"
		}
		rs.rows = append(rs.rows, textRow(item, part))
	}
	return rs
}

// noticeParts splits a NOTICE's text at the "; " outside parentheses: the
// per-group half-widths "(avg, epsilon 0.08; per group: …)" stay one part.
func noticeParts(s string) []string {
	var parts []string
	depth, from := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth = max(depth-1, 0)
		case ';':
			if depth == 0 && strings.HasPrefix(s[i:], "; ") {
				parts = append(parts, s[from:i])
				from = i + 2
			}
		}
	}
	return append(parts, s[from:])
}

func lastAnswerColumns() []column { return []column{{"item", oidText}, {"value", oidText}} }

// upstreamCtx is ctx for the upstream queries of reqs: with sorted
// aggregation where a plan groups by a private key (upstream.ForPlan;
// attack round 108: colliding hashes of one person's key values).
func upstreamCtx(ctx context.Context, reqs ...release.Request) context.Context {
	for _, r := range reqs {
		if sorted := upstream.ForPlan(ctx, r.Plan); sorted != ctx {
			return sorted
		}
	}
	return ctx
}
