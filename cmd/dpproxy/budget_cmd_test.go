package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/examples"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/ledger"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// stewardSetup writes a config with a fresh ledger database and the example
// hospital policy (ε = 3, δ = 1e-6 per analyst, pure), and returns the
// config path, the ledger DSN and an open ledger to charge with.
func stewardSetup(t *testing.T) (cfgPath, dsn string, l *ledger.Ledger, ds *policy.Dataset) {
	t.Helper()
	dsn = pgtest.NewDatabase(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "policies"), 0o755); err != nil {
		t.Fatal(err)
	}
	pp := filepath.Join(dir, "policies", "hospital.yaml")
	if err := os.WriteFile(pp, examples.HospitalPolicy(), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`policies: policies
ledger: %q
datasets:
  hospital:
    upstream: postgres://u@127.0.0.1:1/hospital
    shadow: postgres://s@127.0.0.1:1/hospital_shadow
    shadow_admin: postgres://o@127.0.0.1:1/hospital_shadow
analysts:
  alice: {password: "plain:alice"}
  bob: {password: "plain:bob"}
`, dsn)
	cfgPath = filepath.Join(dir, "dpproxy.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ds, err := policy.Load(pp)
	if err != nil {
		t.Fatal(err)
	}
	l, err = ledger.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return cfgPath, dsn, l, ds
}

