package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5/pgconn"
)

// memLedger is an in-memory accountant.Store with pure composition.
type memLedger struct {
	mu       sync.Mutex
	limit    float64
	spent    float64
	reserved []accountant.Charge
	released map[int64][]byte
	// incidents recorded (RecordIncident), and the breaker: suspended once
	// their number reaches the policy's incident limit.
	incidents    []accountant.Incident
	suspended    bool
	failIncident bool // RecordIncident fails (the ledger is down)
}

func (l *memLedger) RecordIncident(_ context.Context, ds *policy.Dataset, inc accountant.Incident) (accountant.IncidentResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failIncident {
		return accountant.IncidentResult{}, errors.New("ledger down")
	}
	l.incidents = append(l.incidents, inc)
	if len(l.incidents) >= max(ds.Budget.IncidentLimit, 1) {
		l.suspended = true
	}
	return accountant.IncidentResult{Incidents: len(l.incidents), Suspended: l.suspended}, nil
}

func (l *memLedger) Reserve(_ context.Context, c accountant.Charge) (*accountant.Reservation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.suspended {
		return nil, pgerr.New(pgerr.InsufficientPrivilege, "suspended").Wrap(accountant.ErrSuspended)
	}
	cost := 0.0
	for _, e := range c.Events {
		cost += e.Epsilon
	}
	if l.spent+cost > l.limit+1e-12 {
		return nil, pgerr.New(pgerr.ConfigurationLimit, "privacy budget exhausted").Wrap(accountant.ErrBudgetExhausted)
	}
	l.spent += cost
	l.reserved = append(l.reserved, c)
	return &accountant.Reservation{
		ID:     int64(len(l.reserved)),
		Cost:   accountant.Spent{Epsilon: cost},
		Status: accountant.Status{Dataset: c.Dataset, Accountant: "pure", Spent: accountant.Spent{Epsilon: l.spent}, Limit: accountant.Spent{Epsilon: l.limit}},
	}, nil
}

func (l *memLedger) Release(_ context.Context, res *accountant.Reservation, answer []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released == nil {
		l.released = map[int64][]byte{}
	}
	l.released[res.ID] = answer
	return nil
}

func (l *memLedger) Status(_ context.Context, _ string, ds *policy.Dataset) (accountant.Status, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return accountant.Status{Dataset: ds.Name, Accountant: "pure", Spent: accountant.Spent{Epsilon: l.spent}, Limit: accountant.Spent{Epsilon: l.limit}}, nil
}

func (l *memLedger) Cached(_ context.Context, dataset, fingerprint, version string) ([]byte, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := int64(len(l.reserved)); id >= 1; id-- {
		c := l.reserved[id-1]
		if a, ok := l.released[id]; ok && c.Dataset == dataset && c.Fingerprint == fingerprint && c.PolicyVersion == version {
			return a, true, nil
		}
	}
	return nil, false, nil
}

// fakeUpstream returns fixed rows and records the SQL it was sent.
type fakeUpstream struct {
	rows  [][]*string
	err   error
	calls []string
	args  [][]any // the bind parameters of each call
}

func (u *fakeUpstream) Query(_ context.Context, sql string, args ...any) ([][]*string, error) {
	u.calls = append(u.calls, sql)
	u.args = append(u.args, args)
	return u.rows, u.err
}

func s(v string) *string { return &v }

