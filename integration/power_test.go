package integration

// End-to-end tests with power (issue 19): the proxy's answers are compared
// with the truth read upstream, over enough draws to tell the calibrated
// noise from zero noise and from half and double the noise, with every
// bound computed here from the published formulas (never from package
// noise). They run against a `dpproxy serve` of their own whose policy is
// the demo's with a large budget (ε 10⁶, δ 10⁻³), birth_year clamped to [1940, 1990] (so
// clamping changes the sums) and visits limited to one department per
// patient (so the L0 bound changes the counts).

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pinnedPolicy is the unit tests' fixed policy for the demo data
// (internal/testdata/hospital.yaml): the demo's as it was when these
// tests' formulas were written.
const pinnedPolicy = "../internal/testdata/hospital.yaml"

// The power policy's numbers, used by the formulas below.
const (
	powerLower, powerUpper = 1940, 1990 // birth_year clamp
	powerBudget            = 1000000    // ε per analyst
)

// powerProxy starts a `dpproxy serve` with the power policy and the given
// analysts.
func powerProxy(t *testing.T, analysts ...string) *extraProxy {
	t.Helper()
	// The tests' fixed policy (4 groups × 5 rows per patient), not the
	// demo's, whose bounds are tuned for its README session: the formulas
	// below are written for these numbers.
	cfgPath, addr := extraConfigPolicy(t, pinnedPolicy,
		[2]string{"  epsilon: 3.0          # total ε per analyst", fmt.Sprintf("  epsilon: %d     # total ε per analyst", powerBudget)},
		[2]string{"  delta: 1.0e-6\n", "  delta: 1.0e-3\n"},
		[2]string{"birth_year: {type: int, lower: 1910, upper: 2024}", fmt.Sprintf("birth_year: {type: int, lower: %d, upper: %d}", powerLower, powerUpper)},
		[2]string{"    max_groups_per_unit: 4    # a patient counts", "    max_groups_per_unit: 1    # a patient counts"})
	for _, a := range analysts {
		withAnalyst(t, cfgPath, a)
	}
	return startProxy(t, cfgPath, addr)
}

// textRows runs sql (one or more statements) with the simple protocol and
// returns the rows of the last result as text (NULL as "NULL").
func textRows(t *testing.T, ctx context.Context, c *pgx.Conn, sql string) [][]string {
	t.Helper()
	res, err := c.PgConn().Exec(ctx, sql).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	var out [][]string
	for _, row := range res[len(res)-1].Rows {
		var r []string
		for _, v := range row {
			if v == nil {
				r = append(r, "NULL")
			} else {
				r = append(r, string(v))
			}
		}
		out = append(out, r)
	}
	return out
}

// powerKey splits patients into 50 groups of roughly 400 to 2000 each.
const powerKey = "CASE WHEN birth_year < 1950 THEN 'a' WHEN birth_year < 1960 THEN 'b' WHEN birth_year < 1970 THEN 'c' WHEN birth_year < 1980 THEN 'd' ELSE 'e' END"

// powerQuery releases three measures in 50 groups: a count (integer
// mode), a sum of an int column (integer mode) and a sum of a real
// expression (real mode).
const powerQuery = "SELECT sex, region, " + powerKey + " AS k, COUNT(*), SUM(birth_year), SUM(birth_year * 0.5) FROM patients GROUP BY sex, region, k"

// powerTruth reads the true answers of powerQuery upstream: the same
// groups, with birth_year clamped per row as the policy says.
func powerTruth(t *testing.T, ctx context.Context) map[string][3]*big.Rat {
	t.Helper()
	up := connect(t, ctx, env.upstreamDSN)
	clamped := fmt.Sprintf("LEAST(GREATEST(birth_year, %d), %d)", powerLower, powerUpper)
	rows := textRows(t, ctx, up, "SELECT sex, region, "+powerKey+", count(*), sum("+clamped+"), sum("+clamped+" * 0.5) FROM patients "+
		"WHERE patient_id IS NOT NULL AND sex IN ('F', 'M') AND region IN ('north', 'south', 'east', 'west', 'central') GROUP BY 1, 2, 3")
	truth := map[string][3]*big.Rat{}
	for _, r := range rows {
		var v [3]*big.Rat
		for j := range v {
			x, ok := new(big.Rat).SetString(r[3+j])
			if !ok {
				t.Fatalf("upstream value %q", r[3+j])
			}
			v[j] = x
		}
		truth[r[0]+"|"+r[1]+"|"+r[2]] = v
	}
	if len(truth) != 50 {
		t.Fatalf("upstream has %d groups, want 50", len(truth))
	}
	return truth
}

