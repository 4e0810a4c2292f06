package rewrite

import (
	"context"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/pgemit"
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

// TestQuantile_OrderStatsPostgres runs the smooth and ptr methods' SQL on a
// real PostgreSQL loaded with data within the policy's limits (so bounding
// keeps every row) and checks each group's "f;S" and "f;D" against an
// independent computation in Go from the group's sorted values: f must be
// PostgreSQL's own percentile_cont/percentile_disc/MIN/MAX (within 1e-9
// relative for percentile_cont, which PostgreSQL computes in float8), S
// the smooth bound max_k max(e^{−βk}, e^{−100})·U_k (within 1e-9 relative)
// and D = min{k : U_k > b} exactly, with U_k = x_{b+R(k+1)} − x_{a−R(k+1)}
// (quantile_smooth.go).
func TestQuantile_OrderStatsPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := quantileDatabase(t, ctx)
	ds := loadHospital(t)
	cases := []struct {
		query, values string // values: per group key, the column's values
	}{
		{"SELECT department, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits GROUP BY department",
			"SELECT department, array_agg(cost::float8 ORDER BY cost) FROM visits WHERE patient_id IS NOT NULL AND cost IS NOT NULL GROUP BY 1"},
		{"SELECT percentile_disc(0.9) WITHIN GROUP (ORDER BY age) FROM visits",
			"SELECT '', array_agg(age::float8 ORDER BY age) FROM visits WHERE patient_id IS NOT NULL AND age IS NOT NULL"},
		{"SELECT department, MIN(length_of_stay) FROM visits WHERE age > 30 GROUP BY department",
			"SELECT department, array_agg(length_of_stay::float8 ORDER BY length_of_stay) FROM visits WHERE patient_id IS NOT NULL AND length_of_stay IS NOT NULL AND age > 30 GROUP BY 1"},
		{"SELECT percentile_cont(0.25) WITHIN GROUP (ORDER BY cost) FROM visits WHERE department = 'surgery'",
			"SELECT '', array_agg(cost::float8 ORDER BY cost) FROM visits WHERE patient_id IS NOT NULL AND cost IS NOT NULL AND department = 'surgery'"},
		// Expressions (quantile_expr.go): the sentinels are the ends of
		// the expression's interval.
		{"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost / NULLIF(age, 0)) FROM visits",
			"SELECT '', array_agg(v::float8 ORDER BY v) FROM (SELECT cost / NULLIF(age, 0) AS v FROM visits WHERE patient_id IS NOT NULL) AS s WHERE v IS NOT NULL"},
		{"SELECT department, MAX(length_of_stay * 2 + 1) FROM visits GROUP BY department",
			"SELECT department, array_agg((length_of_stay * 2 + 1)::float8 ORDER BY length_of_stay) FROM visits WHERE patient_id IS NOT NULL AND length_of_stay IS NOT NULL GROUP BY 1"},
	}
	for _, tc := range cases {
		base, err := Rewrite(ds, tc.query)
		if err != nil {
			t.Fatal(err)
		}
		direct, err := queryText(ctx, conn, tc.query)
		if err != nil {
			t.Fatal(err)
		}
		pgValue := map[string]float64{}
		for _, r := range direct {
			k := ""
			if len(r) == 2 {
				k = *r[0]
			}
			pgValue[k] = pgQuantileNumber(t, base.Measures[0], r[len(r)-1])
		}
		vals := map[string][]float64{}
		rows, err := conn.Query(ctx, tc.values)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k string
			var v []float64
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			vals[k] = v
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for _, method := range []string{QuantileSmooth, QuantilePTR} {
			p, err := withQuantilesTest(ds, base, method, 1, 1e-6, policy.MechanismLaplace)
			if err != nil {
				t.Fatal(err)
			}
			emitted, err := queryText(ctx, conn, p.SQL)
			if err != nil {
				t.Fatalf("%s: %v\n%s", method, err, p.SQL)
			}
			m := p.Measures[0]
			for _, r := range emitted {
				k := ""
				if len(p.Keys) == 1 {
					k = *r[0]
				}
				fs, stat, _ := strings.Cut(*r[len(p.Keys)], ";")
				f, _ := strconv.ParseFloat(fs, 64)
				if want := pgValue[k]; math.Abs(f-want) > 1e-9*math.Max(1, math.Abs(want)) {
					t.Errorf("%s %q group %q: f = %v, PostgreSQL %v", method, tc.query, k, f, want)
				}
				a, b := orderStatRanks(m.Quantile, len(vals[k]))
				x := func(i int64) float64 {
					switch {
					case i < 1:
						return m.Lower
					case i > int64(len(vals[k])):
						return m.Upper
					}
					return vals[k][i-1]
				}
				r := int64(m.Quantile.Rows)
				kmax := (int64(len(vals[k])) + r - 1) / r
				got, _ := strconv.ParseFloat(stat, 64)
				if method == QuantileSmooth {
					want := 0.0
					for kk := int64(0); kk <= kmax; kk++ {
						w := math.Exp(math.Max(-m.Quantile.Beta*float64(kk), -100))
						want = math.Max(want, w*(x(b+r*(kk+1))-x(a-r*(kk+1))))
					}
					if math.Abs(got-want) > 1e-9*want {
						t.Errorf("%s group %q: S = %v, want %v", tc.query, k, got, want)
					}
					continue
				}
				want := kmax + 1
				for kk := int64(0); kk <= kmax; kk++ {
					if x(b+r*(kk+1))-x(a-r*(kk+1)) > m.Quantile.Bound {
						want = kk
						break
					}
				}
				if got != float64(want) {
					t.Errorf("%s group %q: D = %v, want %v", tc.query, k, got, want)
				}
			}
		}
	}
}

