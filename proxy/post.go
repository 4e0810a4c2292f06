package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pipeline"
	"github.com/dpproxy/dpproxy/release"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"
)

// Post-processing SQL over DP results: the steps and their argument are
// package pipeline's (post.go). The proxy adds what needs the session: one
// DP admission slot for all the leaves and the shadow connection the outer
// SQL runs on, both taken before any charge; the pacing of the leaves'
// releases; and the outer SQL on the shadow.

// execPost answers a post-processing statement (pipeline/post.go).
func (c *conn) execPost(ctx context.Context, env *pipeline.Env, s *pipeline.Settings, st *pipeline.Statement, logText string) (*resultSet, error) {
	outerSQL, err := pipeline.OuterSQL(st)
	if err != nil {
		return nil, dpError(ctx, err, c.log)
	}
	// The outer SQL runs on the shadow after the leaves are charged: it
	// passes the catalog route's allow-lists here, before any charge.
	if err := checkShadowSQL(outerSQL); err != nil {
		return nil, err
	}
	if st.Explain {
		a, err := pipeline.Explain(env, s, st)
		if err != nil {
			return nil, dpError(ctx, err, c.log)
		}
		return answerSet(a)
	}
	var status func(context.Context) (accountant.Status, error)
	if c.srv.cfg.Ledger != nil {
		status = func(ctx context.Context) (accountant.Status, error) {
			// Within the analyst's one share of the ledger's pool for
			// budget reads, as SHOW dp.budget (attack round 89's lead;
			// the cached lookups before it take and give back the same).
			return c.budgetStatus(ctx, c.sess.ds.Policy)
		}
	}
	var cached func(context.Context, release.Request) bool
	if cc, ok := c.srv.cfg.Releaser.(interface {
		IsCached(context.Context, release.Request) bool
	}); ok {
		cached = cc.IsCached
	}
	// Every check that needs no lookup first; then the rate limit and one
	// DP admission slot for the statement (admission.go), before the
	// answer cache's lookups (which may read large answers from the
	// ledger: attack round 65) and before any leaf is charged.
	run, err := pipeline.CheckLeaves(env, s, st)
	if err != nil {
		return nil, dpError(ctx, err, c.log)
	}
	// The shadow parses and analyses the outer SQL (over empty arrays, as
	// Describe does) before any leaf is charged: a column the leaves'
	// results do not have (SELECT department, ROUND(AVG(age), 1),
	// diagnosis … GROUP BY department, a key left out of GROUP BY) is
	// refused uncharged (review round 112: 42703 after the charge).
	if _, err := c.describeShadow(ctx, outerSQL, nil); err != nil {
		return nil, outerError(err, "nothing was charged")
	}
	// Room for the leaves' answers while the outer SQL runs, before any
	// lookup or charge: their rows bound as text arrays (pipeline.Outer)
	// and pgconn's copy of them in the Bind message, and the answers of
	// the leaves released now (attack round 96: none of it was counted,
	// 16–32 MiB per free repetition and session).
	est := postAnswersRoom(st, run, s.ErrorColumns)
	room := 3 * est
	if int64(room) > c.srv.cfg.MaxMemoryPerAnalyst {
		return nil, pgerr.New(pgerr.ProgramLimitExceeded, "this statement's DP answers could hold %d MiB of the proxy's memory while its outer SQL runs, more than one analyst's sessions may hold (%d MiB)", (room+1<<20-1)>>20, c.srv.cfg.MaxMemoryPerAnalyst>>20).
			WithDetail("The room is reserved before the charge from the DP aggregates' shapes. The statement was not run and nothing was charged.").
			WithHint("name fewer DP aggregates, group by fewer keys, or ask the operator to raise max_memory_per_analyst_mb")
	}
	// Taken before any lookup; given back while the statement waits for
	// a DP admission slot and taken again once it has one (review round
	// 97: held through the queue, up to dp_queue_timeout, six wrapped
	// grouped aggregates of one analyst of which two ran had been refused
	// under the default bound).
	reserve := func() error {
		if err := c.checkMemory(room); err != nil {
			return postRoomError(room, c.srv.cfg.MaxMemoryPerAnalyst)
		}
		c.postRoom = room
		return nil
	}
	giveBack := func() {
		c.chargeMemoryOwn(-c.postRoom)
		c.postRoom = 0
	}
	defer giveBack()
	if c.shadow == nil {
		// The outer SQL takes a shadow connection (below): refused now,
		// while it has taken nothing, rather than after the rate limit's
		// token and the padding or the queue (review 100).
		if err := c.churnAllowed(); err != nil {
			return nil, err
		}
	}
	if err := reserve(); err != nil {
		return nil, err
	}
	var results []*release.Result
	var tk *ticket
	if len(run.Requests) > 0 {
		if err := c.srv.allowDP(c.sess.analyst); err != nil {
			c.freeLog().Warn("dp query refused by the rate limit")
			return nil, err
		}
		// Every leaf answered from the in-memory answer cache: nothing
		// is read or charged, so no DP admission slot, as for a plain DP
		// statement's cached answer (dp.go remembered; attack round 96:
		// a free repetition had held a slot through every leaf's time
		// slot and the outer SQL, 32 s for 16 leaves, and colluders held
		// all of a dataset's slots so for free).
		if rs, ok := c.rememberedAll(ctx, run.Requests); ok {
			// Nothing charged: the outer result is bounded as any free
			// one (shadowRun; review round 97: CheckLeaves' Charges, set
			// for any DP leaf and left so without Price, had kept it
			// past the analyst's memory bound as if charged).
			results = rs
			run.Charges = false
		} else if ctx.Err() != nil {
			return nil, statementError(ctx, ctx.Err())
		}
	}
	if len(run.Requests) > 0 && results == nil {
		// One DP admission slot for all the leaves (admission.go),
		// before any is charged.
		giveBack()
		var err error
		tk, err = c.srv.admissions[c.sess.ds].admit(ctx, c.sess.analyst)
		if err != nil {
			return nil, err
		}
		c.ticket = tk
		defer func() {
			c.ticket = nil
			if !c.ticketKept { // else paced's release frees it when it ends
				tk.done()
			}
			c.ticketKept = false
		}()
		if err := reserve(); err != nil {
			return nil, err
		}
		if err := run.Price(ctx, status, cached); err != nil {
			return nil, dpError(ctx, err, c.log)
		}
	}
	// The shadow connection that runs the outer SQL, also before any leaf
	// is charged: with every catalog connection busy the statement fails
	// here (53300) uncharged, never after its leaves were paid for.
	if c.shadow == nil {
		sc, err := c.acquireShadow(ctx)
		if err != nil {
			return nil, err
		}
		c.shadow = sc // pinned: shadowRun uses it and gives it back
		// Idle while the leaves run, which may take longer than a
		// catalog statement: shadowRun's acquireShadow sets the client's
		// write deadline again when it uses the connection.
		c.be.holdUntil(time.Time{})
		defer func() {
			if c.shadow == sc {
				// Nothing ran on it since acquireShadow (shadowRun's
				// statement releases it itself): no cancel request can
				// have reached it, so a statement cancelled while its
				// leaves ran puts it back in the pool rather than close
				// it, and no churn is counted against the analyst (review
				// round 95).
				c.releaseShadow(context.WithoutCancel(ctx), sc)
			}
		}()
	}
	// Room for the outer result, before any charge: an analyst whose
	// sessions hold their whole memory bound is refused uncharged. After
	// the charge the result is kept whatever the bound (shadowRun).
	if err := c.reserveResult(); err != nil {
		return nil, err
	}
	c.settleResult(0)
	// Release the DP leaves under one charge (release.RunBatch), in one
	// time slot: the sum of theirs, as they run one after the other.
	batch := run.Requests
	if len(batch) > 0 && results == nil {
		c.waitPendingDP(ctx)
		if ctx.Err() != nil {
			return nil, statementError(ctx, ctx.Err())
		}
		err := c.paced(ctx, run.Slot, func(rctx context.Context, publishAt time.Time, contended func() bool) (time.Time, error) {
			for i := range batch {
				if run.Slot > 0 {
					batch[i].PublishAt, batch[i].PadStep = publishAt, run.Slot
				}
				batch[i].Contended = contended
			}
			var err error
			results, err = c.srv.cfg.Releaser.RunBatch(upstreamCtx(rctx, batch...), batch)
			ready := time.Now()
			for _, r := range results {
				if r != nil && !r.ReadyAt.IsZero() {
					ready = r.ReadyAt
				}
			}
			return ready, err
		})
		if err != nil {
			return nil, dpError(ctx, err, c.log)
		}
		if len(results) != len(batch) {
			return nil, fmt.Errorf("releaser returned %d results for %d leaves", len(results), len(batch))
		}
		// The leaves' release has ended (paced returned without a
		// cancel): the outer SQL reads no data, so the slot goes back
		// now rather than after it (attack round 96: a free statement's
		// outer SQL had held it up to catalog_statement_timeout).
		tk.done()
	}
	if n := len(results); n > 0 && results[n-1] != nil {
		// SHOW dp.last_answer: the statement's last DP answer, saying of
		// how many.
		c.sess.lastAnswer = c.newLastAnswer(logText, batch[n-1], results[n-1], n)
	}
	// The statement's DP event for the Observer (audit log, dashboard),
	// as execDP's: charged when any leaf was (attack round 89: without it
	// a charged statement's audit line counted as a free one).
	if c.srv.cfg.Observer != nil && len(results) > 0 {
		ev := &DPEvent{Cached: true}
		for _, r := range results {
			if r != nil && !r.Cached {
				ev.Cached = false
				ev.CostEpsilon += r.Cost.Epsilon
				ev.CostDelta += r.Cost.Delta
				if ev.ChargeFingerprint == "" {
					ev.ChargeFingerprint = r.Fingerprint
				}
			}
		}
		c.sess.lastDP = ev
	}
	k := 0
	for i, l := range st.Leaves {
		if l.Kind != pipeline.KindRelease {
			continue
		}
		// A leaf answered from the answer cache spends nothing and
		// repeats a line already written: Debug, as execDP's (attack
		// round 89: 16 Info lines per free statement, unlimited).
		level := zap.InfoLevel
		if k < len(results) && results[k] != nil && results[k].Cached {
			level = zap.DebugLevel
		}
		ce := c.log.Check(level, "dp answer released")
		if ce == nil {
			k++
			continue
		}
		ce.Write(
			zap.String(logKeyFingerprint, c.fingerprintOf(logText)),
			zap.String(logKeyPlanHash, l.Plan.Fingerprint),
			zap.Int("leaf", i+1),
			zap.Float64(logKeyEpsilon, batch[k].Epsilon),
			zap.Float64(logKeyDelta, batch[k].Delta),
			zap.String(logKeyMechanism, batch[k].Mechanism))
		k++
	}
	params, notices, err := pipeline.Outer(st, results)
	if err != nil {
		return nil, err
	}
	// The arrays as built (escaping may make them longer than the
	// estimate): what exceeds their room is charged too, refused when
	// nothing was charged, kept otherwise (refusing it would waste the
	// charge, as for the outer result).
	bound := 0
	for _, p := range params {
		bound += 2 * len(p)
	}
	if extra := bound - 2*est; extra > 0 {
		if anyCharged(results) {
			c.chargeMemoryOwn(extra)
		} else if err := c.checkMemory(extra); err != nil {
			return nil, err
		}
		c.postRoom += extra // given back with the room
	}
	// The outer SQL, on the shadow, over the released rows.
	out, err := c.shadowRun(ctx, outerSQL, params, run.Charges)
	if err != nil {
		if anyCharged(results) {
			// A runtime error of the outer SQL over released values (sqrt or
			// ln of a noisy value below zero): its leaves were charged and
			// their answers cached, which the analyst could not tell.
			return nil, outerError(err, "its DP aggregates were charged, and their answers kept: the statement corrected, over the same aggregates at the same epsilon, is answered from the answer cache at no charge")
		}
		return nil, outerError(err, "")
	}
	var leafNotices []*pgproto3.NoticeResponse
	for _, n := range notices {
		leafNotices = append(leafNotices, notice(n))
	}
	out.notices = append(leafNotices, out.notices...)
	out.notices = append(out.notices, notice(pipeline.PostNotice(st)))
	return out, nil
}

