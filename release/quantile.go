// Privacy-critical: needs DP review.

package release

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/policy"
)

// This file releases quantile measures (dpplan.MeasureQuantile:
// percentile_cont, percentile_disc, MIN, MAX).
//
// # The exponential method (Smith 2011; McSherry–Talwar 2007)
//
// The emitted SQL returns, per group, the counts h_0 … h_{B−1} of the
// group's clamped, contribution-bounded values in the B buckets of a fixed
// grid over the policy bounds [lower, upper] (rewrite/quantile.go). With
// n = Σ h_j, c_<j = Σ_{i<j} h_i and c_≤j = c_<j + h_j, the quantile's target
// ranks are an interval [a, b] of order statistics (1-based):
//
//	percentile_disc(q), MIN (q = 0), MAX (q = 1):  a = b = max(1, ⌈q·n⌉)
//	percentile_cont(q):  a = ⌊h⌋, b = ⌈h⌉ with h = 1 + q·(n − 1)
//
// (PostgreSQL's definitions: percentile_disc returns the first value whose
// position in the ordering is ≥ q·n, percentile_cont interpolates between
// the order statistics ⌊h⌋ and ⌈h⌉.) Bucket j holds the ranks
// c_<j + 1 … c_≤j; its utility is minus the distance from that rank range
// to the target:
//
//	u_j = −max(0, c_<j + 1 − b, a − c_≤j)
//
// which is 0 exactly for the buckets that hold a target order statistic
// (for percentile_cont also the empty buckets between x_a and x_b, where
// the interpolated value may lie), i.e. −|rank − q·n| minimised over the
// ranks a value in the bucket can have. Adding or removing one value
// changes n by 1, so q·n and h by at most 1 and a, b by at most 1 each, and
// each c by at most 1 in the same direction as a and b or not at all; each
// term of the max therefore moves by at most 1: Δu ≤ 1 per value, and
// Δu ≤ R = max_rows_per_unit per unit (Measure.LInf).
//
// A bucket is selected by the exponential mechanism with that utility
// (noise.Exponential, exact sampling), which is ε_g-DP for each group. The
// grid is fixed by the policy, so releasing a point of the selected bucket
// is post-processing: we release its midpoint (for int and date columns
// the midpoint of the bucket's integers, rounded down for percentile_disc,
// MIN and MAX so the answer has the column's type). With equal-width
// buckets this is Smith's (2011, "Privacy-preserving statistical estimation
// with optimal convergence rates", STOC) exponential-mechanism quantile
// with its continuous output replaced by the bucket midpoint.
//
// # The grid
//
// The grid has up to 2¹⁴ buckets (rewrite/quantile.go). With 256 buckets
// the released midpoint of the right bucket was off by half a bucket even
// without noise (9.1 on the demo's median cost, ~600 on PUMS incomes).
// Selecting among 2¹⁴ candidates costs only ln(2¹⁴)/ln(2⁸) = 1.75× in the
// worst-case rank bound (HalfWidth), and in practice nothing: empty
// buckets between two values share one utility, so the selection is
// Smith's continuous exponential mechanism at a finer resolution. It was
// also more accurate than selecting in two stages of ε/2 (256 coarse
// buckets, then 64 fine ones), which halved the ε of each stage and lost
// badly where the rank noise dominates (PUMS median income at ε 0.1:
// BENCHMARKS.md). Exact sampling stays fast: the rejection sampler's
// trials stop at the first failed Bernoulli(e⁻¹) (noise/exponential.go).
//
// # Groups
//
// A unit changes at most L0 = Plan.MaxGroupsPerUnit groups, so each group
// is answered with ε_g = ε_m/L0, where ε_m is the measure's share of the
// query's ε: by basic composition the measure is ε_m-DP.
//
// The exponential method can do better when the plan bounds the change
// summed over groups (Measure.L1 = Λ, elastic joins, dpplan/join_l1.go):
// if a group's utilities move by at most d_g (in ranks), its release with
// parameter ε_g and utility sensitivity Δu = L∞ changes each outcome's
// probability by a factor at most e^{ε_g·d_g/L∞} (numerator and
// normaliser each by e^{ε_g·d_g/(2L∞)}, as in McSherry–Talwar's proof),
// and the groups' releases are independent, so the privacy loss of the
// measure is at most Σ_g ε_g·d_g/L∞ ≤ ε_g·Λ/L∞. With ε_g = ε_m·L∞/Λ (and
// never below ε_m/L0) the measure is ε_m-DP. For an elastic join Λ = L∞ =
// E: every group gets the whole ε_m. The smooth and ptr methods have no
// such linear loss and keep ε_m/L0 and δ_m/L0 per group.
//
// # Splitting the query's budget (the rule for every plan)
//
// ε: every measure of the plan (each count, sum, sum of squares and each
// quantile) gets an equal share ε/m, rounded down (splitDown), so the m
// releases compose to at most ε.
//
// δ: split equally, rounded down, over the measures that use δ: every
// non-quantile measure under the Gaussian mechanism, and every quantile
// answered by the smooth or ptr method (deltaUsers). Exponential-method
// quantiles and Laplace measures are pure ε-DP and take none. Within a
// measure each of the L0 groups a unit can touch gets ε_m/L0 and δ_m/L0.
//
// # The smooth method (Nissim, Raskhodnikova, Smith 2007)
//
// The SQL returns f (PostgreSQL's quantile of the bounded values) and the
// β-smooth upper bound S of its local sensitivity (pgemit/quantile_sql.go)
// for β = ε_g/(2 ln(2/δ_g)); noise.SmoothLaplace adds discrete Laplace
// noise of scale 2S/ε_g: (ε_g, δ_g)-DP per group. S is never disclosed (the
// NOTICE gives the worst case).
//
// # The ptr method (Dwork and Lei 2009)
//
// The SQL returns f and D, the number of units that must change before the
// local sensitivity can exceed the proposed bound b. The test adds discrete
// Laplace noise of scale 2/ε_g to D and answers only if the result exceeds
// ln(1/δ_g)/(ε_g/2) (noise.PTRThreshold); the answer is f plus Laplace noise
// of scale b/(ε_g/2). A refused group is released as NULL (an ungrouped
// query is refused with an error); either way the charge stands.
//
// The released value is clamped to [lower, upper] and, for percentile_disc,
// MIN and MAX of int and date columns, rounded to an integer
// (post-processing).

