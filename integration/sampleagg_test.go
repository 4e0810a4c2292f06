package integration

import (
	"context"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestSampleAgg_ThroughProxy asks corr(cost, age) of the demo's visits
// through the proxy (pgx, simple protocol): the NOTICE says that the answer
// used sample-and-aggregate and names k (1024 for the demo's 50 000
// patients by the noisy-count rule), one charge of the query's ε is made,
// and the answer is close to PostgreSQL's own corr over the same bounded
// rows. EXPLAIN names the method and never shows the key (the SQL takes it as the bind parameters $1, $2,
// which the answer needs: this test runs them through the real upstream
// pool); regr_slope is answered from noisy sums; SET dp.output_range is
// refused (removed, issue 28); and statistics whose every block answer is
// 1, the end of their natural range, are released clamped to it.
func TestSampleAgg_ThroughProxy(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, notices := connectWithNotices(t, ctx, analystDSN("alice"))
	if _, err := c.Exec(ctx, "SET dp.epsilon = 0.2"); err != nil {
		t.Fatal(err)
	}

	// EXPLAIN: no data, no budget.
	rows, err := c.Query(ctx, "EXPLAIN SELECT corr(cost, age) FROM visits")
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	rows.Close()
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "DP Sample-and-aggregate on hospital.visits") || !strings.Contains(text, "sha256($2::bytea || sha256($1::bytea || ") ||
		regexp.MustCompile(`\\x[0-9a-f]{64}`).MatchString(text) {
		t.Fatalf("EXPLAIN = %s", text)
	}

	// The answer.
	var got float64
	if err := c.QueryRow(ctx, "SELECT corr(cost, age) FROM visits").Scan(&got); err != nil {
		t.Fatal(err)
	}
	ns := notices()
	last := ns[len(ns)-1]
	if !strings.Contains(last, "dp: epsilon 0.2 spent") || !strings.Contains(last, "sample-and-aggregate over k=1024 blocks (chosen from a noisy unit count") {
		t.Fatalf("NOTICE = %q, want the charge and sample-and-aggregate with k=1024", last)
	}
	// Truth: PostgreSQL's corr over all visits (the demo's patients have at
	// most 5 visits, so bounding keeps every row; age and cost are within
	// the policy bounds). The released value is the average of 1024 block
	// correlations (≈ 49 patients each) plus Laplace noise of scale
	// 2/(1024·0.18) = 0.0109: |noise| ≤ 0.0109·ln(2/1e-9) = 0.233 except
	// with probability 1e-9. The block-average bias on this data is below
	// 0.02 (the PUMS and neighbour tests in rewrite measure the method), so
	// 0.26 fails falsely with probability ≤ 1e-9.
	up := connect(t, ctx, env.upstreamDSN)
	var truth float64
	if err := up.QueryRow(ctx, "SELECT corr(cost::float8, age::float8) FROM visits WHERE patient_id IS NOT NULL").Scan(&truth); err != nil {
		t.Fatal(err)
	}
	t.Logf("corr(cost, age): PostgreSQL %.4f, released %.4f", truth, got)
	if math.Abs(got-truth) > 0.26 || got < -1 || got > 1 {
		t.Fatalf("corr = %v, PostgreSQL %v: farther than 0.26", got, truth)
	}

	// regr_slope is answered from noisy sums (rewrite/regrstats.go), as
	// float8.
	var fromSums float64
	if err := c.QueryRow(ctx, "SELECT regr_slope(cost, age) FROM visits").Scan(&fromSums); err != nil {
		t.Fatalf("regr_slope without a range: %v, want an answer from sums", err)
	}
	if ns := notices(); strings.Contains(ns[len(ns)-1], "blocks") || math.IsNaN(fromSums) {
		t.Fatalf("regr_slope from sums = %v, NOTICE %q: want no sample-and-aggregate", fromSums, ns[len(ns)-1])
	}
	// dp.output_range was removed: corr and regr_r2 have their natural
	// ranges.
	_, err = c.Exec(ctx, "SET dp.output_range = '-0.5,0.5'")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42704" || !strings.Contains(pe.Hint, "natural ranges") {
		t.Fatalf("SET dp.output_range: %v, want 42704 with a hint", err)
	}
	// corr(x, x) and regr_r2(x, x) are exactly 1 in every block with two
	// distinct values (Sxy = Sxx = Syy bit for bit, and √(a·a) = a in
	// float8), the upper end of both ranges: each released value,
	// 1 + noise, is clamped to 1 (post-processing). Without the clamp each
	// of the 7·4 values would exceed 1 with probability 1/2; with it, none
	// is 1 exactly with probability 2^−28.
	if _, err := c.Exec(ctx, "SET dp.sample_blocks = 256"); err != nil {
		t.Fatal(err)
	}
	rows, err = c.Query(ctx, "SELECT department, corr(age, age), regr_r2(age, age), corr(cost, cost), regr_r2(cost, cost) FROM visits GROUP BY department")
	if err != nil {
		t.Fatal(err)
	}
	ones, groups := 0, 0
	for rows.Next() {
		var d string
		var v [4]float64
		if err := rows.Scan(&d, &v[0], &v[1], &v[2], &v[3]); err != nil {
			t.Fatal(err)
		}
		groups++
		for i, x := range v {
			if lo := []float64{-1, 0}[i%2]; x < lo || x > 1 {
				t.Errorf("%s: statistic %d = %v outside [%v, 1]", d, i, x, lo)
			}
			if x == 1 {
				ones++
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("corr(x, x) and regr_r2(x, x) per department: %d of %d values clamped to 1", ones, 4*groups)
	ns = notices()
	if last := ns[len(ns)-1]; groups != 7 || ones == 0 || !strings.Contains(last, "k=256 for 7 groups; fixed by dp.sample_blocks") {
		t.Fatalf("%d groups, %d values clamped to 1 (want 7 and some), NOTICE %q", groups, ones, last)
	}
	if _, err := c.Exec(ctx, "SET dp.sample_blocks = 1"); err == nil || !strings.Contains(err.Error(), "22023") {
		t.Fatalf("SET dp.sample_blocks = 1: %v, want 22023", err)
	}
}

// TestSampleAgg_GroupedThroughProxy asks corr(cost, age) per department
// through the proxy with SET dp.sample_blocks = 128: all seven departments
// come back (the key's public values), each in [−1, 1], the NOTICE gives k
// per group, one charge of the query's ε is made, and the released values
// track PostgreSQL's own per-department corr. The Laplace scale of each
// answer is b = L0·(u−l)/(k·ε) = 1·2/(128·0.3) = 0.052 (the demo's L0 is
// 1); for the sum of the seven independent noises, P(|Σ| > s) ≤
// 2·e^{−λs}·(1 − λ²b²)^{−7}, which with λ = 3.5 and s = 7·(0.8 − 0.02)
// (0.02 allows for the block bias) is below 2e-6 (it was for b = 0.208
// too): so a mean difference above 0.8 fails falsely with probability
// below 2e-6.
func TestSampleAgg_GroupedThroughProxy(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, notices := connectWithNotices(t, ctx, analystDSN("alice"))
	if _, err := c.Exec(ctx, "SET dp.epsilon = 0.3; SET dp.sample_blocks = 128"); err != nil {
		t.Fatal(err)
	}
	rows, err := c.Query(ctx, "SELECT department, corr(cost, age) FROM visits GROUP BY department ORDER BY department")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	var order []string
	for rows.Next() {
		var d string
		var v float64
		if err := rows.Scan(&d, &v); err != nil {
			t.Fatal(err)
		}
		if v < -1 || v > 1 {
			t.Fatalf("%s: corr = %v outside [-1, 1]", d, v)
		}
		got[d] = v
		order = append(order, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"cardiology", "emergency", "neurology", "oncology", "orthopedics", "pediatrics", "surgery"}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Fatalf("departments %v, want %v", order, want)
	}
	ns := notices()
	last := ns[len(ns)-1]
	if !strings.Contains(last, "dp: epsilon 0.3 spent") || !strings.Contains(last, "sample-and-aggregate per group over k blocks (k=128 for 7 groups; fixed by dp.sample_blocks") || !strings.Contains(last, "±0.156 (corr, epsilon 0.3)") {
		t.Fatalf("NOTICE = %q, want the charge and k per group", last)
	}
	t.Logf("NOTICE: %s", last)
	up := connect(t, ctx, env.upstreamDSN)
	truth, err := up.Query(ctx, "SELECT department, corr(cost::float8, age::float8) FROM visits WHERE patient_id IS NOT NULL GROUP BY department")
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for truth.Next() {
		var d string
		var v float64
		if err := truth.Scan(&d, &v); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: PostgreSQL %.4f, released %.4f", d, v, got[d])
		sum += got[d] - v
	}
	truth.Close()
	if m := sum / 7; math.Abs(m) > 0.8 {
		t.Fatalf("mean released − PostgreSQL corr over departments = %v, want within 0.8", m)
	}
}
