package release

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// pgPercentileDisc and pgPercentileCont are PostgreSQL's definitions over
// sorted values (orderedsetaggs.c): disc returns the first value whose
// position is ≥ q·n, cont interpolates between positions ⌊h⌋ and ⌈h⌉,
// h = 1 + q·(n−1).
func pgPercentileDisc(sorted []int, q float64) float64 {
	n := len(sorted)
	m := int(math.Ceil(q * float64(n)))
	if m < 1 {
		m = 1
	}
	return float64(sorted[m-1])
}

func pgPercentileCont(sorted []int, q float64) float64 {
	h := 1 + q*float64(len(sorted)-1)
	lo, hi := math.Floor(h), math.Ceil(h)
	a, b := float64(sorted[int(lo)-1]), float64(sorted[int(hi)-1])
	return a + (h-lo)*(b-a)
}

// histogram counts int values in buckets of width w starting at 0.
func histogram(values []int, w, buckets int) []int64 {
	h := make([]int64, buckets)
	for _, v := range values {
		h[min(v/w, buckets-1)]++
	}
	return h
}

// TestQuantileUtilities_ZeroSetHoldsPostgresAnswer checks, on random data,
// that the buckets of utility 0 (the noiseless choice) are exactly the
// bucket holding PostgreSQL's percentile_disc, and span PostgreSQL's
// percentile_cont: this is what "the bucket counts reproduce PostgreSQL's
// percentile up to the bucket width" means.
func TestQuantileUtilities_ZeroSetHoldsPostgresAnswer(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const w, buckets = 4, 26 // values 0..103
	for trial := 0; trial < 2000; trial++ {
		n := 1 + rng.IntN(40)
		vals := make([]int, n)
		for i := range vals {
			vals[i] = rng.IntN(104)
		}
		sort.Ints(vals)
		h := histogram(vals, w, buckets)
		for _, q := range []float64{0, 0.1, 1.0 / 3, 0.5, 0.9, 1} {
			for _, cont := range []bool{false, true} {
				us := quantileUtilities(h, q, cont)
				first, last := -1, -1
				for j, u := range us {
					if u.Sign() > 0 {
						t.Fatalf("positive utility %v", u)
					}
					if u.Sign() == 0 {
						if first < 0 {
							first = j
						}
						last = j
					}
				}
				if first < 0 {
					t.Fatalf("no bucket of utility 0 for %v q=%v cont=%v", vals, q, cont)
				}
				lo, hi := float64(first*w), float64((last+1)*w) // values in [lo, hi)
				if cont {
					if v := pgPercentileCont(vals, q); v < lo || v >= hi {
						t.Fatalf("percentile_cont(%v) of %v = %v outside the zero-utility buckets [%v, %v)", q, vals, v, lo, hi)
					}
					continue
				}
				v := pgPercentileDisc(vals, q)
				if first != last || v < lo || v >= hi {
					t.Fatalf("percentile_disc(%v) of %v = %v; zero-utility buckets %d..%d", q, vals, v, first, last)
				}
			}
		}
	}
}

// TestQuantileUtilities_Sensitivity is the neighbouring-database check of
// the utility: adding or removing up to R values (one unit's rows in a
// group) changes every bucket's utility by at most R, the Δu the
// mechanism is calibrated to (Measure.LInf).
func TestQuantileUtilities_Sensitivity(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const buckets = 12
	for trial := 0; trial < 5000; trial++ {
		n := rng.IntN(30)
		x := make([]int64, buckets)
		for i := 0; i < n; i++ {
			x[rng.IntN(buckets)]++
		}
		r := 1 + rng.IntN(5)
		y := append([]int64(nil), x...)
		add := rng.IntN(2) == 0
		for k := 0; k < r; k++ {
			j := rng.IntN(buckets)
			if add {
				y[j]++
			} else if y[j] > 0 {
				y[j]--
			}
		}
		for _, q := range []float64{0, 0.25, 0.5, 0.7, 1} {
			for _, cont := range []bool{false, true} {
				ux, uy := quantileUtilities(x, q, cont), quantileUtilities(y, q, cont)
				for j := range ux {
					d := new(big.Rat).Sub(ux[j], uy[j])
					if d.Abs(d).Cmp(big.NewRat(int64(r), 1)) > 0 {
						t.Fatalf("q=%v cont=%v: utility of bucket %d moved by %v > %d between %v and %v", q, cont, j, d, r, x, y)
					}
				}
			}
		}
	}
}