func loadPolicy(t *testing.T) *policy.Dataset {
	t.Helper()
	d, err := policy.Load("../internal/testdata/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// groupedPlan is the plan of
//
//	SELECT department, COUNT(*), AVG(cost) FROM visits GROUP BY department
//
// as the rewriter builds it (hand-built here so release is tested alone).
func groupedPlan(ds *policy.Dataset) *rewrite.Plan {
	vis, _ := ds.Table("visits")
	dept, _ := vis.Column("department")
	return emitFor(ds, &rewrite.Plan{
		Dataset: "hospital", Table: "visits",
		Keys: []rewrite.Key{{Column: "department", Type: policy.TypeText, Domain: dept.PublicValues}},
		Measures: []rewrite.Measure{
			{Kind: rewrite.MeasureCount, Integer: true, LInf: 5},
			{Kind: rewrite.MeasureSum, Column: "cost", Lower: 0, Upper: 20000, LInf: 5 * 20000},
			{Kind: rewrite.MeasureCount, Column: "cost", Integer: true, LInf: 5},
		},
		Outputs: []rewrite.Output{
			{Name: "department", Kind: rewrite.OutputKey, Key: 0, PGType: "text"},
			{Name: "count", Kind: rewrite.OutputCount, Measure: 0, PGType: "int8"},
			{Name: "avg", Kind: rewrite.OutputAvg, Measure: 1, CountMeasure: 2, PGType: "numeric", Lower: 0, Upper: 20000},
		},
		MaxGroupsPerUnit: 4, Limit: -1, Fingerprint: "fp1",
	})
}

// emitFor gives a hand-built plan what the planner gives every plan: the
// emitter's inputs (the policy table with the plan's rows per unit, no
// WHERE), the SQL pgemit writes from them and the work bound, which release
// verifies (verify.go). The fake upstreams answer whatever the SQL.
func emitFor(ds *policy.Dataset, p *dpplan.Plan) *dpplan.Plan {
	pt, _ := ds.Table(p.Table)
	v := *pt
	if p.RowsPerUnit == 0 {
		p.RowsPerUnit = pt.MaxRowsPerUnit
	}
	v.MaxRowsPerUnit = p.RowsPerUnit
	dpplan.SetSource(p, &v, nil)
	p.SQL = pgemit.SQL(&v, p, nil)
	p.RowOps = dpplan.RowOpsOf(p, nil)
	p.Work = dpplan.WorkOf(ds, p)
	return p
}

func newTestReleaser(t *testing.T, l accountant.Store, seed uint64) *Releaser {
	t.Helper()
	r, err := New(Config{Ledger: l, Planner: rewrite.Replan})
	if err != nil {
		t.Fatal(err)
	}
	r.testOnlyRand = rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	return r
}

func TestRun_Grouped(t *testing.T) {
	ds := loadPolicy(t)
	plan := groupedPlan(ds)
	// True per-department figures; "neurology" and "surgery" have no rows.
	truth := map[string][3]string{
		"cardiology": {"30000", "45000000.50", "29990"},
		"emergency":  {"41000", "20500000", "41000"},
		"oncology":   {"12000", "96000000", "12000"},
		"pediatrics": {"25000", "12500000", "25000"},
	}
	up := &fakeUpstream{}
	for k, v := range truth {
		up.rows = append(up.rows, []*string{s(k), s(v[0]), s(v[1]), s(v[2])})
	}
	up.rows = append(up.rows, []*string{s("not-public"), s("5"), s("5"), s("5")})
	led := &memLedger{limit: 3}
	r := newTestReleaser(t, led, 1)
	res, err := r.Run(context.Background(), Request{Analyst: "alice", Dataset: ds, Plan: plan, Epsilon: 0.3, Mechanism: policy.MechanismLaplace, Upstream: up})
	if err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if len(up.calls) != 1 || up.calls[0] != plan.SQL {
		t.Fatalf("upstream calls = %q, want exactly the plan's SQL", up.calls)
	}
	// Every public key is released, in declared order, and nothing else.
	if len(res.Rows) != 7 {
		t.Fatalf("got %d rows, want the 7 public departments", len(res.Rows))
	}
	for i, row := range res.Rows {
		if *row[0] != plan.Keys[0].Domain[i] {
			t.Fatalf("row %d key = %s, want %s", i, *row[0], plan.Keys[0].Domain[i])
		}
	}
	// The query's ε is split equally over its 3 measurements.
	if len(led.reserved) != 1 || len(led.reserved[0].Events) != 3 {
		t.Fatalf("reserved = %+v", led.reserved)
	}
	total := 0.0
	for _, e := range led.reserved[0].Events {
		total += e.Epsilon
		if math.Abs(e.Epsilon-0.1) > 1e-12 {
			t.Fatalf("event ε = %v, want 0.1", e.Epsilon)
		}
	}
	if math.Abs(total-0.3) > 1e-12 {
		t.Fatalf("charged ε = %v, want 0.3", total)
	}
	// Counts: discrete Laplace of scale b = L1/ε_i = (4·5)/0.1 = 200.
	// P(|Z| ≥ k) ≤ 2·e^{−k/b}, so k = b·ln(2/1e-9) fails with probability
	// ≤ 1e-9 per cell (7 cells: ≤ 7e-9 for the test).
	b := 200.0
	k := b * math.Log(2/1e-9)
	for _, row := range res.Rows {
		want := 0.0
		if v, ok := truth[*row[0]]; ok {
			want, _ = strconv.ParseFloat(v[0], 64)
		}
		got, err := strconv.ParseFloat(*row[1], 64)
		if err != nil || got < 0 || math.Abs(got-want) > k || strings.Contains(*row[1], ".") {
			t.Fatalf("count(%s) = %s, want a non-negative integer within %v of %v", *row[0], *row[1], k, want)
		}
		avg, err := strconv.ParseFloat(*row[2], 64)
		if err != nil || avg < 0 || avg > 20000 {
			t.Fatalf("avg(%s) = %s, want a number in the policy bounds", *row[0], *row[2])
		}
	}
	// The NOTICE gives each output's half-width and the ε of the
	// measurements it rests on: count 1 (0.1), avg 2 (0.2). The count's
	// half-width is that of a discrete Laplace of scale 200:
	// 200·ln(1/0.05) ≈ 599. The average's depends on each group's noisy
	// count: the widest first, then each group's.
	if !regexp.MustCompile(`^dp: epsilon 0\.3 spent \(pure\), 2\.7 of 3 remaining; 95% error ±599 \(count, epsilon 0\.1\), ±[0-9.]+ \(avg, epsilon 0\.2; per group: cardiology ±[0-9.]+, emergency ±[0-9.]+, neurology ±[0-9.]+, oncology ±[0-9.]+, orthopedics ±[0-9.]+, pediatrics ±[0-9.]+, surgery ±[0-9.]+\)(?:; avg: [a-z, ]+ came out at an edge of the range \(noise, or a true value near that edge\), each saying only that the average lies in \[0, 20000\])?$`).MatchString(res.Notice) {
		t.Fatalf("Notice = %q", res.Notice)
	}
	if _, ok := led.released[res.ReservationID]; !ok {
		t.Fatalf("answer not recorded on reservation %d", res.ReservationID)
	}
	if got := []Column{{"department", "text"}, {"count", "int8"}, {"avg", "numeric"}}; len(res.Columns) != 3 || res.Columns[1] != got[1] {
		t.Fatalf("Columns = %+v", res.Columns)
	}
}

func TestRun_ExhaustedReadsNothing(t *testing.T) {
	ds := loadPolicy(t)
	up := &fakeUpstream{}
	led := &memLedger{limit: 0.05}
	r := newTestReleaser(t, led, 2)
	_, err := r.Run(context.Background(), Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace, Upstream: up})
	pe, ok := pgerr.As(err)
	if !ok || pe.Code != pgerr.ConfigurationLimit {
		t.Fatalf("Run() = %v, want 53400", err)
	}
	if len(up.calls) != 0 {
		t.Fatalf("upstream was queried %d times after a refused reservation", len(up.calls))
	}
}

// panicUpstream panics when queried (after the charge).
type panicUpstream struct{}

func (panicUpstream) Query(context.Context, string, ...any) ([][]*string, error) {
	panic("upstream exploded with secret-value-42")
}

// TestRun_IncidentIsOneFixedError: whatever fails after the charge — an
// upstream error with any SQLSTATE and text, an upstream or proxy timeout,
// a value the release cannot read, a panic — the analyst gets the same
// error, field for field, the charge stands, the ledger records an
// incident (SQLSTATE kept, text never), and the breaker (incident_limit 1)
// refuses the next query before anything is read.
func TestRun_IncidentIsOneFixedError(t *testing.T) {
	ds := loadPolicy(t)
	bad := s("secret-value-42") // not a number: the release cannot read it
	cases := []struct {
		name  string
		up    Upstream
		kind  string
		state string
	}{
		{"data error", &fakeUpstream{err: &pgconn.PgError{Code: "22012", Message: "division by zero secret-value-42"}}, "upstream", "22012"},
		{"LIKE escape", &fakeUpstream{err: &pgconn.PgError{Code: "22025", Message: "LIKE pattern must not end with escape character"}}, "upstream", "22025"},
		{"upstream timeout", &fakeUpstream{err: &pgconn.PgError{Code: "57014", Message: "canceling statement due to statement timeout"}}, "timeout", "57014"},
		{"proxy timeout", &fakeUpstream{err: fmt.Errorf("upstream: %w", context.DeadlineExceeded)}, "timeout", ""},
		{"unreadable value", &fakeUpstream{rows: [][]*string{{s("cardiology"), bad, s("1")}}}, "result", pgerr.InternalError},
		{"panic", panicUpstream{}, "panic", ""},
	}
	var first *pgerr.Error
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			led := &memLedger{limit: 3}
			r := newTestReleaser(t, led, 3)
			req := Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace, Upstream: c.up}
			_, err := r.Run(context.Background(), req)
			pe, ok := pgerr.As(err)
			if !ok || !errors.Is(err, ErrIncident) {
				t.Fatalf("Run() = %v, want the incident error", err)
			}
			if first == nil {
				first = pe
			}
			if pe.Code != first.Code || pe.Message != first.Message || pe.Detail != first.Detail || pe.Hint != first.Hint || pe.Position != first.Position {
				t.Fatalf("incident error %+v differs from %+v", pe, first)
			}
			if pe.Code != pgerr.InternalError || pe.Message != IncidentMessage {
				t.Fatalf("incident error %s %q", pe.Code, pe.Message)
			}
			if math.Abs(led.spent-0.1) > 1e-12 || len(led.released) != 0 {
				t.Fatalf("spent = %v, released = %d; want the charge to stand with no answer", led.spent, len(led.released))
			}
			if len(led.incidents) != 1 {
				t.Fatalf("%d incidents recorded, want 1", len(led.incidents))
			}
			inc := led.incidents[0]
			if inc.Kind != c.kind || inc.SQLState != c.state || inc.Analyst != "alice" || inc.ChargeID != 1 || inc.Fingerprint == "" {
				t.Fatalf("incident %+v, want kind %s, SQLSTATE %q", inc, c.kind, c.state)
			}
			// The breaker is open: the next query is refused before the
			// upstream is asked anything, and nothing more is charged.
			up := &fakeUpstream{}
			req.Upstream, req.Epsilon = up, 0.2
			_, err = r.Run(context.Background(), req)
			if !errors.Is(err, accountant.ErrSuspended) || len(up.calls) != 0 || math.Abs(led.spent-0.1) > 1e-12 {
				t.Fatalf("after an incident: Run() = %v, %d upstream calls, spent %v", err, len(up.calls), led.spent)
			}
		})
	}
}

