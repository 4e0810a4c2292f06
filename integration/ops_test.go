package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestOps_AdminMetricsAuditWindowDashboard (issue 18) starts the real
// `dpproxy serve` with the admin endpoint, the audit log, a policy with a
// 30-day budget window and the hidden test clock, on its own ledger
// database; runs DP queries through it and checks that /metrics series
// move, that the audit log has a line per statement and charge with no
// literal, value or password in it, that the budget window renews when
// the clock passes its end, and that the dashboard renders in headless
// Chromium with the analyst's figures.
func TestOps_AdminMetricsAuditWindowDashboard(t *testing.T) {
	requireDemo(t)
	ctx := context.Background()
	dir := t.TempDir()

	// Its own ledger, so the fake clock's renewals touch no other test's rows.
	if err := pgtest.Exec(ctx, env.upstreamDSN, "CREATE DATABASE dpproxy_ledger_ops OWNER dpproxy_ledger"); err != nil {
		t.Fatal(err)
	}
	ledgerOps := strings.Replace(env.upstreamDSN, "/hospital", "/dpproxy_ledger_ops", 1)

	// The demo's policy with a 30-day window and a lifetime cap.
	polDir := filepath.Join(dir, "policies")
	if err := os.MkdirAll(polDir, 0o755); err != nil {
		t.Fatal(err)
	}
	pol, err := os.ReadFile(filepath.Join(env.dataDir, "policies", "hospital.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const budgetLine = "  accountant: pure\n"
	if !strings.Contains(string(pol), budgetLine) {
		t.Fatalf("demo policy has no %q line", budgetLine)
	}
	pol = []byte(strings.Replace(string(pol), budgetLine, budgetLine+"  window: 30d\n  lifetime: {epsilon: 5, delta: 2.0e-6}\n", 1))
	if err := os.WriteFile(filepath.Join(polDir, "hospital.yaml"), pol, 0o644); err != nil {
		t.Fatal(err)
	}

	clockFile := filepath.Join(dir, "clock")
	t0 := time.Date(2031, 1, 1, 9, 0, 0, 0, time.UTC)
	setClock := func(tm time.Time) {
		if err := os.WriteFile(clockFile, []byte(tm.Format(time.RFC3339)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setClock(t0)

	adminAddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	const stewardPassword = "steward-Secret-77"
	const erinPassword = "erin-Secret-42"
	auditPath := filepath.Join(dir, "audit.log")
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		cfg["ledger"] = ledgerOps
		cfg["policies"] = polDir
		cfg["analysts"].(map[string]any)["erin"] = map[string]any{"password": "plain:" + erinPassword}
		cfg["admin"] = map[string]any{"listen": adminAddr, "user": "steward", "password": "plain:" + stewardPassword}
		cfg["audit"] = map[string]any{"path": auditPath, "max_size_mb": 10, "max_backups": 2}
		if ds, ok := cfg["datasets"].(map[string]any)["hospital"].(map[string]any); ok {
			ds["response_time"] = "0s"
		}
	})
	p := startProxy(t, cfgPath, addr, "--testonly-clock-file", clockFile)
	base := "http://" + adminAddr

	// Health: no credentials needed.
	if code, body := httpGet(t, base+"/healthz", "", ""); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	// Metrics: the steward only; an analyst's credentials are refused.
	for _, c := range []struct{ user, pass string }{{"", ""}, {"steward", "wrong"}, {"erin", erinPassword}} {
		if code, body := httpGet(t, base+"/metrics", c.user, c.pass); code != 401 || !strings.Contains(body, "steward") {
			t.Errorf("/metrics as %q = %d %q, want 401 naming the steward's credentials", c.user, code, body)
		}
	}
	before := scrape(t, base, stewardPassword)

	erin := fmt.Sprintf("postgres://erin:%s@%s/hospital?sslmode=disable", erinPassword, addr)
	conn, err := pgx.Connect(ctx, erin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const literalQuery = "SELECT COUNT(*) FROM visits WHERE department = 'oncology' AND age >= 67"
	var released int64
	if err := conn.QueryRow(ctx, literalQuery).Scan(&released); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, literalQuery).Scan(&released); err != nil { // the cache
		t.Fatal(err)
	}
	var avg float64
	if err := conn.QueryRow(ctx, "SELECT AVG(cost) FROM visits WHERE department = 'surgery'").Scan(&avg); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "SELECT * FROM visits WHERE patient_id = 12345")
	if pe := (*pgconn.PgError)(nil); !asPg(err, &pe) || pe.Code != "42501" {
		t.Fatalf("raw read: %v, want 42501", err)
	}
	_, err = conn.Exec(ctx, "SET dp.clipping = sometimes")
	if pe := (*pgconn.PgError)(nil); !asPg(err, &pe) || pe.Code != "22023" {
		t.Fatalf("bad setting: %v, want 22023", err)
	}

	// The budget series are read from the ledger at most every 5 s.
	time.Sleep(5200 * time.Millisecond)
	after := scrape(t, base, stewardPassword)
	moved := func(series string, want float64) {
		t.Helper()
		if got := after[series] - before[series]; got != want {
			t.Errorf("%s moved by %v, want %v", series, got, want)
		}
	}
	moved(`dpproxy_statements_total{route="dp",sqlstate="00000"}`, 3)
	moved(`dpproxy_statements_total{route="dp",sqlstate="42501"}`, 1)
	moved(`dpproxy_dp_answers_total{dataset="hospital"}`, 3)
	moved(`dpproxy_dp_cache_hits_total{dataset="hospital"}`, 1)
	moved(`dpproxy_ledger_charges_total{dataset="hospital"}`, 2)
	moved(`dpproxy_refusals_total{dataset="hospital",reason="not_allowed"}`, 1)
	moved(`dpproxy_refusals_total{dataset="hospital",reason="bad_setting"}`, 1)
	moved(`dpproxy_statement_duration_seconds_count{route="dp"}`, 4)
	// The incident series exist (at 0) before any incident, so an alert on
	// them is defined from the start.
	for _, k := range []string{"upstream", "timeout", "result", "panic"} {
		if _, ok := before[`dpproxy_upstream_incidents_total{dataset="hospital",kind="`+k+`"}`]; !ok {
			t.Errorf("dpproxy_upstream_incidents_total for kind %s is absent before any incident", k)
		}
	}
	if got := after[`dpproxy_dp_charged_epsilon_total{dataset="hospital"}`] - before[`dpproxy_dp_charged_epsilon_total{dataset="hospital"}`]; got < 0.199 || got > 0.201 {
		t.Errorf("charged ε moved by %v, want 0.2", got)
	}
	if got := after[`dpproxy_budget_epsilon_spent{analyst="erin",dataset="hospital"}`]; got < 0.199 || got > 0.201 {
		t.Errorf("erin's ε spent = %v, want 0.2 (from the ledger)", got)
	}
	if got := after[`dpproxy_budget_epsilon_remaining{analyst="erin",dataset="hospital"}`]; got < 2.799 || got > 2.801 {
		t.Errorf("erin's ε remaining = %v, want 2.8", got)
	}
	if got, want := after[`dpproxy_budget_window_renews_timestamp_seconds{analyst="erin",dataset="hospital"}`], float64(t0.Add(30*24*time.Hour).Unix()); got != want {
		t.Errorf("window renews at %v, want %v", got, want)
	}
	if after[`dpproxy_pool_connections{pool="ledger"}`] < 1 || after[`dpproxy_pool_max_connections{pool="upstream/hospital"}`] < 1 {
		t.Errorf("pool series missing: %v", after)
	}
	for k := range after {
		if strings.Contains(k, "oncology") || strings.Contains(k, "67") && strings.Contains(k, "age") || strings.Contains(k, erinPassword) {
			t.Errorf("a metric label holds query text: %s", k)
		}
	}

	// Catalog statements are counted once each (pgx sends
	// Bind/Describe/Execute/Sync of its cached statement for the repeats).
	catBefore := scrape(t, base, stewardPassword)
	for i := 0; i < 20; i++ {
		var one int
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("SELECT 1: %v", err)
		}
	}
	catAfter := scrape(t, base, stewardPassword)
	if k := `dpproxy_statements_total{route="catalog",sqlstate="00000"}`; catAfter[k]-catBefore[k] != 20 {
		t.Errorf("%s moved by %v, want 20", k, catAfter[k]-catBefore[k])
	}

	// The window: spend the rest, be refused, move the clock past the end.
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 2.8"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT COUNT(*) FROM visits WHERE age < 30").Scan(&released); err != nil {
		t.Fatal(err)
	}
	err = conn.QueryRow(ctx, "SELECT COUNT(*) FROM visits WHERE age < 31").Scan(&released)
	if pe := (*pgconn.PgError)(nil); !asPg(err, &pe) || pe.Code != "53400" || !strings.Contains(pe.Hint, "renews every") {
		t.Fatalf("over the window's budget: %v, want 53400 with a renewal hint", err)
	}
	renews := showRenews(t, conn)
	if want := t0.Add(30 * 24 * time.Hour).Format("2006-01-02 15:04:05+00"); renews != want {
		t.Errorf("SHOW dp.budget window_renews = %q, want %q", renews, want)
	}
	setClock(t0.Add(30*24*time.Hour + time.Hour))
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 1.5"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT COUNT(*) FROM visits WHERE age < 31").Scan(&released); err != nil {
		t.Fatalf("after the window renewed: %v", err)
	}
	if want := t0.Add(60 * 24 * time.Hour).Format("2006-01-02 15:04:05+00"); showRenews(t, conn) != want {
		t.Errorf("window_renews after renewal = %q, want %q", showRenews(t, conn), want)
	}
	// The lifetime cap (5): 3 spent in the first window, 1.5 in this one;
	// 1 more would fit the window (2.5 of 3) but not the lifetime (5.5).
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 1"); err != nil {
		t.Fatal(err)
	}
	err = conn.QueryRow(ctx, "SELECT COUNT(*) FROM visits WHERE age < 32").Scan(&released)
	if pe := (*pgconn.PgError)(nil); !asPg(err, &pe) || pe.Code != "53400" || !strings.Contains(pe.Message, "lifetime") {
		t.Errorf("over the lifetime cap: %v, want 53400 naming the lifetime", err)
	}

	// The audit log: JSON lines; statements, charges, the refusals, the
	// renewal; never a literal, a released value or a password.
	time.Sleep(200 * time.Millisecond)
	lines := readAudit(t, auditPath)
	count := map[string]int{}
	for _, l := range lines {
		count[l["event"].(string)]++
		for k, v := range l {
			s := fmt.Sprint(v)
			if strings.Contains(s, "oncology") || strings.Contains(s, "surgery") || strings.Contains(s, erinPassword) || strings.Contains(s, stewardPassword) ||
				(k != "duration" && k != "time" && (s == "67" || s == "12345" || s == strconv.FormatInt(released, 10))) {
				t.Errorf("audit line leaks %s=%v: %v", k, v, l)
			}
		}
		if l["event"] == "statement" && (l["analyst"] != "erin" || l["fingerprint"] == "" || l["sqlstate"] == nil) {
			t.Errorf("statement line without analyst, fingerprint or sqlstate: %v", l)
		}
	}
	if count["statement"] < 8 || count["charge"] != 4 || count["refusal"] != 2 || count["budget_change"] < 1 {
		t.Errorf("audit events = %v, want ≥ 8 statements, 4 charges, 2 refusals, ≥ 1 budget_change (renewal)", count)
	}
	raw, _ := os.ReadFile(auditPath)
	if !regexp.MustCompile(`"event":"budget_change","action":"renew","analyst":"erin"`).Match(raw) {
		t.Errorf("no renewal line for erin in the audit log:\n%s", raw)
	}

	// The dashboard in headless Chromium.
	const w, h = 1200, 1400
	url := fmt.Sprintf("http://steward:%s@%s/", stewardPassword, adminAddr)
	dom, shot := pgtest.ChromiumPage(t, url, w, h)
	for _, want := range []string{"Dataset hospital", `data-analyst="erin"`, "budget window 30d", `class="series"`, "Recent DP statements", "42501", "53400"} {
		if !strings.Contains(dom, want) {
			t.Errorf("dashboard DOM lacks %q", want)
		}
	}
	if !regexp.MustCompile(`data-analyst="erin">\s*<td>.*erin</td>\s*<td class="num eps-spent">1\.5<`).MatchString(dom) {
		t.Errorf("dashboard does not show erin's 1.5 spent in the current window:\n%s", dom)
	}
	if strings.Contains(dom, "oncology") || strings.Contains(dom, erinPassword) || strings.Contains(dom, "<script") {
		t.Error("dashboard shows query text, a password or a script")
	}
	if n := pgtest.Colours(t, shot, w, h); n < 8 {
		t.Errorf("dashboard screenshot has %d colours: blank?", n)
	}
	_ = p
}

