// Privacy-critical: needs DP review.

package rewrite

import (
	"math"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
)

// The smooth and ptr quantile methods (SET dp.quantile_method), see also
// release/quantile.go and noise/smooth.go.
//
// # Order statistics and their stability
//
// Let x_1 ≤ … ≤ x_n be the group's clamped, bounded values, with the
// sentinels x_i = lower for i < 1 and x_i = upper for i > n. The released
// function f is PostgreSQL's quantile, x_a for percentile_disc/MIN/MAX
// (a = b = max(1, ⌈q·n⌉)) and x_a + (h − a)(x_b − x_a) for percentile_cont
// (h = 1 + q(n−1), a = ⌊h⌋, b = ⌈h⌉); so f(x) ∈ [x_a, x_b].
//
// After d added or removed values (A added, D removed), the order
// statistics of y satisfy y_i ∈ [x_{i−A}, x_{i+D}], and a, b move by at most
// A up and D down, so f(y) ∈ [x_{a−d}, x_{b+d}]. One unit adds or removes at
// most R = max_rows_per_unit values of a group, hence, with
//
//	U_k(x) = x_{b+R(k+1)} − x_{a−R(k+1)}    (k ≥ 0)
//
// the local sensitivity at distance k units (the largest local sensitivity
// of a database k units away) is at most U_k(x), and U_k(y) ≤ U_{k+1}(x) for
// neighbours y of x. U is computed in SQL from the sorted values.
//
// Smooth sensitivity (Nissim, Raskhodnikova, Smith 2007, Def. 2.1 and
// Prop. 2.2-style construction): S(x) = max_{k≥0} w_k·U_k(x), with
// w_k = max(e^{−βk}, e^{−100}). S ≥ U_0 ≥ LS, and S(y) ≤ max_k w_k U_{k+1}(x)
// ≤ e^β·S(x) because w_k ≤ e^β·w_{k+1}: S is a β-smooth upper bound. (The
// floor e^{−100} keeps the SQL's exp away from underflow and only makes S
// larger.) The maximum runs over k = 0 … ⌈n/R⌉, after which both ends are
// sentinels and U_k = upper − lower is constant.
//
// Propose-Test-Release (Dwork and Lei 2009): for the proposed bound b the
// SQL computes D(x) = min{k ≥ 0 : U_k(x) > b}. If U_k(x) ≤ b for k < D(x)
// then every database within D(x) − 1 units has local sensitivity ≤ b, and
// D(y) ≥ D(x) − 1 for neighbours (from U_k(y) ≤ U_{k+1}(x)): D has
// sensitivity 1. D(x) ≥ 1 implies LS(x) ≤ U_0(x) ≤ b. Since b < upper −
// lower, U_k > b once both ends are sentinels, so D ≤ ⌈n/R⌉.
//
// The SQL returns "f;S" (smooth) or "f;D" (ptr) per group, as text.

// ptrBoundFraction is the ptr method's proposed local-sensitivity bound as
// a fraction of upper − lower: the noise of a release that passes the test
// is Laplace of scale b/ε₂. A data-independent proposal; the test checks
// it against the data.
const ptrBoundFraction = 1.0 / 64

// WithQuantiles returns the plan with its quantile measures answered by the
// given method (QuantileExponential, QuantileSmooth or QuantilePTR), for a
// query run with the given ε, δ and noise mechanism, with the SQL emitted
// again. Plans without quantiles are returned as they are. The smooth and
// ptr methods need 0 < δ < 1.
//
// Their parameters follow the budget split of release/quantile.go: ε is
// split equally over the plan's m measures and δ equally over the measures
// that use δ (smooth and ptr quantiles, and every other measure under the
// Gaussian mechanism), with partition selection's shares added for a plan
// with private keys (release/partition.go); each group of a measure gets
// 1/L0 of its share. The
// smoothing parameter is β = ε_g/(2 ln(2/δ_g)), lowered by a relative 10⁻⁹
// so that it never exceeds what release computes (release checks).
func WithQuantiles(p *Plan, method string, epsilon, delta float64, mechanism string) (*Plan, error) {
	switch method {
	case "":
		method = DefaultQuantileMethod
	case QuantileExponential, QuantileSmooth, QuantilePTR, QuantileSample:
	default:
		return nil, pgerr.New(pgerr.InvalidParameterValue, "unknown quantile method %q", method).
			WithHint("SET dp.quantile_method = exponential, smooth, ptr or sample")
	}
	n, nDelta := 0, 0
	for _, m := range p.Measures {
		if m.Kind == MeasureQuantile {
			n++
			if method != QuantileExponential {
				nDelta++
			}
		} else if mechanism == policy.MechanismGaussian {
			nDelta++
		}
	}
	if n == 0 {
		return p, nil
	}
	if method == QuantileSample {
		// Sample-and-aggregate quantiles are planned by the builder
		// (Options.QuantileMethod, quantile_expr.go), never re-emitted.
		return nil, pgerr.New(pgerr.InternalError, "internal error: plan not built for quantile method sample")
	}
	nEpsilon := len(p.Measures)
	if p.PrivateGroups() {
		// Partition selection (release/partition.go): its noisy unit count
		// takes one more ε share, its threshold a δ share, and under the
		// Gaussian mechanism the count's noise another.
		nEpsilon++
		nDelta++
		if mechanism == policy.MechanismGaussian {
			nDelta++
		}
	}
	if method != QuantileExponential && !(delta > 0 && delta < 1) {
		return nil, pgerr.New(pgerr.InvalidParameterValue, "quantile method %s needs 0 < dp.delta < 1", method).
			WithHint("SET dp.delta = 1e-7, or SET dp.quantile_method = exponential (pure ε)")
	}
	t, where := dpplan.SourceOf(p)
	if t == nil {
		return nil, pgerr.New(pgerr.InternalError, "internal error: plan cannot be re-emitted")
	}
	if !(epsilon > 0) || math.IsInf(epsilon, 0) {
		return nil, pgerr.New(pgerr.InvalidParameterValue, "dp.epsilon must be a positive number").WithHint("SET dp.epsilon = 0.1")
	}
	c := *p
	c.Measures = append([]Measure(nil), p.Measures...)
	l0 := float64(max(1, p.MaxGroupsPerUnit))
	for i, m := range c.Measures {
		if m.Kind != MeasureQuantile {
			continue
		}
		q := *m.Quantile
		q.Method, q.Beta, q.Bound = method, 0, 0
		switch method {
		case QuantileSmooth:
			eg := epsilon / float64(nEpsilon) / l0
			dg := delta / float64(nDelta) / l0
			q.Beta = eg / (2 * math.Log(2/dg)) * (1 - 1e-9)
		case QuantilePTR:
			q.Bound = (m.Upper - m.Lower) * ptrBoundFraction
		}
		c.Measures[i].Quantile = &q
	}
	c.SQL = pgemit.SQL(t, &c, where)
	c.Fingerprint = fingerprint(&c)
	if err := checkSQLSize(&c); err != nil {
		return nil, err
	}
	return &c, nil
}
