package release

// Tests with power (issue 19) of release's calibration: the mechanism each
// measure gets is checked against the noise scale derived here from the
// policy's numbers and the published formulas (never from package noise or
// sensitivity), and the noise of many releases through Run is tested
// against the CDF of that scale, with stated false rejection and power
// against half and double the scale.
//
// Formulas (DESIGN.md "Privacy model", release/doc.go, noise/doc.go):
//
//   - a measure's ε and δ are the query's split equally over its m
//     measures, rounded down so that m shares never exceed the total;
//   - sensitivities: a unit changes at most L0 = min(max_groups_per_unit,
//     #groups) groups, each by at most L∞ = max_rows_per_unit (count) or
//     max_rows_per_unit·max(|lower|, |upper|) (sum); Δ₁ = L0·L∞,
//     Δ₂ = √L0·L∞ (Wilson et al. 2020, §3);
//   - Laplace: integer measures get discrete Laplace of scale Δ₁/ε; real
//     ones, on the grid r = 2^(⌊log₂(Δ₁/ε)⌋ − 39), scale
//     (Δ₁ + L0·r)/(r·ε) grid steps (Google's secure noise);
//   - Gaussian with L0 > 1 cells: the discrete Gaussian whose σ (grid units)
//     is the smallest with δ_zCDP(ρ = Δ_g²/(2σ²), ε) ≤ δ, Δ_g = Δ₂
//     (integer) or Δ₂/r + √L0 (real), δ_zCDP the CKS 2020 Prop. 12
//     conversion, and r = 2^(⌊log₂ σ_c⌋ − 39) with σ_c the analytic Gaussian
//     σ (Balle–Wang 2018) for (ε, δ, Δ₂).