// groupEpsilon is ε_g, the ε of each group's release of a quantile
// measure whose share is ε_m (see "Groups" above): ε_m/L0, or, for the
// exponential method of a measure with a direct L1 bound Λ (an elastic
// join, dpplan/join_l1.go), ε_m·L∞/min(Λ, L0·L∞). Rounded down so that
// ε_g times the divisor never exceeds ε_m.
func groupEpsilon(epsilon float64, l0 int, ms dpplan.Measure) float64 {
	div := float64(l0)
	if ms.Quantile.Method == dpplan.QuantileExponential && ms.L1 > 0 && ms.LInf > 0 {
		div = math.Max(1, math.Min(div, ms.L1/ms.LInf))
	}
	return shrinkToFit(epsilon/div, func(ge float64) bool { return ge*div <= epsilon })
}

// quantileMech releases one quantile measure. It implements noise.Mechanism
// so that the ledger, NOTICE and EXPLAIN see it like the other measures,
// but its values are released by releaseGroup, never by AddNoise.
type quantileMech struct {
	measure dpplan.Measure
	q       *dpplan.Quantile
	epsilon float64 // ε_m, the measure's share
	delta   float64 // δ_m (smooth and ptr), else 0
	// groupEpsilon is ε_m/L0, the ε of each group's release.
	groupEpsilon float64
	exp          *noise.Exponential   // exponential method
	smooth       *noise.SmoothLaplace // smooth method
	// ptr method: the test's noise (ε_g/2, sensitivity 1), its threshold,
	// and the release's noise (ε_g/2, sensitivity Bound).
	ptrTest      noise.Mechanism
	ptrThreshold float64
	ptrRelease   noise.Mechanism
}

