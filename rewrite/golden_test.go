package rewrite

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
)

var update = flag.Bool("update", false, "rewrite the want sections of rewrite/testdata/*.txtar")

// archive is a minimal txtar archive: a comment and named sections.
type archive struct {
	comment string
	names   []string
	files   map[string]string
}

func parseArchive(data string) *archive {
	a := &archive{files: map[string]string{}}
	cur := ""
	var buf strings.Builder
	flush := func() {
		if cur == "" {
			a.comment = buf.String()
		} else {
			a.files[cur] = buf.String()
		}
		buf.Reset()
	}
	for _, line := range strings.SplitAfter(data, "\n") {
		t := strings.TrimRight(line, "\n")
		if strings.HasPrefix(t, "-- ") && strings.HasSuffix(t, " --") && len(t) > 6 {
			flush()
			cur = strings.TrimSpace(t[3 : len(t)-3])
			a.names = append(a.names, cur)
			continue
		}
		buf.WriteString(line)
	}
	flush()
	return a
}

func (a *archive) format() []byte {
	var b bytes.Buffer
	b.WriteString(a.comment)
	for _, n := range a.names {
		fmt.Fprintf(&b, "-- %s --\n", n)
		s := a.files[n]
		b.WriteString(s)
		if s != "" && !strings.HasSuffix(s, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

func (a *archive) set(name, content string) {
	if _, ok := a.files[name]; !ok {
		a.names = append(a.names, name)
	}
	a.files[name] = content
}

func (a *archive) remove(name string) {
	delete(a.files, name)
	var keep []string
	for _, n := range a.names {
		if n != name {
			keep = append(keep, n)
		}
	}
	a.names = keep
}

// goldenCase is one loaded testdata file.
type goldenCase struct {
	name  string
	path  string
	ar    *archive
	ds    *policy.Dataset
	query string
}

func loadGolden(t *testing.T) []goldenCase {
	t.Helper()
	paths, err := filepath.Glob("testdata/*.txtar")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	sort.Strings(paths)
	def := loadHospital(t)
	var out []goldenCase
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		ar := parseArchive(string(data))
		ds := def
		if y, ok := ar.files["policy.yaml"]; ok {
			ds, err = policy.Parse(strings.NewReader(y), p)
			if err != nil {
				t.Fatalf("%s: policy: %v", p, err)
			}
		}
		q, ok := ar.files["query.sql"]
		if !ok {
			t.Fatalf("%s: no query.sql section", p)
		}
		out = append(out, goldenCase{name: strings.TrimSuffix(filepath.Base(p), ".txtar"), path: p, ar: ar, ds: ds,
			query: strings.TrimSuffix(q, "\n")})
	}
	return out
}

// describePlan renders a plan for review: a header of SQL comments, then
// the emitted SQL broken before each nested FROM.
func describePlan(p *Plan) string {
	var b strings.Builder
	var outs []string
	for i, o := range append(append([]Output(nil), p.Outputs...), p.Hidden...) {
		if i == len(p.Outputs) {
			fmt.Fprintf(&b, "-- outputs: %s\n", strings.Join(outs, "; "))
			outs = nil
		}
		switch o.Kind {
		case OutputExpr:
			outs = append(outs, fmt.Sprintf("%s %s = %s", o.Name, o.PGType, exprText(o.Expr)))
		case OutputKey:
			outs = append(outs, fmt.Sprintf("%s %s = key%d", o.Name, o.PGType, o.Key))
		case OutputSum:
			if c := p.Measures[o.Measure].Centre; c != "" {
				outs = append(outs, fmt.Sprintf("%s %s = m%d + %s·m%d", o.Name, o.PGType, o.Measure, c, o.CountMeasure))
				break
			}
			outs = append(outs, fmt.Sprintf("%s %s = m%d", o.Name, o.PGType, o.Measure))
		case OutputCount:
			outs = append(outs, fmt.Sprintf("%s %s = m%d", o.Name, o.PGType, o.Measure))
		case OutputAvg:
			if c := p.Measures[o.Measure].Centre; c != "" {
				outs = append(outs, fmt.Sprintf("%s %s = %s + m%d/m%d in [%g, %g]", o.Name, o.PGType, c, o.Measure, o.CountMeasure, o.Lower, o.Upper))
				break
			}
			outs = append(outs, fmt.Sprintf("%s %s = m%d/m%d in [%g, %g]", o.Name, o.PGType, o.Measure, o.CountMeasure, o.Lower, o.Upper))
		case OutputVariance:
			outs = append(outs, fmt.Sprintf("%s %s = var(n=m%d, sum=m%d, sumsq=m%d, sample=%v, sqrt=%v) in [%g, %g]",
				o.Name, o.PGType, o.CountMeasure, o.Measure, o.SumSqMeasure, o.Sample, o.Sqrt, o.Lower, o.Upper))
		case OutputSampleAgg:
			outs = append(outs, fmt.Sprintf("%s %s = mid + m%d/k in [%g, %g]", o.Name, o.PGType, o.Measure, o.Lower, o.Upper))
		case OutputQuantile:
			outs = append(outs, fmt.Sprintf("%s %s = quantile m%d", o.Name, o.PGType, o.Measure))
		}
	}
	if len(p.Hidden) > 0 {
		fmt.Fprintf(&b, "-- hidden: %s\n", strings.Join(outs, "; "))
	} else {
		fmt.Fprintf(&b, "-- outputs: %s\n", strings.Join(outs, "; "))
	}
	if p.Having != nil {
		fmt.Fprintf(&b, "-- having: %s\n", condText(p.Having))
	}
	var ms []string
	for i, m := range p.Measures {
		s := fmt.Sprintf("m%d %s(%s) linf=%g", i, m.Kind, m.Column, m.LInf)
		switch {
		case m.Expr != nil:
			s = fmt.Sprintf("m%d %s(expr) linf=%g", i, m.Kind, m.LInf)
		case m.Kind == MeasureRemoved && m.Units:
			s = fmt.Sprintf("m%d removed units linf=%g", i, m.LInf)
		case m.Kind == MeasureRemoved:
			s = fmt.Sprintf("m%d removed rows linf=%g", i, m.LInf)
		case m.Column == "":
			s = fmt.Sprintf("m%d count(*) linf=%g", i, m.LInf)
		}
		if m.L1 > 0 {
			s += fmt.Sprintf(" l1=%g", m.L1)
		}
		if m.Filter != nil {
			s += " filtered"
		}
		if m.Centre != "" {
			s += " centre=" + m.Centre
		}
		if m.Kind == MeasureSum || m.Kind == MeasureSumSq || m.Kind == MeasureSampleAgg {
			s += fmt.Sprintf(" clamp=[%g, %g]", m.Lower, m.Upper)
		}
		if m.Integer {
			s += " integer"
		}
		if q := m.Quantile; q != nil {
			s += fmt.Sprintf(" %s(q=%g cont=%v) in [%g, %g] buckets=%d width=%g", q.Func, q.Q, q.Cont, m.Lower, m.Upper, q.Buckets, q.Width)
		}
		ms = append(ms, s)
	}
	fmt.Fprintf(&b, "-- measures: %s\n", strings.Join(ms, "; "))
	var keys []string
	for _, k := range p.Keys {
		if k.Private {
			keys = append(keys, fmt.Sprintf("%s %s (private: partition selection)", k.Column, k.Type))
			continue
		}
		if k.Func == "case" {
			keys = append(keys, fmt.Sprintf("%s %s (%d values: %s)", k.Args[0], k.Type, len(k.Domain), strings.Join(k.Domain, ", ")))
			continue
		}
		if k.Func != "" {
			keys = append(keys, fmt.Sprintf("%s(%s; %s) %s (%d values: %s … %s)", k.Func, k.Column, strings.Join(k.Args, ", "), k.Type, len(k.Domain), k.Domain[0], k.Domain[len(k.Domain)-1]))
			continue
		}
		keys = append(keys, fmt.Sprintf("%s %s (%d values)", k.Column, k.Type, len(k.Domain)))
	}
	if len(keys) > 0 {
		fmt.Fprintf(&b, "-- keys: %s\n", strings.Join(keys, "; "))
	}
	fmt.Fprintf(&b, "-- max_groups_per_unit: %d\n", p.MaxGroupsPerUnit)
	for _, m := range p.Measures {
		if lu := dpplan.UnitGroups(p, p.RowsPerUnit); m.Kind == MeasureUnits && lu != p.MaxGroupsPerUnit {
			fmt.Fprintf(&b, "-- distinct units counted whole in up to %d groups (L1 %d)\n", lu, lu)
			break
		}
	}
	if p.MinUnits > 0 {
		fmt.Fprintf(&b, "-- min_units_per_cell: %d (the last column: distinct units per group)\n", p.MinUnits)
	}
	if len(p.OrderBy) > 0 || p.Limit >= 0 || p.Offset > 0 {
		var ob []string
		for _, o := range p.OrderBy {
			d := "asc"
			if o.Desc {
				d = "desc"
			}
			ob = append(ob, fmt.Sprintf("%d %s", o.Output, d))
		}
		fmt.Fprintf(&b, "-- post: order by [%s] limit %d offset %d\n", strings.Join(ob, ", "), p.Limit, p.Offset)
	}
	if sa := p.SampleAgg; sa != nil {
		fmt.Fprintf(&b, "-- sample-and-aggregate: levels %v count_measure %d block_units %d count_share %g\n", sa.Levels, sa.CountMeasure, sa.BlockUnits, sa.CountShare)
	}
	// RedactedSQL: the sample key is random per policy load.
	b.WriteString(strings.ReplaceAll(p.RedactedSQL(), " FROM (SELECT", "\n  FROM (SELECT"))
	b.WriteString("\n")
	return b.String()
}

func describeErr(err error) string {
	pe, ok := pgerr.As(err)
	if !ok {
		return "not a *pgerr.Error: " + err.Error() + "\n"
	}
	s := pe.Code + ": " + pe.Message + "\n"
	if pe.Hint != "" {
		s += "HINT: " + pe.Hint + "\n"
	}
	if pe.Position > 0 {
		s += fmt.Sprintf("POSITION: %d\n", pe.Position)
	}
	return s
}

func TestRewrite_Golden(t *testing.T) {
	for _, gc := range loadGolden(t) {
		t.Run(gc.name, func(t *testing.T) {
			var opts Options
			if now, ok := gc.ar.files["now"]; ok {
				// The statement's start, for relative dates (reldate.go).
				var err error
				if opts.Now, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(now)); err != nil {
					t.Fatal(err)
				}
			}
			p, err := RewriteWith(gc.ds, gc.query, opts)
			section, got := "want.sql", ""
			if err != nil {
				section, got = "want.err", describeErr(err)
				pe, ok := pgerr.As(err)
				if !ok || pe.Hint == "" && pe.Code != pgerr.SyntaxError {
					t.Errorf("Rewrite error %v has no hint or is not a *pgerr.Error", err)
				}
			} else {
				got = describePlan(p)
				checkPlan(t, p)
			}
			if *update {
				gc.ar.remove("want.sql")
				gc.ar.remove("want.err")
				gc.ar.set(section, got)
				if err := os.WriteFile(gc.path, gc.ar.format(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, ok := gc.ar.files[section]
			if !ok {
				t.Fatalf("Rewrite(%q): got a %s, but the file has no %s section:\n%s", gc.query, section, section, got)
			}
			if got != want {
				t.Errorf("Rewrite(%q) %s mismatch\ngot:\n%s\nwant:\n%s", gc.query, section, got, want)
			}
		})
	}
}

// checkPlan asserts the invariants every accepted plan must hold.
func checkPlan(t testing.TB, p *Plan) {
	t.Helper()
	if len(p.Measures) == 0 || len(p.Outputs) == 0 {
		t.Fatalf("plan without measures or outputs: %+v", p)
	}
	for i, m := range p.Measures {
		if !(m.LInf > 0) || m.LInf > 1e300 {
			t.Fatalf("measure %d has LInf %v, want finite > 0", i, m.LInf)
		}
		if m.Kind == MeasureSum && m.Lower > m.Upper {
			t.Fatalf("measure %d has lower %v > upper %v", i, m.Lower, m.Upper)
		}
	}
	if p.MaxGroupsPerUnit < 1 {
		t.Fatalf("MaxGroupsPerUnit = %d, want ≥ 1", p.MaxGroupsPerUnit)
	}
	if _, where := dpplan.SourceOf(p); p.RowOps < dpplan.RowOpsOf(p, where) {
		t.Fatalf("RowOps = %d, less than the work of the plan's conditions and values (%d): release refuses it", p.RowOps, dpplan.RowOpsOf(p, where))
	}
	for _, o := range p.Outputs {
		switch o.Kind {
		case OutputKey:
			if o.Key < 0 || o.Key >= len(p.Keys) {
				t.Fatalf("output %q: key %d out of range", o.Name, o.Key)
			}
		case OutputAvg:
			if p.Measures[o.CountMeasure].Kind != MeasureCount || p.Measures[o.Measure].Kind != MeasureSum {
				t.Fatalf("output %q: avg measures are wrong: %+v", o.Name, o)
			}
		case OutputVariance:
			if p.Measures[o.CountMeasure].Kind != MeasureCount || p.Measures[o.Measure].Kind != MeasureSum ||
				p.Measures[o.SumSqMeasure].Kind != MeasureSumSq {
				t.Fatalf("output %q: variance measures are wrong: %+v", o.Name, o)
			}
		default:
			if o.Measure < 0 || o.Measure >= len(p.Measures) {
				t.Fatalf("output %q: measure %d out of range", o.Name, o.Measure)
			}
		}
		if o.PGType == "" || o.Name == "" {
			t.Fatalf("output %+v without name or type", o)
		}
	}
	for _, ob := range p.OrderBy {
		if ob.Output < 0 || ob.Output >= len(p.Outputs) {
			t.Fatalf("order by output %d out of range", ob.Output)
		}
	}
	if p.Fingerprint == "" {
		t.Fatalf("plan without fingerprint")
	}
	// The emitted SQL must lex as PostgreSQL and hold one statement.
	if stmts, err := pgsql.Split(p.SQL); err != nil || len(stmts) != 1 {
		t.Fatalf("emitted SQL does not split into one statement: %v %q", err, stmts)
	}
}

// exprText renders an expression with v<i> for Outputs ++ Hidden values.
func exprText(e *Expr) string {
	switch e.Op {
	case "ref":
		return fmt.Sprintf("v%d", e.Ref)
	case "lit":
		return e.Lit
	case "neg":
		return "-(" + exprText(e.Args[0]) + ")"
	case "coalesce", "nullif":
		var args []string
		for _, a := range e.Args {
			args = append(args, exprText(a))
		}
		return e.Op + "(" + strings.Join(args, ", ") + ")"
	}
	return "(" + exprText(e.Args[0]) + " " + e.Op + " " + exprText(e.Args[1]) + ")"
}

func condText(c *Cond) string {
	switch c.Op {
	case "and", "or":
		return "(" + condText(c.Args[0]) + " " + c.Op + " " + condText(c.Args[1]) + ")"
	case "not":
		return "not " + condText(c.Args[0])
	}
	return exprText(c.L) + " " + c.Op + " " + exprText(c.R)
}