// collectNoise runs powerQuery `queries` times (the session has SET
// dp.cache = off) and returns, per measure, released − true in units of
// that measure's grid.
func collectNoise(t *testing.T, ctx context.Context, c *pgx.Conn, truth map[string][3]*big.Rat, grids [3]*big.Rat, queries int) [3][]float64 {
	t.Helper()
	var out [3][]float64
	for q := 0; q < queries; q++ {
		rows := textRows(t, ctx, c, powerQuery)
		if len(rows) != 50 {
			t.Fatalf("%d rows, want 50", len(rows))
		}
		for _, r := range rows {
			want, ok := truth[r[0]+"|"+r[1]+"|"+r[2]]
			if !ok {
				t.Fatalf("unexpected group %v", r[:3])
			}
			for j := 0; j < 3; j++ {
				got, ok := new(big.Rat).SetString(r[3+j])
				if !ok {
					t.Fatalf("released %q is not a number", r[3+j])
				}
				z := new(big.Rat).Quo(got.Sub(got, want[j]), grids[j])
				if !z.IsInt() {
					t.Fatalf("measure %d: released − true = %s is not a whole number of grid steps %s", j, z.FloatString(6), grids[j].FloatString(30))
				}
				f, _ := z.Float64()
				out[j] = append(out[j], f)
			}
		}
	}
	return out
}

// checkSpent fails unless SHOW dp.budget says the analyst spent exactly
// the ε (and δ) of the queries it sent: an accountant that charged ε/2
// fails it.
func checkSpent(t *testing.T, ctx context.Context, c *pgx.Conn, epsilon, delta float64) {
	t.Helper()
	rows := textRows(t, ctx, c, "SHOW dp.budget")
	if len(rows) != 1 || len(rows[0]) < 5 {
		t.Fatalf("SHOW dp.budget = %v", rows)
	}
	e, err1 := strconv.ParseFloat(rows[0][2], 64)
	d, err2 := strconv.ParseFloat(rows[0][4], 64)
	if err1 != nil || err2 != nil || math.Abs(e-epsilon) > 1e-9*epsilon || math.Abs(d-delta) > 1e-9*delta+1e-300 {
		t.Errorf("SHOW dp.budget: spent ε = %s, δ = %s; the queries sent cost ε = %v, δ = %v", rows[0][2], rows[0][4], epsilon, delta)
	}
}

