package rewrite

import (
	"context"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// Emitted SQL is total (issue 7, SECURITY.md G5): whatever the protected
// tables hold, the SQL rewrite emits for an accepted query raises no
// error, so an error (or its absence) cannot tell the analyst anything
// about the data. TestEmittedSQL_Total fills every table of every golden
// policy, and of totalPolicy (which has a float column), with hostile
// values — NULL, NaN and ±Infinity in numeric and float columns, the
// largest and smallest bigint and numeric values, 1e308 and denormals,
// dates at ±infinity and the ends of PostgreSQL's range, empty, blank,
// quoted and 10,000-character strings, extreme unit values and NULL units
// — and runs the emitted SQL of every accepted golden query and of
// totalQueries on a real PostgreSQL: none may fail, and every released
// measure must be a finite number.

// knownTotalityFailures are accepted shapes whose emitted SQL still raises
// a data-dependent error (by SQLSTATE), found by this test after their
// emitter landed and not fixed yet. Each is a real finding to fix in the
// emitter; the test fails when one stops failing, so the entry is removed.
var knownTotalityFailures = map[string]string{}

// totalPolicy has a column of every policy type, a float among them.
const totalPolicy = `dataset: total
privacy_unit: person
budget: {epsilon: 10, delta: 1.0e-6, accountant: pure}
defaults: {epsilon: 0.1, mechanism: laplace}
tables:
  m:
    unit_column: uid
    max_groups_per_unit: 3
    max_rows_per_unit: 4
    columns:
      f:  {type: float, lower: -100, upper: 100}
      n:  {type: numeric, lower: 0, upper: 1000}
      i:  {type: int, lower: -10, upper: 10}
      d:  {type: date, lower: 2021-01-01, upper: 2022-12-31}
      k:  {type: text, public_values: [a, b, c]}
      ik: {type: int, public_values: [1, 2, 3]}
      s:  {type: text}
`

// totalQueries are query shapes over totalPolicy: every aggregate over the
// float column and the others, every kind of key and predicate.
var totalQueries = []string{
	"SELECT COUNT(*) FROM m",
	"SELECT COUNT(f), COUNT(n), COUNT(s), COUNT(DISTINCT uid) FROM m",
	"SELECT SUM(f), AVG(f) FROM m",
	"SELECT SUM(n), AVG(n), SUM(i), AVG(i) FROM m",
	"SELECT VAR_POP(f), VAR_SAMP(f), VARIANCE(f), STDDEV(f), STDDEV_POP(f), STDDEV_SAMP(f) FROM m",
	"SELECT VAR_POP(n), STDDEV(i) FROM m",
	"SELECT k, COUNT(*), SUM(f), AVG(f) FROM m GROUP BY k",
	"SELECT ik, k, SUM(n) FROM m GROUP BY ik, k",
	"SELECT width_bucket(f, -100, 100, 8), COUNT(*) FROM m GROUP BY 1",
	"SELECT width_bucket(n, 0, 1000, 5), SUM(f) FROM m GROUP BY 1",
	"SELECT width_bucket(i, -10, 10, 4), AVG(n) FROM m GROUP BY 1",
	"SELECT date_trunc('month', d), COUNT(*) FROM m GROUP BY 1",
	"SELECT date_trunc('year', d), SUM(f) FROM m GROUP BY 1",
	"SELECT extract(year from d), AVG(f) FROM m GROUP BY 1",
	"SELECT COUNT(*) FROM m WHERE f > 1.5",
	"SELECT SUM(f) FROM m WHERE f BETWEEN -1e300 AND 1e300",
	"SELECT SUM(n) FROM m WHERE f IN (1.5, -2, 0)",
	"SELECT COUNT(*) FROM m WHERE f IS NULL OR n IS NOT NULL",
	"SELECT COUNT(*) FROM m WHERE f <> 0 AND n < 999999999999999999999999",
	"SELECT COUNT(*) FROM m WHERE i >= -9223372036854775808 AND i <= 9223372036854775807",
	"SELECT COUNT(*) FROM m WHERE d >= '2021-06-01' AND d < '2022-01-01'",
	"SELECT COUNT(*) FROM m WHERE d BETWEEN '0001-01-01' AND '9999-12-31'",
	"SELECT COUNT(*) FROM m WHERE s = '' OR s LIKE '%a%' OR s ILIKE 'Z_'",
	"SELECT COUNT(*) FROM m WHERE s NOT LIKE E'%\\\\%' AND k IN ('a', 'b')",
	"SELECT k, SUM(f) / COUNT(*), SUM(n) / NULLIF(COUNT(f), 0) FROM m GROUP BY k",
	"SELECT k, COUNT(*) FROM m GROUP BY k HAVING SUM(f) > 0 ORDER BY 2 DESC LIMIT 2",
	"SELECT SUM(f * 2), SUM(f + n), SUM(-f), SUM(ABS(f)) FROM m",
	"SELECT SUM(CASE WHEN f > 0 THEN 1 ELSE 0 END), SUM(COALESCE(f, 0)) FROM m",
	"SELECT SUM(LEAST(f, n)), SUM(GREATEST(i, 0)) FROM m",
	"SELECT SUM(f / 2.0), SUM(n / i) FROM m",
	"SELECT AVG(f) FILTER (WHERE k = 'a'), COUNT(*) FILTER (WHERE f > 0) FROM m",
	"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY f) FROM m",
	"SELECT median(f), MIN(f), MAX(f) FROM m",
	"SELECT ik, COUNT(DISTINCT uid), VAR_SAMP(f) FROM m WHERE f > -1e308 GROUP BY ik",
}

// hostileValues are SQL literals for a column: the audit's extremes (NULL,
// NaN, ±Infinity, the ends of each type's range, odd strings) plus a few
// more.
func hostileValues(c *policy.Column, ty policy.Type) []string {
	if c == nil {
		c = &policy.Column{Type: ty}
	}
	out := extremes(c)
	switch ty {
	case policy.TypeNumeric:
		out = append(out, "'1e1000'::numeric", "-0.0", "1e-1000")
	case policy.TypeFloat:
		out = append(out, "'-0'", "2.2250738585072014e-308", "1.7976931348623157e308")
	case policy.TypeText:
		out = append(out, "E'\\n\\t'", "'%'", "'_'", "'NaN'", "'Infinity'", "'ö'", "'\U0001F600'")
	case policy.TypeDate:
		out = append(out, "'0001-01-01'", "'9999-12-31'", "'1970-01-01'")
	}
	return out
}

// hostileRows returns multi-row INSERT statements for a table: for every
// column and every hostile value of it, a row with that value and typical
// values elsewhere (so that predicates on other columns select it); rows
// of random hostile values; rows with extreme and NULL unit values.
func (a *auditTable) hostileRows(rng *rand.Rand) []string {
	var rows [][]string
	// first is the first data column: 1 after the unit column of a
	// protected table, 0 in a public table (no unit column).
	first := 1
	if a.t.Public {
		first = 0
	}
	typicalRow := func(unit string) []string {
		var vals []string
		if first == 1 {
			vals = append(vals, unit)
		}
		for _, name := range a.cols[first:] {
			vals = append(vals, sqlLiteral(typical(rng, a.t.Columns[name])))
		}
		return vals
	}
	unit := func() string {
		if first == 0 {
			return ""
		}
		return sqlLiteral(a.unitValue(1 + rng.IntN(30)))
	}
	hostile := make([][]string, len(a.cols))
	for i, name := range a.cols {
		if i < first {
			hostile[i] = hostileValues(nil, a.types[0])
			continue
		}
		hostile[i] = hostileValues(a.t.Columns[name], a.types[i])
	}
	for i := first; i < len(a.cols); i++ {
		for _, v := range hostile[i] {
			r := typicalRow(unit())
			r[i] = v
			rows = append(rows, r)
		}
	}
	for n := 0; n < 200; n++ {
		r := typicalRow(unit())
		for i := first; i < len(a.cols); i++ {
			if rng.IntN(2) == 0 {
				r[i] = hostile[i][rng.IntN(len(hostile[i]))]
			}
		}
		rows = append(rows, r)
	}
	if first == 1 {
		for _, u := range hostile[0] {
			for n := 0; n < 3; n++ {
				rows = append(rows, typicalRow(u))
			}
		}
	}
	rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	var stmts []string
	head := "INSERT INTO " + quoteIdent(a.t.Schema) + "." + quoteIdent(a.t.Name) + " (" + strings.Join(quoteAll(a.cols), ", ") + ") VALUES "
	for len(rows) > 0 {
		n := min(len(rows), 50)
		var vals []string
		for _, r := range rows[:n] {
			vals = append(vals, "("+strings.Join(r, ", ")+")")
		}
		stmts = append(stmts, head+strings.Join(vals, ", "))
		rows = rows[n:]
	}
	return stmts
}

func TestEmittedSQL_Total(t *testing.T) {
	cases := loadGolden(t)
	fds, err := policy.Parse(strings.NewReader(totalPolicy), "totalPolicy")
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range totalQueries {
		cases = append(cases, goldenCase{name: "total_" + string(rune('a'+i/26)) + string(rune('a'+i%26)), ds: fds, query: q})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(3, 5))

	conns := map[*policy.Dataset]*pgx.Conn{}
	database := func(ds *policy.Dataset) *pgx.Conn {
		if c, ok := conns[ds]; ok {
			return c
		}
		conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		var names []string
		for name := range ds.Tables {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			tb := ds.Tables[name]
			a := newAuditTable(tb)
			if tb.Public {
				// No unit column: the declared columns only.
				a = &auditTable{t: tb}
				for _, c := range tb.ColumnOrder {
					a.cols = append(a.cols, c)
					a.types = append(a.types, tb.Columns[c].Type)
				}
				if len(a.cols) == 0 {
					continue
				}
			}
			if _, err := conn.Exec(ctx, a.createSQL()); err != nil {
				t.Fatalf("%s: %v", a.createSQL(), err)
			}
			for _, ins := range a.hostileRows(rng) {
				if _, err := conn.Exec(ctx, ins); err != nil {
					t.Fatalf("%s: %v", ins, err)
				}
			}
		}
		conns[ds] = conn
		return conn
	}

	accepted, float := 0, 0
	for _, gc := range cases {
		p, err := Rewrite(gc.ds, gc.query)
		if err != nil {
			continue // refused before any data is read
		}
		if _, ok := gc.ds.Tables[p.Table]; !ok || gc.ds.Tables[p.Table].Public {
			continue
		}
		accepted++
		if gc.ds == fds {
			float++
		}
		conn := database(gc.ds)
		t.Run(gc.name, func(t *testing.T) {
			if code, known := knownTotalityFailures[gc.name]; known {
				_, err := runAudit(ctx, conn, p)
				if err == nil || !strings.Contains(err.Error(), code) {
					t.Errorf("known totality failure %s no longer fails with %s (%v): remove it from knownTotalityFailures", gc.name, code, err)
				}
				return
			}
			for run := 0; run < 2; run++ { // the SQL picks rows at random
				if _, err := runAudit(ctx, conn, p); err != nil {
					t.Fatalf("emitted SQL failed on hostile data: %v\nquery: %s\nSQL: %s", err, gc.query, p.SQL)
				}
			}
		})
	}
	if float < 20 {
		t.Errorf("only %d of the %d float-policy shapes were accepted, want ≥ 20", float, len(totalQueries))
	}
	if accepted < 60 {
		t.Errorf("only %d accepted shapes ran, want ≥ 60", accepted)
	}
	t.Logf("%d accepted query shapes (%d over the float policy) ran on hostile data without error", accepted, float)
}
