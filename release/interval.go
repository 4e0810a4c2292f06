package release

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/noise"
)

// Confidence intervals of estimators built from several noisy releases
// (issue 16, "tight intervals"): AVG = c + S̃/C̃, VAR = (Q̃ − S̃²/C̃)/C̃ (or
// /(C̃ − 1)), STDDEV = √VAR, and a SUM derived as S̃_c + c·C̃.
//
// The noise of every release is known exactly (noise.Scaled: discrete
// Laplace or discrete Gaussian of a known scale on a known grid). The
// released S̃, C̃, Q̃ stand in for the true values (plug-in), and the 95%
// half-width is that of the estimator's error under fresh draws of the
// same noises, plus the real-mode rounding of the inputs (at most half a
// grid step each) carried through the estimator's first-order sensitivity.
// It replaces union bounds with worst-case weights (h_s + M·h_c)/C̃ that
// were 3–12× wider than the errors seen.
//
// This is post-processing of released values and public parameters: it
// touches no data, and the simulations below draw from a fixed-seed PRNG,
// not crypto/rand. The statement covers the estimator's noise around the
// bounded value (clamped, contribution-bounded data), like every
// half-width of the NOTICE.
//
// # Cost (issue 27, item 6)
//
// A grouped answer has up to maxGroups groups, and each of its AVG, VAR
// and STDDEV outputs a half-width per group. A simulation of 4,000 draws
// per group cost 5.5 s of proxy CPU for 12,789 groups; so the work is
// bounded by public quantities (the plan's number of groups and outputs),
// whatever the data:
//
//   - where the group's noisy count is far from 0 relative to its noise
//     (C̃ − n_min ≥ analyticCountSDs·σ_C, n_min the count below which the
//     estimator is floored or NULL) and the estimator is nearly linear over
//     ±1σ of each noise (curvature test, stencil), the half-width is
//     computed in closed form from the first-order (delta-method)
//     expansion: O(1) per group;
//   - the other groups are simulated as before (parametric bootstrap),
//     with intervalSims draws each at most, minIntervalSims at least, out
//     of one budget of intervalDrawBudget noise draws per answer; when the
//     budget cannot give every such group its floor, the groups whose
//     count is nearest the analytic regime are simulated first, and the
//     rest are stated with a bound that holds for every truth (below).
//
// Every half-width is also capped by the distance from the released value
// to the farther end of the range the true value lies in (trivialBound):
// an interval that reaches both ends covers the bounded truth whatever the
// noise, so the cap never lowers coverage, and it is the statement given
// to a group the budget does not reach.
//
// # The delta method
//
// For an estimator f of the released inputs x = θ + e (e the independent
// noises, standard deviations σ_i), f(x) − f(θ) ≈ Σ_i ∂_i f·e_i + ½ Σ_i
// ∂_ii f·e_i² + … (the delta method: Casella & Berger, Statistical
// Inference, 2nd ed., §5.5.4; Oehlert, "A note on the delta method", Am.
// Stat. 46 (1992) 27–29), with the derivatives taken at the plug-in x as
// the bootstrap does. The linear term is a combination Σ a_i·Z_i of
// standardized noises, a_i = |∂_i f|·σ_i; the half-width is its 95%
// quantile of |·| (comboQuantiles: exact for Gaussian noise, from the
// closed-form distribution of a sum of Laplace variables for Laplace
// noise) plus the second-order mean ½ Σ ∂_ii f·σ_i², as the bootstrap adds
// its median error. The derivatives are central differences at ±σ_i, so
// that f is the very estimator the simulation runs (floors included).
//
// For a ratio, Marsaglia ("Ratios of normal variables", J. Stat. Softw.
// 16(4), 2006) finds (a + x)/(b + y), x, y standard normal, approximately
// normal once the denominator's mean exceeds 4 standard deviations; the
// neglected terms of the expansion are of relative size σ_C/C̃ (the ratio's
// cross term e_s·e_c/C̃², its curvature in C̃, and for VAR the S̃² term,
// since with equal shares of ε σ_S² = σ_Q·σ_C). At analyticCountSDs = 10
// they are at most about 0.2 of the first-order term at ±1σ, and against
// the simulation it replaces the closed form came out at most 5% narrower,
// and up to 15% wider where a mean sits at a bound and the count's noise
// dominates (the ratio's skew, which the clamp would cut, is not in the
// first-order term), over 400 releases per case at 10–15σ_C; within 2% from
// 30σ_C (TestIntervals_AnalyticMatchesSimulation). Coverage of the truth
// was the same as the simulation's in every case (0.93–0.98).
//
// STDDEV's root is in closed form where the variance is above about 5
// standard deviations of its noise (analyticRootCurvature); below, and
// while the variance's interval stays above 0, the root is simulated, or
// beyond the budget stated as the variance's interval mapped through the
// root (it holds whenever that interval does, at up to 1.4× the simulated
// width).