// TestPower_ContributionBounds checks the contribution bounds end to end.
//
// L0: with an allowance of L0·R = 1·5 rows per patient over all groups
// (the power policy) and at most 5 visits per patient and department,
// the released total over the 7 departments is
// Σ_patients min(Σ_dept min(visits, 5), 5) (each patient's groups weighted
// down to its allowance, truncated towards zero: at most 7·10⁻¹⁵ below),
// up to the noise; without the bound over groups it would be
// Σ_patients Σ_dept min(visits, 5), far above.
//
// Clamping: SUM(birth_year) at ε = 10 (noise scale 1990/10 = 199) is
// within the noise of the sum of birth_year clamped to [1940, 1990], which
// is tens of thousands away from the unclamped sum.
//
// Each check fails falsely with probability ≤ 10⁻⁹ (the noise bounds
// below), and the test fails as underpowered unless the unbounded
// answers lie more than twice the noise bound away.
func TestPower_ContributionBounds(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const analyst = "power_bounds"
	p := powerProxy(t, analyst)
	up := connect(t, ctx, env.upstreamDSN)
	b := textRows(t, ctx, up, `WITH pg AS (SELECT patient_id, department, LEAST(count(*), 5) AS c FROM visits
		WHERE patient_id IS NOT NULL AND department IN ('cardiology', 'emergency', 'neurology', 'oncology', 'orthopedics', 'pediatrics', 'surgery') GROUP BY 1, 2)
		SELECT sum(LEAST(total, 5)), sum(LEAST(total, 5)), sum(total) FROM (SELECT patient_id, sum(c) AS total FROM pg GROUP BY 1) AS s`)
	lo, _ := strconv.ParseFloat(b[0][0], 64)
	hi, _ := strconv.ParseFloat(b[0][1], 64)
	unbounded, _ := strconv.ParseFloat(b[0][2], 64)
	s := textRows(t, ctx, up, fmt.Sprintf("SELECT sum(LEAST(GREATEST(birth_year, %d), %d)), sum(birth_year) FROM patients WHERE patient_id IS NOT NULL", powerLower, powerUpper))
	clamped, _ := strconv.ParseFloat(s[0][0], 64)
	unclamped, _ := strconv.ParseFloat(s[0][1], 64)

	c := connect(t, ctx, p.dsn(analyst))
	// dp.bias = off: the whole ε goes to the measurements, whose noise
	// scales the bounds below are computed for.
	rows := textRows(t, ctx, c, "SET dp.epsilon = 1; SET dp.cache = off; SET dp.bias = off; SET dp.contribution = fixed; SELECT department, COUNT(*) FROM visits GROUP BY department")
	if len(rows) != 7 {
		t.Fatalf("rows = %v, want the 7 departments", rows)
	}
	var total float64
	for _, r := range rows {
		v, err := strconv.ParseFloat(r[1], 64)
		if err != nil {
			t.Fatalf("count %q", r[1])
		}
		total += v
	}
	// Discrete Laplace of scale t: P(|Z| > k) = 2q^{k+1}/(1+q) ≤
	// 2e^{−(k+1)/t}, so |Z| ≤ t·ln(2m/10⁻⁹) for all of m draws except with
	// probability 10⁻⁹. The counts: 7 draws of scale L0·L∞/ε = 5.
	k := 7 * math.Ceil(5*math.Log(2*7/1e-9))
	if unbounded-hi <= 2*k {
		t.Fatalf("underpowered: without the L0 bound the total would be %g, with it at most %g; the noise margin %g cannot tell them apart", unbounded, hi, k)
	}
	t.Logf("L0: released total %g, bounded truth in [%g, %g] ± %g, unbounded %g", total, lo, hi, k, unbounded)
	if total < lo-k || total > hi+k {
		t.Errorf("released total %g outside [%g, %g] ± %g (L0 = 1); without the L0 bound it would be %g", total, lo, hi, k, unbounded)
	}

	// The sum: one draw of scale 1990/10.
	got := textRows(t, ctx, c, "SET dp.epsilon = 10; SELECT SUM(birth_year) FROM patients")[0][0]
	sum, err := strconv.ParseFloat(got, 64)
	if err != nil {
		t.Fatalf("SUM(birth_year) = %q", got)
	}
	ks := math.Ceil(powerUpper / 10.0 * math.Log(2/1e-9))
	if math.Abs(unclamped-clamped) <= 2*ks {
		t.Fatalf("underpowered: clamped sum %g and unclamped %g closer than twice the noise bound %g", clamped, unclamped, ks)
	}
	t.Logf("clamping: released %g, clamped truth %g ± %g, unclamped %g", sum, clamped, ks, unclamped)
	if math.Abs(sum-clamped) > ks {
		t.Errorf("SUM(birth_year) = %g, want the sum clamped to [%d, %d] %g ± %g (unclamped: %g)", sum, powerLower, powerUpper, clamped, ks, unclamped)
	}
	checkSpent(t, ctx, c, 11, 0)
}

// TestPower_QuantileUtility checks the exponential mechanism's utility end
// to end: MAX(birth_year) of the patients born before 1970, clamped to
// [1940, 1990] (51 buckets of width 1), at ε = 40. The bucket of the true
// maximum has utility 0 and every other bucket at most −1 (rank
// sensitivity 1: one row per patient), so another bucket is selected with
// probability at most 50·e^{−ε/2} = 10⁻⁷ per query (McSherry–Talwar:
// P(u ≤ u_max − k) ≤ B·e^{−εk/(2Δu)}): the 5 queries falsely fail with
// probability ≤ 5.2·10⁻⁷. An off-by-one utility that gives the 21 empty
// buckets above the maximum utility 0 answers correctly with probability
// at most 1/22 per query: all five pass with probability ≤ 2·10⁻⁷.
func TestPower_QuantileUtility(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const analyst = "power_quantile"
	p := powerProxy(t, analyst)
	up := connect(t, ctx, env.upstreamDSN)
	truth := textRows(t, ctx, up, fmt.Sprintf("SELECT max(LEAST(GREATEST(birth_year, %d), %d)) FROM patients WHERE birth_year < 1970 AND patient_id IS NOT NULL", powerLower, powerUpper))[0][0]
	c := connect(t, ctx, p.dsn(analyst))
	const eps, queries = 40.0, 5
	textRows(t, ctx, c, fmt.Sprintf("SET dp.epsilon = %g; SET dp.cache = off", eps))
	var got []string
	for i := 0; i < queries; i++ {
		got = append(got, textRows(t, ctx, c, "SELECT MAX(birth_year) FROM patients WHERE birth_year < 1970")[0][0])
	}
	for _, g := range got {
		if g != truth {
			t.Errorf("MAX(birth_year) = %v over %d queries, want %s every time", got, queries, truth)
			break
		}
	}
	checkSpent(t, ctx, c, queries*eps, 0)
}

