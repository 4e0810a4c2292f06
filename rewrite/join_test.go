package rewrite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// joinKeyValues is the range of values of join-like columns (int columns
// without bounds or public values) in the join tests' databases: small, so
// that joins on them match. Rows of D use 1…joinKeyValues−1; public tables
// hold the last value hotKeyCopies times, so that an adversary's rows that
// use it are multiplied by a non-unique public key.
const (
	joinKeyValues = 6
	hotKeyCopies  = 12
)

// joinValue draws a value within the column's bounds or domain; join-like
// columns get values in 1…joinKeyValues, and float and numeric columns
// multiples of 1/4 (so that PostgreSQL's float8 sums, also of expressions
// mixing both, are exact and compare with our numeric sums).
func joinValue(rng *rand.Rand, c *policy.Column, keys int) any {
	switch {
	case c != nil && !c.Hidden && c.Type == policy.TypeInt && !c.HasBounds && len(c.PublicValues) == 0:
		return int64(1 + rng.IntN(keys))
	case c != nil && !c.Hidden && (c.Type == policy.TypeFloat || c.Type == policy.TypeNumeric) && c.HasBounds:
		steps := int((c.UpperNum - c.LowerNum) * 4)
		return c.LowerNum + float64(rng.IntN(steps+1))/4
	}
	return typical(rng, c)
}

// joinDB is a database of a dataset for the join tests: every table of the
// policy (public ones with their declared columns), loaded with data
// within every limit of the join goldens: one row per unit in each
// protected table, each public key value at most twice, key columns never
// NULL (other columns sometimes).
type joinDB struct {
	conn   *pgx.Conn
	tables map[string]*auditTable
}

func newJoinDB(t *testing.T, ctx context.Context, ds *policy.Dataset, rng *rand.Rand) *joinDB {
	t.Helper()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	db := &joinDB{conn: conn, tables: map[string]*auditTable{}}
	for _, name := range ds.TableOrder {
		tb := ds.Tables[name]
		a := newAuditTable(tb)
		if tb.Public {
			a.cols, a.types = nil, nil
			for _, c := range tb.ColumnOrder {
				a.cols = append(a.cols, c)
				a.types = append(a.types, tb.Columns[c].Type)
			}
		}
		if _, err := conn.Exec(ctx, a.createSQL()); err != nil {
			t.Fatalf("%s: %v", a.createSQL(), err)
		}
		if tb.Public {
			// Key values 1…joinKeyValues−1 once or twice each, the last
			// one hotKeyCopies times.
			for k := 1; k <= joinKeyValues; k++ {
				copies := 1 + rng.IntN(2)
				if k == joinKeyValues {
					copies = hotKeyCopies
				}
				for r := 0; r < copies; r++ {
					var row []any
					for _, c := range a.cols {
						col := tb.Columns[c]
						if col.Type == policy.TypeInt && !col.HasBounds && len(col.PublicValues) == 0 {
							row = append(row, int64(k))
						} else {
							row = append(row, joinValue(rng, col, joinKeyValues))
						}
					}
					a.base = append(a.base, row)
				}
			}
		} else {
			for u := 1; u <= 40; u++ {
				row := []any{a.unitValue(u)}
				for _, c := range a.cols[1:] {
					col := tb.Columns[c]
					if len(col.PublicValues) == 0 && col.MaxRowsPerValue == 0 && rng.IntN(10) == 0 {
						row = append(row, nil)
						continue
					}
					row = append(row, joinValue(rng, col, joinKeyValues-1))
				}
				a.base = append(a.base, row)
			}
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{tb.Schema, tb.Name}, a.cols, pgx.CopyFromRows(a.base)); err != nil {
			t.Fatalf("load %s: %v", name, err)
		}
		db.tables[name] = a
	}
	return db
}

// addAdversary inserts, inside tx, one adversarial unit (joinAdversary)
// into every protected table of the join j: the unit numbered u, or a
// person without a unit (NULL) when u < 0.
func (db *joinDB) addAdversary(t *testing.T, ctx context.Context, tx pgx.Tx, rng *rand.Rand, j *Join, u int) {
	t.Helper()
	seen := map[string]bool{}
	for _, jt := range j.Tables {
		if jt.Public || seen[jt.Name] {
			continue
		}
		seen[jt.Name] = true
		a := db.tables[jt.Name]
		unit := "NULL"
		if u >= 0 {
			unit = sqlLiteral(a.unitValue(u))
		}
		for _, ins := range joinAdversary(rng, a, unit) {
			if _, err := tx.Exec(ctx, ins); err != nil {
				_ = tx.Rollback(ctx)
				t.Fatalf("%s: %v", ins, err)
			}
		}
	}
}

