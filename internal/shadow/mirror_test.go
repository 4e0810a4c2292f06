package shadow

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const mirrorPolicy = `dataset: d
privacy_unit: u
budget: {epsilon: 1, delta: 1.0e-6, accountant: pure}
defaults: {epsilon: 0.1, mechanism: laplace}
tables:
  visits:
    unit_column: uid
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      region_id: {type: int}
  regions:
    public: true
    columns:
      region_id: {type: int}
      name: {type: text}
      population: {type: int}
      f: {type: float}
      d: {type: date}
      ts: {type: text}
      b: {type: text}
      n: {type: numeric}
      hidden: {access: none}
  big:
    public: true
    columns:
      k: {type: int}
  bare:
    public: true
`

// rowsText returns the rows of a query as their PostgreSQL row text, one
// per line, in a session with fixed output settings.
func rowsText(t *testing.T, ctx context.Context, dsn, sql string) (string, error) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'; SET extra_float_digits = 3; SET DateStyle = 'ISO, MDY'"); err != nil {
		t.Fatal(err)
	}
	var s *string
	err = conn.QueryRow(ctx, "SELECT string_agg(r::text, E'\\n' ORDER BY r::text COLLATE \"C\") FROM ("+sql+") r").Scan(&s)
	if s == nil {
		return "", err
	}
	return *s, err
}

func pgCode(err error) (string, string) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code, pe.Hint
	}
	return "", ""
}

