package rewrite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// saGroupPolicy is saPolicy with a group key g (public values a, b, c, d,
// of which d never occurs in the data; or private) and a unit in at most
// %d groups.
const saGroupPolicy = `
dataset: sag
privacy_unit: person
budget: {epsilon: 10, delta: 1.0e-6, accountant: pure}
defaults: {epsilon: 1, mechanism: laplace}
tables:
  obs:
    unit_column: unit_id
    max_groups_per_unit: %d
    max_rows_per_unit: 3
    columns:
      g: %s
      x: {type: numeric, lower: 0, upper: 10}
      y: {type: float, lower: -5, upper: 20}
`

// saGroupDataset parses saGroupPolicy with a fixed key (so that which
// block answers are clipped is the same in every run).
func saGroupDataset(t *testing.T, l0 int) *policy.Dataset {
	return saGroupDatasetKey(t, l0, "{type: text, public_values: [a, b, c, d]}")
}

// saGroupDatasetKey is saGroupDataset with g declared as decl.
func saGroupDatasetKey(t *testing.T, l0 int, decl string) *policy.Dataset {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "sag.key")
	fixed := sha256.Sum256([]byte("dpproxy TestSampleAgg grouped"))
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(fixed[:])), 0o600); err != nil {
		t.Fatal(err)
	}
	ds, err := policy.Parse(strings.NewReader(fmt.Sprintf(saGroupPolicy, l0, decl)+"sample_key_file: "+keyFile+"\n"), "sag.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// saGroupTable creates obs(unit_id, g, x, y) with n units; each unit has
// rows in one to maxGroups (≤ 3) of the groups a, b, c (1…3 rows per
// group, within max_rows_per_unit), some rows with g outside the domain
// (z) or NULL.
func saGroupTable(t *testing.T, ctx context.Context, conn *pgx.Conn, n, maxGroups int) {
	t.Helper()
	if _, err := conn.Exec(ctx, `CREATE TABLE obs (unit_id bigint, g text, x numeric, y double precision)`); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var rows [][]any
	for u := 1; u <= n; u++ {
		groups := rng.Perm(3)[:1+rng.IntN(maxGroups)]
		for _, gi := range groups {
			g := string(rune('a' + gi))
			slope := []float64{1.5, -0.5, 0.2}[gi]
			for r, nr := 0, 1+rng.IntN(3); r < nr; r++ {
				x := math.Round(rng.Float64()*1000) / 100
				var xv any = fmt.Sprintf("%.2f", x)
				if rng.IntN(25) == 0 {
					xv = nil
				}
				rows = append(rows, []any{u, g, xv, slope*x + 3 + rng.NormFloat64()*2})
			}
		}
		if rng.IntN(10) == 0 {
			rows = append(rows, []any{u, "z", "1", 1.0}, []any{u, nil, "2", 2.0})
		}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"obs"}, []string{"unit_id", "g", "x", "y"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
}

// groupBlockValues is blockValues restricted to the rows where cond (SQL
// over obs, with $2 the group value) holds: f(y, x) per block of k over
// the group's rows, clipped to [lo, hi], empty and NULL blocks as the
// midpoint. Blocks are assigned in Go (goBlock) to every unit of the table.
func groupBlockValues(t *testing.T, ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}, key []byte, fn string, k int, lo, hi float64, cond, group string) []float64 {
	t.Helper()
	blocks := unitBlocks(t, ctx, q, key, k)
	out := make([]float64, k)
	for b := range blocks {
		var v *float64
		err := q.QueryRow(ctx, `SELECT `+fn+`(LEAST(GREATEST(y, -5), 20), LEAST(GREATEST(x, 0), 10)::float8) FROM obs
			WHERE unit_id = ANY($1) AND x IS NOT NULL AND `+cond, blocks[b], group).Scan(&v)
		if err != nil {
			t.Fatal(err)
		}
		if v == nil {
			out[b] = dpplan.SampleMid(lo, hi)
		} else {
			out[b] = math.Min(math.Max(*v, lo), hi)
		}
	}
	return out
}

// groupedAverages runs a grouped plan's SQL (bind parameters from ds) and
// returns c + S/k per group key (keys joined by "|"), level and output,
// and n per group and level.
func groupedAverages(t *testing.T, ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, args []any, p *Plan) (map[string]map[int][]float64, map[string]map[int]int64) {
	t.Helper()
	rows, err := q.Query(ctx, p.SQL, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		t.Fatalf("emitted SQL: %v\n%s", err, p.SQL)
	}
	defer rows.Close()
	nk := len(p.Keys)
	avg, units := map[string]map[int][]float64{}, map[string]map[int]int64{}
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != nk+1+len(p.Measures) {
			t.Fatalf("emitted SQL returned %d columns, want %d keys, k and %d measures", len(raw), nk, len(p.Measures))
		}
		var key []string
		for _, v := range raw[:nk] {
			key = append(key, string(v))
		}
		g := strings.Join(key, "|")
		k, _ := strconv.Atoi(string(raw[nk]))
		if avg[g] == nil {
			avg[g], units[g] = map[int][]float64{}, map[int]int64{}
		}
		if avg[g][k] != nil {
			t.Fatalf("group %q level %d returned twice", g, k)
		}
		avg[g][k] = []float64{}
		for _, o := range p.Outputs {
			if o.Kind != OutputSampleAgg {
				continue
			}
			s, ok := new(big.Rat).SetString(string(raw[nk+1+o.Measure]))
			if !ok {
				t.Fatalf("S = %q", raw[nk+1+o.Measure])
			}
			f, _ := s.Float64()
			avg[g][k] = append(avg[g][k], dpplan.SampleMid(o.Lower, o.Upper)+f/float64(k))
		}
		if c := p.SampleAgg.CountMeasure; c >= 0 {
			units[g][k], _ = strconv.ParseInt(string(raw[nk+1+c]), 10, 64)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return avg, units
}

// TestSampleAgg_GroupedPostgres is the differential test of grouped
// sample-and-aggregate with noise off: per group (a column key and a CASE
// key) and per block, the emitted SQL's average over the k blocks equals
// the mean of PostgreSQL's own aggregate over the group's rows of each
// block (blocks assigned in Go by HMAC); groups without data (d) and
// outside the domain (z, NULL) return no row; with the noisy-count plan,
// n of each group is its number of distinct units, at every level.
func TestSampleAgg_GroupedPostgres(t *testing.T) {
	ctx, conn := freshConn(t, 3*time.Minute)
	ds := saGroupDataset(t, 4) // L0 = 4 ≥ the 4 groups: no group is dropped
	saGroupTable(t, ctx, conn, 300, 3)
	key := ds.SampleKey()
	const k = 8
	for _, tc := range []struct {
		query  string
		narrow map[string][2]float64 // output ranges narrower than the natural ones (narrowed)
		fns    []string
		cond   string // the reference's group condition, $2 = group
		groups []string
	}{
		{"SELECT g, corr(y, x), regr_r2(y, x) FROM obs GROUP BY g", nil, []string{"corr", "regr_r2"}, "g = $2", []string{"a", "b", "c"}},
		// A narrow output range: block answers are clipped.
		{"SELECT g, corr(y, x) FROM obs WHERE x > 1 GROUP BY 1", map[string][2]float64{"corr": {0.8, 0.82}}, []string{"corr"}, "x > 1 AND g = $2", []string{"a", "b", "c"}},
		// A CASE key (its rows per unit and group stay within the limits).
		{"SELECT CASE WHEN g = 'a' THEN 'A' WHEN g = 'b' THEN 'B' END AS band, regr_r2(y, x) FROM obs GROUP BY band", nil, []string{"regr_r2"},
			"(CASE WHEN g = 'a' THEN 'A' WHEN g = 'b' THEN 'B' END) = $2", []string{"A", "B"}},
	} {
		p, err := RewriteWith(ds, tc.query, Options{SampleBlocks: k})
		if err != nil {
			t.Fatal(err)
		}
		if tc.narrow != nil {
			p = narrowed(t, p, tc.narrow)
		}
		got, _ := groupedAverages(t, ctx, conn, p.QueryArgs(ds), p)
		if _, ok := got["d"]; ok {
			t.Errorf("%s: group d (no data) returned a row", tc.query)
		}
		if len(got) != len(tc.groups) {
			t.Errorf("%s: %d groups returned, want %v", tc.query, len(got), tc.groups)
		}
		clipped := 0
		for _, g := range tc.groups {
			for i, fn := range tc.fns {
				o := p.Outputs[1+i]
				per := groupBlockValues(t, ctx, conn, key, fn, k, o.Lower, o.Upper, tc.cond, g)
				for _, v := range groupBlockValues(t, ctx, conn, key, fn, k, math.Inf(-1), math.Inf(1), tc.cond, g) {
					if v < o.Lower || v > o.Upper {
						clipped++
					}
				}
				want := mean(per)
				if got[g][k] == nil {
					t.Fatalf("%s: no row for group %s", tc.query, g)
				}
				if d := math.Abs(got[g][k][i] - want); d > 1e-9*math.Max(1, math.Abs(want)) {
					t.Errorf("%s: %s of group %s over %d blocks: emitted %v, mean of per-block PostgreSQL aggregates %v", tc.query, fn, g, k, got[g][k][i], want)
				}
			}
		}
		if tc.narrow != nil && clipped == 0 {
			t.Errorf("%s: no block answer was clipped: the test does not exercise clipping", tc.query)
		}
	}

	// A private key: the groups present in the data (a, b, c and z; not
	// NULL), each per block like PostgreSQL, with its unit count.
	pds := saGroupDatasetKey(t, 4, "{type: text}")
	pp, err := RewriteWith(pds, "SELECT g, corr(y, x) FROM obs GROUP BY g", Options{SampleBlocks: k})
	if err != nil {
		t.Fatal(err)
	}
	if !pp.PrivateGroups() || pp.SampleAgg.CountMeasure < 0 {
		t.Fatalf("private-key plan without the selection count: %+v", pp.SampleAgg)
	}
	pgot, punits := groupedAverages(t, ctx, conn, pp.QueryArgs(pds), pp)
	if len(pgot) != 4 {
		t.Errorf("private key: %d groups returned, want a, b, c, z", len(pgot))
	}
	for _, g := range []string{"a", "b", "c", "z"} {
		want := mean(groupBlockValues(t, ctx, conn, key, "corr", k, -1, 1, "g = $2", g))
		if pgot[g][k] == nil || math.Abs(pgot[g][k][0]-want) > 1e-9 {
			t.Errorf("private key, group %s: emitted %v, per-block mean %v", g, pgot[g][k], want)
		}
		var n int64
		if err := conn.QueryRow(ctx, `SELECT COUNT(DISTINCT unit_id) FROM obs WHERE g = $1`, g).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if punits[g][k] != n {
			t.Errorf("private key, group %s: n = %d, want %d", g, punits[g][k], n)
		}
	}

	// The noisy-count plan: n per group at every level.
	p, err := Rewrite(ds, "SELECT g, corr(y, x) FROM obs GROUP BY g")
	if err != nil {
		t.Fatal(err)
	}
	_, units := groupedAverages(t, ctx, conn, p.QueryArgs(ds), p)
	for _, g := range []string{"a", "b", "c"} {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT COUNT(DISTINCT unit_id) FROM obs WHERE g = $1`, g).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if len(units[g]) != len(sampleLevels) {
			t.Fatalf("group %s: %d levels, want %d", g, len(units[g]), len(sampleLevels))
		}
		for lvl, u := range units[g] {
			if u != n {
				t.Errorf("group %s level %d: n = %d, want %d distinct units", g, lvl, u, n)
			}
		}
	}
}

// TestSampleAgg_GroupedNeighbour is the neighbouring-database audit of
// grouped sample-and-aggregate: a new unit with many extreme rows in every
// group (beyond max_rows_per_unit, outside the bounds).
//
//   - L0 = 4 (no group dropped): in each group exactly the new unit's
//     block changes (per-block PostgreSQL references), and every group's
//     average moves by at most (u − l)/k.
//   - L0 = 2 < 4 groups: at most 2 groups' averages change (the SQL keeps
//     2 random groups of the unit), each by at most (u − l)/k; over the
//     trials each group is sometimes kept (the choice is random, not
//     always the first groups).
func TestSampleAgg_GroupedNeighbour(t *testing.T) {
	const k = 16
	for _, l0 := range []int{4, 2} {
		// D within the limits (each unit in at most L0 groups), so that
		// f(D) does not depend on the SQL's random choices.
		ctx, conn := freshConn(t, 3*time.Minute)
		saGroupTable(t, ctx, conn, 150, min(l0, 3))
		ds := saGroupDataset(t, l0)
		key := ds.SampleKey()
		p, err := RewriteWith(ds, "SELECT g, corr(y, x), regr_r2(y, x) FROM obs GROUP BY g", Options{SampleBlocks: k})
		if err != nil {
			t.Fatal(err)
		}
		if p.MaxGroupsPerUnit != l0 {
			t.Fatalf("MaxGroupsPerUnit = %d, want %d", p.MaxGroupsPerUnit, l0)
		}
		args := p.QueryArgs(ds)
		base, _ := groupedAverages(t, ctx, conn, args, p)
		before := map[string][]float64{}
		if l0 == 4 {
			for _, g := range []string{"a", "b", "c", "d"} {
				before[g] = groupBlockValues(t, ctx, conn, key, "corr", k, -1, 1, "g = $2", g)
			}
		}
		kept := map[string]int{}
		for trial := 0; trial < 12; trial++ {
			unit := int64(200001 + trial)
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range []string{"a", "b", "c", "d"} {
				for r := 0; r < 6; r++ {
					if _, err := tx.Exec(ctx, `INSERT INTO obs VALUES ($1, $2, $3, $4)`, unit, g, []string{"0", "10"}[r%2], []float64{20, -5}[r%2]*1e6); err != nil {
						t.Fatal(err)
					}
				}
			}
			after, _ := groupedAverages(t, ctx, tx, args, p)
			ub := goBlock(key, strconv.FormatInt(unit, 10), k)
			if l0 == 4 {
				for g, bv := range before {
					now := groupBlockValues(t, ctx, tx, key, "corr", k, -1, 1, "g = $2", g)
					for b := range bv {
						if b != ub && now[b] != bv[b] {
							t.Errorf("trial %d: group %s block %d changed but the new unit is in block %d", trial, g, b, ub)
						}
					}
				}
			}
			_ = tx.Rollback(ctx)
			changed := 0
			for _, g := range []string{"a", "b", "c", "d"} {
				moved := false
				for i, o := range p.Outputs[1:] {
					b0, a0 := dpplan.SampleMid(o.Lower, o.Upper), dpplan.SampleMid(o.Lower, o.Upper) // an absent group is all midpoints
					if base[g][k] != nil {
						b0 = base[g][k][i]
					}
					if after[g][k] != nil {
						a0 = after[g][k][i]
					}
					bound := (o.Upper - o.Lower) / k
					if d := math.Abs(a0 - b0); d > bound+1e-12 {
						t.Errorf("L0=%d trial %d: %s of group %s moved by %v > (u−l)/k = %v", l0, trial, o.Name, g, d, bound)
					} else if d > 0 {
						moved = true
					}
				}
				if moved {
					changed++
					kept[g]++
				}
			}
			if changed > l0 {
				t.Errorf("L0=%d trial %d: %d groups changed", l0, trial, changed)
			}
		}
		if l0 == 2 {
			// Each group is kept with probability 1/2 per trial (if its
			// answer moves when kept): P(a group never moves in 12 trials)
			// ≤ 2^-12 per group, < 1e-3 for the four.
			for _, g := range []string{"a", "b", "c", "d"} {
				if kept[g] == 0 {
					t.Errorf("L0=2: group %s never changed in 12 trials: the group choice is not random", g)
				}
			}
		}
	}
}

// TestSampleAgg_Joins covers sample-and-aggregate over the join shapes it
// accepts (a protected table joined to public tables; protected tables
// joined on the unit), on the databases of the join audit (join_test.go:
// data within every limit, one row per unit and protected table):
//
//   - differential, noise off, k = 4 fixed: per group, the emitted average
//     equals the mean over the blocks of PostgreSQL's own aggregate over
//     the joined rows of the block's units (blocks assigned in Go);
//   - neighbouring audit: adding one adversarial unit to every protected
//     table of the join (rows matching many keys, extreme values; and a
//     person with NULL units) moves each (group, level) sum by at most
//     u − l, in at most MaxGroupsPerUnit groups per level.
func TestSampleAgg_Joins(t *testing.T) {
	refs := map[string]string{
		// The golden's query restricted to the units of one block ($1).
		"sampleagg_join_unit":   `SELECT p.sex, corr(v.cost, v.age) FROM visits v JOIN patients p ON v.patient_id = p.patient_id WHERE v.patient_id::text = ANY($1) GROUP BY p.sex`,
		"sampleagg_join_public": `SELECT w.wing, corr(v.cost, w.beds) FROM visits v JOIN wards w ON v.ward_id = w.ward_id WHERE v.patient_id::text = ANY($1) GROUP BY w.wing`,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(17, 19))
	audited := 0
	for _, gc := range loadGolden(t) {
		p, err := Rewrite(gc.ds, gc.query)
		if err != nil || p.Join == nil || p.SampleAgg == nil {
			continue
		}
		ref, ok := refs[gc.name]
		if !ok {
			t.Errorf("golden %s: no reference query for the differential test", gc.name)
			continue
		}
		audited++
		t.Run(gc.name, func(t *testing.T) {
			db := newJoinDB(t, ctx, gc.ds, rng)
			// Differential with k = 4.
			const k = 4
			pk, err := RewriteWith(gc.ds, gc.query, Options{SampleBlocks: k})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := groupedAverages(t, ctx, db.conn, auditArgs(pk), pk)
			units, err := queryText(ctx, db.conn, `SELECT DISTINCT patient_id::text FROM visits WHERE patient_id IS NOT NULL`)
			if err != nil {
				t.Fatal(err)
			}
			blocks := make([][]string, k)
			for _, u := range units {
				b := goBlock(auditKey[:], *u[0], k)
				blocks[b] = append(blocks[b], *u[0])
			}
			want := map[string]float64{}
			groups := pk.Keys[0].Domain
			for _, g := range groups {
				want[g] = 0
			}
			for b := range blocks {
				per := map[string]float64{}
				for _, g := range groups {
					per[g] = 0 // the midpoint of [−1, 1]: an empty block
				}
				rows, err := db.conn.Query(ctx, ref, blocks[b])
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var g string
					var v *float64
					if err := rows.Scan(&g, &v); err != nil {
						t.Fatal(err)
					}
					if v != nil {
						per[g] = math.Min(math.Max(*v, -1), 1)
					}
				}
				rows.Close()
				for g, v := range per {
					want[g] += v / k
				}
			}
			nonzero := false
			for _, g := range groups {
				nonzero = nonzero || want[g] != 0
				have := 0.0 // a group without rows answers the midpoint
				if got[g][k] != nil {
					have = got[g][k][0]
				}
				if math.Abs(have-want[g]) > 1e-9 {
					t.Errorf("group %s: emitted %v, mean of per-block PostgreSQL corr %v", g, have, want[g])
				}
			}
			if !nonzero {
				t.Fatalf("every group's reference is the midpoint: the differential compares nothing")
			}

			// Neighbouring audit.
			bound := &Plan{Measures: p.Measures, MaxGroupsPerUnit: len(p.SampleAgg.Levels) * p.MaxGroupsPerUnit}
			base, err := runAudit(ctx, db.conn, p)
			if err != nil {
				t.Fatalf("emitted SQL on D: %v\n%s", err, p.SQL)
			}
			for _, adv := range []int{1_000_000, -1} { // a new unit; a person without a unit
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
				db.addAdversary(t, ctx, tx, rng, p.Join, adv)
				d2, err := runAudit(ctx, tx, p)
				_ = tx.Rollback(ctx)
				if err != nil {
					t.Fatalf("emitted SQL on D': %v", err)
				}
				if bad := auditDiff(bound, base, d2, 1); len(bad) > 0 {
					t.Errorf("adversary %d: D and D' violate the declared sensitivity:\n  %s", adv, strings.Join(bad, "\n  "))
				}
			}
		})
	}
	if audited < 2 {
		t.Errorf("only %d sample-and-aggregate join goldens, want both shapes", audited)
	}
}

// diffSampleAgg is diffPostgres for a sample-and-aggregate plan (the
// corpus's corr/covar/regr queries), generic over the query: for k in 2, 4
// and 8, every block b of the units (assigned in Go by HMAC under
// auditKey) is materialised by deleting, inside a transaction, the rows of
// every other unit from every protected table, and the analyst's own query
// is run on what is left; per group, its answers clipped to the output
// range (absent groups and NULL answers as the midpoint) are averaged over
// the blocks and must equal the emitted SQL's c + S/k. The data must be
// within the contribution limits (then nothing is dropped) and every key
// must be in the select list.
func diffSampleAgg(t *testing.T, ctx context.Context, conn *pgx.Conn, ds *policy.Dataset, p *Plan, query string) {
	t.Helper()
	got, _ := groupedAverages(t, ctx, conn, auditArgs(p), p)
	var keyOut, saOut []int // output positions
	for i, o := range p.Outputs {
		switch o.Kind {
		case OutputKey:
			keyOut = append(keyOut, i)
		case OutputSampleAgg:
			saOut = append(saOut, i)
		}
	}
	if len(keyOut) != len(p.Keys) {
		t.Fatalf("diffSampleAgg needs every key in the select list: %s", query)
	}
	var protected []*policy.Table
	for _, name := range ds.TableOrder {
		if tb := ds.Tables[name]; !tb.Public {
			protected = append(protected, tb)
		}
	}
	unitRows, err := queryText(ctx, conn, `SELECT DISTINCT `+pgemit.QuoteIdent(protected[0].UnitColumn)+`::text FROM `+pgemit.QuoteIdent(protected[0].Name)+` WHERE `+pgemit.QuoteIdent(protected[0].UnitColumn)+` IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, k := range []int{2, 4, 8} {
		blocks := make([][]string, k)
		for _, u := range unitRows {
			b := goBlock(auditKey[:], *u[0], k)
			blocks[b] = append(blocks[b], *u[0])
		}
		perBlock := make([]map[string][]float64, k)
		for b := range blocks {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, tb := range protected {
				if _, err := tx.Exec(ctx, `DELETE FROM `+pgemit.QuoteIdent(tb.Schema)+`.`+pgemit.QuoteIdent(tb.Name)+` WHERE `+pgemit.QuoteIdent(tb.UnitColumn)+`::text <> ALL($1) OR `+pgemit.QuoteIdent(tb.UnitColumn)+` IS NULL`, blocks[b]); err != nil {
					_ = tx.Rollback(ctx)
					t.Fatal(err)
				}
			}
			rows, err := tx.Query(ctx, query, pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				_ = tx.Rollback(ctx)
				t.Fatalf("the analyst's query on block %d: %v", b, err)
			}
			perBlock[b] = map[string][]float64{}
			for rows.Next() {
				raw := rows.RawValues()
				keys := make([]string, len(p.Keys))
				for _, i := range keyOut {
					keys[p.Outputs[i].Key] = string(raw[i])
				}
				var vs []float64
				for _, i := range saOut {
					o := p.Outputs[i]
					v := dpplan.SampleMid(o.Lower, o.Upper)
					if raw[i] != nil {
						f, err := strconv.ParseFloat(string(raw[i]), 64)
						if err != nil {
							t.Fatal(err)
						}
						v = math.Min(math.Max(f, o.Lower), o.Upper)
					}
					vs = append(vs, v)
				}
				perBlock[b][strings.Join(keys, "|")] = vs
			}
			rows.Close()
			_ = tx.Rollback(ctx)
		}
		groups := map[string]bool{}
		for g := range got {
			groups[g] = true
		}
		for _, pb := range perBlock {
			for g := range pb {
				groups[g] = true
			}
		}
		for g := range groups {
			sum := make([]float64, len(saOut))
			for _, pb := range perBlock {
				for j, i := range saOut {
					if vs, ok := pb[g]; ok {
						sum[j] += vs[j]
					} else {
						sum[j] += dpplan.SampleMid(p.Outputs[i].Lower, p.Outputs[i].Upper)
					}
				}
			}
			for j, i := range saOut {
				o := p.Outputs[i]
				have := dpplan.SampleMid(o.Lower, o.Upper)
				if got[g][k] != nil {
					have = got[g][k][j]
				}
				w := sum[j] / float64(k)
				if d := math.Abs(have - w); d > 1e-9*math.Max(1, math.Abs(w)) {
					t.Errorf("%s: group %q, k=%d: emitted %v, mean of PostgreSQL's per-block answers %v", query, g, k, have, w)
				}
				compared++
			}
		}
	}
	if compared == 0 {
		t.Fatalf("%s: nothing compared", query)
	}
}