// joinAdversary returns INSERTs of one adversarial unit into table a: many
// rows (far beyond max_rows_per_unit and any multiplicity), half with key
// values that match the database's keys (including the public tables' hot
// key, which multiplies each such row hotKeyCopies times) and values
// within bounds, half with extreme values.
func joinAdversary(rng *rand.Rand, a *auditTable, unit string) []string {
	var rows []string
	for r := 0; r < 60; r++ {
		vals := []string{unit}
		for i, name := range a.cols[1:] {
			c := a.t.Columns[name]
			if r%2 == 0 || c.MaxRowsPerValue > 0 && r%4 == 1 {
				vals = append(vals, sqlLiteral(joinValue(rng, c, joinKeyValues)))
				continue
			}
			e := extremes(c)
			vals = append(vals, e[(r/2*7+i*3)%len(e)])
		}
		rows = append(rows, "INSERT INTO "+pgemit.QuoteIdent(a.t.Schema)+"."+pgemit.QuoteIdent(a.t.Name)+" ("+
			strings.Join(quoteAll(a.cols), ", ")+") VALUES ("+strings.Join(vals, ", ")+")")
	}
	rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	return rows
}

// joinGoldens returns the accepted golden join plans.
func joinGoldens(t *testing.T) ([]goldenCase, []*Plan) {
	var cases []goldenCase
	var plans []*Plan
	for _, gc := range loadGolden(t) {
		p, err := Rewrite(gc.ds, gc.query)
		if err != nil || p.Join == nil || p.SampleAgg != nil { // sample-and-aggregate: sampleagg_group_test.go
			continue
		}
		cases = append(cases, gc)
		plans = append(plans, p)
	}
	return cases, plans
}

// joinPrivateAudited counts the audited runs of join plans with private
// keys.
var joinPrivateAudited atomic.Int64

// joinMinUnitsAudited counts the audited runs of join plans whose unit
// count of min_units_per_cell was checked as a measure.
var joinMinUnitsAudited atomic.Int64

// TestAudit_Joins is the neighbouring-database audit (audit_test.go) for
// every accepted join golden: f(D) and f(D + one unit) computed by the
// emitted SQL without noise differ by at most Measure.LInf per group, in
// at most MaxGroupsPerUnit groups. The added unit has adversarial rows in
// every protected table of the join at once (rows matching many keys,
// extreme values, NULLs); a person with NULL unit values is the second
// adversary. Each pair is run several times (the SQL's random choices).
func TestAudit_Joins(t *testing.T) {
	cases, plans := joinGoldens(t)
	if len(cases) < 8 {
		t.Fatalf("only %d accepted join goldens, want ≥ 8", len(cases))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(9, 13))
	dbs := map[*policy.Dataset]*joinDB{}
	shapes, quantiles, private := map[string]int{}, map[string]int{}, map[string]int{}
	for i, gc := range cases {
		p := plans[i]
		db, ok := dbs[gc.ds]
		if !ok {
			db = newJoinDB(t, ctx, gc.ds, rng)
			dbs[gc.ds] = db
		}
		shapes[p.Join.Shape]++
		for _, m := range p.Measures {
			if m.Kind == MeasureQuantile {
				quantiles[p.Join.Shape]++
				break
			}
		}
		if p.PrivateGroups() {
			private[p.Join.Shape]++
		}
		t.Run(gc.name, func(t *testing.T) {
			base, err := runAudit(ctx, db.conn, p)
			if err != nil {
				t.Fatalf("emitted SQL on D: %v\n%s", err, p.SQL)
			}
			for _, adv := range []struct {
				name string
				unit int
			}{{"new unit", 1_000_000}, {"NULL-unit person", -1}} {
				for run := 0; run < auditRuns; run++ {
					again, err := runAudit(ctx, db.conn, p)
					if err != nil {
						t.Fatal(err)
					}
					if bad := auditDiff(&Plan{Measures: p.Measures}, base, again, 1); len(bad) > 0 {
						t.Fatalf("f(D) differs between runs (D is not within limits): %v", bad)
					}
					tx, err := db.conn.Begin(ctx)
					if err != nil {
						t.Fatal(err)
					}
					db.addAdversary(t, ctx, tx, rng, p.Join, adv.unit)
					d2, err := runAudit(ctx, tx, p)
					_ = tx.Rollback(ctx)
					if err != nil {
						t.Fatalf("%s: emitted SQL on D': %v\n%s", adv.name, err, p.SQL)
					}
					bound := p
					if p.MinUnits > 0 && !p.PrivateGroups() {
						// min_units_per_cell: the unit count after the
						// measures, audited as a measure of L∞ 1 over L0
						// groups (bounded after the join: one unit per
						// joined row).
						c := *p
						c.Measures = append(append([]Measure(nil), p.Measures...), Measure{Kind: MeasureUnits, LInf: 1})
						bound = &c
						joinMinUnitsAudited.Add(1)
					}
					if bad := auditDiff(bound, base, d2, 1); len(bad) > 0 {
						t.Errorf("%s, run %d: D and D' = D + one %s violate the declared sensitivity:\n  %s\nquery: %s",
							adv.name, run, adv.name, strings.Join(bad, "\n  "), gc.query)
						break
					}
					if p.PrivateGroups() {
						// Partition selection in a join (join_partition.go).
						if bad := auditUnits(p, base, d2); len(bad) > 0 {
							t.Errorf("%s, run %d: partition selection counts violate their bounds:\n  %s\nquery: %s",
								adv.name, run, strings.Join(bad, "\n  "), gc.query)
							break
						}
						joinPrivateAudited.Add(1)
					}
				}
			}
		})
	}
	for _, s := range []string{JoinPublic, JoinUnit} {
		if shapes[s] == 0 {
			t.Errorf("no accepted golden of join shape %s was audited", s)
		}
		if quantiles[s] == 0 {
			t.Errorf("no accepted golden of join shape %s with a quantile was audited", s)
		}
	}
	for _, s := range []string{JoinPublic, JoinUnit} {
		if private[s] == 0 {
			t.Errorf("no accepted golden of join shape %s with a private key (partition selection) was audited", s)
		}
	}
	if joinPrivateAudited.Load() == 0 {
		t.Errorf("no partition-selection count of a join was audited")
	}
	if joinMinUnitsAudited.Load() == 0 {
		t.Errorf("no unit count of min_units_per_cell in a join was audited")
	}
	t.Logf("audited %d join goldens (shapes %v) × 2 adversaries × %d runs", len(cases), shapes, auditRuns)
}

