package rewrite

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// clampedX and clampedY are obs's columns clamped as the emitted SQL does
// (GREATEST and LEAST ignore NULLs, hence the CASE).
const (
	clampedX = "(CASE WHEN x IS NULL THEN NULL ELSE LEAST(GREATEST(x::numeric, 0), 10) END)"
	clampedY = "(CASE WHEN y IS NULL THEN NULL ELSE LEAST(GREATEST(y::numeric, -5), 20) END)"
)

// saQuantileCases are quantiles by sample-and-aggregate over saPolicy's
// obs table, with the same statistic written as a plain PostgreSQL
// aggregate over the columns clamped (and cast) as the emitted SQL does.
var saQuantileCases = []struct {
	query, ref string
	pgType     string
	lo, hi     float64 // the expression's interval
}{
	{"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY y - x * 2) FROM obs",
		"percentile_cont(0.5) WITHIN GROUP (ORDER BY " + clampedY + " - " + clampedX + " * 2)", "float8", -25, 20},
	{"SELECT percentile_disc(0.25) WITHIN GROUP (ORDER BY x / 2) FROM obs",
		"percentile_disc(0.25) WITHIN GROUP (ORDER BY " + clampedX + " / 2)", "numeric", 0, 5},
	{"SELECT MAX(x * 3 + 1) FROM obs",
		"MAX(" + clampedX + " * 3 + 1)", "numeric", 1, 31},
	{"SELECT MIN(y) FROM obs",
		"MIN(" + clampedY + ")", "float8", -5, 20},
}

// saBlockQuantiles is blockValues for a quantile statistic: ref over the
// rows of each block of k, clipped to [lo, hi], empty blocks as the
// midpoint.
func saBlockQuantiles(t *testing.T, ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, key []byte, ref string, k int, lo, hi float64) []float64 {
	t.Helper()
	blocks := unitBlocks(t, ctx, q, key, k)
	out := make([]float64, k)
	for b := range blocks {
		var v *float64
		if err := q.QueryRow(ctx, `SELECT (`+ref+`)::float8 FROM obs WHERE unit_id = ANY($1)`, blocks[b]).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v == nil {
			out[b] = dpplan.SampleMid(lo, hi)
			continue
		}
		out[b] = math.Min(math.Max(*v, lo), hi)
	}
	return out
}

// TestQuantileSample_Postgres: with SET dp.quantile_method = sample and
// noise off, the emitted SQL returns, for every level k, the mean over the
// k blocks of PostgreSQL's own percentile (or MIN/MAX) of the expression
// per block (blocks assigned by HMAC in Go), clipped to the expression's
// interval; and the plan is a sample-and-aggregate plan with that interval
// as output range and sensitivity u − l.
func TestQuantileSample_Postgres(t *testing.T) {
	ctx, conn := freshConn(t, 2*time.Minute)
	ds, err := policy.Parse(strings.NewReader(saPolicy), "sa.yaml")
	if err != nil {
		t.Fatal(err)
	}
	saTable(t, ctx, conn, 400)
	key := ds.SampleKey()
	for _, tc := range saQuantileCases {
		for _, fixed := range []int{0, 8} {
			p, err := RewriteWith(ds, tc.query, Options{QuantileMethod: QuantileSample, SampleBlocks: fixed})
			if err != nil {
				t.Fatalf("%s: %v", tc.query, err)
			}
			o := p.Outputs[0]
			if p.SampleAgg == nil || o.Kind != OutputSampleAgg || o.PGType != tc.pgType || o.Lower != tc.lo || o.Upper != tc.hi ||
				p.Measures[0].LInf != tc.hi-tc.lo {
				t.Fatalf("%s: plan %+v output %+v, want a sample-and-aggregate plan of type %s over [%v, %v]", tc.query, p.SampleAgg, o, tc.pgType, tc.lo, tc.hi)
			}
			got, units := emittedAverages(t, ctx, conn, ds, p)
			levels := p.SampleAgg.Levels
			if len(levels) > 4 {
				levels = levels[:4]
			}
			for _, k := range levels {
				want := mean(saBlockQuantiles(t, ctx, conn, key, tc.ref, k, tc.lo, tc.hi))
				if g := got[k][0]; math.Abs(g-want) > 1e-9*math.Max(1, math.Abs(want)) {
					t.Errorf("%s, k=%d: emitted average %v, PostgreSQL per block %v", tc.query, k, g, want)
				}
				if fixed == 0 && units[k] != 400 {
					t.Errorf("%s, k=%d: n = %d, want 400", tc.query, k, units[k])
				}
			}
		}
	}
}

