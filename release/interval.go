package release

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Confidence intervals of estimators built from several noisy releases
// (issue 16, "tight intervals"): AVG = c + S̃/C̃, VAR = (Q̃ − S̃²/C̃)/C̃ (or
// /(C̃ − 1)), STDDEV = √VAR, and a SUM derived as S̃_c + c·C̃.
//
// The noise of every release is known exactly (noise.Scaled: discrete
// Laplace or discrete Gaussian of a known scale on a known grid), but no
// closed form gives the quantiles of a ratio of noisy values. So the 95%
// half-width is a parametric bootstrap: the released S̃, C̃, Q̃ stand in for
// the true values, the estimator is recomputed under intervalSims fresh
// draws of the same noises, and the half-width is the 95% quantile of its
// distance from the released estimate (plus the real-mode rounding of the
// inputs, at most half a grid step each, carried through the first-order
// sensitivity of the estimator). It replaces union bounds with worst-case
// weights (h_s + M·h_c)/C̃ that were 3–12× wider than the errors seen.
//
// This is post-processing of released values and public parameters: the
// draws come from a fixed-seed PRNG, not crypto/rand, and touch no data.
// The statement covers the estimator's noise around the bounded value
// (clamped, contribution-bounded data), like every half-width of the NOTICE.
//
// Where the plug-in is poor — a group whose noisy count is near 0 — the
// simulated spread is wide and the half-width is capped at what the
// clamped estimator can move (the output's range), as before.

// intervalSims is the number of simulated releases per group: the 95%
// quantile of n draws has a relative standard error of about
// √(0.05·0.95/n)/(q·f(q)), under 2% for the distributions here.
const intervalSims = 4000

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

// rounding is the real-mode rounding bound of the input: half a step.
func (d noiseDraw) rounding() float64 {
	if d.step == 1 || d.scale == 0 {
		return 0
	}
	return d.step / 2
}

// simHalfWidth returns the 95% quantile of |est(x + e) − est(x)| over
// intervalSims draws of e, plus the rounding of the inputs through the
// estimator's first-order sensitivity (a finite difference). est returns
// NaN where the estimator is undefined (a sample variance with C̃ < 2):
// such draws count as an error of limit. The result is at most limit.
func simHalfWidth(seed uint64, x []float64, draws []noiseDraw, est func([]float64) float64, limit float64) float64 {
	errs, ok := simErrors(seed, x, draws, est, limit)
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
	bias := errs[intervalSims/2]
	for i := range errs {
		errs[i] = math.Abs(errs[i] - bias)
	}
	slices.Sort(errs)
	h := errs[int(math.Ceil(0.95*intervalSims))-1] + math.Abs(bias)
	return math.Min(h+inputRounding(x, draws, est), limit)
}

// simHalfWidthTails is simHalfWidth for an estimator clamped at a bound
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
func simHalfWidthTails(seed uint64, x []float64, draws []noiseDraw, est func([]float64) float64, limit float64) float64 {
	errs, ok := simErrors(seed, x, draws, est, limit)
	if !ok {
		return limit
	}
	k := int(math.Ceil(0.025*intervalSims)) - 1
	tails := math.Max(-errs[k], errs[intervalSims-1-k])
	abs := make([]float64, len(errs))
	for i, e := range errs {
		abs[i] = math.Abs(e)
	}
	slices.Sort(abs)
	h := (tails + abs[int(math.Ceil(0.95*intervalSims))-1]) / 2
	return math.Min(math.Max(h, 0)+inputRounding(x, draws, est), limit)
}