func quantilePlan(t *testing.T, ds *policy.Dataset, query string) *rewrite.Plan {
	t.Helper()
	p, err := rewrite.Rewrite(ds, query)
	if err != nil {
		t.Fatalf("Rewrite(%q) = %v", query, err)
	}
	return p
}

// TestRun_Quantile releases a median and a date percentile from
// histograms at a very large ε, where the exponential mechanism selects the
// bucket of the true quantile except with probability below 1e-40, and
// checks the released midpoints, the charge and the NOTICE.
func TestRun_Quantile(t *testing.T) {
	ds := loadPolicy(t)
	plan := quantilePlan(t, ds, "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost), percentile_disc(0.25) WITHIN GROUP (ORDER BY visit_date) AS q1, COUNT(*) FROM visits")
	// cost: [0, 20000] in 16384 buckets of width 1.220703125: 300 values
	// in bucket 6400 ([7812.5, 7813.720703125)), 10 in bucket 192 and 10
	// in bucket 12800: the median is in bucket 6400, midpoint
	// 7813.1103515625.
	// visit_date: one bucket per day from 2020-01-01 (1827 buckets); ranks
	// 1..50 on day 16, 51..300 on day 240: the 0.25-quantile (rank 75) is
	// day 240, 2020-08-28.
	up := &fakeUpstream{rows: [][]*string{{s("192:10,6400:300,12800:10"), s("16:50,240:250"), s("320")}}}
	led := &memLedger{limit: 1e6}
	r := newTestReleaser(t, led, 7)
	// ε = 30000: ε_m = 10000 per measure, Δu = 5; a bucket of utility ≤ −1
	// has weight ≤ e^{−1000} relative to the best.
	res, err := r.Run(context.Background(), Request{Analyst: "alice", Dataset: ds, Plan: plan, Epsilon: 30000, Mechanism: policy.MechanismLaplace, Upstream: up})
	if err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if got := *res.Rows[0][0]; got != "7813.110352" { // printed with 6 decimals
		t.Errorf("median = %s, want the midpoint of bucket 6400, 7813.1103515625 (7813.110352)", got)
	}
	if got := *res.Rows[0][1]; got != "2020-08-28" {
		t.Errorf("q1 = %s, want 2020-08-28", got)
	}
	if res.Columns[0].PGType != "float8" || res.Columns[1].PGType != "date" {
		t.Errorf("columns = %+v", res.Columns)
	}
	ev := led.reserved[0].Events
	if len(ev) != 3 || ev[0].Mechanism != "exponential" || ev[1].Mechanism != "exponential" || ev[2].Mechanism != policy.MechanismLaplace {
		t.Fatalf("events = %+v", ev)
	}
	for _, e := range ev {
		if e.Epsilon != 10000 || e.Delta != 0 {
			t.Errorf("event %+v: want ε = 10000 (a third of the query's), δ = 0", e)
		}
	}
	for _, want := range []string{"exponential mechanism: the released value is within ±", "bucket width 1.220703125 (percentile_cont, epsilon 10000)", "bucket width 1 (q1, epsilon 10000)"} {
		if !strings.Contains(res.Notice, want) {
			t.Errorf("Notice %q lacks %q", res.Notice, want)
		}
	}
}

// TestRun_QuantileMalformedHistogram: an upstream answer that is not a
// histogram of the grid is an internal error, never a release.
func TestRun_QuantileMalformedHistogram(t *testing.T) {
	ds := loadPolicy(t)
	plan := quantilePlan(t, ds, "SELECT MAX(age) FROM visits")
	for _, bad := range []string{"5:1,5:2", "111:3", "x:1", "3:0", "-1:4", "3"} {
		up := &fakeUpstream{rows: [][]*string{{s(bad)}}}
		r := newTestReleaser(t, &memLedger{limit: 10}, 1)
		if _, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up}); err == nil {
			t.Errorf("histogram %q accepted", bad)
		}
	}
}

// TestExplain_Quantile: EXPLAIN names the exponential mechanism and the
// bucket width.
func TestExplain_Quantile(t *testing.T) {
	ds := loadPolicy(t)
	plan := quantilePlan(t, ds, "SELECT department, MIN(age) FROM visits GROUP BY department")
	text := explainPlan(t, ds, plan, 1, 0, policy.MechanismLaplace)
	for _, want := range []string{"min(q=0) of age clamped to [0, 110]", "exponential mechanism over 111 buckets of width 1", "epsilon per group=0.25", "rank sensitivity=5"} {
		if !strings.Contains(text, want) {
			t.Errorf("EXPLAIN lacks %q:\n%s", want, text)
		}
	}
}

