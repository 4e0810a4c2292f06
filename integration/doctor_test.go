package integration

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDoctor_Demo: `dpproxy doctor` finds the demo's roles least-privileged
// and its column types matching (exit 0, every check ok) with the demo's
// own response_time (the tests' demo runs with padding off, which doctor
// reports as a warning).
func TestDoctor_Demo(t *testing.T) {
	requireDemo(t)
	out, _, code := dpproxyCLI(t, "doctor", "--config", filepath.Join(env.dataDir, "dpproxy.yaml"))
	if code != 1 || !strings.Contains(out, "WARNING: hospital: response_time is off") {
		t.Fatalf("doctor with response_time 0s: exit %d, want 1 with the response_time warning\n%s", code, out)
	}
	cfgPath, _ := extraConfigWith(t, func(cfg map[string]any) {
		cfg["datasets"].(map[string]any)["hospital"].(map[string]any)["response_time"] = "500ms"
	})
	out, errOut, code := dpproxyCLI(t, "doctor", "--config", cfgPath)
	t.Logf("dpproxy doctor (demo):\n%s", out)
	if code != 0 || strings.Contains(out, "WARNING") || !strings.Contains(out, "checks passed") {
		t.Fatalf("doctor on the demo: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"data role dpproxy_reader is not superuser",
		"data role dpproxy_reader is read-only",
		"data role dpproxy_reader can SELECT only the",
		"data role dpproxy_reader cannot connect to the ledger database",
		"ledger role dpproxy_ledger cannot connect to the data database",
		"shadow role dpproxy_shadow has no write privilege",
		"the shadow catalog's protected tables hold no rows",
		"shadow role dpproxy_shadow has temp_file_limit 1GB",
		"shadow role dpproxy_shadow cannot connect to the data database",
		"column types: every declared column's live type honours its policy type",
		"response_time pads every DP answer to 500ms",
		"table visits has 200000 rows, within its declared max_rows 250000",
		"table patients has 50000 rows, within its declared max_rows 60000",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q", want)
		}
	}
}

// TestDoctor_OverPrivileged: a data role with more than it needs — CREATEDB,
// a hidden column (visits.visit_id), a table the policy does not name, an
// INSERT privilege, no default_transaction_read_only, CONNECT to the
// ledger database with SELECT on a ledger table, membership of
// pg_read_all_data — gets one warning for each, and exit 1.
func TestDoctor_OverPrivileged(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := connect(t, ctx, env.upstreamDSN)
	ledgerAdmin := connect(t, ctx, ledgerDSN())
	const role = "dpproxy_wide"
	drop := func() {
		for _, s := range []string{
			"REVOKE ALL ON ALL TABLES IN SCHEMA dpproxy_ledger FROM " + role,
			"REVOKE ALL ON SCHEMA dpproxy_ledger FROM " + role,
		} {
			_, _ = ledgerAdmin.Exec(context.Background(), s)
		}
		for _, s := range []string{
			"DROP TABLE IF EXISTS doctor_extra",
			"REVOKE ALL ON DATABASE dpproxy_ledger FROM " + role,
			"DROP OWNED BY " + role,
			"DROP ROLE IF EXISTS " + role,
		} {
			_, _ = admin.Exec(context.Background(), s)
		}
	}
	drop()
	t.Cleanup(drop)
	for _, s := range []string{
		"CREATE ROLE " + role + " LOGIN CREATEDB PASSWORD 'wide'",
		"GRANT CONNECT ON DATABASE hospital TO " + role,
		"GRANT USAGE ON SCHEMA public TO " + role,
		"GRANT SELECT ON visits, patients TO " + role,
		"GRANT INSERT ON patients TO " + role,
		"CREATE TABLE doctor_extra (secret text)",
		"GRANT SELECT ON doctor_extra TO " + role,
		"GRANT CONNECT ON DATABASE dpproxy_ledger TO " + role,
		"GRANT pg_read_all_data TO " + role,
	} {
		if _, err := admin.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	u, err := url.Parse(env.upstreamDSN)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "wide")
	cfgPath, _ := extraConfigWith(t, func(cfg map[string]any) {
		cfg["datasets"].(map[string]any)["hospital"].(map[string]any)["upstream"] = u.String()
	})
	out, errOut, code := dpproxyCLI(t, "doctor", "--config", cfgPath)
	t.Logf("dpproxy doctor (over-privileged):\n%s", out)
	if code != 1 {
		t.Fatalf("doctor on an over-privileged data role: exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"WARNING: hospital: data role dpproxy_wide has CREATEDB",
		"WARNING: hospital: data role dpproxy_wide is a member of pg_read_all_data",
		"WARNING: hospital: data role dpproxy_wide can write: INSERT on public.patients",
		`WARNING: hospital: data role dpproxy_wide can SELECT columns the policy does not expose: public.doctor_extra.secret`,
		`public.visits.visit_id`,
		"WARNING: hospital: data role dpproxy_wide can connect to the ledger database and use its tables dpproxy_ledger.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q", want)
		}
	}
	// The ledger and shadow roles are unchanged: still ok.
	for _, want := range []string{"ok: ledger role dpproxy_ledger is not superuser", "ok: hospital: the shadow catalog's protected tables hold no rows"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q", want)
		}
	}
	if n := strings.Count(out, "WARNING"); n < 5 {
		t.Errorf("%d warnings, want at least 5", n)
	}
}

// TestDoctor_MisspeltUnitColumn: a policy whose unit column does not exist
// (unit_column: patientid) is an ERROR — the proxy will not start — with a
// summary that says so, and no GRANT or REVOKE advice about the misspelt
// column or the real one (a new user's run had three WARNINGs, advice to
// grant SELECT on a column that does not exist, and a summary about
// privileges).
func TestDoctor_MisspeltUnitColumn(t *testing.T) {
	requireDemo(t)
	cfgPath, _ := extraConfigPolicy(t, "../examples/policies/hospital.yaml",
		[2]string{"  visits:\n    unit_column: patient_id", "  visits:\n    unit_column: patientid"})
	out, errOut, code := dpproxyCLI(t, "doctor", "--config", cfgPath)
	if code != 1 {
		t.Fatalf("doctor: exit %d, want 1\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, `ERROR: hospital: column types: table public.visits has no unit column "patientid"`) ||
		!strings.Contains(out, "1 error: dpproxy will not start") {
		t.Errorf("doctor output lacks the ERROR (named once by its dataset) and its summary:\n%s", out)
	}
	// Nor advice on partitioning by the column that does not exist (a
	// new user's run of 7 December).
	for _, bad := range []string{"GRANT SELECT", "REVOKE SELECT on them", "a role has privileges broader", "by patientid"} {
		if strings.Contains(out, bad) {
			t.Errorf("doctor output has %q for a misspelt column:\n%s", bad, out)
		}
	}
}