// TestRun_IncidentLimit: with budget.incident_limit 3, the third incident
// opens the breaker.
func TestRun_IncidentLimit(t *testing.T) {
	ds := loadPolicy(t)
	ds.Budget.IncidentLimit = 3
	led := &memLedger{limit: 3}
	r := newTestReleaser(t, led, 3)
	for i := 1; i <= 4; i++ {
		up := &fakeUpstream{err: &pgconn.PgError{Code: "22012"}}
		_, err := r.Run(context.Background(), Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds),
			Epsilon: 0.1 * float64(i), Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true})
		switch {
		case i <= 3 && !errors.Is(err, ErrIncident):
			t.Fatalf("query %d: %v, want an incident", i, err)
		case i == 4 && (!errors.Is(err, accountant.ErrSuspended) || len(up.calls) != 0):
			t.Fatalf("query 4: %v (%d upstream calls), want suspended before the upstream", err, len(up.calls))
		}
	}
}

// TestRun_IncidentLedgerDown: when the ledger cannot record an incident,
// the releaser suspends the analyst on the dataset itself, so an outage of
// the ledger does not make the breaker forget.
func TestRun_IncidentLedgerDown(t *testing.T) {
	ds := loadPolicy(t)
	led := &memLedger{limit: 3, failIncident: true}
	r := newTestReleaser(t, led, 3)
	req := Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace,
		Upstream: &fakeUpstream{err: &pgconn.PgError{Code: "22012"}}}
	if _, err := r.Run(context.Background(), req); !errors.Is(err, ErrIncident) {
		t.Fatalf("first query: %v, want the incident error", err)
	}
	up := &fakeUpstream{}
	req.Upstream, req.Epsilon = up, 0.2
	if _, err := r.Run(context.Background(), req); !errors.Is(err, accountant.ErrSuspended) || len(up.calls) != 0 || len(led.reserved) != 1 {
		t.Fatalf("after an unrecorded incident: %v, %d upstream calls, %d charges", err, len(up.calls), len(led.reserved))
	}
	// Another analyst is not affected.
	req.Analyst = "bob"
	if _, err := r.Run(context.Background(), req); err != nil {
		t.Fatalf("bob: %v", err)
	}
}

