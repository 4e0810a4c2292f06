package rewrite

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// pumsPath is the shared PUMS sample (read in place, never copied).
const pumsPath = "/work/shared/datasets/pums/PUMS_pid.csv"

const pumsPolicy = `
dataset: pums
privacy_unit: person
budget: {epsilon: 10, accountant: pure}
tables:
  pums:
    unit_column: pid
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      age: {type: int, lower: 0, upper: 100}
      educ: {type: int, lower: 1, upper: 16}
      income: {type: float, lower: 0, upper: 500000}
`

// TestSampleAgg_PUMSAccuracy reports, on the 1,000-person PUMS sample, the
// noiseless sample-and-aggregate answer (the average of clipped per-block
// answers at the k the noisy-count rule picks for n = 1000, i.e. 16)
// against PostgreSQL's answer over all rows, and the Laplace noise scale at
// ε = 1. It asserts only what the method guarantees here: the noiseless
// answer lies in the output range and the per-block bias for corr stays
// below 0.15 (a regression check; the figures are logged for BENCHMARKS).
func TestSampleAgg_PUMSAccuracy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := pumsConn(t, ctx)
	ds, err := policy.Parse(strings.NewReader(pumsPolicy), "pums.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"corr(income, age)", "corr(income, educ)", "regr_r2(income, educ)"} {
		p, err := Rewrite(ds, "SELECT "+fn+" FROM pums")
		if err != nil {
			t.Fatal(err)
		}
		avgs, units := emittedAverages(t, ctx, conn, ds, p)
		k := p.SampleAgg.ChooseBlocks(float64(units[p.SampleAgg.Levels[0]]))
		var full float64
		if err := conn.QueryRow(ctx, "SELECT "+fn+" FROM pums").Scan(&full); err != nil {
			t.Fatal(err)
		}
		got := avgs[k][0]
		o := p.Outputs[0]
		scale := (o.Upper - o.Lower) / (float64(k) * 0.9) // ε = 1, 0.9 for the statistic
		t.Logf("%s: PostgreSQL %.4f, sample-and-aggregate (k=%d, no noise) %.4f, Laplace scale at ε=1 %.4f", fn, full, k, got, scale)
		if got < o.Lower || got > o.Upper {
			t.Errorf("%s: noiseless answer %v outside [%v, %v]", fn, got, o.Lower, o.Upper)
		}
		if strings.HasPrefix(fn, "corr") && math.Abs(got-full) > 0.15 {
			t.Errorf("%s: block-average bias %v > 0.15", fn, got-full)
		}
	}
}

// pumsConn loads the PUMS sample into a fresh database (skipped when the
// file is missing, a failure under CI).
func pumsConn(t *testing.T, ctx context.Context) *pgx.Conn {
	t.Helper()
	f, err := os.Open(pumsPath)
	if err != nil {
		if pgtest.InCI() {
			t.Fatalf("PUMS sample missing: %v", err)
		}
		t.Skipf("PUMS sample not available: %v", err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(recs) < 2 {
		t.Fatalf("read %s: %v", pumsPath, err)
	}
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, `CREATE TABLE pums (age int, sex int, educ int, race int, income float8, married int, pid bigint)`); err != nil {
		t.Fatal(err)
	}
	var rows [][]any
	for _, r := range recs[1:] {
		row := make([]any, len(r))
		for i, v := range r {
			row[i] = v
		}
		rows = append(rows, row)
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"pums"}, strings.Split(strings.Join(recs[0], ","), ","), pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestSampleAgg_PUMSGrouped reports corr(income, educ) GROUP BY sex on the
// PUMS sample (about 500 people per group, so the noisy-count rule picks
// k = 8 or 16 per group): PostgreSQL's per-group answer and, over 20
// sample keys (the block assignment is random through the key), the mean
// and standard deviation of the noiseless block average, and at ε = 1 the
// Laplace scale b = L0·(u−l)/(k·0.9ε) (L0 = 1: one group per person) and
// the root-mean-square error √(mean squared noiseless error + 2b²) of the
// released answer (before clamping to [−1, 1]). It asserts every noiseless
// answer lies in [−1, 1] and the mean within 0.2 of PostgreSQL's (a
// regression check; the figures go to BENCHMARKS.md).
func TestSampleAgg_PUMSGrouped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := pumsConn(t, ctx)
	ds, err := policy.Parse(strings.NewReader(strings.Replace(pumsPolicy, "      age:", "      sex: {type: int, public_values: [0, 1]}\n      age:", 1)), "pums.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Rewrite(ds, "SELECT sex, corr(income, educ) FROM pums GROUP BY sex")
	if err != nil {
		t.Fatal(err)
	}
	const keys = 20
	for _, g := range []string{"0", "1"} {
		var full float64
		if err := conn.QueryRow(ctx, "SELECT corr(income, educ) FROM pums WHERE sex = $1", g).Scan(&full); err != nil {
			t.Fatal(err)
		}
		var sum, sumSq, sq float64
		k, n := 0, int64(0)
		for i := 0; i < keys; i++ {
			key := sha256.Sum256([]byte("dpproxy PUMS key " + strconv.Itoa(i)))
			inner, outer := dpplan.HMACPads(key[:])
			avgs, units := groupedAverages(t, ctx, conn, []any{inner, outer}, p)
			n = units[g][p.SampleAgg.Levels[0]]
			k = p.SampleAgg.ChooseBlocks(float64(n))
			got := avgs[g][k][0]
			if got < -1 || got > 1 {
				t.Fatalf("sex=%s: noiseless answer %v outside [-1, 1]", g, got)
			}
			sum += got
			sumSq += got * got
			sq += (got - full) * (got - full)
		}
		m := sum / keys
		sd := math.Sqrt(math.Max(0, sumSq/keys-m*m))
		b := float64(p.MaxGroupsPerUnit) * 2 / (float64(k) * 0.9)
		t.Logf("sex=%s: n=%d, k=%d, PostgreSQL %.4f, noiseless block average over %d keys %.4f ± %.4f (sd), Laplace scale at ε=1 %.4f, RMSE %.4f",
			g, n, k, full, keys, m, sd, b, math.Sqrt(sq/keys+2*b*b))
		if math.Abs(m-full) > 0.2 {
			t.Errorf("sex=%s: mean noiseless answer %v, PostgreSQL %v", g, m, full)
		}
	}
}