// TestExplain_QuantileOutput: the output line of a quantile says how it
// is released: the midpoint of the bucket the exponential mechanism
// selects.
func TestExplain_QuantileOutput(t *testing.T) {
	ds := loadPolicy(t)
	p := quantilePlan(t, ds, "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits")
	text := explainPlan(t, ds, p, 1, 1e-6, policy.MechanismLaplace)
	if want := "midpoint of the bucket of m0 selected by the exponential mechanism"; !strings.Contains(text, want) {
		t.Errorf("EXPLAIN lacks %q:\n%s", want, text)
	}
}

// TestQuantile_FineGridRankBound releases the median of a histogram
// spread over the whole 16384-bucket grid 600 times at ε_g = 0.5 and counts
// how often the selected bucket is within the stated 95% rank bound
// (HalfWidth(0.95)) of the target. The bound holds with probability ≥ 0.95
// whatever the data; the test fails below 0.92, which a true coverage of
// exactly 0.95 reaches with probability < 3·10⁻⁴ (binomial, 600 draws: 3.4
// standard deviations). The bound is a worst-case one (it grows with
// ln B) and far from tight here: this test catches a selection that strays
// or a bound computed for fewer candidates by far, not a bound a few times
// too small; the second check makes sure the errors are not all zero (the
// data exercise the mechanism).
func TestQuantile_FineGridRankBound(t *testing.T) {
	ds := loadPolicy(t)
	plan := quantilePlan(t, ds, "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY cost) FROM visits")
	ms := plan.Measures[0]
	if ms.Quantile.Buckets != 16384 {
		t.Fatalf("grid = %d buckets, want 16384", ms.Quantile.Buckets)
	}
	r := newTestReleaser(t, &memLedger{limit: 1e9}, 21)
	m, err := r.newQuantileMech(ms, ms.Quantile.Rows, 1, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	// 4000 values: 3 in every 13th bucket, the rest in a lump near the top.
	counts := make([]int64, ms.Quantile.Buckets)
	var parts []string
	n := int64(0)
	for j := 0; j < len(counts) && n < 3000; j += 13 {
		counts[j] = 3
		n += 3
	}
	counts[15000] += 4000 - n
	for j, c := range counts {
		if c > 0 {
			parts = append(parts, fmt.Sprintf("%d:%d", j, c))
		}
	}
	raw := strings.Join(parts, ",")
	util := quantileUtilities(counts, ms.Quantile.Q, ms.Quantile.Cont)
	bound := m.HalfWidth(0.95)
	small := noise.ExponentialUtilityBound(m.groupEpsilon, ms.LInf, 2, 0.5)
	within, withinOne := 0, 0
	const draws = 600
	for i := 0; i < draws; i++ {
		parsed, err := parseHistogram(&raw, ms.Quantile.Buckets)
		if err != nil {
			t.Fatal(err)
		}
		j, err := m.exp.Select(quantileUtilities(parsed, ms.Quantile.Q, ms.Quantile.Cont))
		if err != nil {
			t.Fatal(err)
		}
		d, _ := new(big.Rat).Neg(util[j]).Float64()
		if d <= bound {
			within++
		}
		if d <= small {
			withinOne++
		}
	}
	if cov := float64(within) / draws; cov < 0.92 {
		t.Fatalf("rank error within the stated bound %v in %.3f of %d releases, want ≥ 0.95 (test threshold 0.92)", bound, cov, draws)
	}
	// Power: the errors are real (a quarter of one stage's bound is
	// exceeded often), so the coverage above is not vacuous.
	if withinOne == draws {
		t.Fatalf("every release within %v ranks: the test cannot tell a wrong bound", small)
	}
}

// TestExplain_QuantileOfExpression: EXPLAIN of the exponential method over
// an expression names it and its interval, the grid over that interval
// and the rank sensitivity (the rows a unit may keep: for this ungrouped
// query its whole allowance, 4·5), as for a column.
func TestExplain_QuantileOfExpression(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.Rewrite(ds, "SELECT MAX(cost * 2) FROM visits")
	if err != nil {
		t.Fatal(err)
	}
	all := explainPlan(t, ds, plan, 1, 0, policy.MechanismLaplace)
	for _, want := range []string{"max(q=1) of an expression clamped to [0, 40000]", "exponential mechanism over 16384 buckets of width 2.44140625", "rank sensitivity=20"} {
		if !strings.Contains(all, want) {
			t.Errorf("EXPLAIN lacks %q:\n%s", want, all)
		}
	}
}