// TestRun_AvailabilityIsNotAnIncident: a lost or refused connection, a
// server shutting down, or the proxy's own shutdown (its context
// cancelled) do not depend on a row: their own error, no incident.
func TestRun_AvailabilityIsNotAnIncident(t *testing.T) {
	ds := loadPolicy(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for name, c := range map[string]struct {
		ctx context.Context
		err error
	}{
		"admin shutdown": {context.Background(), &pgconn.PgError{Code: "57P01"}},
		"connection":     {context.Background(), &pgconn.PgError{Code: "08006"}},
		"eof":            {context.Background(), fmt.Errorf("read: %w", io.ErrUnexpectedEOF)},
		"proxy shutdown": {cancelled, context.Canceled},
	} {
		led := &memLedger{limit: 3}
		_, err := newTestReleaser(t, led, 4).Run(c.ctx, Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace, Upstream: &fakeUpstream{err: c.err}})
		if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.SystemError || errors.Is(err, ErrIncident) {
			t.Errorf("%s: Run() = %v, want 58000", name, err)
		}
		if len(led.incidents) != 0 || led.suspended {
			t.Errorf("%s: recorded as an incident", name)
		}
	}
}

// TestRun_TimeoutUnderOthersLoad: a time-out after the charge while
// another analyst's query ran on the dataset (Request.Contended, the
// proxy's admission) is an availability failure: 57014, the charge stands,
// no incident and no suspension, so one analyst cannot get another
// suspended by loading the data server (issue 27). Alone, the same
// time-out stays the analyst's incident; a data error under load does too.
func TestRun_TimeoutUnderOthersLoad(t *testing.T) {
	ds := loadPolicy(t)
	timeout := &pgconn.PgError{Code: "57014", Message: "canceling statement due to statement timeout"}
	for _, c := range []struct {
		name      string
		err       error
		contended bool
		incident  bool
	}{
		{"server timeout under load", timeout, true, false},
		{"proxy deadline under load", fmt.Errorf("upstream: %w", context.DeadlineExceeded), true, false},
		{"timeout alone", timeout, false, true},
		{"data error under load", &pgconn.PgError{Code: "22012"}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			led := &memLedger{limit: 3}
			r := newTestReleaser(t, led, 3)
			req := Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace,
				Upstream: &fakeUpstream{err: c.err}, Contended: func() bool { return c.contended }}
			_, err := r.Run(context.Background(), req)
			if got := errors.Is(err, ErrIncident); got != c.incident {
				t.Fatalf("Run() = %v, incident %v, want %v", err, got, c.incident)
			}
			if !c.incident {
				if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.QueryCanceled {
					t.Fatalf("Run() = %v, want 57014", err)
				}
				if len(led.incidents) != 0 || led.suspended {
					t.Fatal("a time-out under others' load was recorded as an incident")
				}
				if math.Abs(led.spent-0.1) > 1e-12 {
					t.Fatalf("spent %v, want the charge to stand", led.spent)
				}
				// Not suspended: the next query runs.
				req.Upstream, req.Contended, req.NoCache = &fakeUpstream{rows: [][]*string{{s("cardiology"), s("10"), s("100"), s("10")}}}, nil, true
				if _, err := r.Run(context.Background(), req); errors.Is(err, accountant.ErrSuspended) {
					t.Fatalf("suspended after a time-out under load: %v", err)
				}
			}
		})
	}
}