// newQuantileMech builds the mechanism of a quantile measure.
func (r *Releaser) newQuantileMech(ms dpplan.Measure, rows, l0 int, epsilon, delta float64) (*quantileMech, error) {
	q := ms.Quantile
	if q == nil || q.Buckets < 1 || q.Rows != rows || !(q.Width > 0) {
		return nil, pgerr.New(pgerr.InternalError, "internal error: malformed quantile measure")
	}
	// Cross-check the planner: one unit moves at most rows values of a
	// group (max_rows_per_unit, or E for an elastic join; join.go).
	if ms.LInf < float64(rows) {
		return nil, pgerr.New(pgerr.InternalError, "internal error: plan sensitivity below the policy bound")
	}
	if l0 < 1 {
		return nil, pgerr.New(pgerr.InternalError, "internal error: max groups per unit below 1")
	}
	ge := groupEpsilon(epsilon, l0, ms)
	m := &quantileMech{measure: ms, q: q, epsilon: epsilon, groupEpsilon: ge}
	calibrationErr := func(err error) error {
		return withScaleHint(pgerr.New(pgerr.InvalidParameterValue, "cannot calibrate the %s quantile method for this query: %v", q.Method, err).
			WithHint("use a larger dp.epsilon (e.g. SET dp.epsilon = 0.1)"), err)
	}
	var err error
	switch q.Method {
	case dpplan.QuantileExponential:
		m.exp, err = noise.NewExponential(noise.ExponentialParams{Epsilon: ge, Sensitivity: ms.LInf, Rand: r.testOnlyRand})
	case dpplan.QuantileSmooth, dpplan.QuantilePTR:
		if !(delta > 0 && delta < 1) {
			return nil, pgerr.New(pgerr.InvalidParameterValue, "quantile method %s needs 0 < dp.delta < 1", q.Method).
				WithHint("SET dp.delta = 1e-7, or SET dp.quantile_method = exponential (pure ε)")
		}
		m.delta = delta
		dg := shrinkToFit(delta/float64(l0), func(dg float64) bool { return dg*float64(l0) <= delta })
		if q.Method == dpplan.QuantileSmooth {
			// The SQL's S must be β-smooth for the β of this release:
			// calibrate sets the plan's β to m.smooth.Beta() and emits
			// the SQL for it (calibrate.go, withSmoothness).
			m.smooth, err = noise.NewSmoothLaplace(noise.SmoothParams{Epsilon: ge, Delta: dg, Range: ms.Upper - ms.Lower, Rand: r.testOnlyRand})
		} else {
			// Test and release share ε_g equally: (ε_g/2 + ε_g/2, δ_g).
			half := ge / 2
			if !(q.Bound > 0 && q.Bound < ms.Upper-ms.Lower) {
				return nil, pgerr.New(pgerr.InternalError, "internal error: malformed PTR bound")
			}
			m.ptrThreshold, err = noise.PTRThreshold(half, dg)
			if err == nil {
				m.ptrTest, err = noise.NewLaplace(noise.Params{Epsilon: half, Sensitivity: 1, Integer: true, Rand: r.testOnlyRand})
			}
			if err == nil {
				m.ptrRelease, err = noise.NewLaplace(noise.Params{Epsilon: half, Sensitivity: q.Bound, Rand: r.testOnlyRand})
			}
		}
	default:
		return nil, pgerr.New(pgerr.InternalError, "internal error: unknown quantile method")
	}
	if err != nil {
		return nil, calibrationErr(err)
	}
	return m, nil
}

// The noise.Mechanism view of a quantile measure.

func (m *quantileMech) Name() string {
	switch m.q.Method {
	case dpplan.QuantileSmooth:
		return "smooth_sensitivity"
	case dpplan.QuantilePTR:
		return "propose_test_release"
	}
	return "exponential"
}
func (m *quantileMech) Epsilon() float64         { return m.epsilon }
func (m *quantileMech) Delta() float64           { return m.delta }
func (m *quantileMech) NoiseMultiplier() float64 { return 0 } // composed by (ε, δ) alone
func (m *quantileMech) Granularity() *big.Rat    { return nil }
func (m *quantileMech) AddNoise(*big.Rat) (*big.Rat, error) {
	return nil, errors.New("release: a quantile is released by releaseGroup")
}

// HalfWidth returns, for the exponential method, the rank error bound at
// the given confidence: the selected bucket is within this many ranks of
// the target (plus the bucket's own width in value), whatever the data.
// For ptr it is the release noise's half-width (when the test passes);
// for smooth the worst case, noise of scale 2·(upper − lower)/ε_g (the
// actual scale depends on the data and is not disclosed).
func (m *quantileMech) HalfWidth(confidence float64) float64 {
	switch m.q.Method {
	case dpplan.QuantilePTR:
		return m.ptrRelease.HalfWidth(confidence)
	case dpplan.QuantileSmooth:
		return 2 * (m.measure.Upper - m.measure.Lower) / m.groupEpsilon * math.Log(1/(1-confidence))
	}
	return noise.ExponentialUtilityBound(m.groupEpsilon, m.measure.LInf, m.q.Buckets, confidence)
}