// postRoomError refuses a post-processing statement whose answers' room
// (room bytes) does not fit what the analyst's sessions leave of bound.
func postRoomError(room int, bound int64) error {
	return pgerr.New(pgerr.ProgramLimitExceeded, "this statement's DP answers need %d MiB of the proxy's memory while its outer SQL runs, and your sessions hold too much of it (at most %d MiB for all sessions of one analyst)", (room+1<<20-1)>>20, bound>>20).
		WithDetail("The room (the DP aggregates' largest possible answers, and the arrays that bind them to the outer SQL) is reserved before the charge; statements running at once in your other sessions, prepared statements, open portals and unread results count too. Nothing was run or charged.").
		WithHint("run fewer such statements at once, or group by columns with public values (a column without them reserves room for its largest possible number of groups)")
}

// postAnswersRoom estimates the bytes of a post-processing statement's
// leaves' answers: release.AnswerBytes of each DP leaf (as answerRoom),
// and the public values of each drop-down leaf, once per column.
func postAnswersRoom(st *pipeline.Statement, run *pipeline.PostRun, errorColumns bool) int {
	n := 0
	for _, req := range run.Requests {
		n += answerRoom(req.Plan, errorColumns)
	}
	for _, l := range st.Leaves {
		if l.Kind != pipeline.KindDistinct || l.Distinct == nil {
			continue
		}
		cols := max(1, len(l.Distinct.Names))
		for _, v := range l.Distinct.Values {
			n += cols * (len(v) + 3)
		}
	}
	return n
}

