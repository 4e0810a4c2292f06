package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"
)

// Post-processing SQL over DP results (issue 17; rewrite/post.go and
// rewrite/POSTPROCESSING.md hold the design). A statement whose leaves are
// DP aggregates and whose outer parts are ordinary SQL over them is
// answered in four steps:
//
//  1. plan every leaf with the ordinary planner (a refusal of any leaf
//     refuses the statement: nothing is charged);
//  2. check that the leaves together fit the remaining budget (53400
//     before any charge otherwise), take one DP admission slot for them
//     all (admission.go) and the shadow connection the outer SQL will run
//     on (53000 or 53300 before any charge otherwise);
//  3. release each leaf through the ordinary path (c.release: reserve,
//     run the emitted SQL, noise, record), each charged once and listed in
//     its own NOTICE;
//  4. run the outer SQL on the shadow catalog, with the released rows
//     bound as parameters (one text array per column, unnest(…) in place
//     of each leaf). The data connection never sees the outer SQL; the
//     shadow holds no private rows; the outer SQL sees only noisy values.
//
// An error of the outer SQL (division by zero over a noisy count, a bad
// cast of a noisy value) depends on released values and public data only,
// so it is post-processing: it is sent to the client as PostgreSQL
// reports it, the leaves stay charged (they were released), and it is no
// incident.

// postLeaf is one planned leaf.
type postLeaf struct {
	text     string
	plan     *rewrite.Plan // nil when answered from the policy (distinct)
	distinct *resultSet    // a filter drop-down answered from the policy
}

// postQuery returns the post-processing split of a DP statement, or nil
// when the statement is no post-processing statement (then the ordinary
// path answers it). EXPLAIN is looked through.
func (c *conn) postQuery(text string) (q *rewrite.PostQuery, explain bool, err error) {
	if !rewrite.HasPostSyntax(text) {
		return nil, false, nil
	}
	inner, explain, err := rewrite.ExplainTarget(text)
	if err != nil {
		return nil, false, err
	}
	if explain {
		text = inner
	}
	q, err = rewrite.Post(c.ds.Policy, text)
	return q, explain, err
}

// flatText returns the text the ordinary path plans for a flattened
// statement (EXPLAIN kept).
func flatText(q *rewrite.PostQuery, explain bool) string {
	if explain {
		return "EXPLAIN " + q.Flat
	}
	return q.Flat
}

// planPost plans every leaf (nothing is read or charged).
func (c *conn) planPost(q *rewrite.PostQuery) ([]postLeaf, error) {
	leaves := make([]postLeaf, len(q.Leaves))
	for i, text := range q.Leaves {
		leaves[i].text = text
		if rs := c.publicDistinct(text); rs != nil {
			leaves[i].distinct = rs
			continue
		}
		plan, _, err := c.planFor(text)
		if err != nil {
			if pe, ok := pgerr.As(err); ok {
				// The position is relative to the leaf: name the leaf
				// instead.
				cp := *pe
				cp.Position = 0
				if cp.Detail == "" {
					cp.Detail = fmt.Sprintf("in DP aggregate %d of the statement: %s", i+1, truncate(text, 200))
				}
				return nil, &cp
			}
			return nil, err
		}
		leaves[i].plan = plan
	}
	return leaves, nil
}

// leafColumns returns the released columns of each leaf.
func leafColumns(leaves []postLeaf) [][]rewrite.PostColumn {
	out := make([][]rewrite.PostColumn, len(leaves))
	for i, l := range leaves {
		if l.distinct != nil {
			for _, col := range l.distinct.cols {
				out[i] = append(out[i], rewrite.PostColumn{Name: col.name, PGType: typeNameOf(col.oid)})
			}
			continue
		}
		for _, o := range l.plan.Outputs {
			t := o.PGType
			if t == "" {
				t = "text"
			}
			out[i] = append(out[i], rewrite.PostColumn{Name: o.Name, PGType: t})
		}
	}
	return out
}

// typeNameOf is the inverse of oidOf for the types of released columns.
func typeNameOf(oid uint32) string {
	switch oid {
	case oidInt8:
		return "int8"
	case oidInt4:
		return "int4"
	case oidNumeric:
		return "numeric"
	case oidBool:
		return "bool"
	case oidDate:
		return "date"
	case oidFloat8:
		return "float8"
	case oidTimestamp:
		return "timestamp"
	case oidTimestamptz:
		return "timestamptz"
	}
	return "text"
}

