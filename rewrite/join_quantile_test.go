package rewrite

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
)

// joinQuantileGoldens returns the accepted join goldens with a quantile.
func joinQuantileGoldens(t *testing.T) ([]goldenCase, []*Plan) {
	cases, plans := joinGoldens(t)
	var gs []goldenCase
	var ps []*Plan
	for i, p := range plans {
		for _, m := range p.Measures {
			if m.Kind == MeasureQuantile {
				gs, ps = append(gs, cases[i]), append(ps, p)
				break
			}
		}
	}
	return gs, ps
}

// joinDBs builds one join database per dataset (newJoinDB), without
// NULL-unit rows when clean (the analyst's query would count them).
func joinDBs(t *testing.T, ctx context.Context, rng *rand.Rand, clean bool) func(ds *policy.Dataset) *joinDB {
	dbs := map[*policy.Dataset]*joinDB{}
	return func(ds *policy.Dataset) *joinDB {
		if db, ok := dbs[ds]; ok {
			return db
		}
		db := newJoinDB(t, ctx, ds, rng)
		if clean {
			for _, a := range db.tables {
				if a.t.Public {
					continue
				}
				if _, err := db.conn.Exec(ctx, "DELETE FROM "+pgemit.QuoteIdent(a.t.Schema)+"."+pgemit.QuoteIdent(a.t.Name)+" WHERE "+pgemit.QuoteIdent(a.t.UnitColumn)+" IS NULL"); err != nil {
					t.Fatal(err)
				}
			}
		}
		dbs[ds] = db
		return db
	}
}

