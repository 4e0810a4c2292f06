package admin

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/ledger"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/xdg-go/scram"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// verifier makes a SCRAM-SHA-256 verifier as `dpproxy passwd` does.
func verifier(t *testing.T, password string) string {
	t.Helper()
	cl, err := scram.SHA256.NewClient("", password, "")
	if err != nil {
		t.Fatal(err)
	}
	salt := "0123456789abcdef"
	sc, err := cl.GetStoredCredentialsWithError(scram.KeyFactors{Salt: salt, Iters: 4096})
	if err != nil {
		t.Fatal(err)
	}
	enc := func(b []byte) string { return b64(b) }
	return "SCRAM-SHA-256$4096:" + enc([]byte(salt)) + "$" + enc(sc.StoredKey) + ":" + enc(sc.ServerKey)
}

func TestCredential(t *testing.T) {
	v := verifier(t, "correct horse")
	tests := []struct {
		name, user, password, tryUser, tryPassword string
		want                                       bool
	}{
		{"verifier, right", "steward", v, "steward", "correct horse", true},
		{"verifier, wrong password", "steward", v, "steward", "correct horsE", false},
		{"verifier, wrong user", "steward", v, "alice", "correct horse", false},
		{"plain, right", "steward", "plain:s3cret", "steward", "s3cret", true},
		{"plain, empty tried", "steward", "plain:s3cret", "steward", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := newCredential(tt.user, tt.password)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.check(tt.tryUser, tt.tryPassword); got != tt.want {
				t.Errorf("check(%q, %q) = %v, want %v", tt.tryUser, tt.tryPassword, got, tt.want)
			}
		})
	}
	for _, bad := range []struct{ user, password, want string }{
		{"", "plain:x", "admin.user"},
		{"steward", "hunter2", "dpproxy passwd steward"},
		{"steward", "plain:", "needs a password"},
		{"steward", "SCRAM-SHA-256$x:y$z", "bad iteration count"},
	} {
		if _, err := newCredential(bad.user, bad.password); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("newCredential(%q, %q) = %v, want an error naming %q", bad.user, bad.password, err, bad.want)
		}
	}
}

// TestCredential_Bounded: password derivations, the endpoint's cost to
// anyone who can reach it, are at most checksPerAddress a second from one
// address (429 beyond, without a derivation); the steward's accepted password is
// remembered, so their requests go on while wrong ones are refused.
func TestCredential_Bounded(t *testing.T) {
	c, err := newCredential("steward", "plain:s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if ok, busy := c.verify("192.0.2.1", "steward", "s3cret"); !ok || busy {
		t.Fatalf("the right password: ok %v, busy %v", ok, busy)
	}
	busy := 0
	for i := range 100 {
		ok, b := c.verify("192.0.2.1", "steward", "guess"+strconv.Itoa(i))
		if ok {
			t.Fatal("a wrong password was accepted")
		}
		if b {
			busy++
		}
	}
	// The bucket refills at checksPerAddress while the loop runs: allow a
	// second's worth more than its burst.
	if derived := 100 - busy; derived > 3*checksPerAddress {
		t.Errorf("%d derivations for %d wrong passwords at once from one address, bound about %d", derived, 100, 2*checksPerAddress)
	}
	if ok, b := c.verify("192.0.2.1", "steward", "s3cret"); !ok || b {
		t.Errorf("the steward's password while guesses are refused: ok %v, busy %v", ok, b)
	}
	if ok, _ := c.verify("192.0.2.1", "alice", "s3cret"); ok {
		t.Error("the remembered password was accepted for another user")
	}
}

// TestMetrics_StatementAllocatesNothing: the forwarding path's hook costs
// no allocation for a successful statement (the benchmarks compare the
// proxy with PgBouncer).
func TestMetrics_StatementAllocatesNothing(t *testing.T) {
	m := NewMetrics([]string{"hospital"})
	allocs := testing.AllocsPerRun(1000, func() {
		m.Statement("catalog", "", "hospital", time.Millisecond, nil)
		m.Statement("dp", "", "hospital", 3*time.Millisecond, &DPAnswer{CostEpsilon: 0.1})
	})
	if allocs != 0 {
		t.Errorf("Statement allocates %v times per call pair, want 0", allocs)
	}
	m.Statement("dp", "53400", "hospital", time.Millisecond, nil)
	if allocs := testing.AllocsPerRun(1000, func() { m.Statement("dp", "53400", "hospital", time.Millisecond, nil) }); allocs > 2 {
		t.Errorf("a refused statement allocates %v times, want ≤ 2", allocs)
	}
}