// intervalSims is the number of simulated releases of a simulated group at
// most: the 95% quantile of n draws has a relative standard error of about
// √(0.05·0.95/n)/(q·f(q)), under 2% for the distributions here at 4,000.
const intervalSims = 4000

// minIntervalSims is the number of draws below which a group is not
// simulated (relative standard error about 4.6% for a Laplace tail).
const minIntervalSims = 1000

// intervalDrawBudget bounds the noise draws (draws × the estimator's
// inputs) the simulations of one answer may spend, whatever its number of
// groups and outputs: about 0.1 s of CPU (BENCHMARKS.md, "Proxy CPU per
// answer"). An answer with up to 131 AVG groups (43 STDDEV) to simulate
// still simulates each with intervalSims draws, as before issue 27.
const intervalDrawBudget = 1 << 20

// analyticCountSDs (k) and analyticCurvature (η): a group's half-width is
// computed in closed form when its noisy count C̃ satisfies C̃ − n_min ≥ k·σ_C
// and the second differences of the estimator at ±σ_i add up to at most
// η times the standard deviation of its linear term (see the file comment).
// For AVG and VAR that sum is about 2σ_C/C̃ and 2.4σ_C/C̃ (with equal shares
// of ε), so η = 0.5 only stops inputs whose noises are out of the usual
// proportion; the square root of STDDEV bends near 0, and η = 0.1 keeps
// its closed form to variances above about 5 standard deviations of their
// noise (√(v ± σ) has second difference 0.1 of its first there).
const (
	analyticCountSDs      = 10
	analyticCurvature     = 0.5
	analyticRootCurvature = 0.1
)

// noiseDraw draws one release's noise, in value units.
type noiseDraw struct {
	gaussian    bool
	scale, step float64 // noise.Scaled; scale 0: no noise (not Scaled)
}

func drawOf(m noise.Mechanism) noiseDraw {
	s, ok := m.(noise.Scaled)
	if !ok {
		return noiseDraw{}
	}
	scale, step := s.NoiseScale()
	return noiseDraw{gaussian: m.Name() == "gaussian", scale: scale, step: step}
}

// draw returns step·Z: Z discrete Gaussian (σ = scale; rounding a normal,
// accurate for σ ≳ 1) or exactly discrete Laplace (the difference of two
// geometric variables ⌊scale·E⌋ with E exponential).
func (d noiseDraw) draw(r *rand.Rand) float64 {
	switch {
	case d.scale == 0:
		return 0
	case d.gaussian:
		return d.step * math.Round(d.scale*r.NormFloat64())
	}
	return d.step * (math.Floor(d.scale*r.ExpFloat64()) - math.Floor(d.scale*r.ExpFloat64()))
}

// sd is the noise's standard deviation in value units. Discrete Laplace of
// scale t (P(Z = z) ∝ q^|z|, q = e^{−1/t}) has variance 2q/(1 − q)²
// (the difference of two independent geometric variables of variance
// q/(1 − q)² each); the discrete Gaussian of parameter σ has variance at
// most σ² (Canonne, Kamath & Steinke, "The discrete Gaussian for
// differential privacy", NeurIPS 2020, Prop. 19), within 10⁻⁹ relative of
// it for σ ≥ 1.
func (d noiseDraw) sd() float64 {
	switch {
	case d.scale == 0:
		return 0
	case d.gaussian:
		return d.step * d.scale
	}
	q := math.Exp(-1 / d.scale)
	return d.step * math.Sqrt(2*q) / -math.Expm1(-1/d.scale)
}

// rounding is the real-mode rounding bound of the input: half a step.
func (d noiseDraw) rounding() float64 {
	if d.step == 1 || d.scale == 0 {
		return 0
	}
	return d.step / 2
}

// simHalfWidth is simHalfWidthN with intervalSims draws (sumHalfWidth:
// once per output, not per group).
func simHalfWidth(seed uint64, x []float64, draws []noiseDraw, est func([]float64) float64, limit float64) float64 {
	return simHalfWidthN(seed, intervalSims, x, draws, est, limit)
}