// simErrors returns est(x + e) − est(x) for intervalSims draws of e,
// sorted; ok is false when est(x) is undefined.
func simErrors(seed uint64, x []float64, draws []noiseDraw, est func([]float64) float64, limit float64) ([]float64, bool) {
	base := est(x)
	if math.IsNaN(base) {
		return nil, false
	}
	r := rand.New(rand.NewPCG(seed, 0x6470_696e_7476_6c))
	errs := make([]float64, intervalSims)
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
func centreOf(plan *rewrite.Plan, o rewrite.Output) float64 {
	if c := centre(plan, o); c != nil {
		f, _ := c.Float64()
		return f
	}
	return 0
}

// avgHalfWidthSim is the 95% half-width of AVG = clamp(c + S̃/max(C̃, 1)),
// per group (see the file comment).
func avgHalfWidthSim(plan *rewrite.Plan, idx int, o rewrite.Output, ms []measurement, noisy [][]float64) []float64 {
	c := centreOf(plan, o)
	draws := []noiseDraw{drawOf(ms[o.Measure].mech), drawOf(ms[o.CountMeasure].mech)}
	// The estimator as released is clamped into [lower, upper], and a
	// true mean lies in it: the simulation moves the released mean b by
	// the simulated change of the unclamped ratio and clamps the result,
	// so near a bound it sees the errors the clamp allows (a mean of 267
	// in [0, 20000] under noise of ±3000 cannot err by more than 267
	// downwards; the unclamped simulation stated 1.3× the empirical
	// error of that group). Clamping around the unclamped plug-in
	// instead covered 90% there: a plug-in far below the bound makes
	// every simulated release 0.
	raw := func(v []float64) float64 { return c + v[0]/math.Max(v[1], 1) }
	out := make([]float64, len(noisy))
	for g, row := range noisy {
		x := []float64{row[o.Measure], row[o.CountMeasure]}
		r0 := raw(x)
		b := clampF(r0, o.Lower, o.Upper)
		est := func(v []float64) float64 { return clampF(b+raw(v)-r0, o.Lower, o.Upper) }
		out[g] = simHalfWidthTails(groupSeed(idx, g), x, draws, est, o.Upper-o.Lower)
	}
	return out
}

// varHalfWidthSim is the 95% half-width of VAR_POP / VAR_SAMP, computed as
// release's variance does but unclamped (see avgHalfWidthSim), per group. For STDDEV the variance's interval [v − h, v + h] is
// mapped through the square root (an interval of the variance is one of
// its root): the half-width is the larger distance from the released √v
// to √max(v − h, 0) and √(v + h) where that interval reaches 0, and the
// root simulated directly where it does not.
func varHalfWidthSim(idx int, o rewrite.Output, ms []measurement, noisy [][]float64) []float64 {
	draws := []noiseDraw{drawOf(ms[o.SumSqMeasure].mech), drawOf(ms[o.Measure].mech), drawOf(ms[o.CountMeasure].mech)}
	r := (o.Upper - o.Lower) / 2
	bound := func(n float64) (d, hi float64, ok bool) {
		if o.Sample {
			if n < 2 {
				return 0, 0, false
			}
			return n - 1, r * r * n / (n - 1), true
		}
		return math.Max(n, 1), r * r, true
	}
	est := func(v []float64) float64 {
		d, _, ok := bound(v[2])
		if !ok {
			return math.NaN()
		}
		return (v[0] - v[1]*v[1]/math.Max(v[2], 1)) / d
	}
	limit := r * r
	if o.Sample {
		limit *= 2
	}
	out := make([]float64, len(noisy))
	for g, row := range noisy {
		x := []float64{row[o.SumSqMeasure], row[o.Measure], row[o.CountMeasure]}
		h := simHalfWidth(groupSeed(idx, g), x, draws, est, limit)
		if o.Sqrt {
			_, hi, ok := bound(x[2])
			if !ok {
				h = math.Sqrt(limit)
			} else {
				v := clampF(est(x), 0, hi)
				sd := math.Sqrt(v)
				if v-h > 0 {
					// The variance's interval stays above 0: simulate
					// the root itself, whose errors are nearly
					// symmetric there (the larger side of the mapped
					// interval covered 98.5% of STDDEV(cost) on the
					// demo).
					root := func(y []float64) float64 { return math.Sqrt(math.Max(est(y), 0)) }
					h = simHalfWidth(groupSeed(idx, g), x, draws, root, math.Sqrt(limit))
				} else {
					h = math.Max(sd-math.Sqrt(math.Max(v-h, 0)), math.Sqrt(v+h)-sd)
				}
				h = math.Min(h, math.Sqrt(limit))
			}
		}
		out[g] = h
	}
	return out
}

// floatRows converts the noisy measures to float64 for the simulations.
func floatRows(noisy [][]*big.Rat) [][]float64 {
	out := make([][]float64, len(noisy))
	for g, row := range noisy {
		out[g] = make([]float64, len(row))
		for i, v := range row {
			if v != nil {
				out[g][i], _ = v.Float64()
			}
		}
	}
	return out
}
