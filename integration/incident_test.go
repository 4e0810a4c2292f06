package integration

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestAdversarial_LikeOracle is issue 14's exact-row oracle, tried as the
// attacker did: a LIKE pattern ending in an unescaped backslash, probing one
// patient whose diagnosis matches up to the backslash and one whose does
// not, in WHERE, in FILTER, in a CASE condition, with E” and dollar
// quoting, with a custom ESCAPE, through the simple protocol (psql and pgx)
// and the extended protocol with the pattern as a bound parameter. Every
// probe of both patients gets the same 22025 refusal before any charge,
// and nothing is charged.
func TestAdversarial_LikeOracle(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data := connect(t, ctx, env.upstreamDSN)
	var hit, miss int64
	var prefix string
	if err := data.QueryRow(ctx, `SELECT patient_id, left(diagnosis, 3) FROM visits
		WHERE diagnosis IS NOT NULL ORDER BY patient_id LIMIT 1`).Scan(&hit, &prefix); err != nil {
		t.Fatal(err)
	}
	if err := data.QueryRow(ctx, `SELECT patient_id FROM patients p WHERE NOT EXISTS
		(SELECT 1 FROM visits v WHERE v.patient_id = p.patient_id AND v.diagnosis LIKE $1 || '%') ORDER BY patient_id LIMIT 1`,
		prefix).Scan(&miss); err != nil {
		t.Fatal(err)
	}
	ledger := connect(t, ctx, ledgerDSN())
	before := lastChargeID(t, ctx, ledger)

	probes := []string{
		`SELECT COUNT(*) FROM visits WHERE patient_id = $P AND diagnosis LIKE '$D\'`,
		`SELECT COUNT(*) FROM visits WHERE patient_id = $P AND diagnosis ILIKE '$D%\'`,
		`SELECT COUNT(*) FROM visits WHERE patient_id = $P AND diagnosis LIKE E'$D\\'`,
		`SELECT COUNT(*) FROM visits WHERE patient_id = $P AND diagnosis LIKE $$$D\$$`,
		`SELECT COUNT(*) FROM visits WHERE patient_id = $P AND diagnosis LIKE '$D!' ESCAPE '!'`,
		`SELECT COUNT(*) FILTER (WHERE patient_id = $P AND diagnosis LIKE '$D%\') FROM visits`,
		`SELECT SUM(CASE WHEN patient_id = $P AND diagnosis LIKE '$D\' THEN 1 ELSE 0 END) FROM visits`,
	}
	conn := connect(t, ctx, analystDSN("alice"))
	for _, probe := range probes {
		var seen []string
		for _, p := range []int64{hit, miss} {
			q := strings.NewReplacer("$P", strconv.FormatInt(p, 10), "$D", prefix).Replace(probe)
			_, err := conn.Exec(ctx, q)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "22025" {
				t.Fatalf("%s\n  pgx: %v, want 22025 before the charge", q, err)
			}
			seen = append(seen, pe.Code+"|"+pe.Message+"|"+pe.Hint)
			_, stderr, code := psql(t, analystDSN("alice"), "-c", q)
			if code == 0 || !strings.Contains(stderr, "22025") {
				t.Fatalf("%s\n  psql exit %d: %s", q, code, stderr)
			}
		}
		if seen[0] != seen[1] {
			t.Fatalf("%s: the two patients get different replies:\n  %s\n  %s", probe, seen[0], seen[1])
		}
	}
	// The extended protocol, the pattern as a bound parameter.
	for _, p := range []int64{hit, miss} {
		var n int64
		err := conn.QueryRow(ctx, "SELECT COUNT(*) FROM visits WHERE patient_id = $1 AND diagnosis LIKE $2", p, prefix+`\`).Scan(&n)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "22025" {
			t.Fatalf("extended protocol, patient %d: %v, want 22025", p, err)
		}
	}
	if after := lastChargeID(t, ctx, ledger); after != before {
		t.Fatalf("the probes were charged: charge id %d → %d", before, after)
	}
}

// TestIncident_CircuitBreaker: an error after the charge (here the proxy's
// own statement_timeout, while the steward holds a lock on the table) is an
// incident: the analyst gets the one fixed error with no upstream text,
// the charge stands, the ledger records the incident, and the analyst is
// suspended on the dataset (incident_limit 1) — the next query is refused
// before any charge — until the steward runs `dpproxy budget resume`,
// which `dpproxy budget show` prompts and the audit trail records.
func TestIncident_CircuitBreaker(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		cfg["statement_timeout"] = "500ms"
		cfg["analysts"].(map[string]any)["gina"] = map[string]any{"password": "plain:gina"}
	})
	p := startProxy(t, cfgPath, addr)
	ledger := connect(t, ctx, ledgerDSN())

	unlock := lockTable(t, ctx, "patients")
	conn := connect(t, ctx, p.dsn("gina"))
	_, err := conn.Exec(ctx, "SELECT COUNT(*) FROM patients WHERE region = 'east'")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "XX000" || !strings.Contains(pe.Message, "failed after its privacy charge") {
		t.Fatalf("query during the lock: %v, want the fixed incident error", err)
	}
	for _, f := range []string{pe.Message, pe.Detail, pe.Hint} {
		if strings.Contains(f, "timeout") || strings.Contains(f, "cancel") || strings.Contains(f, "57014") {
			t.Fatalf("the incident error names what failed: %q", f)
		}
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	var incidents int
	var suspended bool
	if err := ledger.QueryRow(ctx, `SELECT incidents, suspended_at IS NOT NULL FROM dpproxy_ledger.budget
		WHERE dataset = 'hospital' AND analyst = 'gina'`).Scan(&incidents, &suspended); err != nil || incidents != 1 || !suspended {
		t.Fatalf("ledger: incidents %d, suspended %v, %v", incidents, suspended, err)
	}
	var kind, state string
	if err := ledger.QueryRow(ctx, `SELECT kind, sqlstate FROM dpproxy_ledger.incident WHERE analyst = 'gina'`).Scan(&kind, &state); err != nil ||
		kind != "timeout" || state != "57014" {
		t.Fatalf("incident row: %s %s %v", kind, state, err)
	}

	// Suspended: refused before any charge, also on another connection.
	before := lastChargeID(t, ctx, ledger)
	for _, c := range []*pgx.Conn{conn, connect(t, ctx, p.dsn("gina"))} {
		_, err = c.Exec(ctx, "SELECT COUNT(*) FROM patients WHERE region = 'west'")
		if !errors.As(err, &pe) || pe.Code != "42501" || !strings.Contains(pe.Hint, "dpproxy budget resume") {
			t.Fatalf("query while suspended: %v, want 42501 with the resume hint", err)
		}
	}
	if lastChargeID(t, ctx, ledger) != before {
		t.Fatal("a suspended analyst was charged")
	}

	out, stderr, code := dpproxyCLI(t, "budget", "show", "--config", cfgPath, "--dataset", "hospital", "--analyst", "gina")
	if code != 0 || !strings.Contains(out, "1 (suspended)") || !strings.Contains(out, "timeout") || !strings.Contains(out, "57014") {
		t.Fatalf("budget show (exit %d):\n%s%s", code, out, stderr)
	}
	out, stderr, code = dpproxyCLI(t, "budget", "resume", "--config", cfgPath, "--dataset", "hospital", "--analyst", "gina")
	if code != 0 || !strings.Contains(out, "1 incident(s) cleared") {
		t.Fatalf("budget resume (exit %d):\n%s%s", code, out, stderr)
	}
	if _, _, code = dpproxyCLI(t, "budget", "resume", "--config", cfgPath, "--dataset", "hospital", "--analyst", "gina"); code == 0 {
		t.Fatal("a second resume with nothing to clear succeeded")
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT COUNT(*) FROM patients WHERE region = 'west'").Scan(&n); err != nil {
		t.Fatalf("query after resume: %v", err)
	}
	var actions int
	if err := ledger.QueryRow(ctx, `SELECT count(*) FROM dpproxy_ledger.audit WHERE action = 'resume' AND analyst = 'gina'`).Scan(&actions); err != nil || actions != 1 {
		t.Fatalf("audit rows of the resume: %d, %v", actions, err)
	}
}