// --- formulas and the test of scale ---

// discreteGaussianDelta is the hockey-stick divergence between N_Z(0, σ²)
// and N_Z(d, σ²) at ε, summed term by term (CKS 2020, Theorem 7).
func discreteGaussianDelta(sigma, eps, d float64) float64 {
	lim := math.Ceil(60*sigma + d + 10)
	p := func(y float64) float64 { return math.Exp(-y * y / (2 * sigma * sigma)) }
	var z, sum float64
	for y := -lim; y <= lim; y++ {
		z += p(y)
		sum += math.Max(0, p(y)-math.Exp(eps)*p(y-d))
	}
	return sum / z
}

// scaleFamily is a family of noise laws on Z indexed by a scale s, and the
// statistic g(z; s₀) whose mean the test uses (|z|/s₀ for the Laplace, the
// maximum-likelihood statistic of its scale; z²/s₀² for the Gaussian).
type scaleFamily struct {
	g func(z, s0 float64) float64
	// logMGF is ln E_s[e^{λ·g(Z; s₀)}] (+Inf where infinite) and lambdaMax
	// where it becomes infinite.
	logMGF    func(s, s0, lambda float64) float64
	lambdaMax func(s, s0 float64) float64
	mean      func(s, s0 float64) float64
}

// laplaceFamily: P(Z = z) = (1−q)/(1+q)·q^{|z|}, q = e^{−1/s}, so with
// θ = λ/s₀, E e^{θ|Z|} = (1−q)/(1+q)·(1 + qe^θ)/(1 − qe^θ) for qe^θ < 1,
// and E|Z| = 2q/((1−q)(1+q)).
var laplaceFamily = scaleFamily{
	g: func(z, s0 float64) float64 { return math.Abs(z) / s0 },
	logMGF: func(s, s0, lambda float64) float64 {
		th := lambda / s0
		if th >= 1/s {
			return math.Inf(1)
		}
		return math.Log(-math.Expm1(-1/s)) - math.Log1p(math.Exp(-1/s)) + math.Log1p(math.Exp(th-1/s)) - math.Log(-math.Expm1(th-1/s))
	},
	lambdaMax: func(s, s0 float64) float64 { return s0 / s },
	mean: func(s, s0 float64) float64 {
		q := math.Exp(-1 / s)
		return 2 * q / (-math.Expm1(-1/s) * (1 + q)) / s0
	},
}

// theta is Σ_{z∈Z} e^{−z²/(2v)}: summed for v ≤ 400², else √(2πv)
// (Poisson summation; the correction 2e^{−2π²v} underflows).
func theta(v float64) float64 {
	if v > 400*400 {
		return math.Sqrt(2 * math.Pi * v)
	}
	lim := math.Ceil(40*math.Sqrt(v) + 10)
	var s float64
	for z := -lim; z <= lim; z++ {
		s += math.Exp(-z * z / (2 * v))
	}
	return s
}

