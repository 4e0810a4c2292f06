package release

import (
	"context"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestRunSampleAgg_QuantileOfExpression releases percentile_cont of an
// expression by sample-and-aggregate (SET dp.quantile_method = sample,
// rewrite/quantile_expr.go) end to end through Run: one charge of the
// query's ε, the NOTICE names the method and k, the answer is the noisy
// average within the expression's interval; percentile_disc/MAX of an
// integer expression is released as an integer (PostgreSQL's type).
func TestRunSampleAgg_QuantileOfExpression(t *testing.T) {
	ds := loadPolicy(t)
	opts := rewrite.Options{QuantileMethod: rewrite.QuantileSample, SampleBlocks: 16}
	plan, err := rewrite.RewriteWith(ds, "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost / NULLIF(age, 0)) AS ratio FROM visits", opts)
	if err != nil {
		t.Fatal(err)
	}
	if plan.SampleAgg == nil || len(plan.Measures) != 1 || plan.Measures[0].LInf != 20000 || plan.Outputs[0].PGType != "float8" {
		t.Fatalf("plan = %+v, want a fixed-k sample-and-aggregate plan over [0, 20000], float8", plan)
	}
	led := &memLedger{limit: 3}
	r := newTestReleaser(t, led, 11)
	// True average of the block medians 300: S = k·(300 − 10000).
	up := &fakeUpstream{rows: saRows(plan, 300, 5000)}
	res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	if ev := led.reserved[0].Events; len(ev) != 1 || ev[0].Epsilon != 1 {
		t.Fatalf("events = %+v, want one charge of ε = 1", ev)
	}
	if !strings.Contains(res.Notice, "sample-and-aggregate over k=16 blocks (fixed by dp.sample_blocks") || !strings.Contains(res.Notice, "(ratio, epsilon 1)") {
		t.Fatalf("notice %q does not name the method, k and the output", res.Notice)
	}
	// Laplace of scale 20000/(16·1) = 1250 on the average: P(|Z| > 25000)
	// = e^{−20} < 1e-8.
	v, err := strconv.ParseFloat(*res.Rows[0][0], 64)
	if err != nil || v < 0 || v > 20000 || math.Abs(v-300) > 25000 {
		t.Fatalf("ratio = %v (%v); want a value in [0, 20000]", *res.Rows[0][0], err)
	}

	// MAX of an integer expression: int8, an integer within [1, 121].
	plan, err = rewrite.RewriteWith(ds, "SELECT MAX(length_of_stay * 2 + 1) FROM visits", opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err = r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace,
		Upstream: &fakeUpstream{rows: saRows(plan, 97.3, 5000)}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(*res.Rows[0][0], 10, 64)
	if err != nil || n < 1 || n > 121 || res.Columns[0].PGType != "int8" {
		t.Fatalf("max = %q (%v), columns %+v; want an int8 integer in [1, 121]", *res.Rows[0][0], err, res.Columns)
	}

	// EXPLAIN names the method, k and the statistic.
	all := explainPlan(t, ds, plan, 1, 0, policy.MechanismLaplace)
	for _, want := range []string{"DP Sample-and-aggregate", "Blocks: k=16 (SET dp.sample_blocks)", "max of expression per block, clipped to [1, 121]", "sensitivity (u−l)/k = 120/k"} {
		if !strings.Contains(all, want) {
			t.Errorf("EXPLAIN lacks %q:\n%s", want, all)
		}
	}
}

// TestRunSampleAgg_QuantileNeighbours checks the release side of the
// neighbour bound of sample-and-aggregate percentiles: for neighbouring
// databases D and D' (one unit added, which moves the one block it lies in
// from one end of the output range to the other, so S' = S + (u − l), the
// largest change rewrite/quantile_expr_test.go allows), the released
// answers A(D), A(D') satisfy P[A(D) > t] ≤ e^ε·P[A(D') > t] and the
// reverse for every threshold t, estimated from n releases each. By the
// Dvoretzky–Kiefer–Wolfowitz inequality (Massart's constant) each empirical
// tail is within η = √(ln(2/α)/(2n)) of the true one for all t at once
// with probability 1 − α, so the test checks P̂ ≤ e^ε(P̂' + η) + η and
// falsely rejects with probability below 4α = 4·10⁻⁶. That the check has
// power is shown on non-neighbours: a change of 3(u − l) must violate it.
func TestRunSampleAgg_QuantileNeighbours(t *testing.T) {
	ds := loadPolicy(t)
	const k, epsilon, releases = 16, 1.0, 8000
	plan, err := rewrite.RewriteWith(ds, "SELECT percentile_disc(0.9) WITHIN GROUP (ORDER BY cost * 2 - 1000) FROM visits",
		rewrite.Options{QuantileMethod: rewrite.QuantileSample, SampleBlocks: k})
	if err != nil {
		t.Fatal(err)
	}
	o := plan.Outputs[0]
	width := o.Upper - o.Lower // [−1000, 39000]
	if width != 40000 {
		t.Fatalf("output range [%v, %v], want the expression's interval [-1000, 39000]", o.Lower, o.Upper)
	}
	r := newTestReleaser(t, &memLedger{limit: 3}, 5)
	req := Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: epsilon, Mechanism: policy.MechanismLaplace}
	_, stats, err := r.saMechanisms(req)
	if err != nil {
		t.Fatal(err)
	}
	mech := stats[0].mech
	if mech.Epsilon() > epsilon || stats[0].measure.LInf < width {
		t.Fatalf("mechanism ε %v, sensitivity %v; want ε ≤ %v and sensitivity ≥ u − l = %v", mech.Epsilon(), stats[0].measure.LInf, epsilon, width)
	}
	// D: 10 blocks at the upper end, 6 at the lower end (S in centred
	// units); D' moves one block from the lower end to the upper end.
	half := big.NewRat(int64(width/2), 1)
	sOf := func(up int) *big.Rat {
		s := new(big.Rat).Mul(half, big.NewRat(int64(up-(k-up)), 1))
		return s
	}
	draw := func(s *big.Rat) []float64 {
		out := make([]float64, releases)
		for i := range out {
			v, err := mech.AddNoise(s)
			if err != nil {
				t.Fatal(err)
			}
			f, _ := sampleAggAnswer(v, k, o.Lower, o.Upper).Float64()
			out[i] = f
		}
		sort.Float64s(out)
		return out
	}
	eta := math.Sqrt(math.Log(2/1e-6) / (2 * releases))
	tail := func(xs []float64, t float64) float64 {
		return float64(len(xs)-sort.SearchFloat64s(xs, math.Nextafter(t, math.Inf(1)))) / float64(len(xs))
	}
	violates := func(a, b []float64) bool {
		for i := 0; i <= 200; i++ {
			th := o.Lower + width*float64(i)/200
			pa, pb := tail(a, th), tail(b, th)
			if pa > math.Exp(epsilon)*(pb+eta)+eta || (1-pa) > math.Exp(epsilon)*((1-pb)+eta)+eta {
				return true
			}
		}
		return false
	}
	d, d2 := draw(sOf(10)), draw(sOf(11))
	if violates(d, d2) || violates(d2, d) {
		t.Fatalf("neighbouring databases are told apart beyond e^ε = %v", math.Exp(epsilon))
	}
	far := draw(sOf(13)) // three blocks moved: not neighbours
	if !violates(far, d) && !violates(d, far) {
		t.Fatal("a change of 3(u − l) passed the e^ε check: the check has no power")
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
