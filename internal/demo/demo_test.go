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
	sc := pgtest.NewCluster(t)
	ctx := context.Background()
	start := time.Now()
	res, err := Setup(ctx, c, sc, Options{})
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
	if got := sqlState(t, c.RoleDSN(LedgerRole, "", Database), "SELECT 1"); got != "42501" {
		t.Errorf("%s connecting to %s: SQLSTATE %q, want 42501", LedgerRole, Database, got)
	}
	// Each cluster has only its own roles: the shadow roles cannot even log
	// in to the data cluster (28000: role does not exist), nor the data roles
	// to the shadow cluster.
	for _, role := range ShadowRoles {
		if got := sqlState(t, c.RoleDSN(role, "", Database), "SELECT 1"); got != "28000" {
			t.Errorf("shadow role %s logging in to the data cluster: SQLSTATE %q, want 28000", role, got)
		}
	}
	for _, role := range DataRoles {
		if got := sqlState(t, sc.RoleDSN(role, "", ShadowDatabase), "SELECT 1"); got != "28000" {
			t.Errorf("data role %s logging in to the shadow cluster: SQLSTATE %q, want 28000", role, got)
		}
	}
	// The shadow database is named like the dataset, is in the other
	// cluster, and is the only database the shadow role reaches there.
	if got := scalar(t, res.ShadowDSN, "SELECT current_database()"); got != Database {
		t.Errorf("shadow current_database() = %s, want %s", got, Database)
	}
	// (Read as the shadow's owner: the shadow role may not execute
	// pg_control_system, a volatile function, shadowacl.)
	if scalar(t, res.ShadowAdminDSN, "SELECT system_identifier::text FROM pg_control_system()") == scalar(t, res.AdminDSN, "SELECT system_identifier::text FROM pg_control_system()") {
		t.Fatal("the shadow DSN reaches the data cluster")
	}
	if got := sqlState(t, sc.RoleDSN(ShadowRole, "", "postgres"), "SELECT 1"); got != "42501" {
		t.Errorf("shadow role connecting to the shadow cluster's postgres database: SQLSTATE %q, want 42501", got)
	}
	// The shadow role can connect to its database but create nothing there.
	if got := sqlState(t, res.ShadowDSN, "CREATE TABLE x(i int)"); got == "" {
		t.Error("shadow role can create a table in the shadow database")
	}
	if got := sqlState(t, res.ShadowDSN, "BEGIN READ WRITE; CREATE TEMP TABLE x(i int)"); got != "42501" {
		t.Errorf("shadow role CREATE TEMP TABLE: SQLSTATE %q, want 42501", got)
	}
	// Analysts share the shadow role: their statements are not tracked in
	// pg_stat_activity, and the role cannot turn tracking back on.
	if got := scalar(t, res.ShadowDSN, "SHOW track_activities"); got != "off" {
		t.Errorf("shadow role track_activities = %s, want off", got)
	}
	if got := sqlState(t, res.ShadowDSN, "SET track_activities = on"); got != "42501" {
		t.Errorf("shadow role SET track_activities: SQLSTATE %q, want 42501", got)
	}
	// The statistics the shadow cluster shows know nothing of the data: the
	// data cluster counts the 250000 loaded rows, the shadow cluster's
	// databases (which do not include the ledger) only their own activity
	// (initdb inserts about 18000 catalog rows into template1).
	waitStat(t, res.AdminDSN, "SELECT tup_inserted >= 250000 FROM pg_stat_database WHERE datname = 'hospital'")
	if got := scalar(t, res.ShadowDSN, "SELECT coalesce(max(tup_inserted), 0) < 100000 FROM pg_stat_database"); got != "t" {
		t.Errorf("the shadow cluster's pg_stat_database shows row activity of the data's size")
	}
	if got := scalar(t, res.ShadowDSN, "SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_database"); got != "hospital,postgres,template0,template1" {
		t.Errorf("shadow cluster databases = %s, want only hospital and the system ones", got)
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
	// ... and removes the shadow database and roles that earlier versions
	// created in the data cluster.
	for _, sql := range []string{
		"CREATE ROLE " + ShadowOwnerRole + " LOGIN",
		"CREATE ROLE " + ShadowRole + " LOGIN",
		"CREATE DATABASE " + legacyShadowDatabase + " OWNER " + ShadowOwnerRole,
		"GRANT CONNECT ON DATABASE " + legacyShadowDatabase + " TO " + ShadowRole,
		"GRANT CONNECT ON DATABASE " + LedgerDatabase + " TO " + ShadowRole,
	} {
		if err := execSQL(c.DSN("postgres"), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	res2, err := Setup(ctx, c, sc, Options{})
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
	if got := scalar(t, c.DSN("postgres"), "SELECT (SELECT count(*) FROM pg_database WHERE datname = '"+legacyShadowDatabase+"') || ',' || (SELECT count(*) FROM pg_roles WHERE rolname LIKE 'dpproxy_shadow%')"); got != "0,0" {
		t.Errorf("legacy shadow database, roles left in the data cluster: %s, want 0,0", got)
	}
	if got := sqlState(t, res2.ShadowDSN, "SELECT 1"); got != "" {
		t.Errorf("shadow role after the second Setup: %s", got)
	}

	// The shadow in the data's cluster is refused before anything changes.
	_, err = Setup(ctx, c, c, Options{})
	if !errors.Is(err, ErrSameCluster) {
		t.Errorf("Setup with one cluster for data and shadow: %v, want ErrSameCluster", err)
	}
	if got := scalar(t, c.DSN("postgres"), "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'dpproxy_shadow%'"); got != "0" {
		t.Errorf("the refused Setup created %s shadow roles in the data cluster", got)
	}
}

// waitStat polls a boolean statistics query until it is true (the
// cumulative statistics are flushed by each backend within about a second).
func waitStat(t *testing.T, dsn, sql string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for scalar(t, dsn, sql) != "t" {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still false after 10s", sql)
		}
		time.Sleep(200 * time.Millisecond)
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