// TestRewrite_PostgresJoins is the differential test of join shapes: on a
// real PostgreSQL with data within every limit (one row per unit and table,
// multiplicities far below the declared ones), the emitted SQL with noise
// off answers exactly what the analyst's query answers.
func TestRewrite_PostgresJoins(t *testing.T) {
	cases, plans := joinGoldens(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(21, 22))
	dbs := map[*policy.Dataset]*joinDB{}
	for i, gc := range cases {
		p := plans[i]
		db, ok := dbs[gc.ds]
		if !ok {
			db = newJoinDB(t, ctx, gc.ds, rng)
			// The analyst's query counts rows whose unit is NULL and
			// groups whose key is NULL; the plan does not (documented):
			// this database has none.
			for _, a := range db.tables {
				if a.t.Public {
					continue
				}
				if _, err := db.conn.Exec(ctx, "DELETE FROM "+pgemit.QuoteIdent(a.t.Schema)+"."+pgemit.QuoteIdent(a.t.Name)+" WHERE "+pgemit.QuoteIdent(a.t.UnitColumn)+" IS NULL"); err != nil {
					t.Fatal(err)
				}
			}
			dbs[gc.ds] = db
		}
		t.Run(gc.name, func(t *testing.T) {
			emitted, err := queryText(ctx, db.conn, p.SQL)
			if err != nil {
				t.Fatalf("emitted SQL failed: %v\n%s", err, p.SQL)
			}
			direct, err := queryText(ctx, db.conn, gc.query)
			if err != nil {
				t.Fatalf("analyst query failed on PostgreSQL: %v", err)
			}
			got, want := releaseExact(p, emitted), canonical(p, direct)
			sortRows(got)
			sortRows(want)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("emitted SQL answers differ from the analyst's query:\n got %v\nwant %v\n%s", got, want, p.SQL)
			}
			if len(want) == 0 || len(p.Keys) == 0 && want[0][0] == "0" {
				t.Fatalf("the join matched no rows: the test data does not exercise %s", gc.name)
			}
		})
	}
	if len(cases) < 8 {
		t.Fatalf("only %d join goldens were checked against PostgreSQL", len(cases))
	}
}

// TestClassify_PublicTables pins the routing of public tables: a statement
// that names only public tables goes to the shadow catalog (it holds the
// public tables' schema and no rows); one that also names a protected
// table goes to the DP path, where the join is planned.
func TestClassify_PublicTables(t *testing.T) {
	cases, _ := joinGoldens(t)
	var ds *policy.Dataset
	for _, gc := range cases {
		if _, ok := gc.ds.Tables["wards"]; ok {
			ds = gc.ds
		}
	}
	if ds == nil {
		t.Fatal("no golden policy with the public table wards")
	}
	for q, want := range map[string]pgsql.Route{
		"SELECT COUNT(*) FROM wards":                                                    pgsql.RouteCatalog,
		"SELECT wing, COUNT(*) FROM wards GROUP BY wing":                                pgsql.RouteCatalog,
		"SELECT COUNT(*) FROM visits v JOIN wards w ON v.ward_id = w.ward_id":           pgsql.RouteDP,
		"SELECT COUNT(*) FROM wards w LEFT JOIN labs l ON w.ward_id = l.ward_id":        pgsql.RouteDP,
		"SELECT w.wing FROM wards w JOIN visits v ON v.ward_id = w.ward_id WHERE 1 = 2": pgsql.RouteCatalog,
	} {
		if got, err := pgsql.Classify(ds, q); err != nil || got != want {
			t.Errorf("Classify(%q) = %v, %v; want %v", q, got, err, want)
		}
	}
}
