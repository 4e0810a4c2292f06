package catalog

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const schema = `
CREATE DOMAIN small_money AS numeric(12, 2);
CREATE DOMAIN long_code AS char(400);
CREATE TABLE ok (
	pid int8, i int4, i0 numeric(10, 0), n numeric, n2 small_money, ni int2,
	f float8, fi int4, s text, v varchar(20), d date, b bool, secret bytea, ct citext,
	c3 char(3), c300 char(300), cd long_code, cb bpchar
);
CREATE TABLE bad (
	pid uuid, frac numeric, whole numeric(10, 0), fl float8, big numeric, s int4, d timestamp, b int4, ci text COLLATE ci, cu citext
);
CREATE TABLE textunit (pid text, x int4);
CREATE TABLE pub (code citext, factor text);
`

const okPolicy = `dataset: t
privacy_unit: person
budget: {epsilon: 1}
tables:
  ok:
    unit_column: pid
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      i:  {type: int, lower: 0, upper: 10}
      i0: {type: numeric, lower: 0, upper: 10}
      n:  {type: numeric, lower: 0, upper: 10}
      n2: {type: numeric, lower: 0, upper: 10}
      ni: {type: numeric, lower: 0, upper: 10}
      f:  {type: float, lower: 0, upper: 10}
      fi: {type: float, lower: 0, upper: 10}
      s:  {type: text}
      v:  {type: text}
      d:  {type: date, lower: 2020-01-01, upper: 2020-12-31}
      b:  {type: bool}
      ct: {type: text, public_values: [north, south]}
      c3: {type: text}
      c300: {type: text}
      cd: {type: text}
      cb: {type: text}
      secret: {access: none}
  textunit:
    unit_column: pid
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      x: {type: int, lower: 0, upper: 10}
  pub:
    public: true
    columns:
      code: {type: text, public_values: [a, b]}
`

const badPolicy = `dataset: t
privacy_unit: person
budget: {epsilon: 1}
tables:
  bad:
    unit_column: pid
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      frac: {type: int, lower: 0, upper: 10}
      whole: {type: int, lower: 0, upper: 10}
      fl:   {type: numeric, lower: 0, upper: 10}
      big:  {type: float, lower: 0, upper: 10}
      s:    {type: text}
      d:    {type: date, lower: 2020-01-01, upper: 2020-12-31}
      b:    {type: bool}
      ci:   {type: text}
      cu:   {type: text, public_values: [north, South]}
      gone: {type: int, lower: 0, upper: 1}
  pub:
    public: true
    columns:
      factor: {type: numeric, lower: 0, upper: 10}
  missing:
    unit_column: pid
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      x: {type: int, lower: 0, upper: 10}
`