// TestBuildWith_MirrorsPublicTables: the shadow copy of a public table has
// exactly the upstream rows of its declared visible columns (hostile text,
// floats, dates, timestamps, bytea, numerics, NULLs), nothing of undeclared
// or hidden columns; a protected table stays empty; a table over the cap
// and a table without declared columns refuse every read with 0A000 and a
// hint; the shadow role cannot write the copy; a rebuild refreshes it.
func TestBuildWith_MirrorsPublicTables(t *testing.T) {
	ctx := context.Background()
	up := pgtest.NewDatabase(t)
	shc := pgtest.NewCluster(t)
	sh := shc.DSN("postgres")
	if err := pgtest.Exec(ctx, up,
		`CREATE TABLE regions (region_id int PRIMARY KEY, name text NOT NULL, population bigint, secret text,
			f float8, d date, ts timestamptz, b bytea, n numeric(12,3), hidden text)`,
		`INSERT INTO regions SELECT i, 'region ' || i, i * 1000, 'secret ' || i, i / 7.0, date '2020-01-01' + i,
			timestamptz '2024-03-01 12:00:00+02' + i * interval '1 hour 1 second', decode(md5(i::text), 'hex'), i / 3.0, 'hidden ' || i
			FROM generate_series(1, 20) i`,
		`INSERT INTO regions VALUES (21, E'tab\there\nnew line \\ backslash ''quote'' "dq" ünï', NULL, 's', 'NaN', 'infinity', NULL, '\x00ff', NULL, NULL),
			(22, '', -9223372036854775808, NULL, 0.1, '0001-01-01 BC', '-infinity', '', -0.001, NULL),
			(23, '\N', 0, NULL, '-Infinity', NULL, NULL, NULL, 123456789.999, NULL)`,
		`CREATE TABLE big (k int, junk text)`,
		`INSERT INTO big SELECT i, 'x' FROM generate_series(1, 30) i`,
		`CREATE TABLE bare (x int)`,
		`INSERT INTO bare VALUES (1), (2)`,
		`CREATE TABLE visits (uid int, region_id int)`,
		`INSERT INTO visits SELECT i, i % 20 FROM generate_series(1, 100) i`,
	); err != nil {
		t.Fatal(err)
	}
	if err := pgtest.Exec(ctx, sh, "DROP ROLE IF EXISTS mirror_reader", "CREATE ROLE mirror_reader LOGIN PASSWORD 'mirror_reader'"); err != nil {
		t.Fatal(err)
	}
	reader := shc.RoleDSN("mirror_reader", "mirror_reader", "postgres")
	// The policy types ts, b as text: the shadow takes the upstream types.
	ds, err := policy.Parse(strings.NewReader(mirrorPolicy), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{MaxPublicRows: 25, Setting: "datasets.d.public_max_rows"}
	res, err := BuildWith(ctx, sh, up, ds, "mirror_reader", opts)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]PublicTable{}
	for _, p := range res.Public {
		got[p.Name] = p
	}
	if p := got["regions"]; p.Rows != 23 || p.Unavailable != "" || strings.Join(p.Columns, ",") != "region_id,name,population,f,d,ts,b,n" {
		t.Errorf("regions: %+v, want 23 rows of the 8 declared visible columns", p)
	}
	if p := got["big"]; p.Rows != 0 || !strings.Contains(p.Unavailable, "more than 25 rows (datasets.d.public_max_rows)") {
		t.Errorf("big: %+v, want unavailable over the cap of 25", p)
	}
	if p := got["bare"]; !strings.Contains(p.Unavailable, "no column") {
		t.Errorf("bare: %+v, want unavailable (no declared column)", p)
	}

	const declared = "SELECT region_id, name, population, f, d, ts, b, n FROM regions"
	want, err := rowsText(t, ctx, up, declared)
	if err != nil {
		t.Fatal(err)
	}
	copied, err := rowsText(t, ctx, reader, "SELECT * FROM regions")
	if err != nil {
		t.Fatal(err)
	}
	if copied != want {
		t.Errorf("shadow regions rows:\n%s\nwant (upstream):\n%s", copied, want)
	}
	// Column types are the upstream ones; undeclared and hidden columns
	// are absent.
	if got, want := columns(t, reader, "regions"), columns(t, up, "regions"); len(got) != 8 ||
		got[0] != want[0] || got[1] != want[1] || got[3] != want[4] || got[6] != want[7] || got[7] != want[8] {
		t.Errorf("shadow regions columns = %v, upstream %v", got, want)
	}
	for _, col := range []string{"secret", "hidden"} {
		if _, err := rowsText(t, ctx, reader, "SELECT "+col+" FROM regions"); err == nil {
			t.Errorf("column %s is readable in the shadow", col)
		} else if code, _ := pgCode(err); code != "42703" {
			t.Errorf("SELECT %s: %v, want 42703 (no such column)", col, err)
		}
	}
	if n := scalar(t, reader, "SELECT count(*) FROM visits"); n != "0" {
		t.Errorf("protected visits has %s rows in the shadow, want 0", n)
	}
	if n := scalar(t, reader, "SELECT count(*) FROM regions r JOIN visits v USING (region_id)"); n != "0" {
		t.Errorf("public ⋈ protected in the shadow = %s rows, want 0", n)
	}
	// Refusals, for every read that reaches rows; a probe without rows
	// (metadata, WHERE false) still answers.
	for _, q := range []string{"SELECT * FROM big", "SELECT count(*) FROM big", "SELECT count(*) FROM bare"} {
		_, err := rowsText(t, ctx, reader, q)
		code, hint := pgCode(err)
		if code != "0A000" {
			t.Errorf("%s: %v, want 0A000", q, err)
		}
		if wantHint := map[bool]string{true: "raise datasets.d.public_max_rows", false: "declare the columns"}[strings.Contains(q, "big")]; !strings.Contains(hint, wantHint) {
			t.Errorf("%s: hint %q, want it to say %q", q, hint, wantHint)
		}
	}
	if s, err := rowsText(t, ctx, reader, "SELECT * FROM big WHERE 1 <> 1 LIMIT 0"); err != nil || s != "" {
		t.Errorf("a row-less probe of an unavailable table: %q, %v", s, err)
	}
	// The reader role cannot write the copy.
	for _, q := range []string{"INSERT INTO regions (region_id, name) VALUES (99, 'x')", "UPDATE regions SET name = 'x'",
		"DELETE FROM regions", "TRUNCATE regions", "CREATE TABLE dpproxy.x (i int)",
		"CREATE OR REPLACE FUNCTION dpproxy.unavailable(message text, hint text) RETURNS SETOF record LANGUAGE sql AS 'SELECT 1'"} {
		err := pgtest.Exec(ctx, reader, q)
		if code, _ := pgCode(err); code != "42501" {
			t.Errorf("%s as the shadow role: %v, want 42501", q, err)
		}
	}

	// A rebuild refreshes the copy: new upstream rows appear, and a table
	// that fell under the cap is copied.
	if err := pgtest.Exec(ctx, up, "UPDATE regions SET name = 'renamed' WHERE region_id = 1", "DELETE FROM big WHERE k > 10"); err != nil {
		t.Fatal(err)
	}
	res, err = BuildWith(ctx, sh, up, ds, "mirror_reader", opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := scalar(t, reader, "SELECT name FROM regions WHERE region_id = 1"); n != "renamed" {
		t.Errorf("regions after the refresh: name = %q, want renamed", n)
	}
	if n := scalar(t, reader, "SELECT count(*) || ' ' || sum(k) FROM big"); n != "10 55" {
		t.Errorf("big after it fell under the cap: %s, want 10 rows summing to 55", n)
	}
	for _, p := range res.Public {
		if p.Name == "big" && (p.Rows != 10 || p.Unavailable != "") {
			t.Errorf("big after the refresh: %+v", p)
		}
	}
	// Over the cap again: unavailable again, not stale.
	if err := pgtest.Exec(ctx, up, "INSERT INTO big SELECT i, 'y' FROM generate_series(11, 40) i"); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildWith(ctx, sh, up, ds, "mirror_reader", opts); err != nil {
		t.Fatal(err)
	}
	if _, err := rowsText(t, ctx, reader, "SELECT * FROM big"); err == nil {
		t.Error("big over the cap after a refresh: read succeeded, want 0A000")
	}
}