func TestRun_RejectsUnderstatedSensitivity(t *testing.T) {
	ds := loadPolicy(t)
	plan := groupedPlan(ds)
	plan.Measures[1].LInf = 1 // the policy implies 5·20000
	led := &memLedger{limit: 3}
	up := &fakeUpstream{}
	_, err := newTestReleaser(t, led, 5).Run(context.Background(), Request{Analyst: "alice", Dataset: ds, Plan: plan, Epsilon: 0.1, Mechanism: policy.MechanismLaplace, Upstream: up})
	if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.InternalError {
		t.Fatalf("Run() = %v, want XX000", err)
	}
	if len(led.reserved) != 0 || len(up.calls) != 0 {
		t.Fatal("a plan with understated sensitivity was charged or run")
	}
}

func TestRun_BadSettings(t *testing.T) {
	ds := loadPolicy(t)
	tests := []struct {
		name  string
		eps   float64
		delta float64
		mech  string
	}{
		{"zero epsilon", 0, 0, policy.MechanismLaplace},
		{"nan epsilon", math.NaN(), 0, policy.MechanismLaplace},
		{"gaussian without delta", 0.1, 0, policy.MechanismGaussian},
		{"unknown mechanism", 0.1, 0, "exponential"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			led := &memLedger{limit: 3}
			_, err := newTestReleaser(t, led, 6).Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: groupedPlan(ds), Epsilon: tt.eps, Delta: tt.delta, Mechanism: tt.mech, Upstream: &fakeUpstream{}})
			if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.InvalidParameterValue || pe.Hint == "" {
				t.Fatalf("Run() = %v, want 22023 with a hint", err)
			}
			if len(led.reserved) != 0 {
				t.Fatal("a bad request was charged")
			}
		})
	}
}