// TestVerify checks every policy type against live column types in a real
// PostgreSQL: what honours its declaration passes (integers, numeric(p, 0)
// as numeric (not int: it holds NaN), domains by their base type, varchar as text), every mismatch is
// reported once with the column, both types and the fix, and the unit
// columns' types are learned only when all is well.
func TestVerify(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)`); err != nil {
		t.Fatalf("ICU collation (PostgreSQL built without ICU?): %v", err)
	}
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS citext`); err != nil {
		t.Fatalf("citext (PostgreSQL without its contrib modules?): %v", err)
	}
	if _, err := conn.Exec(ctx, schema); err != nil {
		t.Fatal(err)
	}

	ok, err := policy.Parse(strings.NewReader(okPolicy), "ok.yaml")
	if err != nil {
		t.Fatal(err)
	}
	problems, err := Verify(ctx, conn, ok)
	if err != nil || len(problems) != 0 {
		t.Fatalf("Verify(ok) = %q, %v", problems, err)
	}
	if tb := ok.Tables["ok"]; tb.UnitType != policy.TypeInt || tb.UnitTypeName != "bigint" {
		t.Fatalf("unit type of ok: %q %q", tb.UnitType, tb.UnitTypeName)
	}
	if tb := ok.Tables["textunit"]; tb.UnitType != policy.TypeText {
		t.Fatalf("unit type of textunit: %q", tb.UnitType)
	}
	// Each column's type in the database, for result types as PostgreSQL
	// types them (MAX of an int4 column is int4; SUM of numeric(p, 2)
	// prints 2 decimals).
	for col, want := range map[string]string{"i": "int4", "ni": "int2", "n": "numeric", "f": "float8", "d": "date", "i0": "numeric", "ct": "citext"} {
		if got := ok.Tables["ok"].Columns[col].PGType; got != want {
			t.Errorf("column %s: PGType %q, want %q", col, got, want)
		}
	}
	// Public tables are checked too (attack round 58), and their live
	// types learned: a citext key of a joined public table is released
	// as lower(x).
	if c := ok.Tables["pub"].Columns["code"]; c.PGType != "citext" {
		t.Errorf("public column code: PGType %q, want citext", c.PGType)
	}
	// char(n) values are padded to n characters (review 103: a condition's
	// length test counts the padding).
	for col, want := range map[string]int{"c3": 3, "c300": 300, "cd": 400, "cb": 0, "s": 0, "v": 0} {
		if got := ok.Tables["ok"].Columns[col].PadChars; got != want {
			t.Errorf("column %s: PadChars %d, want %d", col, got, want)
		}
	}
	if c := ok.Tables["ok"].Columns["n2"]; c.PGType != "numeric" || c.Scale != 2 {
		t.Errorf("column n2 (a domain over numeric(…, 2)): %q scale %d", c.PGType, c.Scale)
	}

	bad, err := policy.Parse(strings.NewReader(badPolicy), "bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	problems, err = Verify(ctx, conn, bad)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"column frac is numeric in the database but type: int",
		"column whole is numeric(10,0) in the database but type: int in the policy: it can hold NaN",
		"column fl is double precision in the database but type: numeric",
		"column big is numeric in the database but type: float",
		"column s is integer in the database but type: text",
		"column d is timestamp without time zone in the database but type: date",
		"column b is integer in the database but type: bool",
		"column ci is text in the database but type: text in the policy: its collation is nondeterministic",
		`column cu is citext (its equality ignores case, and dpproxy releases its groups in lower case) but public value "South" is not in lower case`,
		`has no column "gone"`,
		"table public.missing does not exist",
		"table public.pub column factor is text in the database but type: numeric",
	}
	all := strings.Join(problems, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("no problem mentions %q; got:\n%s", w, all)
		}
	}
	if len(problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(problems), len(want), all)
	}
	if bad.Tables["bad"].UnitTypeName != "" {
		t.Error("unit types were set although the policy does not match")
	}
}