// TestQuantileSample_Neighbour: adding one unit with more than
// max_rows_per_unit extreme rows changes the block answer of its own block
// only, and the released average by at most (u − l)/k.
func TestQuantileSample_Neighbour(t *testing.T) {
	ctx, conn := freshConn(t, 2*time.Minute)
	ds, err := policy.Parse(strings.NewReader(saPolicy), "sa.yaml")
	if err != nil {
		t.Fatal(err)
	}
	saTable(t, ctx, conn, 120)
	key := ds.SampleKey()
	const k = 16
	for _, tc := range saQuantileCases {
		p, err := RewriteWith(ds, tc.query, Options{QuantileMethod: QuantileSample, SampleBlocks: k})
		if err != nil {
			t.Fatal(err)
		}
		base, _ := emittedAverages(t, ctx, conn, ds, p)
		before := saBlockQuantiles(t, ctx, conn, key, tc.ref, k, tc.lo, tc.hi)
		maxMove := 0.0
		for trial, unit := range []int64{100001, 100002, 100003, 100004, 100005, 100006} {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for r := 0; r < 6; r++ {
				x, y := []string{"0", "1e9"}[(r+trial)%2], []float64{-1e9, 1e9}[r%2]
				// Every third trial all at one extreme (low, then high):
				// whichever rows the SQL keeps (a function of the unit's
				// rows, not random), they pull the block's quantile.
				switch trial % 3 {
				case 1:
					x, y = "-1e9", -1e9
				case 2:
					x, y = "1e9", 1e9
				}
				if _, err := tx.Exec(ctx, `INSERT INTO obs VALUES ($1, $2, $3)`, unit, x, y); err != nil {
					t.Fatal(err)
				}
			}
			after := saBlockQuantiles(t, ctx, tx, key, tc.ref, k, tc.lo, tc.hi)
			d2, _ := emittedAverages(t, ctx, tx, ds, p)
			_ = tx.Rollback(ctx)
			ub := goBlock(key, strconv.FormatInt(unit, 10), k)
			for b := range before {
				if b != ub && before[b] != after[b] {
					t.Errorf("%s trial %d: block %d changed but the new unit is in block %d", tc.query, trial, b, ub)
				}
			}
			d := math.Abs(d2[k][0] - base[k][0])
			maxMove = math.Max(maxMove, d)
			if bound := (tc.hi - tc.lo) / k; d > bound+1e-9 {
				t.Errorf("%s trial %d: moved by %v > (u−l)/k = %v", tc.query, trial, d, bound)
			}
		}
		if maxMove == 0 {
			t.Errorf("%s: no added unit moved the answer; the audit exercises nothing", tc.query)
		}
	}
}