// execPost answers a post-processing statement (see above).
func (c *conn) execPost(ctx context.Context, q *rewrite.PostQuery, explain bool, logText string) (*resultSet, error) {
	leaves, err := c.planPost(q)
	if err != nil {
		return nil, dpError(ctx, err, c.log)
	}
	outerSQL, err := q.OuterSQL(leafColumns(leaves))
	if err != nil {
		return nil, dpError(ctx, err, c.log)
	}
	// The outer SQL runs on the shadow after the leaves are charged: it
	// passes the catalog route's allow-lists here, before any charge.
	if err := checkShadowSQL(outerSQL); err != nil {
		return nil, err
	}
	if explain {
		return c.explainPost(ctx, q, leaves)
	}
	reqs := make([]*release.Request, len(leaves))
	var total accountant.Spent
	for i, l := range leaves {
		if l.plan == nil {
			continue
		}
		req := c.dpRequest(l.plan)
		reqs[i] = &req
		// Every leaf passes the checks made before a charge, and its
		// work fits the time limit (dp.go timeSlot), before any is
		// charged.
		if err := release.Check(req); err != nil {
			return nil, dpError(ctx, err, c.log)
		}
		if _, err := c.timeSlot(l.plan); err != nil {
			return nil, err
		}
		if cc, ok := c.srv.cfg.Releaser.(interface {
			IsCached(context.Context, release.Request) bool
		}); ok && cc.IsCached(ctx, req) {
			continue
		}
		cost := release.MaxCost(req)
		total.Epsilon += cost.Epsilon
		total.Delta += cost.Delta
	}
	if total.Epsilon > 0 && c.srv.cfg.Ledger != nil {
		st, err := c.srv.cfg.Ledger.Status(ctx, c.analyst, c.ds.Policy)
		if err != nil {
			return nil, dpError(ctx, err, c.log)
		}
		if err := release.CheckTotal(st, total); err != nil {
			return nil, err
		}
	}
	if total.Epsilon > 0 {
		if err := c.srv.allowDP(c.analyst); err != nil {
			c.log.Warn("dp query refused by the rate limit")
			return nil, err
		}
		// One DP admission slot for all the leaves (admission.go),
		// before any is charged.
		tk, err := c.srv.admissions[c.ds].admit(ctx, c.analyst)
		if err != nil {
			return nil, err
		}
		c.ticket = tk
		defer func() { c.ticket = nil; tk.done() }()
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
		defer func() {
			if c.shadow == sc {
				c.releaseShadow(ctx, sc)
			}
		}()
	}
	// Release the DP leaves under one charge (release.RunBatch), in one
	// time slot: the sum of theirs, as they run one after the other.
	var batch []release.Request
	var slotLen time.Duration
	for i, l := range leaves {
		if l.distinct == nil {
			d, _ := c.timeSlot(l.plan) // checked above
			slotLen += d
			batch = append(batch, *reqs[i])
		}
	}
	var results []*release.Result
	if len(batch) > 0 {
		c.waitPendingDP(ctx)
		if ctx.Err() != nil {
			return nil, statementError(ctx, ctx.Err())
		}
		err := c.paced(ctx, slotLen, func(rctx context.Context, publishAt time.Time, contended func() bool) (time.Time, error) {
			for i := range batch {
				if slotLen > 0 {
					batch[i].PublishAt, batch[i].PadStep = publishAt, slotLen
				}
				batch[i].Contended = contended
			}
			var err error
			results, err = c.srv.cfg.Releaser.RunBatch(rctx, batch)
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
	}
	rs := &resultSet{}
	values := make([][][]*string, len(leaves)) // per leaf, per row
	for i, l := range leaves {
		if l.distinct != nil {
			values[i] = l.distinct.rows
			for _, n := range l.distinct.notices {
				cp := *n
				cp.Message = fmt.Sprintf("%s [DP aggregate %d of %d]", n.Message, i+1, len(leaves))
				rs.notices = append(rs.notices, &cp)
			}
			continue
		}
		res := results[0]
		results = results[1:]
		if res == nil {
			return nil, fmt.Errorf("releaser returned no result and no error")
		}
		c.log.Info("dp answer released",
			zap.String(logKeyFingerprint, fingerprint(logText)),
			zap.String(logKeyPlanHash, l.plan.Fingerprint),
			zap.Int("leaf", i+1),
			zap.Float64(logKeyEpsilon, reqs[i].Epsilon),
			zap.Float64(logKeyDelta, reqs[i].Delta),
			zap.String(logKeyMechanism, reqs[i].Mechanism))
		values[i] = res.Rows
		if res.Notice != "" {
			rs.notices = append(rs.notices, &pgproto3.NoticeResponse{
				Severity: severityNotice, SeverityUnlocalized: severityNotice, Code: successfulCompletion,
				// The leaf's own NOTICE (it starts with "dp: ", as for any DP
				// query; its cost is its own mechanisms'), naming the leaf.
				Message: fmt.Sprintf("%s [DP aggregate %d of %d: %s]", res.Notice, i+1, len(leaves), truncate(l.text, 120)),
			})
		}
	}
	// The outer SQL, on the shadow, over the released rows.
	var params [][]byte
	for i, l := range leaves {
		ncols := len(leafColumns([]postLeaf{l})[0])
		for j := 0; j < ncols; j++ {
			params = append(params, textArray(values[i], j))
		}
	}
	out, err := c.shadowRun(ctx, outerSQL, params)
	if err != nil {
		return nil, outerError(err)
	}
	out.notices = append(rs.notices, out.notices...)
	out.notices = append(out.notices, &pgproto3.NoticeResponse{
		Severity: severityNotice, SeverityUnlocalized: severityNotice, Code: successfulCompletion,
		Message: fmt.Sprintf("post-processing over %d DP answers (no extra cost): the statement's cost is the sum of theirs", len(leaves)),
	})
	return out, nil
}

// textArray encodes column j of rows as a PostgreSQL text-format array
// literal: {"v1","v2",NULL,…}.
func textArray(rows [][]*string, j int) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for i, row := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		if j >= len(row) || row[j] == nil {
			b.WriteString("NULL")
			continue
		}
		b.WriteByte('"')
		for _, r := range *row[j] {
			if r == '"' || r == '\\' {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// shadowRun runs one statement with text parameters on the shadow (the
// extended protocol: one statement only) and returns its rows as text
// (at most MaxBufferedResult bytes).
func (c *conn) shadowRun(ctx context.Context, sql string, params [][]byte) (*resultSet, error) {
	rs, err := c.shadowRows(ctx, sql, params, func() error {
		return pgerr.New(programLimitExceeded, "post-processing result too large (over %d bytes)", c.srv.cfg.MaxBufferedResult).
			WithHint("add a LIMIT to the outer query")
	})
	if err != nil {
		return nil, err
	}
	if rs.cols == nil {
		rs.cols = []column{}
	}
	return rs, nil
}

// explainPost answers EXPLAIN of a post-processing statement: each leaf's
// DP plan (as EXPLAIN of the leaf shows it) and the outer SQL. Nothing is
// read or charged.
func (c *conn) explainPost(ctx context.Context, q *rewrite.PostQuery, leaves []postLeaf) (*resultSet, error) {
	var lines []string
	lines = append(lines, fmt.Sprintf("Post-processing over %d DP aggregates (cost: the sum of theirs; the outer SQL adds none)", len(leaves)))
	for i, l := range leaves {
		lines = append(lines, fmt.Sprintf("DP aggregate %d: %s", i+1, l.text))
		if l.plan == nil {
			lines = append(lines, "  answered from the policy's public values (no data read, no cost)")
			continue
		}
		_, rows, err := release.Explain(c.ds.Policy, l.plan, c.params(l.plan))
		if err != nil {
			return nil, dpError(ctx, err, c.log)
		}
		for _, r := range rows {
			if r[0] != nil {
				lines = append(lines, "  "+*r[0])
			}
		}
	}
	lines = append(lines, "Outer SQL (runs on the shadow catalog over the released rows, never on the data): "+q.Outer())
	rs := &resultSet{cols: []column{{name: release.ExplainColumn.Name, oid: oidOf(release.ExplainColumn.PGType)}}, tag: "EXPLAIN"}
	for i := range lines {
		rs.rows = append(rs.rows, []*string{&lines[i]})
	}
	return rs, nil
}

// describePost returns the columns of a post-processing statement without
// running it: the shadow describes the outer SQL (no leaf is released).
func (c *conn) describePost(ctx context.Context, q *rewrite.PostQuery, explain bool) ([]column, error) {
	if explain {
		return []column{{name: release.ExplainColumn.Name, oid: oidOf(release.ExplainColumn.PGType)}}, nil
	}
	leaves, err := c.planPost(q)
	if err != nil {
		return nil, err
	}
	sql, err := q.OuterSQL(leafColumns(leaves))
	if err != nil {
		return nil, err
	}
	sd, err := c.describeShadow(ctx, sql, nil)
	if err != nil {
		return nil, outerError(err)
	}
	cols := make([]column, len(sd.Fields))
	for i, f := range sd.Fields {
		cols[i] = column{name: f.Name, oid: f.DataTypeOID}
	}
	return cols, nil
}

// postStatement is planFor's answer for a statement with DP leaves and
// outer SQL (every leaf planned): not an error for the client, but a
// signal to answer it with execPost (or describe it with describePost).
type postStatement struct {
	q       *rewrite.PostQuery
	explain bool
}

func (e *postStatement) Error() string { return "post-processing statement" }

// asPost reports whether err is planFor's postStatement.
func asPost(err error) (*postStatement, bool) {
	ps, ok := err.(*postStatement)
	return ps, ok
}

func isPost(err error) bool {
	_, ok := asPost(err)
	return ok
}

// outerError turns an error PostgreSQL (the shadow) raised for the outer
// SQL into the client's error: its code, message, detail and hint, without
// its position (which counts characters of the rewritten outer SQL, not of
// the analyst's statement). The outer SQL reads only released (noisy)
// values and public data, so the error is post-processing.
func outerError(err error) error {
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
	return e.WithHint("%s", hint)
}