// simHalfWidthN returns the 95% quantile of |est(x + e) − est(x)| over n
// draws of e, plus the rounding of the inputs through the estimator's
// first-order sensitivity (a finite difference). est returns NaN where
// the estimator is undefined (a sample variance with C̃ < 2): such draws
// count as an error of limit. The result is at most limit.
func simHalfWidthN(seed uint64, n int, x []float64, draws []noiseDraw, est func([]float64) float64, limit float64) float64 {
	errs, ok := simErrors(seed, n, x, draws, est, limit)
	if !ok {
		return limit
	}
	// A ratio of noisy values is biased (E[S̃²] = S² + Var e_s): the
	// simulated errors' median estimates the bias (the mean is not
	// robust: a draw whose count lands near 0 can be huge), which the
	// half-width adds to the 95% quantile of the centred errors, so the
	// interval around the released value still covers the truth. (The
	// uncentred 95% quantile of |e| is narrower but covered 88–90% of
	// variances in TestIntervals_CoverAndAreTight.)
	bias := errs[n/2]
	for i := range errs {
		errs[i] = math.Abs(errs[i] - bias)
	}
	slices.Sort(errs)
	h := errs[int(math.Ceil(0.95*float64(n)))-1] + math.Abs(bias)
	return math.Min(h+inputRounding(x, draws, est), limit)
}

// simHalfWidthTails is simHalfWidthN for an estimator clamped at a bound
// (AVG into [lower, upper]), where the errors towards the bound are cut
// short and no symmetric ±h is right for every truth:
//
//   - the 95% quantile of |e| spends the whole 5% on the side away from
//     the bound (1.645σ there) and misses a truth further from the bound
//     than the released value: 92.3% coverage for emergency on the demo
//     (mean 579 in [0, 20000], ±450);
//   - equal tails (each side's 97.5% quantile) keep 1.96σ away from the
//     bound and cover 97.6–98% where the mean is within about σ of it,
//     at 1.31–1.37× the empirical 95% error (pediatrics, orthopedics).
//
// The half-width is the mean of the two: 93.5–97.7% coverage and at most
// 1.16× the empirical error on the demo (1,000 releases per query,
// BENCHMARKS.md). Away from the bounds the two agree (symmetric errors).
// clampedHalfWidth is the same statement in closed form.
func simHalfWidthTails(seed uint64, n int, x []float64, draws []noiseDraw, est func([]float64) float64, limit float64) float64 {
	errs, ok := simErrors(seed, n, x, draws, est, limit)
	if !ok {
		return limit
	}
	k := int(math.Ceil(0.025*float64(n))) - 1
	tails := math.Max(-errs[k], errs[n-1-k])
	for i, e := range errs {
		errs[i] = math.Abs(e)
	}
	slices.Sort(errs)
	h := (tails + errs[int(math.Ceil(0.95*float64(n)))-1]) / 2
	return math.Min(math.Max(h, 0)+inputRounding(x, draws, est), limit)
}

// simErrors returns est(x + e) − est(x) for n draws of e, sorted; ok is
// false when est(x) is undefined.
func simErrors(seed uint64, n int, x []float64, draws []noiseDraw, est func([]float64) float64, limit float64) ([]float64, bool) {
	base := est(x)
	if math.IsNaN(base) {
		return nil, false
	}
	r := rand.New(rand.NewPCG(seed, 0x6470_696e_7476_6c))
	errs := make([]float64, n)
	y := make([]float64, len(x))
	for i := range errs {
		for k := range x {
			y[k] = x[k] + draws[k].draw(r)
		}
		e := est(y) - base
		if math.IsNaN(e) {
			e = limit
		}
		errs[i] = e
	}
	slices.Sort(errs)
	return errs, true
}

// inputRounding is the real-mode rounding of the inputs (half a grid step
// each) carried through est's first-order sensitivity.
func inputRounding(x []float64, draws []noiseDraw, est func([]float64) float64) float64 {
	base := est(x)
	y := make([]float64, len(x))
	var h float64
	for k := range x {
		if rd := draws[k].rounding(); rd > 0 {
			copy(y, x)
			y[k] += rd
			h += math.Abs(est(y) - base)
		}
	}
	return h
}

// groupSeed makes each group's simulation its own, reproducibly.
func groupSeed(output, group int) uint64 { return uint64(output)<<32 | uint64(group) }

func clampF(x, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, x)) }

// centreOf is the centre of an output's normalized sum, 0 for a plain sum.
func centreOf(plan *dpplan.Plan, o dpplan.Output) float64 {
	if c := centre(plan, o); c != nil {
		f, _ := c.Float64()
		return f
	}
	return 0
}

// trivialBound is the largest distance from a released value b in
// [lo, hi] to a truth in [lo, hi]: a half-width that covers every truth.
func trivialBound(b, lo, hi float64) float64 { return math.Max(b-lo, hi-b) }

// linearized is the first-order (delta-method) view of an estimator's
// error at the released inputs (see the file comment).
type linearized struct {
	// coef[i] = |∂_i f|·σ_i, the standard deviation noise i adds to the
	// linear term, and sd = √Σ coef_i², the term's standard deviation.
	coef [3]float64
	sd   float64
	// bias = ½ Σ ∂_ii f·σ_i², the second-order mean error; curv =
	// Σ |∂_ii f|·σ_i², the size of the neglected quadratic part at ±1σ.
	bias, curv float64
	// rounding is Σ |∂_i f|·(half a grid step), as inputRounding.
	rounding float64
}