// orderStatRanks is [a, b] of quantile_smooth.go, in float arithmetic (the
// test's fractions are exact in binary or give the same ranks).
func orderStatRanks(q *Quantile, n int) (int64, int64) {
	if q.Cont {
		h := 1 + q.Q*float64(n-1)
		return int64(math.Floor(h)), int64(math.Ceil(h))
	}
	m := max(1, int64(math.Ceil(q.Q*float64(n))))
	return m, m
}

// TestAudit_QuantileSmoothPTR is the neighbouring-database check of the
// smooth and ptr methods: for each quantile golden, D is the audit's data
// (within limits) and D' = D plus one adversarial unit (rows at the
// extremes and typical ones, beyond every limit). Per group, with f, S, D
// the SQL's summaries (quantile_smooth.go), it asserts what the privacy
// proofs use:
//
//   - |f(D) − f(D')| ≤ S(D) and ≤ S(D') (S bounds the local sensitivity);
//   - S(D') ≤ e^β·S(D) and S(D) ≤ e^β·S(D') (β-smoothness);
//   - |D(D) − D(D')| ≤ 1 (the distance has sensitivity 1);
//   - at most Plan.MaxGroupsPerUnit groups change.
func TestAudit_QuantileSmoothPTR(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ds := loadHospital(t)
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rng := rand.New(rand.NewPCG(5, 9))
	tb := ds.Tables["visits"]
	a := newAuditTable(tb)
	if _, err := conn.Exec(ctx, a.createSQL()); err != nil {
		t.Fatal(err)
	}
	if err := a.load(ctx, conn, rng, 60); err != nil {
		t.Fatal(err)
	}
	summaries := func(q rowQuerier, p *Plan) (map[string][][2]float64, error) {
		return orderStatSummaries(ctx, q, p)
	}
	audited := 0
	for _, gc := range loadGolden(t) {
		if _, own := gc.ar.files["policy.yaml"]; own || !strings.HasPrefix(gc.name, "quantile") {
			continue
		}
		base, err := Rewrite(gc.ds, gc.query)
		if err != nil || base.Table != "visits" || base.Join != nil {
			continue // joins: TestAudit_QuantileJoins
		}
		for _, method := range []string{QuantileSmooth, QuantilePTR} {
			p, err := withQuantilesTest(ds, base, method, 1, 1e-6, policy.MechanismLaplace)
			if err != nil {
				t.Fatal(err)
			}
			onlyQuantiles := true
			for _, m := range p.Measures {
				onlyQuantiles = onlyQuantiles && m.Kind == MeasureQuantile
			}
			if !onlyQuantiles {
				// The other measures are audited by TestAudit_Sensitivity;
				// here every measure must be a summary.
				sub := *p
				sub.Measures, sub.Outputs = nil, nil
				for _, m := range p.Measures {
					if m.Kind == MeasureQuantile {
						sub.Measures = append(sub.Measures, m)
					}
				}
				tbl, w := dpplan.SourceOf(p)
				sub.SQL = pgemit.SQL(tbl, &sub, w)
				p = &sub
			}
			audited++
			d, err := summaries(conn, p)
			if err != nil {
				t.Fatalf("%s %s on D: %v", gc.name, method, err)
			}
			for run := 0; run < auditRuns; run++ {
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, ins := range a.adversaryInserts(rng, sqlLiteral(a.unitValue(1_000_000+run))) {
					if _, err := tx.Exec(ctx, ins); err != nil {
						_ = tx.Rollback(ctx)
						t.Fatal(err)
					}
				}
				d2, err := summaries(tx, p)
				_ = tx.Rollback(ctx)
				if err != nil {
					t.Fatalf("%s %s on D': %v", gc.name, method, err)
				}
				checkOrderStatNeighbours(t, gc.name, method, p.Measures, p.MaxGroupsPerUnit, d, d2)
			}
		}
	}
	if audited < 4 {
		t.Fatalf("only %d quantile plans audited", audited)
	}
}