// TestVerify_UnitLiterals: once the unit column's type is known, a literal
// of the wrong type is refused at plan time (before any charge) instead of
// failing upstream after it; a uuid unit column cannot be compared with
// literals at all.
func TestVerify_UnitLiterals(t *testing.T) {
	ds, err := policy.Parse(strings.NewReader(okPolicy), "ok.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ds.Tables["ok"].UnitType, ds.Tables["ok"].UnitTypeName = policy.TypeInt, "bigint"
	for q, code := range map[string]string{
		"SELECT COUNT(*) FROM ok WHERE pid = 'abc'":         "22P02",
		"SELECT COUNT(*) FROM ok WHERE pid IN (1, 'x')":     "22P02",
		"SELECT COUNT(*) FROM ok WHERE pid = true":          "42804",
		"SELECT COUNT(*) FROM ok WHERE pid = '42'":          "",
		"SELECT COUNT(*) FROM ok WHERE pid BETWEEN 1 AND 9": "",
	} {
		_, err := rewrite.Rewrite(ds, q)
		pe, _ := pgerr.As(err)
		switch {
		case code == "" && err != nil:
			t.Errorf("%s: %v", q, err)
		case code != "" && (pe == nil || pe.Code != code):
			t.Errorf("%s: %v, want %s", q, err, code)
		}
	}
	ds.Tables["ok"].UnitType, ds.Tables["ok"].UnitTypeName = "", "uuid"
	_, err = rewrite.Rewrite(ds, "SELECT COUNT(*) FROM ok WHERE pid = 'abc'")
	if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.FeatureNotSupported {
		t.Errorf("uuid unit compared with a literal: %v, want 0A000", err)
	}
}

// TestVerify_UnitTypes: a unit column must have one text per value as the
// emitter reads it (attack round 61): citext and numeric are accepted and
// their base type learned (the emitter reads lower(u) and trim_scale(u)),
// a float, an interval or a text under a nondeterministic collation is
// refused with the reason and the fix.
func TestVerify_UnitTypes(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range []string{
		`CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)`,
		`CREATE EXTENSION IF NOT EXISTS citext`,
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		typ, base, problem string
	}{
		{"int8", "int8", ""},
		{"citext", "citext", ""},
		{"numeric", "numeric", ""},
		{"uuid", "uuid", ""},
		{"varchar(40)", "varchar", ""},
		{"float8", "", "a unit column must have one text per value"},
		{"interval", "", "a unit column must have one text per value"},
		{"text COLLATE ci", "", "its collation is nondeterministic"},
	} {
		name := "u_" + strings.NewReplacer(" ", "_", "(", "", ")", "").Replace(tc.typ)
		if _, err := conn.Exec(ctx, `CREATE TABLE `+name+` (pid `+tc.typ+`, x int4)`); err != nil {
			t.Fatal(err)
		}
		ds := unitPolicy(t, name)
		problems, err := Verify(ctx, conn, ds)
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(problems, "\n")
		switch {
		case tc.problem == "" && (len(problems) > 0 || ds.Tables[name].UnitPGType != tc.base):
			t.Errorf("%s unit: problems %q, base %q; want none and %q", tc.typ, problems, ds.Tables[name].UnitPGType, tc.base)
		case tc.problem != "" && (len(problems) != 1 || !strings.Contains(all, "unit column pid") || !strings.Contains(all, tc.problem)):
			t.Errorf("%s unit: problems %q, want one naming unit column pid and %q", tc.typ, problems, tc.problem)
		}
	}
}

// olderServer is a Querier whose data server says it is PostgreSQL 13.
type olderServer struct{ *pgx.Conn }

func (o olderServer) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if strings.Contains(sql, "server_version_num") {
		sql = "SELECT 130016"
	}
	return o.Conn.Query(ctx, sql, args...)
}

// TestVerify_NumericUnitNeedsPostgres14 (review 107): a numeric unit's
// length is tested with pg_column_compression, which PostgreSQL 13 lacks;
// on such a data server every DP query would fail after its charge, so
// the proxy refuses the policy at start-up. An integer unit is accepted.
func TestVerify_NumericUnitNeedsPostgres14(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, typ := range []string{"numeric", "int8"} {
		name := "v_" + typ
		if _, err := conn.Exec(ctx, `CREATE TABLE `+name+` (pid `+typ+`, x int4)`); err != nil {
			t.Fatal(err)
		}
		ds := unitPolicy(t, name)
		for _, q := range []Querier{conn, olderServer{conn}} {
			problems, err := Verify(ctx, q, ds)
			if err != nil {
				t.Fatal(err)
			}
			_, old := q.(olderServer)
			want := old && typ == "numeric"
			if got := len(problems) == 1 && strings.Contains(problems[0], "PostgreSQL 14"); got != want || (!want && len(problems) > 0) {
				t.Errorf("%s unit, PostgreSQL 13 %v: problems %q", typ, old, problems)
			}
		}
	}
}

// unitPolicy is a policy of one table, name, with unit column pid and an
// int column x.
func unitPolicy(t *testing.T, name string) *policy.Dataset {
	t.Helper()
	ds, err := policy.Parse(strings.NewReader(`dataset: t
privacy_unit: person
budget: {epsilon: 1}
tables:
  `+name+`:
    unit_column: pid
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      x: {type: int, lower: 0, upper: 10}
`), "u.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return ds
}