func asPg(err error, pe **pgconn.PgError) bool {
	var e *pgconn.PgError
	if err == nil {
		return false
	}
	ok := errors.As(err, &e)
	*pe = e
	return ok
}

func showRenews(t *testing.T, c *pgx.Conn) string {
	t.Helper()
	rows, err := c.Query(context.Background(), "SHOW dp.budget")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	fields := rows.FieldDescriptions()
	idx := -1
	for i, f := range fields {
		if f.Name == "window_renews" {
			idx = i
		}
	}
	if idx < 0 || !rows.Next() {
		t.Fatalf("SHOW dp.budget has no window_renews column or row")
	}
	v := rows.RawValues()[idx]
	return string(v)
}

func httpGet(t *testing.T, url, user, pass string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scrape reads /metrics as the steward: series (name{labels}) → value.
func scrape(t *testing.T, base, password string) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, base+"/metrics", "steward", password)
	if code != 200 {
		t.Fatalf("/metrics = %d %s", code, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			continue
		}
		out[l[:i]] = v
	}
	return out
}

func readAudit(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line is not JSON: %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestDemo_StewardLines: the demo prints the admin endpoint's URL (with
// the generated steward password) and the audit log's path after ready:,
// and the README's steward commands work with what it printed.
func TestDemo_StewardLines(t *testing.T) {
	requireDemo(t)
	// No trailing slash: the README's curl "$ADMIN/metrics" must hit the
	// path, not "//metrics" (a 307).
	m := regexp.MustCompile(`^http://steward:([0-9a-f]{32})@127\.0\.0\.1:[0-9]+$`).FindStringSubmatch(env.adminURL)
	if m == nil {
		t.Fatalf("admin: line = %q, want http://steward:PASSWORD@127.0.0.1:PORT", env.adminURL)
	}
	base := strings.Replace(env.adminURL, "steward:"+m[1]+"@", "", 1)
	if code, body := httpGet(t, base+"/healthz", "", ""); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, _ := httpGet(t, base+"/metrics", "steward", m[1]); code != 200 {
		t.Errorf("/metrics with the printed password = %d", code)
	}
	if code, _ := httpGet(t, base+"/metrics", "alice", "alice"); code != 401 {
		t.Errorf("/metrics as the analyst alice = %d, want 401", code)
	}
	if filepath.Dir(env.auditPath) != filepath.Dir(env.configPath) {
		t.Errorf("audit: %s is not next to config: %s", env.auditPath, env.configPath)
	}
	out, errOut, code := dpproxyCLI(t, "budget", "show", "--config", env.configPath)
	if code != 0 || !strings.Contains(out, "epsilon_remaining") {
		t.Errorf("bin/dpproxy budget show --config <config: line> = %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(env.auditPath); err != nil {
		t.Errorf("audit log: %v", err)
	}
}