func chargeN(t *testing.T, l *ledger.Ledger, ds *policy.Dataset, analyst string, eps float64, n int, release bool) {
	t.Helper()
	for i := 0; i < n; i++ {
		res, err := l.Reserve(context.Background(), accountant.Charge{
			Analyst: analyst, Dataset: ds.Name, Policy: ds, PolicyVersion: ds.Version, Fingerprint: fmt.Sprintf("fp-%d", i),
			Events: []accountant.Event{{Mechanism: policy.MechanismLaplace, Epsilon: eps, NoiseMultiplier: 1 / eps}},
		})
		if err != nil {
			t.Fatalf("charge %d of %s: %v", i, analyst, err)
		}
		if release {
			if err := l.Release(context.Background(), res, []byte(`{"rows":[]}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// tableRow returns the fields of the budget show line of analyst.
func tableRow(t *testing.T, out, analyst string) []string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && f[1] == analyst {
			return f
		}
	}
	t.Fatalf("budget show has no row of %s:\n%s", analyst, out)
	return nil
}

func okCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runCLI(t, "", args...)
	if code != 0 {
		t.Fatalf("dpproxy %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
	}
	return out
}

func TestBudgetCLI_ShowGrantReset(t *testing.T) {
	cfg, dsn, l, ds := stewardSetup(t)
	if out := okCLI(t, "budget", "show", "--config", cfg); !strings.Contains(out, "no budgets") {
		t.Fatalf("budget show on an empty ledger = %q", out)
	}
	// An analyst the config does not have is named as such, with the ones
	// it has (new-user run: "nothing was charged yet" for a misspelt name).
	if out := okCLI(t, "budget", "show", "--config", cfg, "--analyst", "carol"); !strings.Contains(out, "carol is not an analyst of this config; its analysts: alice") {
		t.Fatalf("budget show --analyst carol = %q", out)
	}
	chargeN(t, l, ds, "alice", 0.5, 4, true) // 2 of 3
	chargeN(t, l, ds, "bob", 0.25, 2, false) // 0.5, left reserved

	out := okCLI(t, "budget", "show", "--config", cfg)
	if !strings.HasPrefix(out, "dataset") || !strings.Contains(out, "epsilon_remaining") {
		t.Fatalf("budget show header = %q", out)
	}
	// dataset analyst accountant ε spent/limit/remaining δ spent/limit/remaining charges unanswered incidents
	if got, want := strings.Join(tableRow(t, out, "alice"), " "), "hospital alice pure 2 3 1 0 1e-06 1e-06 4 0 0"; got != want {
		t.Errorf("alice's row = %q, want %q", got, want)
	}
	if got, want := strings.Join(tableRow(t, out, "bob"), " "), "hospital bob pure 0.5 3 2.5 0 1e-06 1e-06 2 2 0"; got != want {
		t.Errorf("bob's row = %q, want %q", got, want)
	}
	if !strings.Contains(out, "(all analysts)") {
		t.Errorf("budget show lacks the dataset's global row:\n%s", out)
	}
	if out := okCLI(t, "budget", "show", "--config", cfg, "--analyst", "bob"); strings.Contains(out, "alice") || !strings.Contains(out, "bob") {
		t.Errorf("budget show --analyst bob = %q", out)
	}

	// Grant: alice's limit becomes 3 + 1.5; the proxy's Reserve sees it.
	out = okCLI(t, "budget", "grant", "--config", cfg, "--analyst", "alice", "--dataset", "hospital", "--epsilon", "1.5")
	if !strings.Contains(out, "limit now ε=4.5, δ=1e-06; remaining ε=2.5") {
		t.Fatalf("budget grant = %q", out)
	}
	chargeN(t, l, ds, "alice", 0.5, 5, true) // 4.5 exactly
	if _, err := l.Reserve(context.Background(), accountant.Charge{Analyst: "alice", Dataset: "hospital", Policy: ds, Fingerprint: "x",
		Events: []accountant.Event{{Mechanism: policy.MechanismLaplace, Epsilon: 0.01, NoiseMultiplier: 100}}}); err == nil {
		t.Fatal("charge beyond policy + grant accepted")
	}
	if got := strings.Join(tableRow(t, okCLI(t, "budget", "show", "--config", cfg, "--dataset", "hospital", "--analyst", "alice"), "alice"), " "); got != "hospital alice pure 4.5 4.5 0 0 1e-06 1e-06 9 0 0" {
		t.Errorf("alice after grant = %q", got)
	}

	// Reset needs --confirm, then sets spending to zero and keeps charges.
	code, stdout, errOut := runCLI(t, "", "budget", "reset", "--config", cfg, "--analyst", "alice", "--dataset", "hospital")
	if code != 2 || stdout != "" || !strings.Contains(errOut, "refusing without --confirm") {
		t.Fatalf("reset without --confirm: exit %d, stdout %q, stderr %q", code, stdout, errOut)
	}
	out = okCLI(t, "budget", "reset", "--config", cfg, "--analyst", "alice", "--dataset", "hospital", "--confirm")
	if !strings.Contains(out, "reset alice on hospital: spent ε=4.5, δ=0 before") {
		t.Fatalf("budget reset = %q", out)
	}
	if got := strings.Join(tableRow(t, okCLI(t, "budget", "show", "--config", cfg), "alice"), " "); got != "hospital alice pure 0 4.5 4.5 0 1e-06 1e-06 0 0 0" {
		t.Errorf("alice after reset = %q (grants are kept)", got)
	}

	// An incident suspends bob (incident_limit 1): budget show says so and
	// lists it; resume clears it, once.
	if r, err := l.RecordIncident(context.Background(), ds, accountant.Incident{Analyst: "bob", Dataset: "hospital", ChargeID: 1,
		Fingerprint: "fp-of-the-query", Kind: "upstream", SQLState: "22012"}); err != nil || !r.Suspended || r.Incidents != 1 {
		t.Fatalf("RecordIncident = %+v, %v", r, err)
	}
	out = okCLI(t, "budget", "show", "--config", cfg, "--dataset", "hospital", "--analyst", "bob")
	if got := strings.Join(tableRow(t, out, "bob"), " "); got != "hospital bob pure 0.5 3 2.5 0 1e-06 1e-06 2 2 1 (suspended)" {
		t.Errorf("bob after an incident = %q", got)
	}
	if !strings.Contains(out, "recent incidents") || !strings.Contains(out, "upstream  22012") || !strings.Contains(out, "fp-of-the-query") {
		t.Errorf("budget show lacks the incident:\n%s", out)
	}
	if _, err := l.Reserve(context.Background(), accountant.Charge{Analyst: "bob", Dataset: "hospital", Policy: ds, Fingerprint: "y",
		Events: []accountant.Event{{Mechanism: policy.MechanismLaplace, Epsilon: 0.01, NoiseMultiplier: 100}}}); !errors.Is(err, accountant.ErrSuspended) {
		t.Fatalf("charge of a suspended analyst: %v", err)
	}
	out = okCLI(t, "budget", "resume", "--config", cfg, "--analyst", "bob", "--dataset", "hospital")
	if !strings.Contains(out, "resumed bob on hospital: 1 incident(s) cleared") {
		t.Fatalf("budget resume = %q", out)
	}
	if code, _, errOut := runCLI(t, "", "budget", "resume", "--config", cfg, "--analyst", "bob", "--dataset", "hospital"); code == 0 || !strings.Contains(errOut, "not suspended") {
		t.Fatalf("second resume: exit %d, %s", code, errOut)
	}
	chargeN(t, l, ds, "bob", 0.25, 1, true)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var charges, audits int
	var action, who string
	if err := c.QueryRow(ctx, `SELECT (SELECT count(*) FROM dpproxy_ledger.charge WHERE analyst = 'alice'),
		(SELECT count(*) FROM dpproxy_ledger.audit), (SELECT string_agg(action, ',' ORDER BY id) FROM dpproxy_ledger.audit),
		(SELECT min(actor) FROM dpproxy_ledger.audit)`).Scan(&charges, &audits, &action, &who); err != nil {
		t.Fatal(err)
	}
	if charges != 9 || audits != 3 || action != "grant,reset,resume" || who != actor() {
		t.Fatalf("after grant, reset and resume: %d charges of alice, audit %d rows %q by %q; want 9, 3 grant,reset,resume by %q", charges, audits, action, who, actor())
	}

	// ledger verify: clean, with bob's two reserved charges reported.
	out = okCLI(t, "ledger", "verify", "--config", cfg)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[len(lines)-1] != "ok: 3 budgets, 12 charges verified" {
		t.Fatalf("ledger verify = %q", out)
	}
	if n := len(regexp.MustCompile(`(?m)^charged but unanswered: charge \d+ \(hospital/bob at \S+, ε=0\.25, δ=0\)$`).FindAllString(out, -1)); n != 2 {
		t.Fatalf("ledger verify reported %d of bob's reserved charges, want 2:\n%s", n, out)
	}
	// A tampered budget row: exit 1 and the difference.
	if _, err := c.Exec(ctx, `UPDATE dpproxy_ledger.budget SET spent_epsilon = 0.25 WHERE analyst = 'bob'`); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "", "ledger", "verify", "--config", cfg)
	if code != 1 || !strings.Contains(out, "mismatch: hospital/bob: spent ε = 0.25 on the budget row, 0.75 recomputed from the charges") ||
		!strings.Contains(out, "FAILED: 1 differences in 3 budgets, 12 charges") {
		t.Fatalf("ledger verify after tampering: exit %d, %q", code, out)
	}
}

func TestBudgetCLI_Errors(t *testing.T) {
	cfg, _, _, _ := stewardSetup(t)
	usage := []struct {
		args []string
		want string
	}{
		{[]string{"budget"}, "name a subcommand"},
		{[]string{"budget", "spend"}, `unknown subcommand "spend"`},
		{[]string{"budget", "show"}, "--config FILE is required"},
		{[]string{"budget", "grant", "--config", cfg, "--analyst", "alice", "--epsilon", "1"}, "--analyst A and --dataset D are required"},
		{[]string{"budget", "grant", "--config", cfg, "--analyst", "alice", "--dataset", "hospital"}, "give --epsilon X"},
		{[]string{"budget", "grant", "--config", cfg, "--analyst", "alice", "--dataset", "hospital", "--epsilon", "-1"}, "--epsilon must be finite and ≥ 0"},
		{[]string{"budget", "grant", "--config", cfg, "--analyst", "alice", "--dataset", "hospital", "--epsilon", "1", "--delta", "1"}, "--delta in [0, 1)"},
		{[]string{"budget", "reset", "--config", cfg, "--analyst", "alice", "--dataset", "hospital"}, "refusing without --confirm"},
		{[]string{"budget", "show", "--config", cfg, "--confirm"}, "flag provided but not defined: -confirm"},
		{[]string{"ledger"}, "name a subcommand"},
		{[]string{"ledger", "check"}, `unknown subcommand "check"`},
		{[]string{"ledger", "verify"}, "--config FILE is required"},
	}
	for _, tc := range usage {
		code, out, errOut := runCLI(t, "", tc.args...)
		first, _, _ := strings.Cut(errOut, "\n")
		if code != 2 || out != "" || !strings.Contains(first, tc.want) {
			t.Errorf("dpproxy %v: exit %d, stdout %q, first stderr line %q; want 2 and %q", tc.args, code, out, first, tc.want)
		}
	}
	failing := []struct {
		args []string
		want string
	}{
		{[]string{"budget", "grant", "--config", cfg, "--analyst", "mallory", "--dataset", "hospital", "--epsilon", "1"}, `analyst "mallory" is not in the config`},
		{[]string{"budget", "grant", "--config", cfg, "--analyst", "alice", "--dataset", "clinic", "--epsilon", "1"}, `no policy for dataset "clinic"`},
		{[]string{"budget", "reset", "--config", cfg, "--analyst", "bob", "--dataset", "hospital", "--confirm"}, "bob has no budget on hospital"},
		{[]string{"ledger", "verify", "--config", cfg + ".missing"}, "read config"},
	}
	for _, tc := range failing {
		code, out, errOut := runCLI(t, "", tc.args...)
		if code != 1 || out != "" || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("dpproxy %v: exit %d, stdout %q, stderr %q; want 1 and one line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
