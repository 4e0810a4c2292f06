package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// TestBudgetCLI_WindowTeamAudit: with a budget window and a team in the
// policy and an audit log in the config, `budget show` lists the window's
// renewal and the lifetime figure and the team's row, `budget grant`
// raises a team's budget, and grants write budget_change audit lines.
func TestBudgetCLI_WindowTeamAudit(t *testing.T) {
	cfgPath, _, l, _ := stewardSetup(t)
	dir := filepath.Dir(cfgPath)
	pp := filepath.Join(dir, "policies", "hospital.yaml")
	raw, err := os.ReadFile(pp)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(raw), "  accountant: pure\n", "  accountant: pure\n  window: 30d\n  lifetime: {epsilon: 9, delta: 3.0e-6}\n", 1) +
		"teams:\n  cardio: {members: [alice, bob], epsilon: 2, lifetime_epsilon: 5}\n"
	if err := os.WriteFile(pp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := policy.Load(pp)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(cfgPath)
	if err := os.WriteFile(cfgPath, append(cfg, []byte("audit: {path: audit.log}\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	chargeN(t, l, ds, "alice", 0.5, 2, true)

	out := okCLI(t, "budget", "show", "--config", cfgPath)
	if !strings.Contains(out, "window_renews") || !strings.Contains(out, "lifetime_epsilon") {
		t.Fatalf("budget show has no window columns:\n%s", out)
	}
	alice := tableRow(t, out, "alice")
	if alice[3] != "1" || alice[len(alice)-1] != "1/9" || !strings.HasSuffix(alice[len(alice)-2], "Z") {
		t.Errorf("alice's row = %v, want spent 1, lifetime 1/9 and a renewal time", alice)
	}
	team := tableRow(t, out, "team:cardio")
	if team[3] != "1" || team[4] != "2" || team[len(team)-1] != "1/5" {
		t.Errorf("team row = %v, want spent 1 of 2, lifetime 1/5", team)
	}

	out = okCLI(t, "budget", "grant", "--config", cfgPath, "--analyst", "team:cardio", "--dataset", "hospital", "--epsilon", "0.5")
	if !strings.Contains(out, "limit now ε=2.5") {
		t.Errorf("team grant: %s", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"event":"budget_change","action":"grant","analyst":"team:cardio","dataset":"hospital"`) {
		t.Errorf("audit log has no grant line:\n%s", b)
	}
}