func TestOrderAndLimit(t *testing.T) {
	n := func(x int64) value { return value{num: big.NewRat(x, 1)} }
	k := func(x string) value { return value{key: &x} }
	rows := [][]value{{k("a"), n(5)}, {k("b"), n(9)}, {k("c"), {null: true}}, {k("d"), n(1)}}
	plan := &rewrite.Plan{OrderBy: []rewrite.OrderItem{{Output: 1, Desc: true}}, Limit: 2, Offset: 1}
	got := orderAndLimit(plan, rows)
	// DESC puts NULL first (PostgreSQL's default), then 9, 5, 1; OFFSET 1
	// LIMIT 2 keeps 9 and 5.
	if len(got) != 2 || *got[0][0].key != "b" || *got[1][0].key != "a" {
		t.Fatalf("orderAndLimit = %v", got)
	}
}

func TestValueText(t *testing.T) {
	tests := []struct {
		v    value
		want string
	}{
		{value{num: big.NewRat(12, 1), decimals: -1}, "12"},
		{value{num: big.NewRat(-7, 4), decimals: -1}, "-1.75"},
		{value{num: big.NewRat(1, 1024), decimals: -1}, "0.0009765625"},
		{value{num: big.NewRat(2, 3), decimals: 6}, "0.666667"},
		{value{num: big.NewRat(5, 2), decimals: 6}, "2.5"},
	}
	for _, tt := range tests {
		if got := *tt.v.text(); got != tt.want {
			t.Errorf("text(%v) = %s, want %s", tt.v.num, got, tt.want)
		}
	}
}

