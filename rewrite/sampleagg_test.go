package rewrite

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
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

// saPolicy is a small dataset for sample-and-aggregate tests.
const saPolicy = `
dataset: sa
privacy_unit: person
budget: {epsilon: 10, delta: 1.0e-6, accountant: pure}
defaults: {epsilon: 1, mechanism: laplace}
tables:
  obs:
    unit_column: unit_id
    max_groups_per_unit: 1
    max_rows_per_unit: 3
    columns:
      x: {type: numeric, lower: 0, upper: 10}
      y: {type: float, lower: -5, upper: 20}
`

// goBlock is the block of a unit as the emitted SQL computes it: the first
// 56 bits of HMAC-SHA-256(key, unit text), modulo k.
func goBlock(key []byte, unit string, k int) int {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(unit))
	var b [8]byte
	copy(b[1:], m.Sum(nil)[:7])
	return int(binary.BigEndian.Uint64(b[:]) % uint64(k))
}

// saTable creates obs with n units of 1…3 rows each (within the policy's
// limits: no row is dropped by contribution bounding and no value clamped
// except the deliberately out-of-range ones, which the emitted SQL clamps
// and the reference query clamps the same way).
func saTable(t *testing.T, ctx context.Context, conn *pgx.Conn, n int) {
	t.Helper()
	if _, err := conn.Exec(ctx, `CREATE TABLE obs (unit_id bigint, x numeric, y double precision)`); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var rows [][]any
	for u := 1; u <= n; u++ {
		for r, nr := 0, 1+rng.IntN(3); r < nr; r++ {
			x := math.Round(rng.Float64()*1000) / 100 // 0 … 10, two decimals
			y := 1.5*x - 2 + rng.NormFloat64()*3
			var xv, yv any = fmt.Sprintf("%.2f", x), y
			if rng.IntN(20) == 0 {
				xv = nil
			}
			rows = append(rows, []any{u, xv, yv})
		}
	}
	rows = append(rows, []any{nil, "5", 5.0}) // a row without a unit: excluded
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"obs"}, []string{"unit_id", "x", "y"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
}