// rememberedAll answers every leaf of reqs from the releaser's in-memory
// answer cache, on the session's goroutine, padded to the dataset's
// response_time as a plain DP statement's cached answer is (remembered),
// or reports false (some leaf is not remembered, or ctx ended during the
// padding: the caller checks ctx). Nothing is read or charged.
func (c *conn) rememberedAll(ctx context.Context, reqs []release.Request) ([]*release.Result, bool) {
	rm, ok := c.srv.cfg.Releaser.(rememberer)
	if !ok {
		return nil, false
	}
	c.waitPendingDP(ctx)
	if ctx.Err() != nil {
		return nil, false
	}
	start := time.Now()
	out := make([]*release.Result, len(reqs))
	for i, req := range reqs {
		res, ok := rm.Remembered(req)
		if !ok {
			return nil, false
		}
		out[i] = res
	}
	c.padResponse(ctx, start, time.Now(), c.sess.ds.ResponseTime)
	return out, ctx.Err() == nil
}

// shadowRun runs one statement with text parameters on the shadow (the
// extended protocol: one statement only) and returns its rows as text
// (at most MaxBufferedResult bytes). charged: the leaves it reads were
// charged, so the result is kept whatever the analyst's memory bound
// (attack round 51: refusing it then wasted the charge).
func (c *conn) shadowRun(ctx context.Context, sql string, params [][]byte, charged bool) (*resultSet, error) {
	rs, err := c.shadowRows(ctx, sql, params, !charged, func() error {
		return pgerr.New(programLimitExceeded, "post-processing result too large (over %d bytes)", c.srv.cfg.MaxBufferedResult).
			WithHint("add a LIMIT to the outer query")
	})
	if err != nil {
		return nil, err
	}
	if rs.cols == nil {
		rs.cols = []column{}
	}
	// Held until the client has read it: charged until the next
	// ReadyForQuery (memory.go).
	if charged {
		c.chargeMemoryOwn(rowsBytes(rs.rows))
	} else if err := c.checkMemory(rowsBytes(rs.rows)); err != nil {
		return nil, err
	}
	return rs, nil
}

