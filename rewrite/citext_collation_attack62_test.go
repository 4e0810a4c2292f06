package rewrite

import (
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/catalog"
	"github.com/dpproxy/dpproxy/policy"
)

// TestAttack62_CitextUnitLowerUnderColumnCollation (attack round 62,
// severity high: one person is several units, so their contribution
// exceeds every bound the noise is calibrated to).
//
// Round 61 reads a citext unit as lower(u) (pgemit unitSQL), taking "one
// text per unit" from citext's equality. But citext's equality
// (citext_eq) lowercases both sides under the DATABASE's default
// collation, while SQL lower(u) lowercases under the COLUMN's collation.
// internal/catalog accepts a citext unit column of any collation (its
// deterministic-collation check skips citext). With
// unit_id citext COLLATE "tr-x-icu" (Turkish: lower('I') = 'ı'), the
// database says 'IRIS@x.org' = 'iris@x.org' (one person, as the steward
// declared the unit), but lower() gives 'ırıs@x.org' and 'iris@x.org': the
// emitted SQL groups by dp_unit = lower(u), a text, so the person is two
// units, each bounded to L0 groups and R rows on its own.
//
// Measured on the emitted SQL: a person whose 6 rows are written
// 'IRIS@x.org' (3 rows, group A) and 'iris@x.org' (3 rows, group B), with
// max_groups_per_unit 1 and max_rows_per_unit 3: COUNT(DISTINCT unit_id)
// rises by 2 (sensitivity 1), and grouped COUNT(*) by 3 in A and 3 in B
// (the person may change one group by at most 3). With k such spellings
// (e.g. 'I'/'i' in several positions) the contribution is k times the bound.
//
// Suggested fix: read a citext unit as lower(u COLLATE "default") (the
// collation citext's equality uses), or have internal/catalog refuse a
// citext unit whose collation is not the database default; the same for
// citext keys (keyValueSQL), whose groups then match citext's equality.
//
// Command: go test ./rewrite -run TestAttack62_CitextUnitLowerUnderColumnCollation -count=1 -v
func TestAttack62_CitextUnitLowerUnderColumnCollation(t *testing.T) {
	ctx, conn := freshConn(t, 2*time.Minute)
	ds, err := policy.Parse(strings.NewReader(attack61Policy), "a61.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`CREATE EXTENSION IF NOT EXISTS citext`,
		`CREATE TABLE obs (unit_id citext COLLATE "tr-x-icu", diag text, x numeric)`,
		`INSERT INTO obs SELECT 'p' || u || '@x.org', CASE WHEN u % 2 = 0 THEN 'A' ELSE 'B' END, 1 FROM generate_series(1, 100) u`,
		`ANALYZE obs`,
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	var same bool
	if err := conn.QueryRow(ctx, `SELECT 'IRIS@x.org'::citext = 'iris@x.org'::citext AND
		(SELECT count(DISTINCT unit_id) FROM (VALUES ('IRIS@x.org'::citext COLLATE "tr-x-icu"), ('iris@x.org')) v(unit_id)) = 1`).Scan(&same); err != nil || !same {
		t.Fatalf("setup: the two spellings should be one citext value (%v, %v)", same, err)
	}
	if problems, err := catalog.Verify(ctx, conn, ds); err != nil || len(problems) > 0 {
		t.Fatalf("catalog.Verify: %v %q", err, problems)
	}
	for _, tc := range []struct {
		sql   string
		bound int // what one person may change one group by
	}{
		{"SELECT COUNT(DISTINCT unit_id) FROM obs", 1},
		{"SELECT diag, COUNT(*) FROM obs GROUP BY diag", 3},
	} {
		p, err := Rewrite(ds, tc.sql)
		if err != nil {
			t.Fatal(err)
		}
		run := func() map[string]int {
			rows, err := queryText(ctx, conn, p.SQL)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]int{}
			for _, r := range rows {
				k, v := "", r[len(r)-1]
				if len(r) > 1 {
					k, v = *r[0], r[1]
				}
				out[k] = int(ratInt(t, v))
			}
			return out
		}
		without := run()
		if _, err := conn.Exec(ctx, `INSERT INTO obs SELECT 'IRIS@x.org', 'A', 1 FROM generate_series(1, 3)
			UNION ALL SELECT 'iris@x.org', 'B', 1 FROM generate_series(1, 3)`); err != nil {
			t.Fatal(err)
		}
		with := run()
		if _, err := conn.Exec(ctx, `DELETE FROM obs WHERE unit_id = 'iris@x.org'`); err != nil {
			t.Fatal(err)
		}
		changed, total := 0, 0
		for k, v := range with {
			d := v - without[k]
			if d < 0 {
				d = -d
			}
			if d > 0 {
				changed++
			}
			total += d
			if d > tc.bound {
				t.Errorf("%s: adding one person (IRIS@x.org / iris@x.org) changed group %q by %d, above the bound %d", tc.sql, k, d, tc.bound)
			}
		}
		if changed > 1 { // L0 = 1
			t.Errorf("%s: adding one person changed %d groups (by %d in all), max_groups_per_unit is 1: %v → %v", tc.sql, changed, total, without, with)
		}
	}
}

func ratInt(t *testing.T, s *string) int64 {
	t.Helper()
	if s == nil {
		return 0
	}
	r := rat(s)
	if r == nil || !r.IsInt() {
		t.Fatalf("not an integer: %v", *s)
	}
	return r.Num().Int64()
}
