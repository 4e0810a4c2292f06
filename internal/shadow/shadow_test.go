package shadow

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type colInfo struct{ name, typ, notNull string }

func columns(t *testing.T, dsn, table string) []colInfo {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull::text
		FROM pg_attribute a WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []colInfo
	for rows.Next() {
		var c colInfo
		if err := rows.Scan(&c.name, &c.typ, &c.notNull); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func scalar(t *testing.T, dsn, sql string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, sql, pgx.QueryExecModeSimpleProtocol).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func TestBuild(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Cluster(t)
	sc := pgtest.NewCluster(t)
	res, err := demo.Setup(ctx, c, sc, demo.Options{Patients: 200, Visits: 800})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := demo.HospitalPolicy()
	if err != nil {
		t.Fatal(err)
	}
	// A leftover table of an earlier policy must disappear.
	if err := pgtest.Exec(ctx, res.ShadowAdminDSN, "CREATE TABLE IF NOT EXISTS old_table(secret int)"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // idempotent
		if err := Build(ctx, res.ShadowAdminDSN, res.UpstreamDSN, ds, demo.ShadowRole); err != nil {
			t.Fatalf("Build #%d: %v", i+1, err)
		}
	}

	for _, name := range ds.TableOrder {
		tbl := ds.Tables[name]
		visible := map[string]bool{}
		for _, v := range tbl.VisibleColumns() {
			visible[v] = true
		}
		var want []colInfo
		for _, col := range columns(t, res.AdminDSN, name) {
			if visible[col.name] {
				want = append(want, col)
			}
		}
		got := columns(t, res.ShadowDSN, name)
		if len(got) != len(want) || len(got) != len(tbl.VisibleColumns()) {
			t.Fatalf("shadow %s columns = %v, want %v", name, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("shadow %s column %d = %v, want %v", name, i, got[i], want[i])
			}
		}
		if got := scalar(t, res.ShadowDSN, "SELECT count(*) FROM "+name); got != "0" {
			t.Errorf("shadow %s has %s rows, want 0", name, got)
		}
		// Statistics describe an empty table, even after ANALYZE.
		if err := pgtest.Exec(ctx, res.ShadowAdminDSN, "ANALYZE "+name); err != nil {
			t.Fatal(err)
		}
		if got := scalar(t, res.ShadowDSN, "SELECT count(*) FROM pg_stats WHERE tablename = '"+name+"'"); got != "0" {
			t.Errorf("shadow %s has %s pg_stats rows, want 0", name, got)
		}
		if got := scalar(t, res.ShadowDSN, "SELECT reltuples <= 0 AND relpages = 0 FROM pg_class WHERE relname = '"+name+"'"); got != "t" {
			t.Errorf("shadow %s: pg_class reltuples/relpages describe rows", name)
		}
	}
	// Primary keys are reproduced when all their columns are visible
	// (patients.patient_id), and dropped when not (visits.visit_id is
	// access: none).
	pkOf := func(table string) string {
		return scalar(t, res.ShadowDSN, `SELECT coalesce(string_agg(a.attname, ','), '') FROM pg_index i
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
			WHERE i.indrelid = '`+table+`'::regclass AND i.indisprimary`)
	}
	if got := pkOf("patients"); got != "patient_id" {
		t.Errorf("shadow patients primary key = %q, want patient_id", got)
	}
	if got := pkOf("visits"); got != "" {
		t.Errorf("shadow visits primary key = %q, want none (visit_id is hidden)", got)
	}
	// Each protected column says what DP queries do with it, where
	// clients show column comments (psql \d+, JDBC REMARKS).
	comment := func(table, col string) string {
		return scalar(t, res.ShadowDSN, "SELECT coalesce(col_description('"+table+"'::regclass, (SELECT attnum FROM pg_attribute WHERE attrelid = '"+table+"'::regclass AND attname = '"+col+"')), '')")
	}
	for _, w := range []struct{ table, col, want string }{
		{"visits", "patient_id", "dpproxy: the privacy unit (one patient); each DP answer counts at most 20 rows of one patient in all; its values are never released"},
		{"visits", "cost", "dpproxy: clamped to [0, 20000] in sums, averages, deviations and quantiles"},
		{"visits", "department", "dpproxy: GROUP BY returns exactly these values: cardiology, emergency, neurology, oncology, orthopedics, pediatrics, surgery"},
		{"visits", "diagnosis", "dpproxy: no public values: GROUP BY needs SET dp.delta (groups chosen by DP)"},
		{"visits", "visit_date", "dpproxy: declared range [2020-01-01, 2024-12-31]: date groups (date_trunc, extract) and quantiles cover it"},
	} {
		if got := comment(w.table, w.col); got != w.want {
			t.Errorf("comment of %s.%s = %q, want %q", w.table, w.col, got, w.want)
		}
	}
	// Hidden columns never appear, not even by name.
	if got := scalar(t, res.ShadowDSN, "SELECT count(*) FROM pg_attribute WHERE attname = 'visit_id'"); got != "0" {
		t.Errorf("hidden column visit_id appears %s times in the shadow catalog", got)
	}
	if got := scalar(t, res.ShadowAdminDSN, "SELECT count(*) FROM pg_class WHERE relname = 'old_table'"); got != "0" {
		t.Error("a table no longer in the policy survived Build")
	}
	// The shadow role does not exist in the data cluster.
	ctxConn, err := pgx.Connect(ctx, c.RoleDSN(demo.ShadowRole, "", demo.Database))
	var pe *pgconn.PgError
	if err == nil {
		ctxConn.Close(ctx)
		t.Error("the shadow role can connect to the data database")
	} else if !errors.As(err, &pe) || pe.Code != "28000" {
		t.Errorf("shadow role connecting to %s: %v, want SQLSTATE 28000 (no such role)", demo.Database, err)
	}
}

func TestBuild_PolicyColumnMissingUpstream(t *testing.T) {
	ctx := context.Background()
	up := pgtest.NewDatabase(t)
	sameCluster := pgtest.NewDatabase(t)
	sh := pgtest.NewCluster(t).DSN("postgres")
	if err := pgtest.Exec(ctx, up, "CREATE TABLE t (uid bigint, a int, secret text)"); err != nil {
		t.Fatal(err)
	}
	for _, dsn := range []string{sh, sameCluster} {
		if err := pgtest.Exec(ctx, dsn, "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shadow_test') THEN CREATE ROLE shadow_test; END IF; END$$"); err != nil {
			t.Fatal(err)
		}
	}
	const pol = `dataset: d
privacy_unit: u
budget: {epsilon: 1, delta: 1.0e-6, accountant: pure}
defaults: {epsilon: 0.1, mechanism: laplace}
tables:
  t:
    unit_column: uid
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      a: {type: int, lower: 0, upper: 10}
      b: {type: int, lower: 0, upper: 10}
      secret: {access: none}
`
	ds, err := policy.Parse(strings.NewReader(pol), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A shadow database in the upstream's cluster is refused.
	if err := Build(ctx, sameCluster, up, ds, "shadow_test"); !errors.Is(err, ErrSameCluster) {
		t.Fatalf("Build with the shadow in the upstream's cluster: %v, want ErrSameCluster", err)
	}
	if got := scalar(t, sameCluster, "SELECT count(*) FROM pg_class WHERE relname = 't'"); got != "0" {
		t.Errorf("the refused Build created the shadow table")
	}
	err = Build(ctx, sh, up, ds, "shadow_test")
	if err == nil || !strings.Contains(err.Error(), "column b of table public.t does not exist") {
		t.Fatalf("Build with a missing column: %v, want an error naming column b", err)
	}
	// After fixing the table, Build works and leaves out the hidden column.
	if err := pgtest.Exec(ctx, up, "ALTER TABLE t ADD COLUMN b smallint NOT NULL DEFAULT 0"); err != nil {
		t.Fatal(err)
	}
	if err := Build(ctx, sh, up, ds, "shadow_test"); err != nil {
		t.Fatal(err)
	}
	got := columns(t, sh, "t")
	want := []colInfo{{"uid", "bigint", "false"}, {"a", "integer", "false"}, {"b", "smallint", "true"}}
	if len(got) != len(want) {
		t.Fatalf("shadow columns = %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("shadow column %d = %v, want %v", i, got[i], want[i])
		}
	}
}
