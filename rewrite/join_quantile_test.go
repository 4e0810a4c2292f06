package rewrite

import (
	"context"
	"math/rand/v2"
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
	for _, s := range []string{JoinPublic, JoinUnit} {
		if shapes[s] == 0 {
			t.Errorf("no quantile golden of join shape %s was checked", s)
		}
	}
}
