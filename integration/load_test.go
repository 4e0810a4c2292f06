package integration

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The load test (issue 7; BENCHMARKS.md, "Load test"). `make test` runs a
// short version (100 sessions, 2 s); `make load` the documented one
// (go test ./integration -run TestLoad -load.sessions 200 -load.duration
// 30s -v).
var (
	loadDuration = flag.Duration("load.duration", 2*time.Second, "how long TestLoad_MixedSessions keeps its sessions busy")
	loadSessions = flag.Int("load.sessions", 100, "concurrent sessions of TestLoad_MixedSessions")
)

// loadAnalysts share the sessions (sessions/loadAnalysts each), so that
// budgets run out under concurrency and are checked for overspending:
// with dp.epsilon = 1 the policy's ε = 3 lasts three distinct queries.
const loadAnalysts = 20

// loadStats counts outcomes. Safe for concurrent use.
type loadStats struct {
	dp, exhausted, catalog, refused, unexpected atomic.Int64
	mu                                          sync.Mutex
	samples                                     []string
}

func (s *loadStats) fail(what string, err error) {
	s.unexpected.Add(1)
	s.mu.Lock()
	if len(s.samples) < 10 {
		s.samples = append(s.samples, what+": "+err.Error())
	}
	s.mu.Unlock()
}

