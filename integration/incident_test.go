package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
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

// TestAdversarial_ClientTimeDoesNotReachDP: the client's statement_timeout
// (and a cancel request, which the session maps the same way) ends a DP
// statement for the client — 57014 after the client's own delay, while the
// upstream query still waits on a lock — but not the query: once the lock
// goes, the release completes in the background, its charge is released
// (answered, not an incident), and asking again returns that answer from
// the cache at no cost. A unit literal of the wrong type is refused before
// any charge (the unit column's type comes from the live catalog).
func TestAdversarial_ClientTimeDoesNotReachDP(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		cfg["analysts"].(map[string]any)["hank"] = map[string]any{"password": "plain:hank"}
	})
	p := startProxy(t, cfgPath, addr)
	ledger := connect(t, ctx, ledgerDSN())
	conn, notices := connectWithNotices(t, ctx, p.dsn("hank"))

	before := lastChargeID(t, ctx, ledger)
	_, err := conn.Exec(ctx, "SELECT COUNT(*) FROM patients WHERE patient_id = 'abc'")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22P02" {
		t.Fatalf("unit column compared with 'abc': %v, want 22P02 at plan time", err)
	}
	if lastChargeID(t, ctx, ledger) != before {
		t.Fatal("the refused unit literal was charged")
	}

	const q = "SELECT COUNT(*) FROM patients WHERE region = 'north' AND birth_year > 1950"
	unlock := lockTable(t, ctx, "patients")
	if _, err := conn.Exec(ctx, "SET statement_timeout = 300"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = conn.Exec(ctx, q)
	if !errors.As(err, &pe) || pe.Code != "57014" || !strings.Contains(pe.Message, "statement timeout") {
		t.Fatalf("DP query under a 300ms client timeout: %v, want 57014", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Fatalf("the client's timeout came after %v", d)
	}
	id, status := waitForCharge(t, ctx, ledger, "hank", before)
	if status != "reserved" {
		t.Fatalf("charge %d is %s while the upstream waits", id, status)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET statement_timeout = 0"); err != nil {
		t.Fatal(err)
	}
	// The next DP statement waits for the background release, which
	// finishes and is released, not an incident.
	var n int64
	if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
		t.Fatalf("the same query again: %v", err)
	}
	if err := ledger.QueryRow(ctx, "SELECT status FROM dpproxy_ledger.charge WHERE id = $1", id).Scan(&status); err != nil || status != "released" {
		t.Fatalf("charge %d: %s, %v; want released", id, status, err)
	}
	var charges, incidents int
	if err := ledger.QueryRow(ctx, `SELECT (SELECT count(*) FROM dpproxy_ledger.charge WHERE analyst = 'hank'),
		(SELECT count(*) FROM dpproxy_ledger.incident WHERE analyst = 'hank')`).Scan(&charges, &incidents); err != nil {
		t.Fatal(err)
	}
	if charges != 1 || incidents != 0 {
		t.Fatalf("hank: %d charges, %d incidents; want 1 (the second answer from the cache) and 0", charges, incidents)
	}
	if ns := notices(); len(ns) == 0 || !strings.Contains(ns[len(ns)-1], "cached") {
		t.Fatalf("the second answer's NOTICE does not say it is cached: %q", ns)
	}
}

// TestPsql_OnErrorRollback: psql with ON_ERROR_ROLLBACK on (common in
// .psqlrc) wraps every statement of a transaction in a savepoint; a
// refused statement then no longer aborts the whole transaction (issue 17).
func TestPsql_OnErrorRollback(t *testing.T) {
	requireDemo(t)
	script := filepath.Join(t.TempDir(), "s.sql")
	if err := os.WriteFile(script, []byte(`\set ON_ERROR_ROLLBACK on
BEGIN;
SELECT * FROM visits;
SELECT 'still in the transaction' AS t;
SET dp.epsilon = 0.2;
SHOW dp.epsilon;
COMMIT;
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := psql(t, analystDSN("alice"), "-v", "ON_ERROR_STOP=0", "-A", "-t", "-f", script)
	if code != 0 || !strings.Contains(out, "still in the transaction") || !strings.Contains(out, "0.2") ||
		!strings.Contains(stderr, "42501") || strings.Contains(stderr, "25P02") || strings.Contains(stderr, "savepoints are not supported") {
		t.Fatalf("psql ON_ERROR_ROLLBACK: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
}

// TestPgx_TimeParameters: pgx binds time.Time, in every exec mode; at
// midnight it is the date it names and the DP query is answered; with a
// time of day it is compared with the date column exactly as PostgreSQL
// compares it (issue 17): the date EXPLAIN shows in the emitted SQL
// selects, on the data database, exactly the rows the same statement
// with the same parameter and exec mode selects there. Described as a
// date, pgx sends the date; in exec mode a timestamptz (the date is
// promoted to midnight, so 10:30 means the next day); in the simple
// protocol a string PostgreSQL reads as a date.
func TestPgx_TimeParameters(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := connect(t, ctx, analystDSN("alice"))
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 0.01"); err != nil {
		t.Fatal(err)
	}
	up := connect(t, ctx, env.upstreamDSN)
	folded := regexp.MustCompile(`"visit_date" >= '(\d{4}-\d\d-\d\d)'::date`)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol,
		pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeDescribeExec} {
		var n int64
		day := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
		if err := conn.QueryRow(ctx, "SELECT COUNT(*) FROM visits WHERE visit_date >= $1 AND age > 7", mode, day).Scan(&n); err != nil {
			t.Fatalf("%v, midnight: %v", mode, err)
		}
		at := day.Add(10*time.Hour + 30*time.Minute)
		if _, err := conn.Exec(ctx, "SELECT COUNT(*) FROM visits WHERE visit_date >= $1 AND age > 8", mode, at); err != nil {
			t.Fatalf("%v, 10:30: %v", mode, err)
		}
		var plan []string
		rows, err := conn.Query(ctx, "EXPLAIN SELECT COUNT(*) FROM visits WHERE visit_date >= $1 AND age > 8", mode, at)
		if err != nil {
			t.Fatalf("%v, EXPLAIN 10:30: %v", mode, err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if rows.Err() != nil {
			t.Fatalf("%v, EXPLAIN 10:30: %v", mode, rows.Err())
		}
		m := folded.FindStringSubmatch(strings.Join(plan, "\n"))
		if m == nil {
			t.Fatalf("%v: EXPLAIN shows no folded date:\n%s", mode, strings.Join(plan, "\n"))
		}
		var want, got int64
		if err := up.QueryRow(ctx, "SELECT count(*) FROM visits WHERE visit_date >= $1", mode, at).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if err := up.QueryRow(ctx, "SELECT count(*) FROM visits WHERE visit_date >= $1::date", m[1]).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%v: dpproxy compares visit_date >= %s (%d rows); PostgreSQL, given the same parameter, selects %d rows", mode, m[1], got, want)
		}
		t.Logf("%v: 10:30 on 2024-03-01 compares as visit_date >= %s, as on PostgreSQL", mode, m[1])
	}
}