func TestAverageClamped(t *testing.T) {
	got := average(big.NewRat(-500, 1), big.NewRat(-3, 1), 0, 100)
	if got.Sign() != 0 {
		t.Fatalf("average = %v, want clamped to 0", got)
	}
	got = average(big.NewRat(5000, 1), big.NewRat(10, 1), 0, 100)
	if got.Cmp(big.NewRat(100, 1)) != 0 {
		t.Fatalf("average = %v, want clamped to 100", got)
	}
}

func TestNum(t *testing.T) {
	for x, want := range map[float64]string{2.9000000000000004: "2.9", 0.1: "0.1", 3: "3", 123456.7: "123457", 1e-7: "1e-07", 0: "0"} {
		if got := num(x); got != want {
			t.Errorf("num(%v) = %s, want %s", x, got, want)
		}
	}
}

func TestSplitDown(t *testing.T) {
	for _, x := range []float64{0.1, 0.3, 1, 3, 0.7, 1e-6, 2.9} {
		for m := 1; m <= 12; m++ {
			e := splitDown(x, m)
			total := new(big.Rat).Mul(new(big.Rat).SetFloat64(e), big.NewRat(int64(m), 1))
			if total.Cmp(new(big.Rat).SetFloat64(x)) > 0 {
				t.Fatalf("splitDown(%v, %d) = %v: m·e exceeds x", x, m, e)
			}
			if math.Abs(e*float64(m)-x) > 1e-12*x {
				t.Fatalf("splitDown(%v, %d) = %v: too far below x/m", x, m, e)
			}
		}
	}
	if splitDown(0, 3) != 0 {
		t.Fatal("splitDown(0, 3) != 0")
	}
}

func TestRun_AnswerCache(t *testing.T) {
	ds := loadPolicy(t)
	up := &fakeUpstream{rows: [][]*string{{s("oncology"), s("10"), s("100"), s("10")}}}
	led := &memLedger{limit: 3}
	r := newTestReleaser(t, led, 7)
	req := Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace, Upstream: up}
	first, err := r.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	// The same query again: the stored noisy answer, at no cost, without
	// touching the data.
	again, err := r.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cached || len(up.calls) != 1 || len(led.reserved) != 1 {
		t.Fatalf("second run: cached=%v, upstream calls %d, charges %d; want a free cached answer", again.Cached, len(up.calls), len(led.reserved))
	}
	for i := range first.Rows {
		for j := range first.Rows[i] {
			if *first.Rows[i][j] != *again.Rows[i][j] {
				t.Fatalf("cached answer differs at row %d col %d", i, j)
			}
		}
	}
	if !strings.HasPrefix(again.Notice, "dp: cached answer, epsilon 0 spent (pure), 2.9 of 3 remaining; 95% error ±") {
		t.Fatalf("cached Notice = %q", again.Notice)
	}
	// Another ε, another analyst, or dp.cache = off: charged afresh.
	for _, change := range []func(*Request){
		func(q *Request) { q.Epsilon = 0.2 },
		func(q *Request) { q.Analyst = "bob" },
		func(q *Request) { q.NoCache = true },
	} {
		q := req
		change(&q)
		res, err := r.Run(context.Background(), q)
		if err != nil || res.Cached {
			t.Fatalf("Run(%+v) = cached %v, %v; want a fresh answer", q.Epsilon, res != nil && res.Cached, err)
		}
	}
	if len(led.reserved) != 4 {
		t.Fatalf("charges = %d, want 4", len(led.reserved))
	}
}