func TestQuantileSample_Refusals(t *testing.T) {
	ds, err := policy.Parse(strings.NewReader(saPolicy), "sa.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sample := Options{QuantileMethod: QuantileSample}
	for _, tc := range []struct {
		name, sql string
		opts      Options
		code      string
	}{
		{"filter", "SELECT MAX(x * 2) FILTER (WHERE y > 0) FROM obs", sample, "0A000"},
		{"with count", "SELECT MAX(x * 2), COUNT(*) FROM obs", sample, "0A000"},
		{"range outside", "SELECT MAX(x * 2) FROM obs", Options{QuantileMethod: QuantileSample, HasOutputRange: true, OutputLower: 30, OutputUpper: 40}, "22023"},
		{"unbounded quotient", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY y / x) FROM obs", sample, "0A000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RewriteWith(ds, tc.sql, tc.opts)
			pe, ok := err.(interface{ SQLState() string })
			if !ok || pe.SQLState() != tc.code {
				t.Fatalf("RewriteWith(%q) = %v, want SQLSTATE %s", tc.sql, err, tc.code)
			}
		})
	}
	// dp.output_range narrows the expression's interval (x * 2 in [0, 20]).
	p, err := RewriteWith(ds, "SELECT MAX(x * 2) FROM obs", Options{QuantileMethod: QuantileSample, HasOutputRange: true, OutputLower: 5, OutputUpper: 100})
	if err != nil || p.Outputs[0].Lower != 5 || p.Outputs[0].Upper != 20 || p.Measures[0].LInf != 15 {
		t.Fatalf("MAX(x * 2) with dp.output_range 5,100: %v; want range [5, 20], LInf 15", err)
	}
	// A plan built without the sample method cannot be switched to it:
	// release.TestCalibrate_QuantileMethod.
}

// TestQuantileSample_Corpus is the corpus check of SET dp.quantile_method
// = sample over the hospital policy (data within its limits): for k = 2,
// 4, 8 the emitted SQL's average per group must equal the average over
// the blocks of the analyst's own query run on each block's units, clipped
// to the expression's interval (diffSampleAgg, sampleagg_group_test.go);
// grouped by public keys too (sample-and-aggregate per group), and over a
// join on the unit.
func TestQuantileSample_Corpus(t *testing.T) {
	ctx, conn := freshConn(t, 3*time.Minute)
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	ds := loadHospital(t)
	loadWithinLimits(t, ctx, conn, ds)
	for _, q := range []string{
		"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost / NULLIF(age, 0)) FROM visits",
		"SELECT MAX(cost * 2 + 1) FROM visits",
		"SELECT department, MIN(age - length_of_stay), percentile_disc(0.75) WITHIN GROUP (ORDER BY length_of_stay * 2) FROM visits GROUP BY department",
		"SELECT percentile_cont(0.25) WITHIN GROUP (ORDER BY cost * 1.1 + 5) FROM visits WHERE age >= 18",
		"SELECT MIN(CASE WHEN age >= 65 THEN cost ELSE cost / 2 END) FROM visits",
		"SELECT department, percentile_disc(0.5) WITHIN GROUP (ORDER BY age) FROM visits GROUP BY department",
		"SELECT p.sex, MAX(v.cost * 2 - p.birth_year) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY p.sex",
	} {
		t.Run(q, func(t *testing.T) {
			p, err := RewriteWith(ds, q, Options{QuantileMethod: QuantileSample})
			if err != nil {
				t.Fatal(err)
			}
			if p.SampleAgg == nil {
				t.Fatalf("%s: not a sample-and-aggregate plan", q)
			}
			diffSampleAgg(t, ctx, conn, ds, p, q)
		})
	}
}

// TestQuantile_TinyValues: a numeric value nearer to 0 than 1e-308 (here
// 1e-400, within x's bounds [0, 10]) must not make the quantile SQL fail
// (a conversion to float8 would raise 22003: an error that would depend
// on the data), for a column and for an expression.
func TestQuantile_TinyValues(t *testing.T) {
	ctx, conn := freshConn(t, time.Minute)
	ds, err := policy.Parse(strings.NewReader(saPolicy), "sa.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE obs (unit_id bigint, x numeric, y double precision);
INSERT INTO obs VALUES (1, 1e-400, 1), (2, 3, 2), (3, 1e-400, 3)`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SELECT MIN(x) FROM obs", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x * 2) FROM obs"} {
		p, err := Rewrite(ds, q)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := queryText(ctx, conn, p.SQL); err != nil {
			t.Errorf("%s on a value of 1e-400: %v", q, err)
		}
	}
}
