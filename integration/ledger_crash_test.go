package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.yaml.in/yaml/v3"
)

// Extra proxies of the demo: `dpproxy serve` processes with a config derived
// from the demo's (same PostgreSQL, same shared ledger, another listen
// address, two more analysts carol and dave with the policy's default budget
// of ε = 3).

// extraConfig writes the derived config and returns its path and listen
// address.
func extraConfig(t *testing.T) (string, string) {
	t.Helper()
	return extraConfigWith(t, nil)
}

// extraConfigPolicy is extraConfig with the policy file at path (the
// demo's, or the tests' pinned one) edited: each edit replaces its old
// text, which must occur exactly once, with its new text.
func extraConfigPolicy(t *testing.T, path string, edits ...[2]string) (string, string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for _, e := range edits {
		if strings.Count(text, e[0]) != 1 {
			t.Fatalf("%s no longer has exactly one %q to replace", path, e[0])
		}
		text = strings.Replace(text, e[0], e[1], 1)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hospital.yaml"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return extraConfigWith(t, func(cfg map[string]any) { cfg["policies"] = dir })
}

// extraConfigWith is extraConfig with a change to the config (e.g. more
// analysts, another upstream) made before it is written.
func extraConfigWith(t *testing.T, mutate func(cfg map[string]any)) (string, string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.dataDir, "dpproxy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cfg["listen"] = addr
	if admin, ok := cfg["admin"].(map[string]any); ok {
		// The demo's admin listens on port 0: the kernel may pick the
		// port freeAddr just closed for listen (a CI run: "bind: address
		// already in use"). An address of its own, not handed out before.
		a, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		admin["listen"] = a
	}
	pol, _ := cfg["policies"].(string)
	if !filepath.IsAbs(pol) {
		cfg["policies"] = filepath.Join(env.dataDir, pol)
	}
	analysts, _ := cfg["analysts"].(map[string]any)
	if analysts == nil {
		t.Fatalf("demo config has no analysts: %s", raw)
	}
	for _, a := range []string{"carol", "dave"} {
		analysts[a] = map[string]any{"password": "plain:" + a}
	}
	if mutate != nil {
		mutate(cfg)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Next to the demo's own config, so every relative path in it (policies,
	// TLS files) resolves the same way.
	_, port, _ := net.SplitHostPort(addr)
	p := filepath.Join(env.dataDir, "extra-"+port+".yaml")
	if err := os.WriteFile(p, out, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(p) })
	return p, addr
}

// extraProxy is one running `dpproxy serve`.
type extraProxy struct {
	cmd    *exec.Cmd
	addr   string
	stderr *strings.Builder
	done   chan error
}

// startProxy starts `dpproxy serve --config cfgPath` listening on addr and
// waits until it accepts connections. It is stopped (SIGTERM, then SIGKILL)
// at the end of the test unless the test killed it.
func startProxy(t *testing.T, cfgPath, addr string, extraArgs ...string) *extraProxy {
	t.Helper()
	p := &extraProxy{addr: addr, stderr: &strings.Builder{}, done: make(chan error, 1)}
	p.cmd = exec.Command(env.bin, append([]string{"serve", "--config", cfgPath}, extraArgs...)...)
	p.cmd.Stderr = &lockedWriter{w: p.stderr}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("dpproxy serve did not stop within 30s of SIGTERM")
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return p
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("dpproxy serve exited before listening: %v\n%s", err, p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("dpproxy serve not listening on %s after 60s\n%s", addr, p.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill9 kills the proxy with SIGKILL and waits for it to be gone.
func (p *extraProxy) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-p.done
	p.done <- err
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("proxy exit after kill -9: %v", err)
	}
}

func (p *extraProxy) dsn(analyst string) string {
	return fmt.Sprintf("postgres://%s:%s@%s/hospital?sslmode=disable", analyst, analyst, p.addr)
}

// dpproxyCLI runs the dpproxy binary and returns stdout, stderr and the
// exit code.
func dpproxyCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.bin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("dpproxy %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// TestLedger_CrashLeavesBudgetCharged: a DP query blocked upstream (its
// table locked) after its charge was committed as reserved; the proxy is
// killed with SIGKILL. The charge stays (nothing is refunded), the budget
// stays charged, and `dpproxy ledger verify` is clean and reports the
// charge as charged but unanswered.
func TestLedger_CrashLeavesBudgetCharged(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfig(t)
	p := startProxy(t, cfgPath, addr)

	unlock := lockTable(t, ctx, "patients")
	ledger := connect(t, ctx, ledgerDSN())
	before := lastChargeID(t, ctx, ledger)

	done := queryInBackground(ctx, p.dsn("carol"), "SELECT COUNT(*) FROM patients WHERE region = 'south'")
	id, status := waitForCharge(t, ctx, ledger, "carol", before)
	if status != "reserved" {
		t.Fatalf("charge %d status = %s while the upstream query is blocked, want reserved", id, status)
	}

	p.kill9(t)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("carol's query was answered although the proxy was killed")
	}

	// The charge and the budget stay as they were.
	var spent string
	var charges int64
	if err := ledger.QueryRow(ctx, `SELECT c.status, b.spent_epsilon::text, b.charges FROM dpproxy_ledger.charge c
		JOIN dpproxy_ledger.budget b ON b.dataset = c.dataset AND b.analyst = c.analyst WHERE c.id = $1`, id).
		Scan(&status, &spent, &charges); err != nil {
		t.Fatal(err)
	}
	if status != "reserved" || spent != "0.1" || charges != 1 {
		t.Fatalf("after kill -9: charge %s, carol spent ε %s in %d charges; want reserved, 0.1, 1", status, spent, charges)
	}
	out, errOut, code := dpproxyCLI(t, "budget", "show", "--config", cfgPath, "--analyst", "carol")
	if code != 0 || !regexp.MustCompile(`(?m)^hospital\s+carol\s+pure\s+0\.1\s+3\s+2\.9\s+0\s+1e-06\s+1e-06\s+1\s+1\s+0\s*$`).MatchString(out) {
		t.Fatalf("budget show --analyst carol: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = dpproxyCLI(t, "ledger", "verify", "--config", cfgPath)
	t.Logf("dpproxy ledger verify:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || !strings.HasPrefix(lines[len(lines)-1], "ok: ") || strings.Contains(out, "mismatch") {
		t.Fatalf("ledger verify after the crash: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, fmt.Sprintf("charged but unanswered: charge %d (hospital/carol at ", id)) {
		t.Fatalf("ledger verify does not report charge %d as charged but unanswered:\n%s", id, out)
	}
}

// TestBudget_TwoProxiesNeverOverspend: two proxy processes sharing the
// ledger, 32 sessions each, all analyst dave (budget ε = 3, pure), firing
// distinct queries of ε = 0.1 until refused. Exactly 30 answers fit; every
// answer a client received is on a committed, released ledger row of dave.
func TestBudget_TwoProxiesNeverOverspend(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfgA, addrA := extraConfig(t)
	cfgB, addrB := extraConfig(t)
	proxies := []*extraProxy{startProxy(t, cfgA, addrA), startProxy(t, cfgB, addrB)}

	const sessions = 32
	var next atomic.Int64
	var mu sync.Mutex
	var answers []string // the released counts, as text
	refused := 0
	var wg sync.WaitGroup
	errs := make(chan error, 2*sessions)
	for _, p := range proxies {
		for s := 0; s < sessions; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := pgx.Connect(ctx, p.dsn("dave"))
				if err != nil {
					errs <- err
					return
				}
				defer c.Close(context.Background())
				if _, err := c.Exec(ctx, "SET dp.epsilon = 0.1"); err != nil {
					errs <- err
					return
				}
				for {
					// A distinct query each time: the answer cache must not
					// serve it for free.
					i := next.Add(1)
					q := fmt.Sprintf("SELECT COUNT(*) FROM patients WHERE birth_year >= %d AND region = '%s'",
						1910+i%100, []string{"north", "south", "east", "west", "central"}[(i/100)%5])
					var n int64
					err := c.QueryRow(ctx, q).Scan(&n)
					var pe *pgconn.PgError
					switch {
					case err == nil:
						mu.Lock()
						answers = append(answers, strconv.FormatInt(n, 10))
						mu.Unlock()
					case errors.As(err, &pe) && pe.Code == "53400":
						mu.Lock()
						refused++
						mu.Unlock()
						return
					default:
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("session error: %v", err)
	}
	if len(answers) != 30 || refused != 2*sessions {
		t.Fatalf("%d answers, %d refusals; want exactly 30 answers of ε = 0.1 within ε = 3 and every session refused", len(answers), refused)
	}
	ledger := connect(t, ctx, ledgerDSN())
	var total string
	var reserved int
	if err := ledger.QueryRow(ctx, `SELECT sum(cost_epsilon)::text, count(*) FILTER (WHERE status = 'reserved')
		FROM dpproxy_ledger.charge WHERE analyst = 'dave'`).Scan(&total, &reserved); err != nil {
		t.Fatal(err)
	}
	if total != "3.0" && total != "3" {
		t.Fatalf("dave charged ε = %s in the ledger, want exactly 3", total)
	}
	if reserved != 0 {
		t.Fatalf("%d of dave's charges left reserved", reserved)
	}
	rows, err := ledger.Query(ctx, `SELECT answer->'rows'->0->>0 FROM dpproxy_ledger.charge WHERE analyst = 'dave' AND status = 'released'`)
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(answers)
	sort.Strings(stored)
	if strings.Join(answers, ",") != strings.Join(stored, ",") {
		t.Fatalf("answers received %v; released answers in the ledger %v: want the same", answers, stored)
	}
	out, errOut, code := dpproxyCLI(t, "ledger", "verify", "--config", cfgA)
	if code != 0 || strings.Contains(out, "mismatch") {
		t.Fatalf("ledger verify: exit %d\n%s%s", code, out, errOut)
	}
}

// TestCache_RepeatedQueryIsFree: the same query twice in one session returns
// the same noisy rows, and the second costs nothing.
func TestCache_RepeatedQueryIsFree(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfgPath, addr := extraConfig(t)
	p := startProxy(t, cfgPath, addr)
	c, noticesSoFar := connectWithNotices(t, ctx, p.dsn("carol"))
	const q = "SELECT region, COUNT(*) FROM patients WHERE birth_year >= 1960 GROUP BY region ORDER BY region"
	run := func() []string {
		rows, err := c.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var r string
			var n int64
			if err := rows.Scan(&r, &n); err != nil {
				t.Fatal(err)
			}
			out = append(out, r+"="+strconv.FormatInt(n, 10))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := run()
	second := run()
	if len(first) != 5 || strings.Join(first, ",") != strings.Join(second, ",") {
		t.Fatalf("first answer %v, second %v; want the same 5 rows", first, second)
	}
	notices := noticesSoFar()
	if len(notices) != 2 {
		t.Fatalf("notices = %q, want one per query", notices)
	}
	if strings.Contains(notices[0], "cached") || !strings.HasPrefix(notices[1], "dp: cached answer, epsilon 0 spent") {
		t.Fatalf("notices = %q; want a charge, then \"dp: cached answer, epsilon 0 spent …\"", notices)
	}
	// The second answer charged nothing: one released charge of carol (the
	// crash test leaves another, reserved).
	ledger := connect(t, ctx, ledgerDSN())
	var n int
	if err := ledger.QueryRow(ctx, `SELECT count(*) FROM dpproxy_ledger.charge WHERE analyst = 'carol' AND status = 'released'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d released charges of carol after two identical queries, want 1", n)
	}
}