// releaseGroup releases the quantile of one group from the SQL's summary:
// the histogram "j:c,…" (exponential; nil when the group has no values),
// or "f;S" (smooth) or "f;D" (ptr). A nil value with a nil error is a
// group refused by the PTR test.
func (m *quantileMech) releaseGroup(raw *string) (*big.Rat, error) {
	if m.q.Method != dpplan.QuantileExponential {
		return m.releaseOrderStat(raw)
	}
	counts, err := parseHistogram(raw, m.q.Buckets)
	if err != nil {
		return nil, pgerr.New(pgerr.InternalError, "internal error: upstream returned a malformed histogram").Wrap(err)
	}
	j, err := m.exp.Select(quantileUtilities(counts, m.q.Q, m.q.Cont))
	if err != nil {
		return nil, pgerr.New(pgerr.InternalError, "internal error while adding noise").Wrap(err)
	}
	return bucketValue(m.measure, j), nil
}

// parseHistogram reads "j:c,j:c,…" (strictly increasing j in [0, buckets),
// c ≥ 1) into a dense count vector.
func parseHistogram(raw *string, buckets int) ([]int64, error) {
	counts := make([]int64, buckets)
	if raw == nil || *raw == "" {
		return counts, nil
	}
	prev := -1
	for _, part := range strings.Split(*raw, ",") {
		js, cs, ok := strings.Cut(part, ":")
		if !ok {
			return nil, errors.New("histogram entry without ':'")
		}
		j, err1 := strconv.Atoi(js)
		c, err2 := strconv.ParseInt(cs, 10, 64)
		if err1 != nil || err2 != nil || j <= prev || j >= buckets || c < 1 {
			return nil, errors.New("histogram entry out of range")
		}
		counts[j] = c
		prev = j
	}
	return counts, nil
}

// quantileUtilities returns u_j = −max(0, c_<j + 1 − b, a − c_≤j) for every
// bucket (see the file comment), as exact integers.
func quantileUtilities(counts []int64, q float64, cont bool) []*big.Rat {
	var n int64
	for _, c := range counts {
		n += c
	}
	a, b := targetRanks(n, q, cont)
	out := make([]*big.Rat, len(counts))
	// Buckets with the same distance share one (read-only) value: most of
	// the 2¹⁴ buckets are empty and share a few, and a big.Rat per bucket
	// was most of a grouped quantile's CPU (issue 27).
	shared := map[int64]*big.Rat{}
	var below int64 // c_<j
	for j, c := range counts {
		atOrBelow := below + c
		d := max(0, below+1-b, a-atOrBelow)
		u, ok := shared[d]
		if !ok {
			u = big.NewRat(-d, 1)
			shared[d] = u
		}
		out[j] = u
		below = atOrBelow
	}
	return out
}

// targetRanks returns the interval [a, b] of 1-based order statistics a
// quantile is computed from, by PostgreSQL's definitions, in exact
// arithmetic. q is taken as the shortest decimal that rounds to the
// float64 (the analyst's literal, e.g. 1/10 for 0.1), so that q·n agrees
// with PostgreSQL's float8 product for literal fractions (0.1·10 is 1 in
// both; the dyadic value of the float64 0.1 would give 1.0000000000000000555
// and the next rank). The sensitivity argument holds for every real q.
func targetRanks(n int64, q float64, cont bool) (int64, int64) {
	qr, ok := new(big.Rat).SetString(strconv.FormatFloat(q, 'g', -1, 64))
	if !ok {
		qr = new(big.Rat).SetFloat64(q)
	}
	if cont {
		// h = 1 + q(n − 1)
		h := new(big.Rat).Mul(qr, big.NewRat(n-1, 1))
		h.Add(h, big.NewRat(1, 1))
		return floorRatInt(h), ceilRatInt(h)
	}
	m := ceilRatInt(new(big.Rat).Mul(qr, big.NewRat(n, 1)))
	return max(m, 1), max(m, 1)
}

func floorRatInt(x *big.Rat) int64 {
	q := new(big.Int).Div(x.Num(), x.Denom()) // Euclidean: floor for a positive denominator
	return q.Int64()
}

func ceilRatInt(x *big.Rat) int64 {
	neg := new(big.Rat).Neg(x)
	return -floorRatInt(neg)
}

