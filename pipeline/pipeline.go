package pipeline

import (
	"fmt"
	"math"
	"time"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Env is what the pipeline needs of a dataset and the proxy's
// configuration. Read only; shared by the sessions of the dataset.
type Env struct {
	Policy   *policy.Dataset
	Upstream release.Upstream
	// ResponseTime and WorkRate make an answer's time slot (TimeSlot);
	// StatementTimeout refuses a plan whose work bound cannot fit it.
	ResponseTime     time.Duration
	WorkRate         float64
	StatementTimeout time.Duration
	// Plan plans a DP statement (rewrite.RewriteWith, or a cache of it).
	Plan func(ds *policy.Dataset, text string, opts rewrite.Options) (*dpplan.Plan, error)
	// PublicDistinct recognises a SELECT DISTINCT of a column with
	// public values (rewrite.PublicDistinct); nil: none is.
	PublicDistinct func(ds *policy.Dataset, text string) *rewrite.DistinctValues
}

// Settings are the session's settings a DP statement depends on.
type Settings struct {
	Analyst        string
	Epsilon, Delta float64
	Mechanism      string
	NoCache        bool
	// ErrorColumns adds, after each released column that is not a group
	// key, a column with each cell's 95% half-width (SET
	// dp.error_columns = on): error bars every client shows.
	ErrorColumns bool
	// Options are the settings that change a plan (they are part of the
	// plan cache's key).
	Options rewrite.Options
}

// Kind is what a prepared statement is.
type Kind int

const (
	// KindDistinct is a filter drop-down answered from the policy's public
	// values: no data is read and no budget spent.
	KindDistinct Kind = iota + 1
	// KindRelease is a DP aggregate (Explain: its EXPLAIN).
	KindRelease
	// KindPost is a post-processing statement: DP leaves and outer SQL
	// over their released rows (Explain: its EXPLAIN).
	KindPost
)

// Statement is a prepared DP statement. Nothing has been read or charged.
type Statement struct {
	Kind    Kind
	Text    string
	Explain bool
	// Distinct: the public values (KindDistinct).
	Distinct *rewrite.DistinctValues
	// Plan: the plan (KindRelease).
	Plan *dpplan.Plan
	// Post and Leaves: the split statement and each leaf, prepared as a
	// KindDistinct or KindRelease statement (KindPost).
	Post   *rewrite.PostQuery
	Leaves []*Statement
}

// Prepare recognises and plans a DP statement (see the package comment).
// texts, when not nil, is the session's cache of what is derived from a
// text alone. For a post-processing statement every leaf is planned, and
// a refusal of any leaf refuses the statement (its error names the leaf).
func Prepare(env *Env, s *Settings, texts *Texts, text string) (*Statement, error) {
	// Length and nesting first: every pass below costs proxy CPU before
	// admission and the charge, bounded only once these are.
	if err := rewrite.CheckText(text); err != nil {
		return nil, err
	}
	if dv := publicDistinct(env, texts, text); dv != nil {
		return &Statement{Kind: KindDistinct, Text: text, Distinct: dv}, nil
	}
	key := text
	d, known := texts.get(env.Policy, key)
	explain := false
	if known && d.planText != "" {
		text, explain = d.planText, d.explain
	} else {
		if q, ex, err := postQuery(env, text); err != nil {
			return nil, err
		} else if q != nil {
			if q.Flat == "" {
				return preparePost(env, s, texts, q, ex)
			}
			text = q.Flat
			if ex {
				text = "EXPLAIN " + text
			}
		}
		inner, ex, err := rewrite.ExplainTarget(text)
		if err != nil {
			return nil, err
		}
		if explain = ex; explain {
			text = inner
		}
		d.planText, d.explain = text, explain
		texts.put(env.Policy, key, d)
	}
	plan, err := env.Plan(env.Policy, text, s.Options)
	if err != nil {
		return nil, err
	}
	return &Statement{Kind: KindRelease, Text: key, Explain: explain, Plan: plan}, nil
}

// publicDistinct returns the public values that answer text, or nil.
func publicDistinct(env *Env, texts *Texts, text string) *rewrite.DistinctValues {
	if env.PublicDistinct == nil {
		return nil
	}
	d, _ := texts.get(env.Policy, text)
	if d.notDistinct {
		return nil
	}
	dv := env.PublicDistinct(env.Policy, text)
	if dv == nil {
		d.notDistinct = true
		texts.put(env.Policy, text, d)
	}
	return dv
}

// postQuery returns the post-processing split of a DP statement, or nil
// when it is no post-processing statement. EXPLAIN is looked through.
func postQuery(env *Env, text string) (q *rewrite.PostQuery, explain bool, err error) {
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
	q, err = rewrite.Post(env.Policy, text)
	return q, explain, err
}

// preparePost plans every leaf of a post-processing statement.
func preparePost(env *Env, s *Settings, texts *Texts, q *rewrite.PostQuery, explain bool) (*Statement, error) {
	st := &Statement{Kind: KindPost, Explain: explain, Post: q, Leaves: make([]*Statement, len(q.Leaves))}
	for i, text := range q.Leaves {
		if dv := publicDistinct(env, texts, text); dv != nil {
			st.Leaves[i] = &Statement{Kind: KindDistinct, Text: text, Distinct: dv}
			continue
		}
		plan, err := env.Plan(env.Policy, text, s.Options)
		if err != nil {
			if pe, ok := pgerr.As(err); ok {
				// The position is relative to the leaf: name the leaf
				// instead.
				cp := *pe
				cp.Position = 0
				if cp.Detail == "" {
					cp.Detail = fmt.Sprintf("in DP aggregate %d of the statement: %s", i+1, pgerr.Truncate(text, 200))
				}
				return nil, &cp
			}
			return nil, err
		}
		st.Leaves[i] = &Statement{Kind: KindRelease, Text: text, Plan: plan}
	}
	return st, nil
}

// Params are the privacy parameters of the session's settings.
func Params(s *Settings) release.Params {
	return release.Params{Epsilon: s.Epsilon, Delta: s.Delta, Mechanism: s.Mechanism}
}

// Request is the release of plan for the session's analyst and settings.
func Request(env *Env, s *Settings, plan *dpplan.Plan) release.Request {
	p := Params(s)
	return release.Request{
		Analyst:   s.Analyst,
		Dataset:   env.Policy,
		Plan:      plan,
		Epsilon:   p.Epsilon,
		Delta:     p.Delta,
		Mechanism: p.Mechanism,
		Upstream:  env.Upstream,
		NoCache:   s.NoCache,
	}
}

// TimeSlot is how long the release of plan takes, fixed before its charge
// from public quantities only (issue 27, SECURITY.md "Time"): the dataset's
// response_time, or the first doubling of it that covers the plan's work
// bound (dpplan.Work: the rows its upstream queries may process, from the
// policy's max_rows, at the dataset's work_rate, and the proxy's CPU for
// the most candidate groups partition selection can have). The answer, or
// the error after its charge, is released at the end of the slot (the proxy
// pads to it; a slot overrun under load goes to the next doubling). 0: no
// padding (response_time 0). Whatever the padding, a plan whose work bound
// needs longer than the upstream statement_timeout is refused here,
// uncharged: it could time out however its data is made.
func TimeSlot(env *Env, plan *dpplan.Plan) (time.Duration, error) {
	if plan == nil {
		return 0, nil
	}
	need, err := workTime(env, plan.Work, "join fewer tables, group by a column with public values, or use fixed bounds (SET dp.contribution = fixed; SET dp.clipping = off)")
	if err != nil {
		return 0, err
	}
	d := env.ResponseTime
	if d <= 0 {
		return 0, nil
	}
	var zero time.Time
	return release.PadUntil(zero, d, zero.Add(need)).Sub(zero), nil
}

// workTime is the time work w takes: its rows at the dataset's work rate
// and its candidate groups at dpplan.CandidateCost, both within the
// upstream statement (the candidates' noise is drawn as they stream in).
// It is 54000 when that exceeds the statement time-out (hint: what the
// analyst can change).
func workTime(env *Env, w dpplan.Work, hint string) (time.Duration, error) {
	var need time.Duration
	if w.Rows > 0 && env.WorkRate > 0 {
		need = time.Duration(min(float64(w.Rows)/env.WorkRate*float64(time.Second), math.MaxInt64/2))
	}
	need += time.Duration(min(float64(w.Candidates)*float64(dpplan.CandidateCost), math.MaxInt64/2))
	if st := env.StatementTimeout; st > 0 && need > st {
		e := pgerr.New(pgerr.ProgramLimitExceeded, "this query may process up to %d rows upstream, %s of work at %g rows/s, over the statement_timeout of %s", w.Rows, need.Round(time.Millisecond), env.WorkRate, st)
		if w.Candidates > 0 {
			e = pgerr.New(pgerr.ProgramLimitExceeded, "this query may process up to %d rows upstream and %d candidate groups of a private key, %s of work at %g rows/s and %s a group, over the statement_timeout of %s",
				w.Rows, w.Candidates, need.Round(time.Millisecond), env.WorkRate, dpplan.CandidateCost, st)
		}
		return 0, e.WithDetail("The bound comes from the policy's max_rows, the query's joins, its aggregates, its private keys and its automatic bounds, not from the data. The query was not run and nothing was charged.").
			WithHint("%s; the data steward sets max_rows, work_rate and statement_timeout", hint)
	}
	return need, nil
}

// Columns returns the result columns of a KindDistinct or KindRelease
// statement, for Describe (no data is read, no budget spent): with the
// error columns when s asks for them (s may be nil). A KindPost
// statement's columns are the outer SQL's (OuterSQL).
func (st *Statement) Columns(s *Settings) []release.Column {
	switch {
	case st.Explain:
		return []release.Column{release.ExplainColumn}
	case st.Kind == KindDistinct:
		return distinctColumns(st.Distinct)
	case st.Kind == KindRelease:
		var cols []release.Column
		for _, o := range st.Plan.Outputs {
			cols = append(cols, release.Column{Name: o.Name, PGType: o.PGType})
			if s != nil && s.ErrorColumns && o.Kind != dpplan.OutputKey {
				cols = append(cols, errorColumn(o.Name))
			}
		}
		return cols
	}
	return nil
}

// errorColumn is the error column of a released column: its cells' 95%
// half-widths ("margin of error", as statistical offices name it).
func errorColumn(name string) release.Column {
	return release.Column{Name: name + "_moe95", PGType: "numeric"}
}