// TestLoad_MixedSessions: loadSessions concurrent sessions of 20 analysts
// (an extra proxy process) send a mix of DP queries (distinct ones, which
// are charged until the analyst's budget is spent and then refused with
// 53400, and repeated ones, answered from the cache), catalog statements
// (every session: more sessions than the shadow cluster's max_connections,
// PostgreSQL's default 100) and statements that must be refused, for
// load.duration. Wanted: no
// unexpected error (every error is 53400 for a DP query or the refusal's
// SQLSTATE for a refused one), no analyst charged beyond their budget (in
// the budget row and in the sum of their charges), `dpproxy ledger verify`
// clean, the proxy's resident memory bounded and its shadow backends (read
// from the shadow cluster's pg_stat_activity) bounded by its shadow pool.
// Figures are logged.
func TestLoad_MixedSessions(t *testing.T) {
	requireDemo(t)
	dur, nSessions := *loadDuration, *loadSessions
	ctx, cancel := context.WithTimeout(context.Background(), dur+5*time.Minute)
	defer cancel()
	names := make([]string, loadAnalysts)
	for i := range names {
		names[i] = fmt.Sprintf("load%02d", i+1)
	}
	var shadowAdminDSN string
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		shadowAdminDSN = cfg["datasets"].(map[string]any)["hospital"].(map[string]any)["shadow_admin"].(string)
		as := cfg["analysts"].(map[string]any)
		for _, n := range names {
			as[n] = map[string]any{"password": "plain:" + n}
		}
		cfg["max_connections"] = nSessions + 20
	})
	p := startProxy(t, cfgPath, addr)
	ledger := connect(t, ctx, ledgerDSN())
	var maxBefore int64
	if err := ledger.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM dpproxy_ledger.charge").Scan(&maxBefore); err != nil {
		t.Fatal(err)
	}

	// Memory: sample the proxy's resident set every 200ms; and the client
	// sessions of the shadow database (other roles see no backend_type;
	// autovacuum has no usename; the demo proxy's idle
	// pool connections are counted in the baseline).
	rssStart := rssKiB(t, p.cmd.Process.Pid)
	var rssMax atomic.Int64
	rssMax.Store(rssStart)
	shadowAdmin := connect(t, ctx, shadowAdminDSN)
	shadowBackends := func() (int64, error) {
		var n int64
		err := shadowAdmin.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_stat_activity
			WHERE datname = current_database() AND usename IS NOT NULL AND pid <> pg_backend_pid()`).Scan(&n)
		return n, err
	}
	shadowBase, err := shadowBackends()
	if err != nil {
		t.Fatalf("count the shadow cluster's backends: %v", err)
	}
	var shadowMax atomic.Int64
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				if v := rssKiBNoFail(p.cmd.Process.Pid); v > rssMax.Load() {
					rssMax.Store(v)
				}
				if v, _ := shadowBackends(); v > shadowMax.Load() {
					shadowMax.Store(v)
				}
			}
		}
	}()

	// Connect every session first (SCRAM is slow on purpose), then run.
	var st loadStats
	conns := make([]*pgx.Conn, nSessions)
	var wg sync.WaitGroup
	connectStart := time.Now()
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pgx.Connect(ctx, p.dsn(names[i%loadAnalysts]))
			if err != nil {
				st.fail("connect", err)
				return
			}
			if _, err := c.Exec(ctx, "SET dp.epsilon = 1"); err != nil {
				st.fail("set", err)
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	connectTime := time.Since(connectStart)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close(context.Background())
			}
		}
	}()
	if st.unexpected.Load() > 0 {
		t.Fatalf("connecting %d sessions: %d errors, e.g. %v", nSessions, st.unexpected.Load(), st.samples)
	}

	var seq atomic.Int64
	refusedQueries := []string{
		"SELECT * FROM visits",
		"SELECT patient_id FROM visits LIMIT 5",
		"DELETE FROM visits",
		"SELECT pg_sleep(1)",
		"COPY visits TO STDOUT",
	}
	catalogQueries := []string{
		"SELECT 1",
		"SELECT relname FROM pg_class WHERE relname IN ('visits', 'patients') ORDER BY 1",
		"SELECT column_name FROM information_schema.columns WHERE table_name = 'visits' ORDER BY ordinal_position",
		"SELECT version()",
	}
	runStart := time.Now()
	deadline := runStart.Add(dur)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			for time.Now().Before(deadline) {
				kind := rng.IntN(10)
				switch {
				case kind < 5: // DP: distinct (charged) or repeated (cached)
					var q string
					if rng.IntN(2) == 0 {
						q = fmt.Sprintf("SELECT COUNT(*) FROM patients WHERE birth_year >= %d", 1900+seq.Add(1)%120)
					} else {
						q = "SELECT region, COUNT(*) FROM patients GROUP BY region"
					}
					rows, err := c.Query(ctx, q)
					if err == nil {
						for rows.Next() {
						}
						rows.Close()
						err = rows.Err()
					}
					var pe *pgconn.PgError
					switch {
					case err == nil:
						st.dp.Add(1)
					case errors.As(err, &pe) && pe.Code == "53400":
						st.exhausted.Add(1)
					default:
						st.fail(q, err)
					}
				case kind < 8: // catalog
					q := catalogQueries[rng.IntN(len(catalogQueries))]
					if _, err := c.Exec(ctx, q); err != nil {
						st.fail(q, err)
					} else {
						st.catalog.Add(1)
					}
				default: // must be refused
					q := refusedQueries[rng.IntN(len(refusedQueries))]
					_, err := c.Exec(ctx, q)
					var pe *pgconn.PgError
					if errors.As(err, &pe) && (pe.Code == "42501" || pe.Code == "0A000" || pe.Code == "42601") {
						st.refused.Add(1)
					} else {
						st.fail(q, fmt.Errorf("want a refusal, got %v", err))
					}
				}
			}
			// The session is still usable.
			var eps string
			if err := c.QueryRow(ctx, "SHOW dp.epsilon").Scan(&eps); err != nil || eps != "1" {
				st.fail("final SHOW dp.epsilon", fmt.Errorf("%q, %v", eps, err))
			}
		}()
	}
	wg.Wait()
	runTime := time.Since(runStart)
	close(stopSampling)
	sampler.Wait()
	rssEnd := rssKiB(t, p.cmd.Process.Pid)

	total := st.dp.Load() + st.exhausted.Load() + st.catalog.Load() + st.refused.Load() + st.unexpected.Load()
	t.Logf("load: %d sessions of %d analysts for %v (connect %v): %d statements (%.0f/s): %d DP answers, %d refused for budget (53400), %d catalog, %d refused as they must be, %d unexpected errors",
		nSessions, loadAnalysts, runTime.Round(time.Millisecond), connectTime.Round(time.Millisecond), total,
		float64(total)/runTime.Seconds(), st.dp.Load(), st.exhausted.Load(), st.catalog.Load(), st.refused.Load(), st.unexpected.Load())
	t.Logf("load: shadow cluster client backends: %d before the run, %d at peak", shadowBase, shadowMax.Load())
	if peak := shadowMax.Load(); peak > shadowBase+config.DefaultShadowMaxConnections {
		t.Errorf("%d shadow backends at peak, over the %d before the run plus the proxy's pool (shadow_max_connections %d)",
			peak, shadowBase, config.DefaultShadowMaxConnections)
	}
	t.Logf("load: proxy RSS %d MiB at start, %d MiB peak, %d MiB at the end (race build: %v)", rssStart/1024, rssMax.Load()/1024, rssEnd/1024, raceBuild)
	if n := st.unexpected.Load(); n > 0 {
		t.Errorf("%d unexpected errors, e.g.:\n  %s\nproxy log (errors):\n%s", n, strings.Join(st.samples, "\n  "), errorLines(p.stderrSoFar()))
	}
	if st.dp.Load() == 0 || st.refused.Load() == 0 || st.catalog.Load() == 0 {
		t.Errorf("the mix did not run: %d DP, %d catalog, %d refused", st.dp.Load(), st.catalog.Load(), st.refused.Load())
	}

	// No overspending: per analyst, the budget row and the charges.
	rows, err := ledger.Query(ctx, `SELECT b.analyst, b.spent_epsilon::float8, b.limit_epsilon::float8,
			coalesce((SELECT sum(c.cost_epsilon) FROM dpproxy_ledger.charge c WHERE c.analyst = b.analyst AND c.dataset = b.dataset), 0)::float8,
			(SELECT count(*) FROM dpproxy_ledger.charge c WHERE c.analyst = b.analyst AND c.dataset = b.dataset AND c.id > $1)
		FROM dpproxy_ledger.budget b WHERE b.analyst LIKE 'load%' AND b.dataset = 'hospital' ORDER BY 1`, maxBefore)
	if err != nil {
		t.Fatal(err)
	}
	var charges int64
	budgets := 0
	for rows.Next() {
		var a string
		var spent, limit, sum float64
		var n int64
		if err := rows.Scan(&a, &spent, &limit, &sum, &n); err != nil {
			t.Fatal(err)
		}
		budgets++
		charges += n
		if spent > limit+1e-9 || sum > limit+1e-9 {
			t.Errorf("analyst %s overspent: budget row %g, sum of charges %g, limit %g", a, spent, sum, limit)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("load: %d charges over %d analysts' budgets, none above its limit", charges, budgets)
	out, errOut, code := dpproxyCLI(t, "ledger", "verify", "--config", cfgPath)
	if code != 0 || strings.Contains(out, "mismatch") {
		t.Fatalf("ledger verify after the load: exit %d\n%s%s", code, out, errOut)
	}
	// Memory bound: generous for the race detector's shadow memory.
	limit := int64(512 << 10)
	if raceBuild {
		limit = 2 << 20
	}
	if rssMax.Load() > limit {
		t.Errorf("proxy RSS peaked at %d MiB, over the bound of %d MiB", rssMax.Load()/1024, limit/1024)
	}
}

// rssKiB reads VmRSS of a process from /proc (Linux).
func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	v := rssKiBNoFail(pid)
	if v == 0 {
		if pgtest.InCI() {
			t.Fatalf("cannot read /proc/%d/status: memory must be measured in CI", pid)
		}
		t.Skipf("cannot read /proc/%d/status (not Linux?)", pid)
	}
	return v
}

func rssKiBNoFail(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// errorLines returns the log lines at warn level or above (at most 20).
func errorLines(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "error") || strings.Contains(l, "warn") {
			out = append(out, l)
		}
	}
	if len(out) > 20 {
		out = out[len(out)-20:]
	}
	return strings.Join(out, "\n")
}

// stderrSoFar returns what the running proxy wrote to stderr so far.
func (p *extraProxy) stderrSoFar() string {
	lw := p.cmd.Stderr.(*lockedWriter)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return p.stderr.String()
}