// releaseOrderStat releases a group by the smooth or ptr method from
// "f;S" or "f;D" (pgemit/quantile_sql.go).
func (m *quantileMech) releaseOrderStat(raw *string) (*big.Rat, error) {
	bad := pgerr.New(pgerr.InternalError, "internal error: upstream returned a malformed quantile summary")
	if raw == nil {
		// A group with no contributing unit: the summary of the empty
		// group, as the SQL computes it for n = 0 (sentinels only).
		e := emptySummary(m.measure)
		raw = &e
	}
	fs, ss, ok := strings.Cut(*raw, ";")
	f, ok1 := new(big.Rat).SetString(fs)
	stat, ok2 := new(big.Rat).SetString(ss)
	if !ok || !ok1 || !ok2 || stat.Sign() < 0 {
		return nil, bad
	}
	var v *big.Rat
	var err error
	if m.q.Method == dpplan.QuantileSmooth {
		v, err = m.smooth.Release(f, stat)
	} else {
		if !stat.IsInt() {
			return nil, bad
		}
		// Test: D + Z > T, Z discrete Laplace of scale 2/ε_g.
		var dt *big.Rat
		dt, err = m.ptrTest.AddNoise(stat)
		if err == nil {
			if d, _ := dt.Float64(); !(d > m.ptrThreshold) {
				return nil, nil // refused; the charge stands
			}
			v, err = m.ptrRelease.AddNoise(f)
		}
	}
	if err != nil {
		return nil, pgerr.New(pgerr.InternalError, "internal error while adding noise").Wrap(err)
	}
	// Clamping to the policy bounds is post-processing.
	lo, hi := new(big.Rat).SetFloat64(m.measure.Lower), new(big.Rat).SetFloat64(m.measure.Upper)
	if v.Cmp(lo) < 0 {
		v = lo
	}
	if v.Cmp(hi) > 0 {
		v = hi
	}
	if !m.q.Cont && (m.q.Type == policy.TypeInt || m.q.Type == policy.TypeDate) {
		// percentile_disc, MIN and MAX of an int or date column: the
		// nearest integer (post-processing).
		v = new(big.Rat).SetInt64(floorRatInt(new(big.Rat).Add(v, big.NewRat(1, 2))))
	}
	return v, nil
}

// deltaUsers counts the measures that take a share of δ.
func deltaUsers(mechanism string, ms []dpplan.Measure) int {
	n := 0
	for _, m := range ms {
		switch {
		case m.Kind == dpplan.MeasureQuantile:
			if m.Quantile != nil && m.Quantile.Method != dpplan.QuantileExponential {
				n++
			}
		case mechanism == policy.MechanismGaussian:
			n++
		}
	}
	return n
}

// ptrRefused is the error of an ungrouped query whose PTR test refused (a
// grouped query gets NULL in the refused groups instead). The outcome of
// the test is itself differentially private, so it may be reported.
func ptrRefused() error {
	return pgerr.New("22000", "propose-test-release refused to answer: the data are not stable enough for the proposed sensitivity bound").
		WithDetail("The privacy budget for this query stays charged.").
		WithHint("SET dp.quantile_method = exponential, which needs no stability test, or use a larger dp.epsilon")
}

// emptySummary is the SQL's "f;S" or "f;D" for a group with n = 0: every
// order statistic is a sentinel (x_i = lower for i < 1, upper for i > 0),
// so f = upper for percentile_disc, MIN and MAX (a = 1), and for
// percentile_cont with h = 1 − q, f = x_⌊h⌋ + (h − ⌊h⌋)(x_⌈h⌉ − x_⌊h⌋);
// U_k = upper − lower for every k, so S = upper − lower and D = 0.
func emptySummary(ms dpplan.Measure) string {
	q := ms.Quantile
	lower, upper := new(big.Rat).SetFloat64(ms.Lower), new(big.Rat).SetFloat64(ms.Upper)
	f := new(big.Rat).Set(upper)
	if q.Cont {
		a, b := targetRanks(0, q.Q, true)
		x := func(i int64) *big.Rat {
			if i < 1 {
				return lower
			}
			return upper
		}
		qr, _ := new(big.Rat).SetString(strconv.FormatFloat(q.Q, 'g', -1, 64))
		h := new(big.Rat).Sub(big.NewRat(1, 1), qr)
		d := new(big.Rat).Sub(x(b), x(a))
		d.Mul(d, h.Sub(h, big.NewRat(a, 1)))
		f = d.Add(d, x(a))
	}
	stat := "0"
	if q.Method == dpplan.QuantileSmooth {
		stat = new(big.Rat).Sub(upper, lower).RatString()
	}
	return f.RatString() + ";" + stat
}