// TestMetrics_ChargedSumsAsWritten: 1124 charges of ε 0.1 show as 112.4,
// not as their float64 sum 112.39999999999…
func TestMetrics_ChargedSumsAsWritten(t *testing.T) {
	m := NewMetrics([]string{"hospital"})
	sum := 0.0
	for range 1124 {
		m.Statement("dp", "", "hospital", time.Millisecond, &DPAnswer{CostEpsilon: 0.1, CostDelta: 1e-7})
		sum += 0.1
	}
	if sum == 112.4 {
		t.Fatal("the float64 sum is exact: the test shows nothing")
	}
	var b strings.Builder
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			if c := mt.GetCounter(); c != nil {
				fmt.Fprintf(&b, "%s %v\n", mf.GetName(), c.GetValue())
			}
		}
	}
	for _, want := range []string{"dpproxy_dp_charged_epsilon_total 112.4\n", "dpproxy_dp_charged_delta_total 0.0001124\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
}

func BenchmarkMetrics_Statement(b *testing.B) {
	m := NewMetrics([]string{"hospital"})
	b.ReportAllocs()
	for b.Loop() {
		m.Statement("catalog", "", "hospital", time.Millisecond, nil)
	}
}

// fakeLedger is an in-memory Ledger for the handler tests (the ledger
// itself is tested against PostgreSQL in ledger and integration).
type fakeLedger struct {
	budgets []ledger.BudgetInfo
	history []ledger.ChargePoint
	down    bool
}

func (f *fakeLedger) Budgets(context.Context, map[string]*policy.Dataset, string, string) ([]ledger.BudgetInfo, error) {
	if f.down {
		return nil, errors.New("down")
	}
	return f.budgets, nil
}
func (f *fakeLedger) Incidents(context.Context, string, string, int) ([]ledger.IncidentInfo, error) {
	return nil, nil
}
func (f *fakeLedger) History(context.Context, time.Time, int) ([]ledger.ChargePoint, error) {
	return f.history, nil
}
func (f *fakeLedger) Ping(context.Context) error {
	if f.down {
		return errors.New("down")
	}
	return nil
}
func (f *fakeLedger) PoolStat() *pgxpool.Stat { return nil }