// TestQuantile_PostgresJoins is the differential test of quantiles over
// every join shape (join_quantile.go): on a real PostgreSQL with data
// within every limit of the join goldens (newJoinDB: one row per unit and
// table, multiplicities far below the declared ones), the emitted SQL with
// noise off reproduces PostgreSQL's own answer to the analyst's query:
// PostgreSQL's value lies in the zero-utility buckets of each group's
// histogram (checkQuantileRows), and the other outputs are equal.
func TestQuantile_PostgresJoins(t *testing.T) {
	cases, plans := joinQuantileGoldens(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := joinDBs(t, ctx, rand.New(rand.NewPCG(31, 37)), true)
	shapes := map[string]int{}
	for i, gc := range cases {
		p := plans[i]
		conn := db(gc.ds).conn
		shapes[p.Join.Shape]++
		t.Run(gc.name, func(t *testing.T) {
			emitted, err := queryText(ctx, conn, p.SQL)
			if err != nil {
				t.Fatalf("emitted SQL failed: %v\n%s", err, p.SQL)
			}
			direct, err := queryText(ctx, conn, gc.query)
			if err != nil {
				t.Fatalf("analyst query failed on PostgreSQL: %v", err)
			}
			checkQuantileRows(t, p, emitted, direct)
		})
	}
	for _, s := range []string{JoinPublic, JoinUnit, JoinKey} {
		if shapes[s] == 0 {
			t.Errorf("no quantile golden of join shape %s was checked", s)
		}
	}
}

// TestAudit_ElasticL1Saturated checks the direct L1 bound of elastic joins
// (join_l1.go) where it matters: on a database whose join values are
// filled to their declared multiplicities (every ward value has exactly
// m_A = 50 visits and m_B = 20 labs rows, one per unit), so that an added
// unit's rows push other rows out of the per-value truncation and change
// close to E joined rows. Grouped by a key with ten public values (L0 =
// min(E, 10) = 10), the change summed over groups must stay within L1 =
// E·M for every measure, including the quantile's histograms (the L1
// distance of the bucket counts); the largest observed fraction of L1 is
// logged, next to L0·L∞ = 10·L1, the bound the noise used before.
func TestAudit_ElasticL1Saturated(t *testing.T) {
	ds, err := policy.Load("testdata/clinic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Rewrite(ds, "SELECT v.kind, COUNT(*), SUM(l.result), MIN(v.cost) FROM visits v JOIN labs l ON v.ward_id = l.ward_id GROUP BY v.kind")
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxGroupsPerUnit != 10 || p.Join.Changed != 320 {
		t.Fatalf("L0 %d, E %d; want 10 and 320", p.MaxGroupsPerUnit, p.Join.Changed)
	}
	ctx, conn := freshConn(t, 2*time.Minute)
	setup := `CREATE TABLE visits (patient_id bigint, ward_id bigint, kind text, cost numeric);
CREATE TABLE labs (patient_id bigint, ward_id bigint, result float8);
SELECT setseed(0.5);
INSERT INTO visits SELECT w * 1000 + i, w, 'k' || floor(random() * 10)::int, round((random() * 100)::numeric, 2)
  FROM generate_series(1, 5) AS w, generate_series(1, 50) AS i;
INSERT INTO labs SELECT 100000 + w * 1000 + i, w, round((random() * 14 - 4)::numeric, 2)::float8
  FROM generate_series(1, 5) AS w, generate_series(1, 20) AS i;`
	if _, err := conn.Exec(ctx, setup); err != nil {
		t.Fatal(err)
	}
	base, err := runAudit(ctx, conn, p)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(51, 53))
	worst := make([]float64, len(p.Measures))
	for run := 0; run < 8; run++ {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The added unit: 60 rows in each table on the saturated ward
		// values, with typical and extreme values.
		unit := 7_000_000 + run
		for r := 0; r < 60; r++ {
			w := 1 + rng.IntN(5)
			ins := fmt.Sprintf("INSERT INTO visits VALUES (%d, %d, 'k%d', %s); INSERT INTO labs VALUES (%d, %d, %s)",
				unit, w, rng.IntN(10), []string{"1e9", "-5", "50", "NULL"}[r%4], unit, w, []string{"'Infinity'", "-1e300", "3.5", "10"}[r%4])
			if _, err := tx.Exec(ctx, ins); err != nil {
				_ = tx.Rollback(ctx)
				t.Fatal(err)
			}
		}
		d2, err := runAudit(ctx, tx, p)
		_ = tx.Rollback(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if bad := auditDiff(p, base, d2, 1); len(bad) > 0 {
			t.Fatalf("run %d: the saturated elastic join violates the declared sensitivity:\n  %s", run, strings.Join(bad, "\n  "))
		}
		// The L1 change of each measure, as a fraction of its L1 bound.
		pos := 0
		for i, m := range p.Measures {
			width := 1
			if m.Kind == MeasureQuantile {
				width = m.Quantile.Buckets
			}
			total := 0.0
			for k := range keysOf(base, d2) {
				for e := pos; e < pos+width; e++ {
					a, b := 0.0, 0.0
					if base[k] != nil {
						a, _ = base[k][e].Float64()
					}
					if d2[k] != nil {
						b, _ = d2[k][e].Float64()
					}
					total += math.Abs(b - a)
				}
			}
			pos += width
			worst[i] = math.Max(worst[i], total/m.L1)
		}
	}
	for i, m := range p.Measures {
		t.Logf("measure %d (%s %s): largest L1 change %.3g·L1 (L1 = E·M = %g; L0·L∞ = %g)", i, m.Kind, m.Column, worst[i], m.L1, float64(p.MaxGroupsPerUnit)*m.LInf)
	}
	// The saturated database makes the bound nearly tight for the
	// histogram (every changed joined row moves one bucket count): the
	// adversary changes far more than L1/L0 = E·M/10, so calibrating to
	// min(E, groups)·L∞ wasted a factor of about 10, not less.
	if worst[0] < 0.2 {
		t.Errorf("the adversary changed COUNT(*) by only %.3g·L1: the saturated database does not exercise the bound", worst[0])
	}
}

func keysOf(a, b auditResult) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
