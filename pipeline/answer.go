package pipeline

import (
	"fmt"

	"github.com/dpproxy/dpproxy/dpplan"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Answer is what the client gets for a DP statement: columns, rows of
// text values (NULL as nil) and NOTICEs, sent before the rows.
type Answer struct {
	Columns []release.Column
	Rows    [][]*string
	Notices []string
	// Explain: the answer of an EXPLAIN (its command tag is EXPLAIN).
	Explain bool
}

// FromResult is the answer of the release of st's plan, with the error
// columns when s asks for them (Settings.ErrorColumns).
func FromResult(st *Statement, s *Settings, res *release.Result) (*Answer, error) {
	if res == nil {
		return nil, fmt.Errorf("releaser returned no result and no error")
	}
	for _, row := range res.Rows {
		if len(row) != len(res.Columns) {
			return nil, fmt.Errorf("released row has %d values for %d columns", len(row), len(res.Columns))
		}
	}
	a := &Answer{Columns: res.Columns, Rows: res.Rows}
	if st != nil && st.Plan != nil {
		a.Notices = append(a.Notices, st.Plan.Warnings...)
	}
	if res.Notice != "" {
		a.Notices = append(a.Notices, res.Notice)
	}
	if s != nil && s.ErrorColumns && st != nil && st.Plan != nil && len(st.Plan.Outputs) == len(res.Columns) {
		withErrorColumns(a, st.Plan, res)
	}
	return a, nil
}

// withErrorColumns puts after each released column that is not a group
// key the column of its cells' 95% half-widths (NULL where there is none;
// all NULL for an answer recorded before widths were kept).
func withErrorColumns(a *Answer, plan *dpplan.Plan, res *release.Result) {
	var cols []release.Column
	for i, o := range plan.Outputs {
		cols = append(cols, res.Columns[i])
		if o.Kind != dpplan.OutputKey {
			cols = append(cols, errorColumn(res.Columns[i].Name))
		}
	}
	rows := make([][]*string, len(res.Rows))
	for r, row := range res.Rows {
		var widths []*string
		if r < len(res.Widths) {
			widths = res.Widths[r]
		}
		out := make([]*string, 0, len(cols))
		for i, o := range plan.Outputs {
			out = append(out, row[i])
			if o.Kind != dpplan.OutputKey {
				var w *string
				if i < len(widths) {
					w = widths[i]
				}
				out = append(out, w)
			}
		}
		rows[r] = out
	}
	a.Columns, a.Rows = cols, rows
}

// FromDistinct is the answer of a filter drop-down from the policy's
// public values: one row per value, the column repeated as often as the
// statement names it.
func FromDistinct(dv *rewrite.DistinctValues) *Answer {
	a := &Answer{
		Columns: distinctColumns(dv),
		Rows:    make([][]*string, len(dv.Values)),
		Notices: []string{fmt.Sprintf("dp: the public values of %s.%s declared in the policy; no budget spent", dv.Table, dv.Column)},
	}
	for i := range dv.Values {
		a.Rows[i] = make([]*string, len(a.Columns))
		for j := range a.Columns {
			a.Rows[i][j] = &dv.Values[i]
		}
	}
	return a
}

func distinctColumns(dv *rewrite.DistinctValues) []release.Column {
	names := dv.Names
	if len(names) == 0 {
		names = []string{dv.Name}
	}
	cols := make([]release.Column, len(names))
	for i, n := range names {
		cols[i] = release.Column{Name: n, PGType: dv.PGType}
	}
	return cols
}

// Explain answers EXPLAIN of a prepared statement: the plan,
// sensitivities, noise scales, cost and time slot, computed from the
// policy and the session's settings (for a post-processing statement,
// each leaf's and the outer SQL). No data is read and no budget spent.
func Explain(env *Env, s *Settings, st *Statement) (*Answer, error) {
	if st.Kind == KindPost {
		return explainPost(env, s, st)
	}
	cols, rows, err := release.Explain(env.Policy, st.Plan, Params(s))
	if err != nil {
		return nil, err
	}
	line := slotLine(env, st)
	rows = append(rows[:len(rows)-1:len(rows)-1], []*string{&line}, rows[len(rows)-1])
	return &Answer{Columns: cols, Rows: rows, Explain: true}, nil
}

// slotLine is EXPLAIN's line on the answer's time slot.
func slotLine(env *Env, st *Statement) string {
	slot, err := TimeSlot(env, st.Plan)
	switch {
	case err != nil:
		pe, _ := pgerr.As(err)
		return "  Time slot: refused before the charge: " + pe.Message
	case slot > 0:
		line := fmt.Sprintf("  Time slot: the answer is released %s after its release starts (response_time %s", slot, env.ResponseTime)
		if w := st.Plan.Work; w.Rows > 0 && w.Candidates > 0 {
			line += fmt.Sprintf(", doubled until it covers %d rows at work_rate %g rows/s and %d candidate groups at %s each", w.Rows, env.WorkRate, w.Candidates, dpplan.CandidateCost)
		} else if w.Rows > 0 {
			line += fmt.Sprintf(", doubled until it covers %d rows at work_rate %g rows/s", w.Rows, env.WorkRate)
		}
		return line + ")"
	}
	return "  Time slot: none (response_time is 0: the time of the answer shows the work the data made upstream)"
}

// explainPost answers EXPLAIN of a post-processing statement: each leaf's
// DP plan (as EXPLAIN of the leaf shows it) and the outer SQL.
func explainPost(env *Env, s *Settings, st *Statement) (*Answer, error) {
	var lines []string
	lines = append(lines, fmt.Sprintf("Post-processing over %d DP aggregates (cost: the sum of theirs; the outer SQL adds none)", len(st.Leaves)))
	for i, l := range st.Leaves {
		lines = append(lines, fmt.Sprintf("DP aggregate %d: %s", i+1, l.Text))
		if l.Kind == KindDistinct {
			lines = append(lines, "  answered from the policy's public values (no data read, no cost)")
			continue
		}
		_, rows, err := release.Explain(env.Policy, l.Plan, Params(s))
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if r[0] != nil {
				lines = append(lines, "  "+*r[0])
			}
		}
	}
	lines = append(lines, "Outer SQL (runs on the shadow catalog over the released rows, never on the data): "+st.Post.Outer())
	a := &Answer{Columns: []release.Column{release.ExplainColumn}, Explain: true}
	for i := range lines {
		a.Rows = append(a.Rows, []*string{&lines[i]})
	}
	return a, nil
}