func TestServer_AuthHealthAndLabels(t *testing.T) {
	fl := &fakeLedger{budgets: []ledger.BudgetInfo{{Dataset: "hospital", Analyst: "alice",
		Status: accountant.Status{Dataset: "hospital", Accountant: "pure", Spent: accountant.Spent{Epsilon: 0.3}, Limit: accountant.Spent{Epsilon: 3, Delta: 1e-6}}}}}
	m := NewMetrics([]string{"hospital"})
	clock := time.Now()
	s, err := New(Config{User: "steward", Password: "plain:pw", Ledger: fl, Metrics: m,
		Policies: map[string]*policy.Dataset{"hospital": {Name: "hospital", Budget: policy.Budget{Epsilon: 3, Accountant: "pure"}}},
		Now:      func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, user, pass string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		if user != "" {
			r.SetBasicAuth(user, pass)
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w
	}
	if w := get("/healthz", "", ""); w.Code != http.StatusOK {
		t.Errorf("/healthz = %d", w.Code)
	}
	for _, p := range []string{"/", "/metrics", "/nothing"} {
		if w := get(p, "", ""); w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s without credentials = %d", p, w.Code)
		}
		if w := get(p, "steward", "nope"); w.Code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong password = %d", p, w.Code)
		}
	}
	m.Statement("dp", "", "hospital", time.Millisecond, &DPAnswer{CostEpsilon: 0.3})
	w := get("/metrics", "steward", "pw")
	body := w.Body.String()
	for _, want := range []string{`dpproxy_budget_epsilon_spent{analyst="alice",dataset="hospital"} 0.3`,
		`dpproxy_budget_epsilon_remaining{analyst="alice",dataset="hospital"} 2.7`,
		`dpproxy_statements_total{route="dp",sqlstate="00000"} 1`, `dpproxy_ledger_scrape_ok 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if w := get("/", "steward", "pw"); w.Code != 200 || !strings.Contains(w.Body.String(), `data-analyst="alice"`) ||
		strings.Contains(w.Body.String(), "<script") || !strings.Contains(w.Header().Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("dashboard = %d", w.Code)
	}
	fl.down = true
	clock = clock.Add(healthTTL) // /healthz probes at most once per healthTTL
	if w := get("/healthz", "", ""); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "ledger") {
		t.Errorf("/healthz with the ledger down = %d %q", w.Code, w.Body.String())
	}
}

// TestDashboard_Chromium renders the dashboard of a real server in
// Debian's headless Chromium: the screenshot is not blank and the DOM
// holds the analyst, dataset and figures.
func TestDashboard_Chromium(t *testing.T) {
	pgtest.Chromium(t)
	fl := &fakeLedger{budgets: []ledger.BudgetInfo{
		{Dataset: "hospital", Analyst: "", Status: accountant.Status{Accountant: "pure", Spent: accountant.Spent{Epsilon: 1.3}, Limit: accountant.Spent{Epsilon: inf(), Delta: inf()}}},
		{Dataset: "hospital", Analyst: "bob", Suspended: true, Incidents: 1,
			Status: accountant.Status{Accountant: "pure", Spent: accountant.Spent{Epsilon: 1.3}, Limit: accountant.Spent{Epsilon: 3, Delta: 1e-6},
				Renews: time.Date(2031, 2, 1, 9, 0, 0, 0, time.UTC), Lifetime: &accountant.Lifetime{Spent: accountant.Spent{Epsilon: 4.3}, Limit: accountant.Spent{Epsilon: 9}}}},
		{Dataset: "hospital", Analyst: "team:cardio",
			Status: accountant.Status{Accountant: "pure", Spent: accountant.Spent{Epsilon: 1.3}, Limit: accountant.Spent{Epsilon: 2}}},
		// alice has a grant of 2 on top of the policy's 3.
		{Dataset: "hospital", Analyst: "alice", Granted: accountant.Spent{Epsilon: 2},
			Status: accountant.Status{Accountant: "pure", Spent: accountant.Spent{Epsilon: 0.4}, Limit: accountant.Spent{Epsilon: 5, Delta: 1e-6}}}}}
	// One morning's charges: the chart starts shortly before them, not
	// 30 days back (where they were one vertical line at the edge).
	now := time.Now()
	for i, a := range []string{"alice", "bob", "alice"} {
		fl.history = append(fl.history, ledger.ChargePoint{At: now.Add(-time.Duration(5-i) * time.Hour), Dataset: "hospital", Analyst: a, Cost: accountant.Spent{Epsilon: 0.2}})
	}
	m := NewMetrics([]string{"hospital"})
	m.RecordDP(RecentStatement{At: time.Now(), Analyst: "bob", Dataset: "hospital", Fingerprint: "abcdef0123456789", CostEpsilon: 0.5})
	m.RecordDP(RecentStatement{At: time.Now(), Analyst: "alice", Dataset: "hospital", Fingerprint: "fedcba9876543210", SQLState: "53400"})
	s, err := New(Config{User: "steward", Password: "plain:pw", Ledger: fl, Metrics: m,
		Analysts: map[string][]string{"alice": nil, "bob": nil, "carol": nil, "dave": {"other"}}, Now: func() time.Time { return now },
		Policies: map[string]*policy.Dataset{"hospital": {Name: "hospital", Budget: policy.Budget{Epsilon: 3, Accountant: "pure", Window: 30 * 24 * time.Hour}}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	url := strings.Replace(ts.URL, "http://", "http://steward:pw@", 1) + "/"
	dom, shot := pgtest.ChromiumPage(t, url, 1000, 900)
	for _, want := range []string{"Dataset hospital", `data-analyst="bob"`, ">1.3<", "suspended", "abcdef0123456789", "ε 0.5, δ 0",
		"budget window 30d", "2031-02-01 09:00Z", "4.3 of 9", `data-analyst="team:cardio"`,
		// carol may query and has no charge yet; the δ limit column.
		`data-analyst="carol"`, "(no charge yet)", "<th>δ limit</th>", ">1e-06<",
		// One limit line per distinct limit: bob's 3, alice's 5 with her
		// grant, the team's 2.
		"limit 3 (bob, carol)", "limit 5 (alice)", "limit 2 (team:cardio)",
		// The refusal's reason in words.
		"refused: budget exhausted", "answered",
		"ε charged since " + now.Add(-6*time.Hour).UTC().Format("2006-01-02 15:04 UTC")} {
		if !strings.Contains(dom, want) {
			t.Errorf("DOM lacks %q", want)
		}
	}
	for _, bad := range []string{`data-analyst="dave"`, "per-analyst limit"} {
		if strings.Contains(dom, bad) {
			t.Errorf("DOM has %q", bad)
		}
	}
	if n := pgtest.Colours(t, shot, 1000, 900); n < 8 {
		t.Errorf("screenshot has %d colours: blank?", n)
	}
	// DPPROXY_DASHBOARD_PNG=file keeps the screenshot for a look.
	if p := os.Getenv("DPPROXY_DASHBOARD_PNG"); p != "" {
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Error(err)
		}
	}
}

func inf() float64 { return math.Inf(1) }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