// noiseSD is a noise's standard deviation and rounding bound (noiseDraw's
// sd and rounding), computed once per output.
type noiseSD struct{ sd, rounding float64 }

// stencil is an estimator evaluated at x and at x ± σ_i e_i: the central
// differences of the linearization.
type stencil struct {
	f0     float64
	fp, fm [3]float64
	n      int
}

// evaluate returns f's stencil at x (y is scratch of len(x) ≤ 3); ok is
// false where f is undefined there (NaN or infinite), which leaves the
// group to the simulation.
func evaluate(x, y []float64, noise []noiseSD, f func([]float64) float64) (st stencil, ok bool) {
	st.f0, st.n = f(x), len(x)
	if !finite(st.f0) {
		return st, false
	}
	copy(y, x)
	for i := range x {
		if s := noise[i].sd; s > 0 {
			y[i] = x[i] + s
			st.fp[i] = f(y)
			y[i] = x[i] - s
			st.fm[i] = f(y)
			y[i] = x[i]
			if !finite(st.fp[i]) || !finite(st.fm[i]) {
				return st, false
			}
		}
	}
	return st, true
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// apply is the stencil of h∘f, from f's.
func (st stencil) apply(h func(float64) float64) stencil {
	out := stencil{f0: h(st.f0), n: st.n}
	for i := range st.n {
		out.fp[i], out.fm[i] = h(st.fp[i]), h(st.fm[i])
	}
	return out
}

// linear is the linearization the stencil gives: ∂_i f·σ_i ≈ (f(x + σ_i)
// − f(x − σ_i))/2 and ∂_ii f·σ_i² ≈ f(x + σ_i) − 2f(x) + f(x − σ_i).
func (st stencil) linear(noise []noiseSD) linearized {
	var l linearized
	var ss float64
	for i := range st.n {
		s := noise[i].sd
		if s == 0 {
			continue
		}
		a := math.Abs(st.fp[i]-st.fm[i]) / 2
		d2 := st.fp[i] - 2*st.f0 + st.fm[i]
		l.coef[i] = a
		ss += a * a
		l.bias += d2 / 2
		l.curv += math.Abs(d2)
		l.rounding += a / s * noise[i].rounding
	}
	l.sd = math.Sqrt(ss)
	return l
}

// nearlyLinear is the curvature test of the analytic regime.
func (l linearized) nearlyLinear(eta float64) bool { return l.curv <= eta*l.sd }

// The quantiles of Y = Σ a_i·Z_i / √Σ a_i², Z_i independent with mean 0
// and variance 1: Gaussian noise makes Y standard normal; for Laplace
// noise Y is a sum of independent Laplace variables of scales
// α_i = a_i/√(2·Σ a_j²), whose characteristic function Π_i 1/(1 + α_i²ω²)
// splits into partial fractions Σ_i w_i/(1 + α_i²ω²) with
// w_i = Π_{j≠i} α_i²/(α_i² − α_j²) (distinct α_i): Y's law is the signed
// mixture Σ_i w_i·Laplace(α_i), so P(Y > t) = ½ Σ_i w_i·e^{−t/α_i} for
// t ≥ 0 (the sum of two: Kotz, Kozubowski & Podgórski, The Laplace
// Distribution and Generalizations, 2001, §2.3). Y is symmetric, so the
// 95% quantile of |Y| is its 97.5% quantile.
const (
	normalQ975 = 1.959963984540054
	normalQ95  = 1.6448536269514722
)

// comboGrid is the resolution of the Laplace quantile table: entries at
// r1 = a₂/a₁ and r2 = a₃/a₂ in {0, 1/16, …, 1} for a₁ ≥ a₂ ≥ a₃, read by
// bilinear interpolation (within 10⁻³ relative of the closed form:
// TestComboQuantiles).
const comboGrid = 16

var (
	comboOnce  sync.Once
	comboTable [comboGrid + 1][comboGrid + 1][2]float64 // q975, q95
)

// laplaceComboTail is P(Y > t), t ≥ 0, for Y a sum of independent
// Laplace variables of distinct scales alphas (> 0).
func laplaceComboTail(alphas []float64, t float64) float64 {
	var p float64
	for i, ai := range alphas {
		w := 1.0
		for j, aj := range alphas {
			if j != i {
				w *= ai * ai / (ai*ai - aj*aj)
			}
		}
		p += w * math.Exp(-t/ai)
	}
	return p / 2
}

// laplaceComboQuantile is the t with P(Y > t) = p (bisection; the tail
// is decreasing and every unit-variance Y here has t < 4 for p ≥ 0.025).
func laplaceComboQuantile(alphas []float64, p float64) float64 {
	lo, hi := 0.0, 4.0
	for range 60 {
		mid := (lo + hi) / 2
		if laplaceComboTail(alphas, mid) > p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// comboScales are the Laplace scales of unit-variance Y with coefficient
// ratios r1, r2 (a₁ = 1, a₂ = r1, a₃ = r1·r2). Equal scales (ratios of 1)
// are moved apart by 10⁻⁴ relative, where the partial fractions need
// distinct poles: Y's quantiles are symmetric functions of the scales, so
// at equal scales their first-order change is 0 and the error is of order
// 10⁻⁸.
func comboScales(r1, r2 float64) []float64 {
	const d = 1e-4
	if r1 == 1 {
		r1 = 1 - d
	}
	if r2 == 1 {
		r2 = 1 - 2*d
	}
	coef := []float64{1, r1, r1 * r2}
	norm := math.Sqrt(2 * (1 + r1*r1 + r1*r1*r2*r2))
	var alphas []float64
	for _, c := range coef {
		if c > 0 {
			alphas = append(alphas, c/norm)
		}
	}
	return alphas
}

func buildComboTable() {
	for i := range comboGrid + 1 {
		for j := range comboGrid + 1 {
			alphas := comboScales(float64(i)/comboGrid, float64(j)/comboGrid)
			comboTable[i][j] = [2]float64{laplaceComboQuantile(alphas, 0.025), laplaceComboQuantile(alphas, 0.05)}
		}
	}
}

// comboQuantiles returns the 97.5% and 95% quantiles of Y for the
// coefficients coef (≥ 0, up to 3 of them).
func comboQuantiles(gaussian bool, coef [3]float64) (q975, q95 float64) {
	a := coef
	// Sort descending (three elements).
	if a[1] > a[0] {
		a[0], a[1] = a[1], a[0]
	}
	if a[2] > a[1] {
		a[1], a[2] = a[2], a[1]
	}
	if a[1] > a[0] {
		a[0], a[1] = a[1], a[0]
	}
	if gaussian || a[0] == 0 {
		return normalQ975, normalQ95
	}
	comboOnce.Do(buildComboTable)
	r1 := a[1] / a[0]
	r2 := 0.0
	if a[1] > 0 {
		r2 = a[2] / a[1]
	}
	x, y := r1*comboGrid, r2*comboGrid
	i, j := min(int(x), comboGrid-1), min(int(y), comboGrid-1)
	fx, fy := x-float64(i), y-float64(j)
	var q [2]float64
	for k := range q {
		q[k] = (1-fx)*(1-fy)*comboTable[i][j][k] + fx*(1-fy)*comboTable[i+1][j][k] +
			(1-fx)*fy*comboTable[i][j+1][k] + fx*fy*comboTable[i+1][j+1][k]
	}
	return q[0], q[1]
}

// symmetricHalfWidth is the closed-form counterpart of simHalfWidthN: the
// 95% quantile of the centred linear term plus the second-order bias and
// the inputs' rounding.
func symmetricHalfWidth(gaussian bool, l linearized) float64 {
	q975, _ := comboQuantiles(gaussian, l.coef)
	return l.sd*q975 + math.Abs(l.bias) + l.rounding
}

// clampedHalfWidth is the closed-form counterpart of simHalfWidthTails for
// an estimator released as clamp(b + E) with E = bias + sd·Y (Y as in
// comboQuantiles), dlo and dhi the distances from b to the bounds. The
// quantiles of the monotone clamp(b + E) − b are the clamped quantiles of
// E, so with u₉₇.₅ = sd·q975 + |bias| and u₉₅ = sd·q95 + |bias|:
//
//   - equal tails: max(min(dlo, u₉₇.₅), min(dhi, u₉₇.₅));
//   - the 95% quantile of |clamp(b + E) − b|, with near ≤ far the two
//     distances: u₉₇.₅ while it is below near; beyond it one side is cut
//     at the bound and the other needs its one-sided 95% quantile, so
//     max(near, u₉₅), at most far, where every error is within reach.
//
// The half-width is their mean, plus the inputs' rounding. (Adding |bias|
// to both sides, rather than shifting E, is conservative; the bias is at
// most of order σ_C/C̃ ≤ 1/10 of sd in the analytic regime.)
func clampedHalfWidth(gaussian bool, l linearized, dlo, dhi float64) float64 {
	q975, q95 := comboQuantiles(gaussian, l.coef)
	u975 := l.sd*q975 + math.Abs(l.bias)
	u95 := l.sd*q95 + math.Abs(l.bias)
	tails := math.Max(math.Min(dlo, u975), math.Min(dhi, u975))
	near, far := math.Min(dlo, dhi), math.Max(dlo, dhi)
	abs := u975
	if u975 >= near {
		abs = math.Min(math.Max(near, u95), far)
	}
	return (tails+abs)/2 + l.rounding
}

// ratioOutput is one AVG, VAR or STDDEV output of an answer, with what
// its half-widths need.
type ratioOutput struct {
	idx      int // its index in Plan.Outputs (the simulations' seed)
	o        dpplan.Output
	gaussian bool
	draws    []noiseDraw
	noise    []noiseSD
	cols     []int   // the measures in the estimator's input order
	minCount float64 // n_min: the count below which the estimator is floored (1) or NULL (2)
	countSD  float64 // σ_C
	centre   float64 // AVG: the centre c of a normalized sum
	limit    float64 // the cap of the half-width: the output's range
	x, y     []float64
}

func newRatioOutput(plan *dpplan.Plan, idx int, o dpplan.Output, ms []measurement) *ratioOutput {
	r := &ratioOutput{idx: idx, o: o, minCount: 1}
	if o.Kind == dpplan.OutputAvg {
		r.cols = []int{o.Measure, o.CountMeasure}
		r.centre = centreOf(plan, o)
		r.limit = o.Upper - o.Lower
	} else {
		r.cols = []int{o.SumSqMeasure, o.Measure, o.CountMeasure}
		rr := (o.Upper - o.Lower) / 2
		r.limit = rr * rr
		if o.Sample {
			r.limit *= 2
			r.minCount = 2
		}
	}
	for _, c := range r.cols {
		d := drawOf(ms[c].mech)
		r.draws = append(r.draws, d)
		r.noise = append(r.noise, noiseSD{d.sd(), d.rounding()})
		r.gaussian = r.gaussian || d.gaussian
	}
	r.countSD = r.noise[len(r.noise)-1].sd
	r.x = make([]float64, len(r.cols))
	r.y = make([]float64, len(r.cols))
	return r
}

// load reads group g's noisy inputs into r.x.
func (r *ratioOutput) load(row []float64) []float64 {
	for i, c := range r.cols {
		r.x[i] = row[c]
	}
	return r.x
}

// countOK is the count condition of the analytic regime.
func (r *ratioOutput) countOK(x []float64) bool {
	return x[len(x)-1]-r.minCount >= analyticCountSDs*r.countSD
}

// priority orders the groups that are simulated when the budget cannot
// reach them all: the count's distance above n_min in quarters of σ_C
// (the groups nearest the analytic regime first: those with hardly any
// count get about trivialBound from the simulation anyway), and root
// (STDDEV whose variance is in closed form) above every count.
func (r *ratioOutput) priority(x []float64, root bool) int {
	if root {
		return rootPriority
	}
	if r.countSD == 0 {
		return rootPriority - 1
	}
	p := (x[len(x)-1] - r.minCount) / r.countSD * 4
	return int(clampF(math.Floor(p), -1, rootPriority-2)) + 1
}

// rootPriority is the priority of the roots of STDDEV, the highest: 0 …
// rootPriority−1 are counts in quarters of σ_C below the analytic regime.
const rootPriority = 4*analyticCountSDs + 1

// rawAvg is AVG before the clamp: c + S̃/max(C̃, 1).
func (r *ratioOutput) rawAvg(v []float64) float64 { return r.centre + v[0]/math.Max(v[1], 1) }

// varEst is VAR before the clamp, NaN for VAR_SAMP below 2.
func (r *ratioOutput) varEst(v []float64) float64 {
	d := math.Max(v[2], 1)
	if r.o.Sample {
		if v[2] < 2 {
			return math.NaN()
		}
		d = v[2] - 1
	}
	return (v[0] - v[1]*v[1]/math.Max(v[2], 1)) / d
}

// varHi is the released variance's upper clamp (post.go's variance).
func (r *ratioOutput) varHi(n float64) float64 {
	rr := (r.o.Upper - r.o.Lower) / 2
	if r.o.Sample {
		return rr * rr * n / (n - 1)
	}
	return rr * rr
}

func (r *ratioOutput) rootEst(v []float64) float64 { return rootOf(r.varEst(v)) }

// groupState is one group's half-width before the simulations: h, and
// whether (and how) it asks for one.
type groupState struct {
	h    float64
	sim  bool // the closed form does not apply: simulate, else keep h (an honest fallback)
	root bool // STDDEV whose variance is in closed form but whose root is not: simulate the root only
	hv   float64
	prio int
	cost int // noise draws per simulated draw
}

// analytic classifies a group (x its inputs) and returns its closed-form
// half-width, or the fallback stated if the simulation does not reach it.
func (r *ratioOutput) analytic(x []float64) groupState {
	if r.o.Kind == dpplan.OutputAvg {
		r0 := r.rawAvg(x)
		b := clampF(r0, r.o.Lower, r.o.Upper)
		triv := trivialBound(b, r.o.Lower, r.o.Upper)
		if r.countOK(x) {
			if st, ok := evaluate(x, r.y, r.noise, r.rawAvg); ok {
				if l := st.linear(r.noise); l.nearlyLinear(analyticCurvature) {
					h := clampedHalfWidth(r.gaussian, l, b-r.o.Lower, r.o.Upper-b)
					return groupState{h: math.Min(math.Min(h, r.limit), triv)}
				}
			}
		}
		return groupState{h: triv, sim: true, prio: r.priority(x, false), cost: r.simCost(false)}
	}
	v0 := r.varEst(x)
	if math.IsNaN(v0) {
		// VAR_SAMP released as NULL: nothing to cover.
		if r.o.Sqrt {
			return groupState{h: math.Sqrt(r.limit)}
		}
		return groupState{h: r.limit}
	}
	v := clampF(v0, 0, r.varHi(x[2]))
	sim := groupState{sim: true, prio: r.priority(x, false), cost: r.simCost(false)}
	var l linearized
	st, ok := evaluate(x, r.y, r.noise, r.varEst)
	if ok {
		l = st.linear(r.noise)
	}
	if !r.countOK(x) || !ok || !l.nearlyLinear(analyticCurvature) {
		sim.h = trivialBound(v, 0, r.limit)
		if r.o.Sqrt {
			sim.h = trivialBound(math.Sqrt(v), 0, math.Sqrt(r.limit))
		}
		return sim
	}
	hv := math.Min(symmetricHalfWidth(r.gaussian, l), r.limit)
	if !r.o.Sqrt {
		return groupState{h: math.Min(hv, trivialBound(v, 0, r.limit))}
	}
	sd := math.Sqrt(v)
	triv := trivialBound(sd, 0, math.Sqrt(r.limit))
	mapped := math.Min(mapRoot(v, hv), triv)
	if v-hv <= 0 {
		return groupState{h: mapped}
	}
	// The root's stencil from the variance's (rootEst = √max(varEst, 0)).
	if lr := st.apply(rootOf).linear(r.noise); lr.nearlyLinear(analyticRootCurvature) {
		return groupState{h: math.Min(math.Min(symmetricHalfWidth(r.gaussian, lr), math.Sqrt(r.limit)), triv)}
	}
	return groupState{h: mapped, sim: true, root: true, hv: hv, prio: r.priority(x, true), cost: r.simCost(true)}
}

func rootOf(v float64) float64 { return math.Sqrt(math.Max(v, 0)) }

// simCost is the noise draws per simulated draw of a group: its inputs,
// twice for a STDDEV whose variance is simulated too (then perhaps its
// root); root: the root only.
func (r *ratioOutput) simCost(root bool) int {
	if r.o.Sqrt && !root {
		return 2 * len(r.cols)
	}
	return len(r.cols)
}

// mapRoot maps the variance's interval [v − h, v + h] through the square
// root (an interval of the variance is one of its root): the larger
// distance from √v to √max(v − h, 0) and √(v + h).
func mapRoot(v, h float64) float64 {
	sd := math.Sqrt(v)
	return math.Max(sd-math.Sqrt(math.Max(v-h, 0)), math.Sqrt(v+h)-sd)
}

// simulate is group g's half-width by simulation with n draws (st from
// analytic).
func (r *ratioOutput) simulate(g, n int, x []float64, st groupState) float64 {
	seed := groupSeed(r.idx, g)
	if r.o.Kind == dpplan.OutputAvg {
		// The estimator as released is clamped into [lower, upper], and a
		// true mean lies in it: the simulation moves the released mean b
		// by the simulated change of the unclamped ratio and clamps the
		// result, so near a bound it sees the errors the clamp allows (a
		// mean of 267 in [0, 20000] under noise of ±3000 cannot err by
		// more than 267 downwards; the unclamped simulation stated 1.3×
		// the empirical error of that group). Clamping around the
		// unclamped plug-in instead covered 90% there: a plug-in far
		// below the bound makes every simulated release 0.
		r0 := r.rawAvg(x)
		b := clampF(r0, r.o.Lower, r.o.Upper)
		est := func(v []float64) float64 { return clampF(b+r.rawAvg(v)-r0, r.o.Lower, r.o.Upper) }
		h := simHalfWidthTails(seed, n, x, r.draws, est, r.limit)
		return math.Min(h, trivialBound(b, r.o.Lower, r.o.Upper))
	}
	// VAR_POP / VAR_SAMP as release's variance computes it but unclamped.
	// For STDDEV the variance's interval [v − h, v + h] is mapped through
	// the square root where that interval reaches 0, and the root is
	// simulated directly where it does not: its errors are nearly
	// symmetric there (the larger side of the mapped interval covered
	// 98.5% of STDDEV(cost) on the demo).
	v := clampF(r.varEst(x), 0, r.varHi(x[2]))
	hv := st.hv
	if !st.root {
		hv = simHalfWidthN(seed, n, x, r.draws, r.varEst, r.limit)
	}
	if !r.o.Sqrt {
		return math.Min(hv, trivialBound(v, 0, r.limit))
	}
	sd := math.Sqrt(v)
	h := mapRoot(v, hv)
	if v-hv > 0 {
		h = simHalfWidthN(seed, n, x, r.draws, r.rootEst, math.Sqrt(r.limit))
	}
	return math.Min(math.Min(h, math.Sqrt(r.limit)), trivialBound(sd, 0, math.Sqrt(r.limit)))
}

// groupHalfWidths returns, for every AVG, VAR and STDDEV output of the
// plan (indexed as Plan.Outputs, nil for the others), the 95% half-width
// of each group (noisy: the released measures, one row per group), and the
// noise draws its simulations were allowed (at most intervalDrawBudget).
//
// Work: one pass over the groups at O(1) each (the closed forms, and the
// cost of the rest by priority), then the simulations, at most
// intervalDrawBudget noise draws in all (see the file comment). Which
// groups are simulated, and with how many draws, depends on the released
// counts only (post-processing); the seeds on the output and the group.
func groupHalfWidths(plan *dpplan.Plan, ms []measurement, noisy [][]float64) (out [][]float64, spent int) {
	out = make([][]float64, len(plan.Outputs))
	var outs []*ratioOutput
	for v, o := range plan.Outputs {
		if o.Kind == dpplan.OutputAvg || o.Kind == dpplan.OutputVariance {
			outs = append(outs, newRatioOutput(plan, v, o, ms))
			out[v] = make([]float64, len(noisy))
		}
	}
	// Pass 1: the closed forms (or the fallback), and the cost of the
	// simulations asked for, by priority. prio[k][g] is −1 where group g
	// of outs[k] needs none.
	const levels = rootPriority + 1
	var cost [levels]int
	total := 0
	prio := make([][]int8, len(outs))
	for k, r := range outs {
		prio[k] = make([]int8, len(noisy))
		for g, row := range noisy {
			st := r.analytic(r.load(row))
			out[r.idx][g] = st.h
			prio[k][g] = -1
			if st.sim {
				prio[k][g] = int8(st.prio)
				cost[st.prio] += st.cost
				total += st.cost
			}
		}
	}
	if total == 0 {
		return out, 0
	}
	// The draws per simulated group, and which groups get them: all of
	// them when the budget gives each its floor, else the highest
	// priorities (whole levels, then the first groups of the last level
	// in output and group order).
	n := min(intervalSims, intervalDrawBudget/total)
	cut, allow := 0, total // simulate prio > cut, and of prio == cut the first allow units of cost
	if n < minIntervalSims {
		n = minIntervalSims
		left := intervalDrawBudget / n
		for p := levels - 1; p >= 0; p-- {
			if cost[p] > left {
				cut, allow = p, left
				break
			}
			left -= cost[p]
		}
	}
	// Pass 2: the simulations.
	for k, r := range outs {
		for g, p := range prio[k] {
			if int(p) < cut {
				continue // also every group without a simulation (−1)
			}
			c := r.simCost(int(p) == rootPriority)
			if int(p) == cut {
				if allow < c {
					continue
				}
				allow -= c
			}
			x := r.load(noisy[g])
			out[r.idx][g] = r.simulate(g, n, x, r.analytic(x))
			spent += n * c
		}
	}
	return out, spent
}

// floatRows converts the noisy measures to float64 for the interval
// computations (one backing array for all groups).
func floatRows(noisy [][]*big.Rat) [][]float64 {
	out := make([][]float64, len(noisy))
	var cells []float64
	if len(noisy) > 0 {
		cells = make([]float64, len(noisy)*len(noisy[0]))
	}
	for g, row := range noisy {
		if len(row) > len(cells) {
			cells = make([]float64, len(row)) // rows of unequal length: never, but safe
		}
		out[g], cells = cells[:len(row):len(row)], cells[len(row):]
		for i, v := range row {
			if v != nil {
				out[g][i] = ratFloat(v)
			}
		}
	}
	return out
}

// ratFloat is x as the nearest float64, as big.Rat.Float64, without its
// arbitrary-precision division where numerator and denominator are exact
// in float64 (|n|, d < 2⁵³: the noisy values on their grid, mostly): the
// IEEE quotient of two exact operands is correctly rounded.
func ratFloat(x *big.Rat) float64 {
	const exact = 1 << 53
	if num, den := x.Num(), x.Denom(); num.IsInt64() && den.IsInt64() {
		if n, d := num.Int64(), den.Int64(); -exact < n && n < exact && d < exact {
			return float64(n) / float64(d)
		}
	}
	f, _ := x.Float64()
	return f
}
