package release

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestRun_RegrFromSums: regr_slope and regr_intercept planned from noisy
// sums (rewrite/regrstats.go) release PostgreSQL's least-squares values
// of the bounded rows. The upstream answers the five sums of 2,000
// synthetic (age, cost) points on cost = 150 + 32·age + e. At ε = 1e5
// (2e4 per sum) the Laplace scales are at most 20·110·20000/2e4 = 2,200
// (Sxy), 12.1 (Sxx), 110 and 1,000 (Sx, Sy), 0.001 (n): the slope's
// denominator n·Sxx − Sx² ≈ 1.2e9 moves by about 5e4 per scale unit and
// its numerator similarly, so the slope moves by about 5e-5 of itself per
// unit of noise; 1e-2 relative needs noise of about 200 scales, of
// probability below e^-100: no false rejection.
func TestRun_RegrFromSums(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.RewriteWith(ds, "SELECT regr_slope(cost, age) AS slope, regr_intercept(cost, age) AS b0 FROM visits", rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var n, sx, sy, sxy, sxx float64
	for range 2000 {
		x := float64(20 + rng.IntN(60))
		y := math.Round(150 + 32*x + 40*rng.NormFloat64())
		n, sx, sy, sxy, sxx = n+1, sx+x, sy+y, sxy+x*y, sxx+x*x
	}
	row := make([]*string, len(plan.Measures))
	for i, m := range plan.Measures {
		v := 0.0
		switch e := ""; {
		case m.Expr != nil:
			e = m.Expr.String()
			if strings.Count(e, "age") == 2 {
				v = sxx
			} else {
				v = sxy
			}
		case m.Column == "age" && m.Kind == rewrite.MeasureSum:
			v = sx
		case m.Column == "cost":
			v = sy
		default:
			v = n
		}
		row[i] = s(strconv.FormatFloat(v, 'f', -1, 64))
	}
	r := newTestReleaser(t, &memLedger{limit: 1e7}, 3)
	res, err := r.Run(context.Background(), Request{Analyst: "alice", Dataset: ds, Plan: plan, Epsilon: 1e5, Mechanism: policy.MechanismLaplace, Upstream: &fakeUpstream{rows: [][]*string{row}}})
	if err != nil {
		t.Fatal(err)
	}
	den := n*sxx - sx*sx
	wantSlope, wantB0 := (n*sxy-sx*sy)/den, (sy*sxx-sx*sxy)/den
	got := func(i int) float64 {
		f, err := strconv.ParseFloat(*res.Rows[0][i], 64)
		if err != nil {
			t.Fatalf("column %d: %v", i, err)
		}
		return f
	}
	if s := got(0); math.Abs(s-wantSlope) > 1e-2*math.Abs(wantSlope) {
		t.Errorf("regr_slope %v, want %v (least squares of the rows)", s, wantSlope)
	}
	if b := got(1); math.Abs(b-wantB0) > 1e-2*math.Abs(wantB0)+1 {
		t.Errorf("regr_intercept %v, want %v", b, wantB0)
	}
	if res.Columns[0].PGType != "float8" || res.Columns[1].Name != "b0" {
		t.Errorf("columns %+v", res.Columns)
	}
}
