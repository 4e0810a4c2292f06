package rewrite

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/policy"
)

// TestAttack56_SampleAggUnitTextSpreadsBlocks (attack round 56, severity
// medium: G1 — sample-and-aggregate's sensitivity bound fails when one
// person's unit value has several texts).
//
// Sample-and-aggregate puts each unit in one block by
// HMAC-SHA-256(key, unit::text), computed per ROW (pgemit/sampleagg_sql.go
// blockHashSQL in dp_rows), and its guarantee (rewrite/sampleagg.go,
// "Guarantee") is that "adding or removing all rows of one unit changes
// the rows of exactly one block (the unit's hash is a fixed function of its
// value)". But the unit is what PostgreSQL's equality says (PARTITION BY /
// GROUP BY dp_unit, the join on the unit), and its text is that of each row:
// a citext unit column (accepted by internal/catalog as a text unit: e-mail
// addresses are commonly citext) holds one person as 'Zed', 'zed' and
// 'ZED'; an unconstrained numeric unit column (accepted, unit type "")
// holds 1000, 1000.0 and 1000.00. Each writing hashes to its own block, so
// one person's rows land in up to max_rows_per_unit blocks of every level:
// the distinct-unit count per level (noised with L∞ = 1) moves by up to 3
// here, and up to 3 block answers of S (noised with L∞ = u − l) change.
//
// Data: obs with 120 units (1–3 rows each) and the neighbour with one more
// unit of 3 rows, each row writing the unit differently. Plan: SELECT
// corr(y, x) FROM obs (levels chosen from the count, so the count is a
// measure). On the current code the count of some level moves by more
// than 1 between the neighbours.
//
// Suggested fix: hash a canonical text of the unit (for citext lower(u),
// for numeric trim_scale(u), for float u + 0: the keyValueSQL rules), or
// compute the block once per unit (e.g. MIN(hash) OVER (PARTITION BY
// unit)) so that it is a function of the unit's equality class; or refuse
// unit columns whose equality is coarser than their text (citext,
// unconstrained numeric, float, nondeterministic collations) in
// internal/catalog.
func TestAttack56_SampleAggUnitTextSpreadsBlocks(t *testing.T) {
	for _, tc := range []struct {
		name, typ string
		unit      func(u int) string
		writings  []string
	}{
		{"citext", "citext", func(u int) string { return fmt.Sprintf("user%d@example.org", u) },
			[]string{"Zed@example.org", "zed@example.org", "ZED@EXAMPLE.ORG"}},
		{"numeric", "numeric", func(u int) string { return fmt.Sprint(u) },
			[]string{"1000", "1000.0", "1000.00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, conn := freshConn(t, 2*time.Minute)
			ds, err := policy.Parse(strings.NewReader(saPolicy), "sa.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS citext`); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `CREATE TABLE obs (unit_id `+tc.typ+`, x numeric, y double precision)`); err != nil {
				t.Fatal(err)
			}
			for u := 1; u <= 120; u++ {
				for r := 0; r < 1+u%3; r++ {
					x := float64((u*7+r*3)%100) / 10
					if _, err := conn.Exec(ctx, `INSERT INTO obs VALUES ($1, $2, $3)`, tc.unit(u), fmt.Sprintf("%.1f", x), 1.5*x-2+float64((u*13+r)%7)-3); err != nil {
						t.Fatal(err)
					}
				}
			}
			p, err := Rewrite(ds, "SELECT corr(y, x) FROM obs")
			if err != nil {
				t.Fatal(err)
			}
			if p.SampleAgg == nil || p.SampleAgg.CountMeasure < 0 {
				t.Fatalf("expected a sample-and-aggregate plan with a unit count: %+v", p.SampleAgg)
			}
			baseAvg, baseUnits := emittedAverages(t, ctx, conn, ds, p)
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck
			// One more person: 3 rows (max_rows_per_unit), one unit by
			// PostgreSQL's equality, written three ways.
			for r, w := range tc.writings {
				if _, err := tx.Exec(ctx, `INSERT INTO obs VALUES ($1, $2, $3)`, w, []string{"0", "10", "0"}[r], []float64{20, -5, 20}[r]); err != nil {
					t.Fatal(err)
				}
			}
			var units int
			if err := tx.QueryRow(ctx, `SELECT COUNT(DISTINCT unit_id) FROM obs WHERE unit_id IN ($1, $2, $3)`, tc.writings[0], tc.writings[1], tc.writings[2]).Scan(&units); err != nil {
				t.Fatal(err)
			}
			if units != 1 {
				t.Fatalf("the three writings are %d units for PostgreSQL, want 1", units)
			}
			avg, n := emittedAverages(t, ctx, tx, ds, p)
			worst, worstK := int64(0), 0
			for _, k := range p.SampleAgg.Levels {
				if d := n[k] - baseUnits[k]; d > worst {
					worst, worstK = d, k
				}
				o := p.Outputs[0]
				if d, bound := math.Abs(avg[k][0]-baseAvg[k][0]), (o.Upper-o.Lower)/float64(k); d > bound+1e-12 {
					t.Errorf("level k = %d: corr moved by %v between the neighbours, more than (u − l)/k = %v (one person in several blocks)", k, d, bound)
				}
			}
			t.Logf("largest change of a level's unit count: %d (k = %d)", worst, worstK)
			if worst > 1 {
				t.Errorf("adding one person (3 rows, one unit for PostgreSQL) moved the distinct-unit count of level k = %d by %d; its noise is calibrated to L∞ = 1: the person's rows hash to %d blocks, one per written form of the unit", worstK, worst, worst)
			}
		})
	}
}
