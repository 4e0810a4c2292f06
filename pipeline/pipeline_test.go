package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
)

// These tests drive the pipeline without the wire and without PostgreSQL:
// statement text and settings in, statements, requests, time slots and
// answers out.

func testEnv(t *testing.T) (*Env, *int) {
	t.Helper()
	ds, err := policy.Load("../internal/testdata/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A declared table size gives plans a work bound (dpplan.Work).
	for _, tb := range ds.Tables {
		tb.MaxRows = 300_000
	}
	plans := 0
	env := &Env{
		Policy:   ds,
		Upstream: noUpstream{},
		Plan: func(ds *policy.Dataset, text string, opts rewrite.Options) (*dpplan.Plan, error) {
			plans++
			return rewrite.RewriteWith(ds, text, opts)
		},
		PublicDistinct: rewrite.PublicDistinct,
	}
	return env, &plans
}

// noUpstream is never queried: nothing in the pipeline reads data.
type noUpstream struct{}

func (noUpstream) Query(context.Context, string, ...any) ([][]*string, error) {
	panic("the pipeline read data")
}

func testSettings() *Settings {
	return &Settings{Analyst: "alice", Epsilon: 0.5, Mechanism: policy.MechanismLaplace}
}

func TestPrepare_Kinds(t *testing.T) {
	env, _ := testEnv(t)
	s := testSettings()
	tests := []struct {
		text    string
		kind    Kind
		explain bool
		cols    []string
		leaves  int
	}{
		{"SELECT DISTINCT department FROM visits", KindDistinct, false, []string{"department"}, 0},
		{"SELECT department, COUNT(*) AS n FROM visits GROUP BY department", KindRelease, false, []string{"department", "n"}, 0},
		{"EXPLAIN SELECT COUNT(*) FROM visits", KindRelease, true, []string{release.ExplainColumn.Name}, 0},
		// A post-processing statement that flattens into one DP aggregate.
		{"SELECT dept, COUNT(*) AS n FROM (SELECT department AS dept FROM visits WHERE cost > 0) s GROUP BY dept", KindRelease, false, []string{"dept", "n"}, 0},
		{"SELECT COUNT(*) AS n FROM visits UNION ALL SELECT COUNT(*) FROM patients ORDER BY 1", KindPost, false, nil, 2},
		{"SELECT * FROM (SELECT DISTINCT department FROM visits) d JOIN (SELECT department, COUNT(*) AS c FROM visits GROUP BY department) a USING (department)", KindPost, false, nil, 2},
	}
	for _, tt := range tests {
		st, err := Prepare(env, s, &Texts{}, tt.text)
		if err != nil {
			t.Fatalf("Prepare(%q): %v", tt.text, err)
		}
		if st.Kind != tt.kind || st.Explain != tt.explain || len(st.Leaves) != tt.leaves {
			t.Errorf("Prepare(%q) = kind %d explain %v leaves %d, want %d %v %d", tt.text, st.Kind, st.Explain, len(st.Leaves), tt.kind, tt.explain, tt.leaves)
		}
		if tt.kind == KindPost {
			sql, err := OuterSQL(st)
			if err != nil || !strings.Contains(sql, "unnest(") {
				t.Errorf("OuterSQL(%q) = %q, %v", tt.text, sql, err)
			}
			continue
		}
		var got []string
		for _, c := range st.Columns(nil) {
			got = append(got, c.Name)
		}
		if strings.Join(got, ",") != strings.Join(tt.cols, ",") {
			t.Errorf("Prepare(%q).Columns() = %v, want %v", tt.text, got, tt.cols)
		}
	}
}

// TestPrepare_Refusals: a refusal is a PostgreSQL error with its SQLSTATE
// and a hint; a refused leaf of a post-processing statement is named.
func TestPrepare_Refusals(t *testing.T) {
	env, _ := testEnv(t)
	_, err := Prepare(env, testSettings(), nil, "SELECT patient_id, COUNT(*) FROM visits GROUP BY patient_id")
	pe, ok := pgerr.As(err)
	if !ok || pe.Code == "" || pe.Hint == "" {
		t.Fatalf("grouping by the unit: %v, want a PostgreSQL error with a hint", err)
	}
	_, err = Prepare(env, testSettings(), nil, "SELECT COUNT(*) AS n FROM visits UNION ALL SELECT patient_id FROM visits")
	pe, ok = pgerr.As(err)
	if !ok || pe.Position != 0 || !strings.Contains(pe.Detail, "DP aggregate 2") {
		t.Fatalf("refused leaf: %#v, want its detail to name DP aggregate 2 and no position", err)
	}
}

// TestPrepare_Texts: a repeated statement is recognised from the
// session's Texts (the drop-down check is not repeated) and planned by
// the planner it is given each time (the plan cache is the planner's).
func TestPrepare_Texts(t *testing.T) {
	env, plans := testEnv(t)
	distinct := 0
	pd := env.PublicDistinct
	env.PublicDistinct = func(ds *policy.Dataset, text string) *rewrite.DistinctValues {
		distinct++
		return pd(ds, text)
	}
	var texts Texts
	const q = "EXPLAIN SELECT COUNT(*) FROM visits"
	for range 3 {
		st, err := Prepare(env, testSettings(), &texts, q)
		if err != nil || !st.Explain {
			t.Fatalf("Prepare: %v, %+v", err, st)
		}
	}
	if distinct != 1 || *plans != 3 {
		t.Errorf("3 prepares: %d drop-down checks (want 1), %d plans (want 3)", distinct, *plans)
	}
	// Another policy (a reload) forgets what was learned.
	env2 := *env
	ds2 := *env.Policy
	env2.Policy = &ds2
	if _, err := Prepare(&env2, testSettings(), &texts, q); err != nil {
		t.Fatal(err)
	}
	if distinct != 2 {
		t.Errorf("after a policy reload: %d drop-down checks, want 2", distinct)
	}
}

// TestTimeSlot: the slot is response_time doubled until it covers the
// work bound at work_rate; a bound beyond statement_timeout is refused
// (54000) before any charge.
func TestTimeSlot(t *testing.T) {
	env, _ := testEnv(t)
	st, err := Prepare(env, testSettings(), nil, "SELECT COUNT(*) FROM visits")
	if err != nil {
		t.Fatal(err)
	}
	rows := st.Plan.Work.Rows
	if rows <= 0 {
		t.Fatalf("plan has no work bound")
	}
	if d, err := TimeSlot(env, st.Plan); d != 0 || err != nil {
		t.Errorf("no response_time: slot %v, %v; want none", d, err)
	}
	env.ResponseTime = 100 * time.Millisecond
	env.WorkRate = float64(rows) / 0.3 // 300 ms of work: 100 → 200 → 400 ms
	if d, err := TimeSlot(env, st.Plan); d != 400*time.Millisecond || err != nil {
		t.Errorf("slot %v, %v; want 400ms", d, err)
	}
	env.StatementTimeout = 200 * time.Millisecond
	_, err = TimeSlot(env, st.Plan)
	if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.ProgramLimitExceeded || pe.Hint == "" {
		t.Errorf("work over statement_timeout: %v, want 54000 with a hint", err)
	}
	a, err := Explain(env, testSettings(), st)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(answerText(a), "Time slot: refused before the charge") {
		t.Errorf("EXPLAIN does not show the refused slot:\n%s", answerText(a))
	}
}

// TestTimeSlot_Candidates: a private key's candidate groups count in the
// slot at dpplan.CandidateCost each, as many as the scan has rows (how
// many there are comes from the data), and past the statement time-out
// the query is refused before any charge.
func TestTimeSlot_Candidates(t *testing.T) {
	env, _ := testEnv(t)
	public, err := Prepare(env, testSettings(), nil, "SELECT department, COUNT(*) FROM visits GROUP BY department")
	if err != nil {
		t.Fatal(err)
	}
	private, err := Prepare(env, testSettings(), nil, "SELECT diagnosis, COUNT(*) FROM visits GROUP BY diagnosis")
	if err != nil {
		t.Fatal(err)
	}
	if !private.Plan.PrivateGroups() || public.Plan.PrivateGroups() {
		t.Fatalf("premise: diagnosis has no public values, department has")
	}
	w := private.Plan.Work
	if w.Candidates <= 0 || w.Rows != public.Plan.Work.Rows || public.Plan.Work.Candidates != 0 {
		t.Fatalf("work: private key %+v, public keys %+v", w, public.Plan.Work)
	}
	env.ResponseTime = 100 * time.Millisecond
	env.WorkRate = float64(w.Rows) / 0.15 // 150 ms of rows: a 200 ms slot
	if d, err := TimeSlot(env, public.Plan); d != 200*time.Millisecond || err != nil {
		t.Errorf("public keys: slot %v, %v; want 200ms", d, err)
	}
	cand := time.Duration(w.Candidates) * dpplan.CandidateCost
	want := 200 * time.Millisecond
	for want < 150*time.Millisecond+cand {
		want *= 2
	}
	if d, err := TimeSlot(env, private.Plan); d != want || err != nil {
		t.Errorf("a private key: slot %v, %v; want %v (150ms of rows and %v of candidates)", d, err, want, cand)
	}
	env.StatementTimeout = 150*time.Millisecond + cand/2
	if _, err := TimeSlot(env, public.Plan); err != nil {
		t.Errorf("public keys within the time-out: %v", err)
	}
	_, err = TimeSlot(env, private.Plan)
	if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.ProgramLimitExceeded || !strings.Contains(pe.Message, "candidate groups") || !strings.Contains(pe.Hint, "public values") {
		t.Errorf("candidates over statement_timeout: %v, want 54000 naming the candidate groups", err)
	}
}

func answerText(a *Answer) string {
	var b strings.Builder
	for _, r := range a.Rows {
		for _, v := range r {
			if v != nil {
				b.WriteString(*v + "\n")
			}
		}
	}
	return b.String()
}

// TestCheckPost: the leaves of a post-processing statement are checked
// together against the remaining budget before any charge (53400), and
// leaves the answer cache answers cost nothing.
func TestCheckPost(t *testing.T) {
	env, _ := testEnv(t)
	s := testSettings() // ε 0.5 per leaf
	st, err := Prepare(env, s, nil, "SELECT COUNT(*) AS n FROM visits UNION ALL SELECT COUNT(*) FROM patients")
	if err != nil {
		t.Fatal(err)
	}
	status := func(remaining float64) func(context.Context) (accountant.Status, error) {
		return func(context.Context) (accountant.Status, error) {
			return accountant.Status{Dataset: "hospital", Limit: accountant.Spent{Epsilon: 10, Delta: 1e-5}, Spent: accountant.Spent{Epsilon: 10 - remaining}}, nil
		}
	}
	run, err := CheckPost(context.Background(), env, s, st, status(1), nil)
	if err != nil || len(run.Requests) != 2 || !run.Charges {
		t.Fatalf("two leaves of ε 0.5 in a remaining ε 1: %+v, %v", run, err)
	}
	_, err = CheckPost(context.Background(), env, s, st, status(0.9), nil)
	if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.ConfigurationLimit || !strings.Contains(pe.Detail, "nothing was charged") {
		t.Fatalf("two leaves of ε 0.5 in a remaining ε 0.9: %v, want 53400", err)
	}
	cachedAll := func(context.Context, release.Request) bool { return true }
	run, err = CheckPost(context.Background(), env, s, st, status(0), cachedAll)
	if err != nil || run.Charges {
		t.Fatalf("cached leaves: %+v, %v; want no charge", run, err)
	}
}

// TestOuter: released rows are bound as text arrays (quotes and
// backslashes escaped, NULL kept), each leaf's NOTICE names its leaf.
func TestOuter(t *testing.T) {
	env, _ := testEnv(t)
	st, err := Prepare(env, testSettings(), nil, "SELECT * FROM (SELECT DISTINCT department FROM visits) d JOIN (SELECT department, COUNT(*) AS c FROM visits GROUP BY department) a USING (department)")
	if err != nil {
		t.Fatal(err)
	}
	v := func(s string) *string { return &s }
	res := &release.Result{Rows: [][]*string{{v(`a"b\c`), v("12")}, {v("x"), nil}}, Notice: "dp: cost ε=0.5"}
	params, notices, err := Outer(st, []*release.Result{res})
	if err != nil {
		t.Fatal(err)
	}
	if len(params) != 3 || !strings.HasPrefix(string(params[0]), `{"cardiology",`) ||
		string(params[1]) != `{"a\"b\\c","x"}` || string(params[2]) != `{"12",NULL}` {
		t.Errorf("params = %q", params)
	}
	if len(notices) != 2 || !strings.HasSuffix(notices[0], "[DP aggregate 1 of 2]") || !strings.Contains(notices[1], "[DP aggregate 2 of 2: SELECT department") {
		t.Errorf("notices = %q", notices)
	}
	if _, _, err := Outer(st, nil); err == nil {
		t.Error("Outer without the leaf's result: no error")
	}
}

// TestFromResult_ErrorColumns: with SET dp.error_columns = on, each
// released column but the keys is followed by its cells' half-widths
// (NULL where there are none, all NULL for an answer cached before widths
// were kept); Describe's columns (Columns) are the same.
func TestFromResult_ErrorColumns(t *testing.T) {
	env, _ := testEnv(t)
	s := testSettings()
	s.ErrorColumns = true
	st, err := Prepare(env, s, nil, "SELECT department, COUNT(*) AS n, AVG(cost) AS mean FROM visits GROUP BY department")
	if err != nil {
		t.Fatal(err)
	}
	v := func(s string) *string { return &s }
	res := &release.Result{
		Columns: []release.Column{{Name: "department", PGType: "text"}, {Name: "n", PGType: "int8"}, {Name: "mean", PGType: "numeric"}},
		Rows:    [][]*string{{v("cardiology"), v("120"), v("410.5")}, {v("surgery"), v("3"), nil}},
		Widths:  [][]*string{{nil, v("30"), v("95.2")}, {nil, v("30"), nil}},
	}
	a, err := FromResult(st, s, res)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range a.Columns {
		names = append(names, c.Name+":"+c.PGType)
	}
	want := "department:text,n:int8,n_moe95:numeric,mean:numeric,mean_moe95:numeric"
	if got := strings.Join(names, ","); got != want {
		t.Fatalf("columns %s, want %s", got, want)
	}
	var desc []string
	for _, c := range st.Columns(s) {
		desc = append(desc, c.Name+":"+c.PGType)
	}
	if got := strings.Join(desc, ","); got != want {
		t.Errorf("Describe's columns %s, want %s", got, want)
	}
	row := func(r []*string) string {
		var out []string
		for _, x := range r {
			if x == nil {
				out = append(out, "NULL")
			} else {
				out = append(out, *x)
			}
		}
		return strings.Join(out, ",")
	}
	if got := row(a.Rows[0]) + "|" + row(a.Rows[1]); got != "cardiology,120,30,410.5,95.2|surgery,3,30,NULL,NULL" {
		t.Errorf("rows %s", got)
	}
	res.Widths = nil // an answer cached before widths were kept
	if a, _ = FromResult(st, s, res); row(a.Rows[0]) != "cardiology,120,NULL,410.5,NULL" {
		t.Errorf("old cached answer: %s", row(a.Rows[0]))
	}
	s.ErrorColumns = false
	if a, _ = FromResult(st, s, res); len(a.Columns) != 3 {
		t.Errorf("error columns without dp.error_columns: %d columns", len(a.Columns))
	}
}

// TestFromResult_Warnings: the plan's warnings (a value compared with
// that its column does not declare) reach the client as NOTICEs before the
// release's own.
func TestFromResult_Warnings(t *testing.T) {
	env, _ := testEnv(t)
	s := testSettings()
	st, err := Prepare(env, s, nil, "SELECT COUNT(*) FROM visits WHERE department = 'Oncology'")
	if err != nil {
		t.Fatal(err)
	}
	v := func(s string) *string { return &s }
	res := &release.Result{Columns: []release.Column{{Name: "count", PGType: "int8"}}, Rows: [][]*string{{v("3")}}, Notice: "dp: epsilon 0.1 spent"}
	a, err := FromResult(st, s, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Notices) != 2 || !strings.Contains(a.Notices[0], "'Oncology' is not one of the values") || a.Notices[1] != res.Notice {
		t.Errorf("notices %q, want the warning then the release's", a.Notices)
	}
}
