package demo

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func scalar(t *testing.T, dsn, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(ctx)
	var s *string
	if err := conn.QueryRow(ctx, sql, pgx.QueryExecModeSimpleProtocol).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if s == nil {
		return "NULL"
	}
	return *s
}

// sqlState runs sql as the DSN's role and returns the SQLSTATE of the error
// ("" when it succeeded).
func sqlState(t *testing.T, dsn, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err == nil {
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	if err != nil {
		t.Fatalf("%s as %s: %v (not a PostgreSQL error)", sql, dsn, err)
	}
	return ""
}

func TestSetup(t *testing.T) {
	c := pgtest.Cluster(t)
	ctx := context.Background()
	start := time.Now()
	res, err := Setup(ctx, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Setup took %s", time.Since(start))
	if !res.Generated {
		t.Error("first Setup did not generate data")
	}

	// Counts and policy conformance, checked by PostgreSQL on the loaded rows.
	checks := []struct{ name, sql, want string }{
		{"patients", "SELECT count(*) FROM patients", "50000"},
		{"visits", "SELECT count(*) FROM visits", "200000"},
		{"visits per patient", "SELECT min(n) || '..' || max(n) FROM (SELECT count(*) n FROM visits GROUP BY patient_id) s", "1..20"},
		{"patients without visits", "SELECT count(*) FROM patients p WHERE NOT EXISTS (SELECT 1 FROM visits v WHERE v.patient_id = p.patient_id)", "0"},
		{"dates", "SELECT min(visit_date) >= '2020-01-01' AND max(visit_date) <= '2024-12-31' FROM visits", "t"},
		{"age", "SELECT min(age) >= 0 AND max(age) <= 110 FROM visits", "t"},
		{"cost", "SELECT min(cost) >= 0 AND max(cost) <= 20000 FROM visits", "t"},
		{"length_of_stay", "SELECT min(length_of_stay) >= 0 AND max(length_of_stay) <= 60 FROM visits", "t"},
		{"departments", "SELECT string_agg(DISTINCT department, ',' ORDER BY department) FROM visits", "cardiology,emergency,neurology,oncology,orthopedics,pediatrics,surgery"},
		{"sexes", "SELECT string_agg(DISTINCT sex, ',' ORDER BY sex) FROM patients", "F,M"},
		{"regions", "SELECT string_agg(DISTINCT region, ',' ORDER BY region) FROM patients", "central,east,north,south,west"},
		{"birth_year", "SELECT min(birth_year) >= 1910 AND max(birth_year) <= 2024 FROM patients", "t"},
	}
	for _, ch := range checks {
		if got := scalar(t, res.AdminDSN, ch.sql); got != ch.want {
			t.Errorf("%s: %s = %s, want %s", ch.name, ch.sql, got, ch.want)
		}
	}
	// The loaded rows are the generated ones (same seed → same sum).
	var wantCents int64
	for _, v := range demoData().Visits {
		wantCents += v.CostCents
	}
	if got := scalar(t, res.AdminDSN, "SELECT (sum(cost) * 100)::bigint FROM visits"); got != itoa(wantCents) {
		t.Errorf("sum(cost)*100 = %s, want %d", got, wantCents)
	}

	// Least privilege of the reader role.
	if got := sqlState(t, res.UpstreamDSN, "SELECT patient_id, visit_date, department, diagnosis, age, cost, length_of_stay FROM visits LIMIT 1"); got != "" {
		t.Errorf("reader cannot read the exposed columns of visits: %s", got)
	}
	if got := sqlState(t, res.UpstreamDSN, "SELECT patient_id, birth_year, sex, region FROM patients LIMIT 1"); got != "" {
		t.Errorf("reader cannot read the exposed columns of patients: %s", got)
	}
	for _, sql := range []string{
		"SELECT visit_id FROM visits LIMIT 1", // access: none
		"SELECT * FROM visits LIMIT 1",
		"SELECT 1 FROM pg_catalog.pg_statistic LIMIT 1",
	} {
		if got := sqlState(t, res.UpstreamDSN, sql); got != "42501" {
			t.Errorf("reader: %s → SQLSTATE %q, want 42501", sql, got)
		}
	}
	if got := sqlState(t, res.UpstreamDSN, "CREATE TEMP TABLE x(i int)"); got == "" {
		t.Error("reader can create a temporary table")
	}
	if got := sqlState(t, res.UpstreamDSN, "SHOW default_transaction_read_only"); got != "" {
		t.Fatal(got)
	}
	if got := scalar(t, res.UpstreamDSN, "SHOW default_transaction_read_only"); got != "on" {
		t.Errorf("reader default_transaction_read_only = %s, want on", got)
	}
	// Nobody but the reader (and superusers) connects to the data database.
	for _, role := range []string{ShadowRole, LedgerRole, ShadowOwnerRole} {
		if got := sqlState(t, c.RoleDSN(role, "", Database), "SELECT 1"); got != "42501" {
			t.Errorf("%s connecting to %s: SQLSTATE %q, want 42501", role, Database, got)
		}
	}
	if got := sqlState(t, c.RoleDSN(ShadowRole, "", LedgerDatabase), "SELECT 1"); got != "42501" {
		t.Errorf("shadow role connecting to the ledger database: SQLSTATE %q, want 42501", got)
	}
	// The shadow role can connect to its database but create nothing there.
	if got := sqlState(t, res.ShadowDSN, "CREATE TABLE x(i int)"); got == "" {
		t.Error("shadow role can create a table in the shadow database")
	}
	if got := sqlState(t, res.ShadowDSN, "BEGIN READ WRITE; CREATE TEMP TABLE x(i int)"); got != "42501" {
		t.Errorf("shadow role CREATE TEMP TABLE: SQLSTATE %q, want 42501", got)
	}
	// Owners can create in their databases.
	if got := sqlState(t, res.LedgerDSN, "CREATE TABLE ledger_probe(i int); DROP TABLE ledger_probe"); got != "" {
		t.Errorf("ledger role cannot create a table in its database: %s", got)
	}
	if got := sqlState(t, res.ShadowAdminDSN, "CREATE TABLE shadow_probe(i int); DROP TABLE shadow_probe"); got != "" {
		t.Errorf("shadow owner cannot create a table in its database: %s", got)
	}

	// Idempotent: a second Setup keeps the data.
	if err := execSQL(res.AdminDSN, "CREATE TABLE setup_probe(i int)"); err != nil {
		t.Fatal(err)
	}
	res2, err := Setup(ctx, c, Options{})
	if err != nil {
		t.Fatalf("second Setup: %v", err)
	}
	if res2.Generated {
		t.Error("second Setup generated the data again")
	}
	if got := scalar(t, res.AdminDSN, "SELECT count(*) FROM setup_probe"); got != "0" {
		t.Errorf("probe table lost after the second Setup")
	}
	if *res2 != (Result{AdminDSN: res.AdminDSN, UpstreamDSN: res.UpstreamDSN, LedgerDSN: res.LedgerDSN, ShadowDSN: res.ShadowDSN, ShadowAdminDSN: res.ShadowAdminDSN}) {
		t.Errorf("second Setup DSNs %+v differ from the first %+v", res2, res)
	}
}

func execSQL(dsn, sql string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}
