// Privacy-critical: needs DP review.

package release

import (
	"errors"
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
// The grid has up to 2¹⁴ buckets (rewrite/quantile.go): selecting among
// 2¹⁴ candidates costs only ln(2¹⁴)/ln(2⁸) = 1.75× a 256-bucket grid in the
// worst-case rank bound (HalfWidth), and empty buckets between two values
// share one utility (accuracy: BENCHMARKS.md).
//
// # Groups
//
// A unit changes at most L0 = Plan.MaxGroupsPerUnit groups, so each group
// is answered with ε_g = ε_m/L0, where ε_m is the measure's share of the
// query's ε (splitBudget, partition.go: quantiles take no δ): by basic
// composition the measure is ε_m-DP.

// groupEpsilon is ε_g, the ε of each group's release of a quantile
// measure whose share is ε_m (see "Groups" above): ε_m/L0, rounded down so
// that ε_g·L0 never exceeds ε_m.
func groupEpsilon(epsilon float64, l0 int) float64 {
	div := float64(l0)
	return shrinkToFit(epsilon/div, func(ge float64) bool { return ge*div <= epsilon })
}

// quantileMech releases one quantile measure. It implements noise.Mechanism
// so that the ledger, NOTICE and EXPLAIN see it like the other measures,
// but its values are released by releaseGroup, never by AddNoise.
type quantileMech struct {
	measure dpplan.Measure
	q       *dpplan.Quantile
	epsilon float64 // ε_m, the measure's share
	// groupEpsilon is ε_m/L0, the ε of each group's release.
	groupEpsilon float64
	exp          *noise.Exponential
}

// newQuantileMech builds the mechanism of a quantile measure.
func (r *Releaser) newQuantileMech(ms dpplan.Measure, rows, l0 int, epsilon float64) (*quantileMech, error) {
	q := ms.Quantile
	if q == nil || q.Buckets < 1 || q.Rows != rows || !(q.Width > 0) {
		return nil, pgerr.New(pgerr.InternalError, "internal error: malformed quantile measure")
	}
	// Cross-check the planner: one unit moves at most rows values of a
	// group (max_rows_per_unit; join.go).
	if ms.LInf < float64(rows) {
		return nil, pgerr.New(pgerr.InternalError, "internal error: plan sensitivity below the policy bound")
	}
	if l0 < 1 {
		return nil, pgerr.New(pgerr.InternalError, "internal error: max groups per unit below 1")
	}
	ge := groupEpsilon(epsilon, l0)
	m := &quantileMech{measure: ms, q: q, epsilon: epsilon, groupEpsilon: ge}
	var err error
	if m.exp, err = noise.NewExponential(noise.ExponentialParams{Epsilon: ge, Sensitivity: ms.LInf, Rand: r.testOnlyRand}); err != nil {
		return nil, withScaleHint(pgerr.New(pgerr.InvalidParameterValue, "cannot calibrate the exponential mechanism of a quantile for this query: %v", err).
			WithHint("use a larger dp.epsilon (e.g. SET dp.epsilon = 0.1)"), err)
	}
	return m, nil
}

// The noise.Mechanism view of a quantile measure.

func (m *quantileMech) Name() string             { return "exponential" }
func (m *quantileMech) Epsilon() float64         { return m.epsilon }
func (m *quantileMech) Delta() float64           { return 0 } // pure ε-DP
func (m *quantileMech) NoiseMultiplier() float64 { return 0 } // composed by (ε, δ) alone
func (m *quantileMech) Granularity() *big.Rat    { return nil }
func (m *quantileMech) AddNoise(*big.Rat) (*big.Rat, error) {
	return nil, errors.New("release: a quantile is released by releaseGroup")
}

// HalfWidth returns the rank error bound at the given confidence: the
// selected bucket is within this many ranks of the target (plus the
// bucket's own width in value), whatever the data.
func (m *quantileMech) HalfWidth(confidence float64) float64 {
	return noise.ExponentialUtilityBound(m.groupEpsilon, m.measure.LInf, m.q.Buckets, confidence)
}

// releaseGroup releases the quantile of one group from the SQL's summary,
// the histogram "j:c,…" (nil when the group has no values).
func (m *quantileMech) releaseGroup(raw *string) (*big.Rat, error) {
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

// deltaUsers counts the measures that take a share of δ: under the
// Gaussian mechanism every measure but the quantiles, which are pure ε-DP
// (the exponential mechanism); none under the Laplace mechanism.
func deltaUsers(mechanism string, ms []dpplan.Measure) int {
	if mechanism != policy.MechanismGaussian {
		return 0
	}
	n := 0
	for _, m := range ms {
		if m.Kind != dpplan.MeasureQuantile {
			n++
		}
	}
	return n
}
