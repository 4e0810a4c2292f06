package rewrite

import (
	"context"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// quantileLoad fills visits with 800 patients of 1 to 4 visits each, in
// distinct departments: within every limit of the hospital policy for
// grouped and ungrouped queries alike (at most 4 rows per patient, at most
// 1 per patient and department), so contribution bounding keeps every row
// and the emitted SQL sees exactly the data PostgreSQL's own aggregates
// see. Costs are skewed (products of uniforms) and 10% NULL.
const quantileLoad = `SELECT setseed(0.42);
INSERT INTO visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay)
SELECT row_number() OVER (), p, DATE '2020-01-01' + floor(random() * 1827)::int, d, 'x', floor(random() * 111)::int,
  CASE WHEN random() < 0.1 THEN NULL ELSE round((random() * random() * 20000)::numeric, 2) END, floor(random() * 61)::int
FROM generate_series(1, 800) AS p,
  LATERAL (SELECT d FROM unnest(ARRAY['cardiology','emergency','neurology','oncology','orthopedics','pediatrics','surgery']) AS d
           ORDER BY random() + p * 0 LIMIT 1 + p % 4) AS dd`

func quantileDatabase(t *testing.T, ctx context.Context) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, quantileLoad); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestQuantile_Postgres is the differential test of the exponential
// method: every accepted quantile golden runs on a real PostgreSQL with
// data within the policy's limits and checkQuantileRows compares the
// bucket counts with PostgreSQL's own answer.
func TestQuantile_Postgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := quantileDatabase(t, ctx)
	n := 0
	for _, gc := range loadGolden(t) {
		if _, ok := gc.ar.files["want.sql"]; !ok || !strings.HasPrefix(gc.name, "quantile") || strings.HasPrefix(gc.name, "quantile_join") || strings.Contains(gc.query, " JOIN ") {
			continue // joins: TestQuantile_PostgresJoins
		}
		n++
		t.Run(gc.name, func(t *testing.T) {
			p, err := Rewrite(gc.ds, gc.query)
			if err != nil {
				t.Fatal(err)
			}
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
	if n < 3 {
		t.Fatalf("only %d quantile goldens", n)
	}
}

// checkQuantileRows compares, group by group, the emitted SQL's rows with
// PostgreSQL's answer to the analyst's query, on data within the policy's
// bounds and contribution limits (so bounding keeps every row). Outputs
// other than quantiles must be equal, as in TestRewrite_Postgres. For a
// quantile the noiseless answer is a set of buckets, the ones of utility 0
// (release/quantile.go): from the histogram h, with n = Σh and the target
// ranks [a, b] (percentile_disc, MIN, MAX: a = b = max(1, ⌈q·n⌉);
// percentile_cont: a = ⌊h⌋, b = ⌈h⌉, h = 1 + q(n−1)), the first such
// bucket is the first j with c_≤j ≥ a and the last the last j with
// c_<j + 1 ≤ b. The test asserts that PostgreSQL's value lies in the
// closed value range of those buckets, and that for percentile_disc, MIN
// and MAX it is one bucket: PostgreSQL's answer is reproduced up to the
// bucket width.
func checkQuantileRows(t *testing.T, p *Plan, emitted, direct [][]*string) {
	t.Helper()
	keyOf := func(cells []string, kinds func(i int) bool) string {
		var ks []string
		for i, c := range cells {
			if kinds(i) {
				ks = append(ks, c)
			}
		}
		return strings.Join(ks, "\x00")
	}
	isKey := func(i int) bool { return p.Outputs[i].Kind == OutputKey }
	got := map[string][]*string{}
	nk := len(p.Keys)
	for _, r := range emitted {
		var cells []string
		for _, o := range p.Outputs {
			if o.Kind == OutputKey {
				cells = append(cells, *r[o.Key])
			} else {
				cells = append(cells, "")
			}
		}
		got[keyOf(cells, isKey)] = r
	}
	exact := releaseExact(p, emitted)
	exactBy := map[string][]string{}
	for _, row := range exact {
		exactBy[keyOf(row, isKey)] = row
	}
	// canonical drops PostgreSQL's NULL groups (not released): drop them
	// from direct too, so that want[i] and direct[i] are the same row.
	var kept [][]*string
rows:
	for _, r := range direct {
		for i, o := range p.Outputs {
			if o.Kind == OutputKey && r[i] == nil {
				continue rows
			}
		}
		kept = append(kept, r)
	}
	direct = kept
	want := canonical(p, direct)
	if len(want) != len(got) {
		t.Fatalf("emitted SQL returned %d groups, PostgreSQL %d", len(got), len(want))
	}
	checked := 0
	for wi, w := range want {
		k := keyOf(w, isKey)
		r, ok := got[k]
		if !ok {
			t.Fatalf("group %q missing from the emitted SQL's answer", k)
		}
		for i, o := range p.Outputs {
			if o.Kind != OutputQuantile {
				if exactBy[k][i] != w[i] {
					t.Fatalf("group %q output %s: emitted %s, PostgreSQL %s", k, o.Name, exactBy[k][i], w[i])
				}
				continue
			}
			m := p.Measures[o.Measure]
			lo, hi, one := zeroUtilitySpan(t, m, r[nk+o.Measure])
			v := pgQuantileNumber(t, m, direct[wi][i])
			if v < lo-1e-9 || v > hi+1e-9 || !m.Quantile.Cont && !one {
				t.Fatalf("group %q %s: PostgreSQL's %v is not in the zero-utility buckets [%v, %v] (single bucket: %v)", k, o.Name, v, lo, hi, one)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no quantile was compared")
	}
}

// zeroUtilitySpan returns the value range of the utility-0 buckets of a
// histogram "j:c,…" and whether it is a single bucket.
func zeroUtilitySpan(t *testing.T, m Measure, raw *string) (float64, float64, bool) {
	t.Helper()
	q := m.Quantile
	h := make([]int64, q.Buckets)
	var n int64
	if raw == nil {
		t.Fatalf("no histogram for a group that PostgreSQL answers")
	}
	for _, part := range strings.Split(*raw, ",") {
		js, cs, _ := strings.Cut(part, ":")
		j, err1 := strconv.Atoi(js)
		c, err2 := strconv.ParseInt(cs, 10, 64)
		if err1 != nil || err2 != nil || j < 0 || j >= q.Buckets {
			t.Fatalf("bad histogram %q", *raw)
		}
		h[j] = c
		n += c
	}
	qr, _ := new(big.Rat).SetString(strconv.FormatFloat(q.Q, 'g', -1, 64))
	var a, b int64
	if q.Cont {
		x := new(big.Rat).Mul(qr, big.NewRat(n-1, 1))
		x.Add(x, big.NewRat(1, 1))
		f, _ := x.Float64()
		a, b = int64(math.Floor(f)), int64(math.Ceil(f))
	} else {
		x := new(big.Rat).Mul(qr, big.NewRat(n, 1))
		f, _ := x.Float64()
		a = max(1, int64(math.Ceil(f)))
		b = a
	}
	first, last := -1, -1
	var below int64
	for j, c := range h {
		if first < 0 && below+c >= a {
			first = j
		}
		if below+1 <= b {
			last = j
		}
		below += c
	}
	bounds := func(j int) (float64, float64) {
		if q.Type == policy.TypeInt || q.Type == policy.TypeDate {
			lo := m.Lower + float64(j)*q.Width
			return lo, math.Min(lo+q.Width-1, m.Upper)
		}
		return m.Lower + float64(j)*q.Width, m.Lower + float64(j+1)*q.Width
	}
	lo, _ := bounds(first)
	_, hi := bounds(last)
	return lo, hi, first == last
}

// pgQuantileNumber reads PostgreSQL's answer as a number (dates as days
// since 1970-01-01).
func pgQuantileNumber(t *testing.T, m Measure, v *string) float64 {
	t.Helper()
	if v == nil {
		t.Fatalf("PostgreSQL returned NULL for a quantile")
	}
	if m.Quantile.Type == policy.TypeDate {
		d, err := time.Parse("2006-01-02", *v)
		if err != nil {
			t.Fatalf("date %q: %v", *v, err)
		}
		return float64(d.Unix() / 86400)
	}
	f, err := strconv.ParseFloat(*v, 64)
	if err != nil {
		t.Fatalf("number %q: %v", *v, err)
	}
	return f
}