func TestKeyText(t *testing.T) {
	for _, tt := range []struct{ typ, in, want string }{
		{"bool", "true", "t"}, {"bool", "false", "f"}, {"text", "true", "true"}, {"int4", "5", "5"},
	} {
		if got := keyText(tt.typ, tt.in); got != tt.want {
			t.Errorf("keyText(%s, %s) = %s, want %s", tt.typ, tt.in, got, tt.want)
		}
	}
}

// TestRun_RowsPerUnitWithinPolicy: release checks the plan's per-query
// contribution bounds against the policy before any charge: an ungrouped
// plan may keep the unit's whole allowance (4·5 rows), a grouped one at
// most 5 per group, and no plan more groups per unit than the policy's 4.
func TestRun_RowsPerUnitWithinPolicy(t *testing.T) {
	ds := loadPolicy(t)
	ungrouped := func(rows int) *rewrite.Plan {
		return emitFor(ds, &rewrite.Plan{Dataset: "hospital", Table: "visits", MaxGroupsPerUnit: 1, RowsPerUnit: rows,
			Measures: []rewrite.Measure{{Kind: rewrite.MeasureCount, Integer: true, LInf: float64(rows)}},
			Outputs:  []rewrite.Output{{Name: "count", Kind: rewrite.OutputCount, Measure: 0, PGType: "int8"}}})
	}
	grouped := groupedPlan(ds)
	grouped.RowsPerUnit = 20
	grouped.Measures[0].LInf, grouped.Measures[1].LInf = 20, 20*20000
	grouped = emitFor(ds, grouped)
	wideL0 := groupedPlan(ds)
	wideL0.MaxGroupsPerUnit = 5
	for name, c := range map[string]struct {
		plan *rewrite.Plan
		ok   bool
	}{
		"ungrouped, whole allowance": {ungrouped(20), true},
		"ungrouped, tightened":       {ungrouped(3), true},
		"ungrouped, beyond":          {ungrouped(21), false},
		"grouped, 20 per group":      {grouped, false},
		"L0 beyond the policy":       {wideL0, false},
	} {
		led := &memLedger{limit: 3}
		up := &fakeUpstream{rows: [][]*string{{s("7")}}}
		_, err := newTestReleaser(t, led, 9).Run(context.Background(), Request{Analyst: "alice", Dataset: ds, Plan: c.plan, Epsilon: 0.1, Mechanism: policy.MechanismLaplace, Upstream: up})
		if c.ok && err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !c.ok && (err == nil || len(led.reserved) != 0 || len(up.calls) != 0) {
			t.Errorf("%s: %v with %d charges, %d upstream calls; want refused before the charge", name, err, len(led.reserved), len(up.calls))
		}
	}
}

// TestRun_PublishAtHidesUpstreamTime: an answer enters the cache only at
// its PublishAt (the padded response time), so an identical query that
// starts while the first waits gets no cached answer whether or not the
// first's upstream query had finished (issue 14: the cache was a timing
// oracle); once published, it is answered from the cache.
func TestRun_PublishAtHidesUpstreamTime(t *testing.T) {
	ds := loadPolicy(t)
	led := &memLedger{limit: 3}
	r := newTestReleaser(t, led, 11)
	up := &fakeUpstream{rows: [][]*string{{s("cardiology"), s("10"), s("100"), s("10")}}}
	req := Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace, Upstream: up,
		PublishAt: time.Now().Add(400 * time.Millisecond)}
	first := make(chan error, 1)
	go func() {
		_, err := r.Run(context.Background(), req)
		first <- err
	}()
	time.Sleep(100 * time.Millisecond) // the first's upstream has long finished
	second := req
	second.PublishAt = time.Time{}
	second.Upstream = &fakeUpstream{rows: up.rows} // its own (no shared state with the first goroutine)
	res, err := r.Run(context.Background(), second)
	if err != nil || res.Cached {
		t.Fatalf("second run while the first waits: cached=%v, %v; want a charged answer", res != nil && res.Cached, err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	res, err = r.Run(context.Background(), second)
	if err != nil || !res.Cached {
		t.Fatalf("after publication: cached=%v, %v", res != nil && res.Cached, err)
	}
}
