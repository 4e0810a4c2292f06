package pipeline

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Post-processing SQL over DP results (issue 17; rewrite/post.go and
// rewrite/POSTPROCESSING.md hold the design). A statement whose leaves are
// DP aggregates and whose outer parts are ordinary SQL over them is
// answered in four steps:
//
//  1. Prepare plans every leaf with the ordinary planner (a refusal of any
//     leaf refuses the statement: nothing is charged);
//  2. CheckPost checks every leaf as a release would before its charge
//     (release.Check, TimeSlot) and that the leaves together fit the
//     remaining budget (53400 before any charge otherwise); the proxy then
//     takes one DP admission slot for them all and the shadow connection
//     the outer SQL will run on (53000 or 53300 before any charge
//     otherwise);
//  3. the leaves are released under one charge (release.RunBatch), each
//     listed in its own NOTICE;
//  4. the outer SQL (OuterSQL) runs on the shadow catalog, with the
//     released rows bound as parameters (Outer: one text array per
//     column, unnest(…) in place of each leaf). The data connection never
//     sees the outer SQL; the shadow holds no private rows; the outer SQL
//     sees only noisy values.
//
// An error of the outer SQL (division by zero over a noisy count, a bad
// cast of a noisy value) depends on released values and public data only,
// so it is post-processing: the client gets it as PostgreSQL reports it,
// the leaves stay charged (they were released), and it is no incident.

// OuterSQL is the outer SQL of a post-processing statement, with a
// parameter per released column of each leaf.
func OuterSQL(st *Statement) (string, error) {
	cols := make([][]rewrite.PostColumn, len(st.Leaves))
	for i, l := range st.Leaves {
		for _, c := range l.Columns(nil) {
			t := c.PGType
			if l.Kind == KindDistinct {
				t = CanonicalType(t)
			}
			if t == "" {
				t = "text"
			}
			cols[i] = append(cols[i], rewrite.PostColumn{Name: c.Name, PGType: t})
		}
	}
	return st.Post.OuterSQL(cols)
}

// CanonicalType is the canonical name of a result type the proxy types its
// results with ("int4" for integer, "float8" for double precision), or
// "text" for any other: a drop-down's values are bound as it, and the
// proxy maps it to the type OID of RowDescription.
func CanonicalType(t string) string {
	switch strings.ToLower(t) {
	case "int8", "bigint":
		return "int8"
	case "int4", "integer", "int":
		return "int4"
	case "int2", "smallint":
		return "int2"
	case "numeric", "decimal":
		return "numeric"
	case "bool", "boolean":
		return "bool"
	case "date":
		return "date"
	case "float8", "double precision":
		return "float8"
	case "float4", "real":
		return "float4"
	case "timestamp":
		return "timestamp"
	case "timestamptz":
		return "timestamptz"
	}
	return "text"
}

// PostRun is the release of a post-processing statement's DP leaves.
type PostRun struct {
	// Requests are the releases of the KindRelease leaves, in order.
	Requests []release.Request
	// Slot is their time slot: the sum of theirs, as they run one after
	// the other.
	Slot time.Duration
	// Charges: some leaf is not answered from the answer cache, so the
	// statement needs an admission slot and will be charged.
	Charges bool
}

// CheckPost checks every leaf of a post-processing statement as a release
// checks it before its charge (CheckLeaves), then prices it (Price).
func CheckPost(ctx context.Context, env *Env, s *Settings, st *Statement,
	status func(context.Context) (accountant.Status, error), cached func(context.Context, release.Request) bool) (*PostRun, error) {
	run, err := CheckLeaves(env, s, st)
	if err != nil {
		return nil, err
	}
	return run, run.Price(ctx, status, cached)
}

// CheckLeaves checks every leaf of a post-processing statement as a
// release checks it before its charge, with no lookup: a statement refused
// for its shape costs no read of the answer cache's ledger copies (attack
// round 65: 15 names of one cached 14 MB answer and an oversized leaf read
// 210 MB each time, then refused). Nothing is read or charged.
//
// The leaves' answers are held together (Outer binds them all): their
// sizes (release.AnswerBytes, once per time a leaf is named) must fit
// release.MaxAnswerBytes together, as one answer's must (attack round 65:
// one cached 14 MB answer named 16 times made the proxy hold 700 MB for a
// statement that charged nothing).
func CheckLeaves(env *Env, s *Settings, st *Statement) (*PostRun, error) {
	run := &PostRun{}
	var work dpplan.Work // the leaves' work together
	// The leaves' answers together: those over public keys count their
	// size; those with a private key share what is left, each holding at
	// most as many groups as fit its share (dpplan.Plan.GroupsCap; attack
	// round 70: 16 of them could hold 30,000 groups of 1 KiB keys each).
	bytes, private := 0, 0
	for _, l := range st.Leaves {
		switch {
		case l.Kind != KindRelease:
		case l.Plan.PrivateGroups():
			private++
		default:
			bytes += release.AnswerBytes(l.Plan, 0)
		}
	}
	tooLarge := pgerr.New(pgerr.ProgramLimitExceeded, "this statement's DP aggregates would hold more than %d MiB of answers together", release.MaxAnswerBytes>>20).
		WithDetail("The proxy holds every DP aggregate's answer of a statement at once (each time it is named); the statement was not run and nothing was charged.").
		WithHint("name each DP aggregate once (a WITH query can be read several times), or group by fewer keys")
	if bytes > release.MaxAnswerBytes {
		return nil, tooLarge
	}
	share := 0
	if private > 0 {
		share = (release.MaxAnswerBytes - bytes) / private
	}
	for _, l := range st.Leaves {
		if l.Kind != KindRelease {
			continue
		}
		plan := l.Plan
		if plan.PrivateGroups() {
			groups := share / dpplan.AnswerRowBytes(plan, len(plan.Outputs))
			if groups < 1 {
				return nil, tooLarge
			}
			if groups < dpplan.MaxSelectedGroups(plan) {
				cp := *plan
				cp.GroupsCap = groups
				cp.Fingerprint = dpplan.Fingerprint(&cp) // its own cached answer
				plan = &cp
			}
		}
		req := Request(env, s, plan)
		if err := release.Check(req); err != nil {
			return nil, err
		}
		slot, err := TimeSlot(env, plan)
		if err != nil {
			return nil, err
		}
		// The leaves run one after another within the statement: their
		// work together, not only each one's, must fit the time-out
		// (attack round 43: 16 leaves just under it held the analyst's
		// DP slots for 16 time-outs).
		if work.Rows += plan.Work.Rows; work.Rows < 0 {
			work.Rows = math.MaxInt64
		}
		if work.Candidates += plan.Work.Candidates; work.Candidates < 0 {
			work.Candidates = math.MaxInt64
		}
		if _, err := workTime(env, work, "use fewer DP aggregates in one statement, or join fewer tables"); err != nil {
			return nil, err
		}
		run.Requests = append(run.Requests, req)
		run.Slot += slot
	}
	run.Charges = len(run.Requests) > 0
	return run, nil
}

// Price sets Charges (some leaf is not answered from the answer cache:
// cached, when not nil, reports which are) and checks that the leaves
// together fit the remaining budget (status, when not nil, reads it).
// Nothing is charged.
func (run *PostRun) Price(ctx context.Context, status func(context.Context) (accountant.Status, error), cached func(context.Context, release.Request) bool) error {
	var total accountant.Spent
	for _, req := range run.Requests {
		if cached != nil && cached(ctx, req) {
			continue
		}
		cost := release.MaxCost(req)
		total.Epsilon += cost.Epsilon
		total.Delta += cost.Delta
	}
	run.Charges = total.Epsilon > 0
	if run.Charges && status != nil {
		bs, err := status(ctx)
		if err != nil {
			return err
		}
		if err := release.CheckTotal(bs, total); err != nil {
			return err
		}
	}
	return nil
}

// Outer binds the released rows of a post-processing statement's leaves
// (results: one per KindRelease leaf, in order) as the outer SQL's
// parameters, and returns the leaves' NOTICEs, each naming its leaf (the
// statement's own is PostNotice).
func Outer(st *Statement, results []*release.Result) (params [][]byte, notices []string, err error) {
	n := len(st.Leaves)
	for i, l := range st.Leaves {
		var rows [][]*string
		switch l.Kind {
		case KindDistinct:
			a := FromDistinct(l.Distinct)
			rows = a.Rows
			for _, msg := range a.Notices {
				notices = append(notices, fmt.Sprintf("%s [DP aggregate %d of %d]", msg, i+1, n))
			}
		default:
			if len(results) == 0 || results[0] == nil {
				return nil, nil, fmt.Errorf("releaser returned no result for DP aggregate %d", i+1)
			}
			res := results[0]
			results = results[1:]
			rows = res.Rows
			if res.Notice != "" {
				// The leaf's own NOTICE (it starts with "dp: ", as for
				// any DP query; its cost is its own mechanisms'),
				// naming the leaf.
				notices = append(notices, fmt.Sprintf("%s [DP aggregate %d of %d: %s]", res.Notice, i+1, n, pgerr.Truncate(l.Text, 120)))
			}
		}
		for j := range l.Columns(nil) {
			params = append(params, textArray(rows, j))
		}
	}
	return params, notices, nil
}

// PostNotice is the NOTICE of a post-processing statement, after its
// leaves' and the outer SQL's.
func PostNotice(st *Statement) string {
	return fmt.Sprintf("post-processing over %d DP answers (no extra cost): the statement's cost is the sum of theirs", len(st.Leaves))
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