// describePost returns the columns of a post-processing statement without
// running it: the shadow describes the outer SQL (no leaf is released).
func (c *conn) describePost(ctx context.Context, st *pipeline.Statement) ([]column, error) {
	if st.Explain {
		return columnsOf([]release.Column{release.ExplainColumn}), nil
	}
	sql, err := pipeline.OuterSQL(st)
	if err != nil {
		return nil, err
	}
	sd, err := c.describeShadow(ctx, sql, nil)
	if err != nil {
		return nil, outerError(err, "")
	}
	cols := make([]column, len(sd.Fields))
	for i, f := range sd.Fields {
		cols[i] = column{name: f.Name, oid: f.DataTypeOID}
	}
	return cols, nil
}

// outerError turns an error PostgreSQL (the shadow) raised for the outer
// SQL into the client's error: its code, message, detail and hint, without
// its position (which counts characters of the rewritten outer SQL, not of
// the analyst's statement), and more, when given, appended to its hint
// (what was charged). The outer SQL reads only released (noisy) values and
// public data, so the error is post-processing.
func outerError(err error, more string) error {
	var pge *pgconn.PgError
	if !errors.As(err, &pge) {
		return err
	}
	e := pgerr.New(pge.Code, "%s", pge.Message)
	if pge.Detail != "" {
		e = e.WithDetail("%s", pge.Detail)
	}
	hint := "the error is in the SQL around the DP aggregates (it runs over their released rows)"
	if pge.Hint != "" {
		hint = pge.Hint + "; " + hint
	}
	if more != "" {
		hint += "; " + more
	}
	return e.WithHint("%s", hint)
}

// anyCharged reports whether a leaf of results was charged now (not
// answered from the cache).
func anyCharged(results []*release.Result) bool {
	for _, r := range results {
		if r != nil && !r.Cached {
			return true
		}
	}
	return false
}