// gaussianFamily: the discrete Gaussian N_Z(0, s²): with g = Z²/s₀²,
// E e^{λg} = Θ(v′)/Θ(s²) with 1/v′ = 1/s² − 2λ/s₀², and E Z² = Σ z² p(z).
var gaussianFamily = scaleFamily{
	g: func(z, s0 float64) float64 { return z * z / (s0 * s0) },
	logMGF: func(s, s0, lambda float64) float64 {
		inv := 1/(s*s) - 2*lambda/(s0*s0)
		if inv <= 0 {
			return math.Inf(1)
		}
		if s > 400 && 1/inv > 400*400 {
			return 0.5 * math.Log(1/(inv*s*s))
		}
		return math.Log(theta(1/inv)) - math.Log(theta(s*s))
	},
	lambdaMax: func(s, s0 float64) float64 { return s0 * s0 / (2 * s * s) },
	mean: func(s, s0 float64) float64 {
		if s > 400 {
			return s * s / (s0 * s0)
		}
		lim := math.Ceil(40*s + 10)
		var m, z float64
		for y := -lim; y <= lim; y++ {
			p := math.Exp(-y * y / (2 * s * s))
			z += p
			m += y * y * p
		}
		return m / z / (s0 * s0)
	},
}

// chernoff bounds P(mean of n draws of g ≥ a) (upper) or ≤ a (lower)
// under scale s by exp(−n·sup_λ (λa − ln E e^{λg})), the supremum over
// λ > 0 (upper) or λ < 0 (lower) found by golden-section search of that
// concave function.
func chernoff(f scaleFamily, s, s0, a float64, n int, upper bool) float64 {
	obj := func(l float64) float64 { return l*a - f.logMGF(s, s0, l) }
	lo, hi := -200/a, 0.0
	if upper {
		lo, hi = 0, f.lambdaMax(s, s0)*(1-1e-12)
	}
	const g = 0.6180339887498949
	x1, x2 := hi-g*(hi-lo), lo+g*(hi-lo)
	for i := 0; i < 300; i++ {
		if obj(x1) < obj(x2) {
			lo, x1 = x1, x2
			x2 = lo + g*(hi-lo)
		} else {
			hi, x2 = x1, x1
			x1 = hi - g*(hi-lo)
		}
	}
	rate := math.Max(0, math.Max(obj(x1), obj(x2)))
	return math.Exp(-float64(n) * rate)
}

// scaleTest decides whether draws z of the noise (in grid units) follow
// the family's law of scale s0, by the mean T of g(z; s0): it accepts T in
// [lo, hi], lo = √(μ₀·μ½) and hi = √(μ₀·μ₂), the geometric midpoints
// between the mean μ₀ at s0 and the means at half and double the scale.
//
// False rejection ≤ P₀(T ≥ hi) + P₀(T ≤ lo), and the miss probabilities at
// half and double the scale, P½(T ≥ lo) and P₂(T ≤ hi), are all bounded by
// Chernoff's inequality with the exact moment generating function of the
// law; the test fails as underpowered unless each is below 10⁻⁶. No noise
// gives T = 0 < lo: always rejected.
func scaleTest(t *testing.T, name string, f scaleFamily, s0 float64, z []float64) {
	t.Helper()
	n := len(z)
	mu0, muHalf, muDouble := f.mean(s0, s0), f.mean(s0/2, s0), f.mean(2*s0, s0)
	lo, hi := math.Sqrt(mu0*muHalf), math.Sqrt(mu0*muDouble)
	falseReject := chernoff(f, s0, s0, hi, n, true) + chernoff(f, s0, s0, lo, n, false)
	missHalf := chernoff(f, s0/2, s0, lo, n, true)
	missDouble := chernoff(f, 2*s0, s0, hi, n, false)
	if falseReject > 1e-6 || missHalf > 1e-6 || missDouble > 1e-6 {
		t.Fatalf("%s: underpowered with %d draws: false rejection ≤ %.2g, miss at ½× ≤ %.2g, at 2× ≤ %.2g", name, n, falseReject, missHalf, missDouble)
	}
	var sum float64
	for _, x := range z {
		sum += f.g(x, s0)
	}
	tStat := sum / float64(n)
	t.Logf("%s: %d draws, mean statistic %.4f (expected %.4f, accept [%.4f, %.4f]); false rejection ≤ %.2g, miss at ½× ≤ %.2g, at 2× ≤ %.2g",
		name, n, tStat, mu0, lo, hi, falseReject, missHalf, missDouble)
	if tStat < lo || tStat > hi {
		t.Errorf("%s: the noise does not have the calibrated scale %.6g (grid steps): mean statistic %.4f outside [%.4f, %.4f] (expected %.4f)", name, s0, tStat, lo, hi, mu0)
	}
}