// unitBlocks assigns the units of obs to k blocks as the emitted SQL does
// (goBlock: HMAC-SHA-256 of the unit under key), computed in Go.
func unitBlocks(t *testing.T, ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, key []byte, k int) [][]int64 {
	t.Helper()
	rows, err := q.Query(ctx, `SELECT DISTINCT unit_id FROM obs WHERE unit_id IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	blocks := make([][]int64, k)
	for rows.Next() {
		var u int64
		if err := rows.Scan(&u); err != nil {
			t.Fatal(err)
		}
		b := goBlock(key, strconv.FormatInt(u, 10), k)
		blocks[b] = append(blocks[b], u)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks
}

// blockValues computes, with ordinary PostgreSQL aggregates, f(y, x) over
// the rows of each block of k (inputs clamped to the policy bounds like the
// emitted SQL does), clipped to [lo, hi], NULL (and empty) blocks as the
// midpoint.
func blockValues(t *testing.T, ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, key []byte, fn string, k int, lo, hi float64) []float64 {
	t.Helper()
	blocks := unitBlocks(t, ctx, q, key, k)
	out := make([]float64, k)
	for b := range blocks {
		var v *float64
		err := q.QueryRow(ctx, `SELECT `+fn+`(LEAST(GREATEST(y, -5), 20), LEAST(GREATEST(x, 0), 10)::float8) FROM obs WHERE unit_id = ANY($1) AND x IS NOT NULL`, blocks[b]).Scan(&v)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case v == nil:
			out[b] = dpplan.SampleMid(lo, hi)
		default:
			out[b] = math.Min(math.Max(*v, lo), hi)
		}
	}
	return out
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// emittedAverages runs the plan's SQL and returns c + S/k per level and
// statistic, and n per level.
func emittedAverages(t *testing.T, ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, ds *policy.Dataset, p *Plan) (map[int][]float64, map[int]int64) {
	t.Helper()
	args := p.QueryArgs(ds)
	inner, outer := args[0], args[1]
	rows, err := q.Query(ctx, p.SQL, pgx.QueryExecModeExec, inner, outer)
	if err != nil {
		t.Fatalf("emitted SQL: %v", err)
	}
	defer rows.Close()
	avg, units := map[int][]float64{}, map[int]int64{}
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != 1+len(p.Measures) {
			t.Fatalf("emitted SQL returned %d columns, want k and %d measures", len(raw), len(p.Measures))
		}
		k, _ := strconv.Atoi(string(raw[0]))
		for i, o := range p.Outputs {
			s, ok := new(big.Rat).SetString(string(raw[1+o.Measure]))
			if !ok {
				t.Fatalf("S = %q", raw[1+o.Measure])
			}
			f, _ := s.Float64()
			_ = i
			avg[k] = append(avg[k], dpplan.SampleMid(o.Lower, o.Upper)+f/float64(k))
		}
		if p.SampleAgg.CountMeasure >= 0 {
			n, _ := strconv.ParseInt(string(raw[1+p.SampleAgg.CountMeasure]), 10, 64)
			units[k] = n
		}
	}
	return avg, units
}

// narrowed returns p with the output range of each statistic replaced by
// ranges[fn] and its SQL emitted again. The planner builds only the
// natural ranges (corr [−1, 1], regr_r2 [0, 1]), which PostgreSQL's block
// answers never leave (its float8 → numeric cast keeps 15 digits, so even
// a rounding excess such as 1.0000000000000002 reaches the clip as 1): a
// narrower range is how a test makes the emitted clip change block
// answers.
func narrowed(t *testing.T, p *Plan, ranges map[string][2]float64) *Plan {
	t.Helper()
	c := *p
	sa := *p.SampleAgg
	sa.Calls = append([]dpplan.SampleCall(nil), sa.Calls...)
	c.SampleAgg = &sa
	c.Measures = append([]Measure(nil), p.Measures...)
	c.Outputs = append([]Output(nil), p.Outputs...)
	for i, call := range sa.Calls {
		r, ok := ranges[call.Fn]
		if !ok {
			continue
		}
		sa.Calls[i].Lower, sa.Calls[i].Upper = r[0], r[1]
		c.Measures[i].Lower, c.Measures[i].Upper, c.Measures[i].LInf = r[0], r[1], r[1]-r[0]
		for j, o := range c.Outputs {
			if o.Kind == OutputSampleAgg && o.Measure == i {
				c.Outputs[j].Lower, c.Outputs[j].Upper = r[0], r[1]
			}
		}
	}
	table, where := dpplan.SourceOf(p)
	c.SQL = pgemit.SampleAggSQL(table, &c, where)
	if c.SQL == p.SQL {
		t.Fatalf("narrowing %v left the SQL unchanged", ranges)
	}
	return &c
}

// collinear makes the rows of the units of block b (of k, under key) lie
// on a line through the origin: y = x (corr and regr_r2 exactly 1 over the
// block) or, with negative, y = −x with x halved to stay within y's
// bounds (corr exactly −1). Exactly: the float8 values of d and −d are
// negatives of each other, so PostgreSQL's sums over the block have
// Syy = Sxx and Sxy = ±Sxx, bit for bit, and Sxx/√(Sxx·Sxx) is 1.
func collinear(t *testing.T, ctx context.Context, conn *pgx.Conn, key []byte, b, k int, negative bool) {
	t.Helper()
	units := unitBlocks(t, ctx, conn, key, k)[b]
	if len(units) < 3 {
		t.Fatalf("block %d of %d has %d units", b, k, len(units))
	}
	set := `y = x::float8`
	if negative {
		set = `x = x / 2, y = -(x / 2)::float8`
	}
	if _, err := conn.Exec(ctx, `UPDATE obs SET `+set+` WHERE unit_id = ANY($1)`, units); err != nil {
		t.Fatal(err)
	}
}

// TestSampleAgg_Postgres: with k blocks and noise off, the emitted SQL
// returns the mean over the blocks of PostgreSQL's own aggregate per block
// (blocks assigned by HMAC in Go, aggregates by plain PostgreSQL queries);
// for every level of the noisy-count plan too, with n the number of units.
// Two blocks of 8 hold collinear data, so their answers reach the ends of
// the natural ranges (corr 1 and −1, regr_r2 1); and with narrower ranges
// (narrowed) the emitted clip changes block answers, which must match
// the per-block answers clipped in Go.
func TestSampleAgg_Postgres(t *testing.T) {
	ctx, conn := freshConn(t, 2*time.Minute)
	// A fixed key (not the random one drawn without sample_key_file): the
	// block assignment, and so which blocks are collinear and which block
	// answers are clipped, is then the same in every run.
	keyFile := filepath.Join(t.TempDir(), "sa.key")
	fixed := sha256.Sum256([]byte("dpproxy TestSampleAgg_Postgres"))
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(fixed[:])), 0o600); err != nil {
		t.Fatal(err)
	}
	ds, err := policy.Parse(strings.NewReader(saPolicy+"sample_key_file: "+keyFile+"\n"), "sa.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !ds.SampleKeyFromFile() {
		t.Fatal("the test key file was not used")
	}
	saTable(t, ctx, conn, 400)
	key := ds.SampleKey()
	collinear(t, ctx, conn, key, 0, 8, false)
	collinear(t, ctx, conn, key, 1, 8, true)

	p, err := RewriteWith(ds, "SELECT corr(y, x), regr_r2(y, x) FROM obs", Options{SampleBlocks: 8})
	if err != nil {
		t.Fatal(err)
	}
	// Natural ranges: corr's blocks 0 and 1 at its ends, regr_r2's at 1.
	// The 0.8 and 0.65 wide ranges of narrow are met by the block answers
	// of 50 noisy units on both sides, whatever the key.
	narrow := narrowed(t, p, map[string][2]float64{"corr": {0.8, 0.81}, "regr_r2": {0.65, 0.66}})
	for _, plan := range []*Plan{p, narrow} {
		got, _ := emittedAverages(t, ctx, conn, ds, plan)
		for i, f := range []string{"corr", "regr_r2"} {
			o := plan.Outputs[i]
			raw := blockValues(t, ctx, conn, key, f, 8, math.Inf(-1), math.Inf(1))
			per := blockValues(t, ctx, conn, key, f, 8, o.Lower, o.Upper)
			clipped := 0
			for b, v := range raw {
				if v < o.Lower || v > o.Upper {
					clipped++
				}
				if plan == p && b < 2 {
					end := o.Upper
					if f == "corr" && b == 1 {
						end = o.Lower
					}
					if v != end {
						t.Errorf("%s of collinear block %d = %v, want %v, an end of its range", f, b, v, end)
					}
				}
			}
			if plan == narrow && clipped == 0 {
				t.Errorf("%s in [%v, %v]: no block answer was clipped: the test does not exercise clipping", f, o.Lower, o.Upper)
			}
			want := mean(per)
			if d := math.Abs(got[8][i] - want); d > 1e-9*math.Max(1, math.Abs(want)) {
				t.Errorf("%s in [%v, %v] over 8 blocks: emitted SQL gives %v, mean of per-block PostgreSQL aggregates %v", f, o.Lower, o.Upper, got[8][i], want)
			}
		}
	}

	// The noisy-count plan: every level, including levels with empty
	// blocks (4096 blocks for 400 units).
	p, err = Rewrite(ds, "SELECT corr(y, x) FROM obs WHERE x >= 0")
	if err != nil {
		t.Fatal(err)
	}
	avgs, units := emittedAverages(t, ctx, conn, ds, p)
	if len(avgs) != len(sampleLevels) {
		t.Fatalf("emitted SQL returned %d levels, want %d", len(avgs), len(sampleLevels))
	}
	for _, k := range []int{2, 32, 4096} {
		want := mean(blockValuesWhere(t, ctx, conn, key, k))
		if d := math.Abs(avgs[k][0] - want); d > 1e-9 {
			t.Errorf("corr over %d blocks: emitted %v, per-block mean %v", k, avgs[k][0], want)
		}
	}
	var n int64
	if err := conn.QueryRow(ctx, `SELECT COUNT(DISTINCT unit_id) FROM obs WHERE x >= 0`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	for k, u := range units {
		if u != n {
			t.Errorf("level %d: n = %d, want %d distinct units", k, u, n)
		}
	}
}

// blockValuesWhere is blockValues for corr restricted to x >= 0 (the
// WHERE of the noisy-count case).
func blockValuesWhere(t *testing.T, ctx context.Context, conn *pgx.Conn, key []byte, k int) []float64 {
	t.Helper()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `DELETE FROM obs WHERE NOT (x >= 0) OR x IS NULL`); err != nil {
		t.Fatal(err)
	}
	return blockValues(t, ctx, tx, key, "corr", k, -1, 1)
}

// TestSampleAgg_Neighbour: adding one unit (D' = D + u) changes the block
// answers of exactly one block (u's block, computed in Go), and the average
// by at most (u − l)/k, for units with many extreme rows.
func TestSampleAgg_Neighbour(t *testing.T) {
	ctx, conn := freshConn(t, 2*time.Minute)
	ds, err := policy.Parse(strings.NewReader(saPolicy), "sa.yaml")
	if err != nil {
		t.Fatal(err)
	}
	saTable(t, ctx, conn, 120)
	key := ds.SampleKey()
	const k = 16
	p, err := RewriteWith(ds, "SELECT corr(y, x), regr_r2(y, x) FROM obs", Options{SampleBlocks: k})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := emittedAverages(t, ctx, conn, ds, p)
	before := blockValues(t, ctx, conn, key, "corr", k, -1, 1)
	for trial, unit := range []int64{100001, 100002, 100003, 100004, 100005} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Rows far off the trend, more than max_rows_per_unit of them.
		for r := 0; r < 6; r++ {
			if _, err := tx.Exec(ctx, `INSERT INTO obs VALUES ($1, $2, $3)`, unit, []string{"0", "10"}[r%2], []float64{20, -5}[r%2]*1e6); err != nil {
				t.Fatal(err)
			}
		}
		after := blockValues(t, ctx, tx, key, "corr", k, -1, 1)
		d2, _ := emittedAverages(t, ctx, tx, ds, p)
		_ = tx.Rollback(ctx)
		ub := goBlock(key, strconv.FormatInt(unit, 10), k)
		for b := range before {
			if b != ub && before[b] != after[b] {
				t.Errorf("trial %d: block %d changed but the new unit is in block %d", trial, b, ub)
			}
		}
		for i, o := range p.Outputs {
			bound := (o.Upper - o.Lower) / k
			if d := math.Abs(d2[k][i] - base[k][i]); d > bound+1e-12 {
				t.Errorf("trial %d: %s moved by %v > (u−l)/k = %v", trial, o.Name, d, bound)
			}
		}
	}
}

func TestSampleAgg_Refusals(t *testing.T) {
	ds, err := policy.Parse(strings.NewReader(saPolicy), "sa.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, sql string
		opts      Options
		code      string
	}{
		{"one argument", "SELECT corr(y) FROM obs", Options{}, "42883"},
		{"expression argument", "SELECT corr(y + 1, x) FROM obs", Options{}, "0A000"},
		{"k too small", "SELECT corr(y, x) FROM obs", Options{SampleBlocks: 1}, "22023"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RewriteWith(ds, tc.sql, tc.opts)
			pe, ok := err.(interface{ SQLState() string })
			if !ok || pe.SQLState() != tc.code {
				t.Fatalf("RewriteWith(%q) = %v, want SQLSTATE %s", tc.sql, err, tc.code)
			}
		})
	}
	// The output ranges are the natural ones, with sensitivity u − l.
	p, err := Rewrite(ds, "SELECT corr(y, x), regr_r2(y, x) FROM obs")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][3]float64{{-1, 1, 2}, {0, 1, 1}} {
		o := p.Outputs[i]
		if m := p.Measures[o.Measure]; o.Lower != want[0] || o.Upper != want[1] ||
			m.Lower != want[0] || m.Upper != want[1] || m.LInf != want[2] {
			t.Errorf("%s: output [%v, %v], measure [%v, %v] LInf %v; want [%v, %v] LInf %v", o.Name, o.Lower, o.Upper, m.Lower, m.Upper, m.LInf, want[0], want[1], want[2])
		}
	}
}

// auditKey is the sample key the shared audits (runAudit) run
// sample-and-aggregate plans with: the neighbouring-database bound holds
// for every key, so any fixed one serves.
var auditKey = sha256.Sum256([]byte("dpproxy audit sample key"))

// auditArgs are the bind parameters of p's SQL under auditKey (nil for
// plans without any).
func auditArgs(p *Plan) []any {
	if p.SampleAgg == nil {
		return nil
	}
	inner, outer := dpplan.HMACPads(auditKey[:])
	return []any{inner, outer}
}

// TestSampleAgg_KeyNotInPlan: neither the sample key nor its HMAC pads (raw
// or in hex) are in the emitted SQL or in the input of the fingerprint
// (the SQL and the canonical encoding of the rest of the plan), for
// grouped and ungrouped plans; the key reaches PostgreSQL only as
// Plan.QueryArgs.
func TestSampleAgg_KeyNotInPlan(t *testing.T) {
	ds, err := policy.Parse(strings.NewReader(saPolicy), "sa.yaml")
	if err != nil {
		t.Fatal(err)
	}
	key := ds.SampleKey()
	inner, outer := dpplan.HMACPads(key)
	for _, q := range []string{"SELECT corr(y, x) FROM obs", "SELECT corr(y, x), regr_r2(y, x) FROM obs WHERE x > 1"} {
		p, err := Rewrite(ds, q)
		if err != nil {
			t.Fatal(err)
		}
		c := *p
		c.Fingerprint, c.SQL = "", ""
		cj, err := json.Marshal(&c) // every exported field, as the fingerprint reads them
		if err != nil {
			t.Fatal(err)
		}
		canon := string(cj)
		for _, secret := range [][]byte{key, inner, outer} {
			for _, form := range []string{string(secret), hex.EncodeToString(secret), hex.EncodeToString(secret[:8])} {
				if strings.Contains(p.SQL, form) || strings.Contains(canon, form) || strings.Contains(p.RedactedSQL(), form) {
					t.Fatalf("%q: the SQL or the fingerprint input holds the key", q)
				}
			}
		}
		args := p.QueryArgs(ds)
		if len(args) != 2 || string(args[0].([]byte)) != string(inner) || string(args[1].([]byte)) != string(outer) {
			t.Fatalf("%q: QueryArgs = %v, want the key's HMAC pads", q, args)
		}
	}
	if p, err := Rewrite(ds, "SELECT SUM(x) FROM obs"); err != nil || p.QueryArgs(ds) != nil {
		t.Fatalf("a plain SUM has bind parameters: %v", err)
	}
}