import (
	"context"
	"math"
	"math/big"
	"sort"
	"strconv"
	"testing"

	"github.com/dpproxy/dpproxy/internal/dpref"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// powerPlan is SELECT department, COUNT(*), SUM(cost), SUM(age) FROM
// visits GROUP BY department, as the rewriter plans it (L∞ of the policy:
// max_rows_per_unit = 5, cost in [0, 20000], age in [0, 110]).
func powerPlan(ds *policy.Dataset, fingerprint string) *rewrite.Plan {
	vis, _ := ds.Table("visits")
	dept, _ := vis.Column("department")
	return emitFor(ds, &rewrite.Plan{
		Dataset: "hospital", Table: "visits",
		Keys: []rewrite.Key{{Column: "department", Type: policy.TypeText, Domain: dept.PublicValues}},
		Measures: []rewrite.Measure{
			{Kind: rewrite.MeasureCount, Integer: true, LInf: 5},
			{Kind: rewrite.MeasureSum, Column: "cost", Lower: 0, Upper: 20000, LInf: 5 * 20000},
			{Kind: rewrite.MeasureSum, Column: "age", Lower: 0, Upper: 110, Integer: true, LInf: 5 * 110},
		},
		Outputs: []rewrite.Output{
			{Name: "department", Kind: rewrite.OutputKey, Key: 0, PGType: "text"},
			{Name: "count", Kind: rewrite.OutputCount, Measure: 0, PGType: "int8"},
			{Name: "sum", Kind: rewrite.OutputSum, Measure: 1, PGType: "numeric"},
			{Name: "sum", Kind: rewrite.OutputSum, Measure: 2, PGType: "numeric"},
		},
		MaxGroupsPerUnit: 4, Limit: -1, Fingerprint: fingerprint,
	})
}

// refMeasure is what the formulas say one measure of powerPlan gets.
type refMeasure struct {
	name    string
	integer bool
	epsilon float64
	r       *big.Rat // grid
	scale   float64  // Laplace t or Gaussian σ, in grid units
}

// refShare is the largest float64 e with m·e ≤ x exactly.
func refShare(x float64, m int) float64 {
	fits := func(e float64) bool {
		p := new(big.Rat).Mul(new(big.Rat).SetFloat64(e), big.NewRat(int64(m), 1))
		return p.Cmp(new(big.Rat).SetFloat64(x)) <= 0
	}
	e := x / float64(m)
	for !fits(e) {
		e = math.Nextafter(e, 0)
	}
	for fits(math.Nextafter(e, math.Inf(1))) {
		e = math.Nextafter(e, math.Inf(1))
	}
	return e
}

// refPowerMeasures returns the reference calibration of powerPlan's three
// measures for a query (ε, δ) and mechanism.
func refPowerMeasures(mechanism string, epsilon, delta float64) []refMeasure {
	// cells: one grid step of rounding for each of the 7 departments, as
	// the plan weights groups (7 > L0), so one patient can change all 7
	// (rewrite.Plan.CellsChanged).
	const l0, rows, cells = 4, 5, 7
	eps := refShare(epsilon, 3)
	del := 0.0
	if mechanism == policy.MechanismGaussian {
		del = refShare(delta, 3)
	}
	var out []refMeasure
	for _, m := range []struct {
		name    string
		integer bool
		lInf    float64
	}{{"count", true, rows}, {"sum(cost)", false, rows * 20000}, {"sum(age)", true, rows * 110}} {
		rm := refMeasure{name: m.name, integer: m.integer, epsilon: eps, r: big.NewRat(1, 1)}
		if mechanism == policy.MechanismLaplace {
			l1 := l0 * m.lInf
			s := new(big.Rat).Quo(new(big.Rat).SetFloat64(l1), new(big.Rat).SetFloat64(eps))
			t := s
			if !m.integer {
				rm.r = dpref.Pow2(dpref.FloorLog2(s) - 39)
				t = new(big.Rat).Add(new(big.Rat).SetFloat64(l1), new(big.Rat).Mul(big.NewRat(cells, 1), rm.r))
				t.Quo(t, new(big.Rat).Mul(rm.r, new(big.Rat).SetFloat64(eps)))
			}
			rm.scale, _ = t.Float64()
		} else {
			l2 := math.Sqrt(l0) * m.lInf
			sc := dpref.SmallestSigma(l2/eps, del, 1e-10, func(s float64) float64 { return dpref.AnalyticGaussianDelta(s, eps, l2) })
			charged := l2
			if !m.integer {
				rm.r = dpref.Pow2(dpref.FloorLog2(new(big.Rat).SetFloat64(sc)) - 39)
				rf, _ := rm.r.Float64()
				charged = l2/rf + math.Sqrt(cells)
			}
			rf, _ := rm.r.Float64()
			rm.scale = dpref.SmallestSigma(sc/rf, del, 1e-10, func(s float64) float64 { return dpref.ZCDPDelta(charged*charged/(2*s*s), eps) })
		}
		out = append(out, rm)
	}
	return out
}

// refLaplaceK is the smallest whole k with P(|Z| ≤ k) ≥ c for discrete
// Laplace of scale t: P(|Z| > k) = 2q^{k+1}/(1+q), q = e^{−1/t}.
func refLaplaceK(t, c float64) float64 {
	tail := func(k float64) float64 { return 2 * math.Exp(-(k+1)/t) / (1 + math.Exp(-1/t)) }
	// 2q^{k+1}/(1+q) ≤ 1 − c ⟺ k + 1 ≥ t·(ln 2 − ln(1+q) − ln(1−c));
	// settled on the criterion below.
	k := math.Max(0, math.Ceil(t*(math.Ln2-math.Log1p(math.Exp(-1/t))-math.Log1p(-c)))-1)
	for k > 0 && tail(k-1) <= 1-c {
		k--
	}
	for tail(k) > 1-c {
		k++
	}
	return k
}

// refGaussianK is the same for the discrete Gaussian with a large σ:
// P(|Z| > k) = 2(1 − Φ((k + ½)/σ)) up to terms of relative order 1/σ².
func refGaussianK(sigma, c float64) float64 {
	lo, hi := 0.0, 100*sigma
	for hi-lo > 1 {
		mid := math.Floor((lo + hi) / 2)
		if 2*(1-dpref.NormalCDF((mid+0.5)/sigma)) <= 1-c {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// TestMechanisms_ScaleFormula checks the mechanism of every measure of
// powerPlan, under both mechanisms: its ε, its grid exactly, and its
// 50/90/99% half-widths against the quantiles of the reference scale
// (exactly for Laplace; to a whole step or 10⁻³ for the Gaussian, whose σ
// the reference finds to 10⁻¹⁰ through its own numerics). Half or double
// the scale, the sensitivity or the ε fails it.
func TestMechanisms_ScaleFormula(t *testing.T) {
	ds := loadPolicy(t)
	r := newTestReleaser(t, &memLedger{limit: 1e9}, 3)
	for _, tc := range []struct {
		mechanism      string
		epsilon, delta float64
	}{{policy.MechanismLaplace, 0.6, 0}, {policy.MechanismLaplace, 2.5, 0}, {policy.MechanismGaussian, 0.6, 1e-6}, {policy.MechanismGaussian, 3, 1e-8}} {
		req := Request{Analyst: "p", Dataset: ds, Plan: powerPlan(ds, "fp"), Epsilon: tc.epsilon, Delta: tc.delta, Mechanism: tc.mechanism, Upstream: &fakeUpstream{}}
		ms, err := r.mechanisms(req)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range refPowerMeasures(tc.mechanism, tc.epsilon, tc.delta) {
			m := ms[i].mech
			name := tc.mechanism + " ε=" + strconv.FormatFloat(tc.epsilon, 'g', -1, 64) + " " + want.name
			if m.Epsilon() != want.epsilon {
				t.Errorf("%s: ε = %v, want %v", name, m.Epsilon(), want.epsilon)
			}
			if g := m.Granularity(); g.Cmp(want.r) != 0 {
				t.Errorf("%s: grid %v, want %v", name, g.FloatString(25), want.r.FloatString(25))
			}
			rf, _ := want.r.Float64()
			rounding := 0.0
			if !want.integer {
				rounding = rf / 2
			}
			for _, c := range []float64{0.5, 0.9, 0.99} {
				k := math.Round((m.HalfWidth(c) - rounding) / rf)
				if tc.mechanism == policy.MechanismLaplace {
					if wk := refLaplaceK(want.scale, c); k != wk {
						t.Errorf("%s: %g%% half-width is %g grid steps, want %g (scale %g)", name, 100*c, k, wk, want.scale)
					}
				} else if wk := refGaussianK(want.scale, c); math.Abs(k-wk) > 1+1e-3*wk {
					t.Errorf("%s: %g%% half-width is %g grid steps, want %g (σ %g)", name, 100*c, k, wk, want.scale)
				}
			}
		}
	}
}

// The distribution test is a one-sample Kolmogorov–Smirnov test of the
// noise of powerRuns × 7 groups = 2100 releases per measure against the
// reference CDF. False rejection: P(sup|F_n − F| > c) ≤ 2e^{−2nc²}
// (Dvoretzky–Kiefer–Wolfowitz–Massart), c set for 10⁻⁵ per measure.
// Power: against a CDF at distance d (half or double the scale: d ≈ 0.125
// for the Laplace, 0.16 for the Gaussian; no noise: d ≈ ½) the test accepts
// with probability at most 2e^{−2n(d−c)²}; the test computes d and fails as
// underpowered unless that is below 10⁻⁶.
const powerRuns = 300

func refLaplaceCDF(t float64) func(int64) float64 {
	onePlusQ := 1 + math.Exp(-1/t)
	return func(z int64) float64 {
		if z >= 0 {
			return 1 - math.Exp(-float64(z+1)/t)/onePlusQ
		}
		return math.Exp(float64(z)/t) / onePlusQ
	}
}

// refGaussianCDF: Φ((z + ½)/σ) for the large σ of these measures (the
// discrete Gaussian's CDF to relative order 1/σ², σ > 30 here).
func refGaussianCDF(sigma float64) func(int64) float64 {
	return func(z int64) float64 { return dpref.NormalCDF((float64(z) + 0.5) / sigma) }
}

func ksWithPower(t *testing.T, name string, z []int64, family func(float64) func(int64) float64, scale float64) {
	t.Helper()
	n := float64(len(z))
	c := math.Sqrt(math.Log(2/1e-5) / (2 * n))
	cdf := family(scale)
	gap := func(g func(int64) float64) float64 {
		var d float64
		for k := -4000; k <= 4000; k++ {
			x := int64(math.Round(float64(k) * scale / 100))
			d = math.Max(d, math.Abs(cdf(x)-g(x)))
		}
		return d
	}
	zero := func(x int64) float64 {
		if x >= 0 {
			return 1
		}
		return 0
	}
	for _, alt := range []func(int64) float64{family(scale / 2), family(2 * scale), zero} {
		if d := gap(alt); d <= c || 2*math.Exp(-2*n*(d-c)*(d-c)) > 1e-6 {
			t.Fatalf("%s: underpowered (CDF gap %.4f, critical value %.4f)", name, d, c)
		}
	}
	s := append([]int64(nil), z...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var d float64
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] == s[i] {
			j++
		}
		d = math.Max(d, math.Max(math.Abs(float64(j)/n-cdf(s[i])), math.Abs(float64(i)/n-cdf(s[i]-1))))
		i = j
	}
	if d > c {
		t.Errorf("%s: KS distance %.5f > %.5f to the CDF of scale %.6g (false rejection ≤ 1e-5)", name, d, c, scale)
	}
}

// TestRun_NoiseMatchesFormula runs powerPlan powerRuns times per mechanism
// (answer cache off) over fixed upstream rows, and KS-tests each measure's
// noise (released − true, in grid units) against the reference scale.
func TestRun_NoiseMatchesFormula(t *testing.T) {
	ds := loadPolicy(t)
	vis, _ := ds.Table("visits")
	dept, _ := vis.Column("department")
	// Large true values (no count is floored at zero), on every grid.
	truth := map[string][3]*big.Rat{}
	up := &fakeUpstream{}
	for i, d := range dept.PublicValues {
		v := [3]*big.Rat{big.NewRat(int64(1000000+i), 1), big.NewRat(int64(4*123456789+i), 4), big.NewRat(int64(987654+i), 1)}
		truth[d] = v
		up.rows = append(up.rows, []*string{s(d), s(v[0].RatString()), s(v[1].FloatString(2)), s(v[2].RatString())})
	}
	for _, tc := range []struct {
		mechanism      string
		epsilon, delta float64
	}{{policy.MechanismLaplace, 0.6, 0}, {policy.MechanismGaussian, 0.6, 1e-6}} {
		t.Run(tc.mechanism, func(t *testing.T) {
			led := &memLedger{limit: 1e9}
			r := newTestReleaser(t, led, 19)
			want := refPowerMeasures(tc.mechanism, tc.epsilon, tc.delta)
			noise := make([][]int64, 3)
			for run := 0; run < powerRuns; run++ {
				res, err := r.Run(context.Background(), Request{Analyst: "p", Dataset: ds, Plan: powerPlan(ds, "fp"), Epsilon: tc.epsilon, Delta: tc.delta,
					Mechanism: tc.mechanism, Upstream: up, NoCache: true})
				if err != nil {
					t.Fatal(err)
				}
				for _, row := range res.Rows {
					for j := 0; j < 3; j++ {
						got, ok := new(big.Rat).SetString(*row[1+j])
						if !ok {
							t.Fatalf("%s = %q is not a number", res.Columns[1+j].Name, *row[1+j])
						}
						z := new(big.Rat).Quo(got.Sub(got, truth[*row[0]][j]), want[j].r)
						if !z.IsInt() {
							t.Fatalf("%s: noise %v is not a whole number of grid steps", want[j].name, z)
						}
						noise[j] = append(noise[j], z.Num().Int64())
					}
				}
			}
			// Every charge is the ε (and δ) the noise was calibrated to,
			// with the noise multiplier of that noise (scale over the
			// charged sensitivity, both in grid units): 1/ε for Laplace,
			// σ/Δ_g for the Gaussian (Δ_g as in refPowerMeasures).
			if len(led.reserved) != powerRuns {
				t.Fatalf("%d charges for %d runs", len(led.reserved), powerRuns)
			}
			for _, c := range led.reserved {
				var total float64
				for j, e := range c.Events {
					total += e.Epsilon
					multiplier := 1 / want[j].epsilon
					if tc.mechanism == policy.MechanismGaussian {
						l2 := 2 * []float64{5, 5 * 20000, 5 * 110}[j] // √L0·L∞
						rf, _ := want[j].r.Float64()
						charged := l2
						if !want[j].integer {
							charged = l2/rf + 2
						}
						multiplier = want[j].scale / charged
					}
					if e.Epsilon != want[j].epsilon || math.Abs(e.NoiseMultiplier/multiplier-1) > 1e-4 {
						t.Fatalf("charged %+v for %s, want ε = %v and noise multiplier %v", e, want[j].name, want[j].epsilon, multiplier)
					}
				}
				if total > tc.epsilon || total < tc.epsilon*(1-1e-12) {
					t.Fatalf("charged ε = %v for a query of ε = %v", total, tc.epsilon)
				}
			}
			for j, w := range want {
				family := refLaplaceCDF
				if tc.mechanism == policy.MechanismGaussian {
					family = refGaussianCDF
				}
				ksWithPower(t, tc.mechanism+" "+w.name, noise[j], family, w.scale)
			}
		})
	}
}
