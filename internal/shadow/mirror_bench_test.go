package shadow

import (
	"context"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
)

// BenchmarkBuildWith_PublicTable100k: one build of a shadow catalog whose
// only table is a public table of 100,000 rows and six columns (int, two
// text, two float8, int), copied in full (the default public_max_rows).
// BENCHMARKS.md, "Public tables: the copy into the shadow".
func BenchmarkBuildWith_PublicTable100k(b *testing.B) {
	ctx := context.Background()
	up := pgtest.NewDatabase(b)
	sh := pgtest.NewCluster(b).DSN("postgres")
	if err := pgtest.Exec(ctx, up, `CREATE TABLE zips (zip int PRIMARY KEY, city text, state text, lat float8, lon float8, population int)`,
		`INSERT INTO zips SELECT i, 'City number ' || i, 'ST', 40 + i / 1e6, -70 - i / 1e6, i % 50000 FROM generate_series(1, 100000) i`); err != nil {
		b.Fatal(err)
	}
	if err := pgtest.Exec(ctx, sh, "DROP ROLE IF EXISTS bench_reader", "CREATE ROLE bench_reader"); err != nil {
		b.Fatal(err)
	}
	ds, err := policy.Parse(strings.NewReader(`dataset: d
privacy_unit: u
budget: {epsilon: 1}
tables:
  zips:
    public: true
    columns:
      zip: {type: int}
      city: {type: text}
      state: {type: text}
      lat: {type: float}
      lon: {type: float}
      population: {type: int}
`), "d.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		res, err := BuildWith(ctx, sh, up, ds, "bench_reader", Options{})
		if err != nil {
			b.Fatal(err)
		}
		if res.Public[0].Rows != 100_000 {
			b.Fatalf("copied %d rows, want 100000", res.Public[0].Rows)
		}
	}
}
