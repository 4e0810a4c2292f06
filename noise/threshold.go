// Privacy-critical: needs DP review.

package noise

import (
	"errors"
	"fmt"
	"math"
	"math/big"
)

// Partition selection: a GROUP BY over keys with no public domain must not
// reveal that a key exists when only one unit has it. The release path
// computes, per partition, the number of distinct units (each unit counted
// in at most maxGroups partitions, once each), adds noise, and keeps the
// partition only if the noisy count reaches a threshold τ.
//
// Privacy (Wilson et al. 2020, "Differentially Private SQL with Bounded
// User Contribution", §3; Desfontaines, Voss, Gipson, Mandayam 2022,
// "Differentially private partition selection", PoPETs): let D and D′
// differ by one unit u, and S the partitions that only u populates (count 1
// in D, absent from D′), |S| ≤ maxGroups = L0. The noisy counts of the other
// partitions change by at most one each in at most L0 partitions: with
// Laplace noise of scale L0/ε (L1 sensitivity L0) they are ε-DP, with
// Gaussian noise calibrated to L2 sensitivity √L0 they are (ε, δ_noise)-DP.
// Every partition of S is released with probability p = P(1 + noise ≥ τ)
// independently; choosing τ with p ≤ δ_p = 1 − (1−δ)^{1/L0} bounds the
// probability that any of them is released by 1 − (1−δ_p)^{|S|} ≤ δ. On
// the complementary event the output is that of the other partitions, so
// the whole release is (ε, δ)-DP (Laplace) or (ε, δ_noise + δ)-DP
// (Gaussian): P[M(D) ∈ O] ≤ P[others(D) ∈ O] + δ ≤ e^ε P[M(D′) ∈ O] + δ,
// and conversely P[M(D′) ∈ O] ≤ min(1, e^ε P[M(D) ∈ O]/(1−δ)) ≤
// e^ε P[M(D) ∈ O] + δ.

// perPartitionDelta returns δ_p = 1 − (1−δ)^{1/L0}, computed as
// −expm1(log1p(−δ)/L0) to keep its precision for small δ.
func perPartitionDelta(delta float64, maxGroups int) float64 {
	return -math.Expm1(math.Log1p(-delta) / float64(maxGroups))
}

func checkThresholdArgs(delta float64, maxGroups int) error {
	if math.IsNaN(delta) || !(delta > 0 && delta < 1) {
		return errors.New("noise: partition selection needs a delta in (0, 1)")
	}
	if maxGroups < 1 {
		return errors.New("noise: max groups per unit must be ≥ 1")
	}
	return nil
}

// thresholdSafety shrinks δ_p by a relative 10⁻⁶ before the float
// computations below, so that rounding in them cannot put τ one grid step
// too low.
const thresholdSafety = 1 - 1e-6

// PartitionThreshold returns the smallest threshold τ, a multiple of
// m.Granularity(), such that a partition whose only unit contributes a
// count of 1 is kept (released noisy count ≥ τ) with probability at most
// δ_p = 1 − (1−delta)^{1/maxGroups}, for the discrete noise m adds.
// m must be the mechanism that noises the distinct-unit counts: NewLaplace
// with Sensitivity = maxGroups, or NewGaussian with Sensitivity =
// √maxGroups and Cells = maxGroups. The selection is then (ε, delta)-DP
// for Laplace and (ε, m.Delta() + delta)-DP for Gaussian (see the top of
// this file).
//
// With c the grid point of the count 1 and Z the noise in grid units, the
// release probability is P(Z ≥ k) for k = τ/r − c: for discrete Laplace
// with q = e^{−1/t}, P(Z ≥ k) = q^k/(1+q) (k ≥ 1); for the discrete
// Gaussian, P(Z ≥ k) = ½·P(|Z| > k−1).
func PartitionThreshold(m Mechanism, delta float64, maxGroups int) (*big.Rat, error) {
	if err := checkThresholdArgs(delta, maxGroups); err != nil {
		return nil, err
	}
	dp := perPartitionDelta(delta, maxGroups) * thresholdSafety
	var g *grid
	var k float64 // smallest k ≥ 1 with P(Z ≥ k) ≤ dp
	var err error
	switch mm := m.(type) {
	case *laplace:
		g = mm.grid
		k, err = laplaceThresholdSteps(mm.t, dp)
	case *gaussian:
		g = mm.grid
		// P(Z ≥ k) ≤ dp ⟺ P(|Z| > k−1) ≤ 2dp.
		k, err = gaussianTailQuantile(mm.sigma, 2*dp)
		k++
	default:
		return nil, fmt.Errorf("noise: partition threshold for an unknown mechanism %T", m)
	}
	if err != nil {
		return nil, err
	}
	c, err := g.toGrid(big.NewRat(1, 1))
	if err != nil {
		return nil, err
	}
	if math.IsInf(k, 0) || math.IsNaN(k) {
		return nil, errors.New("noise: partition threshold out of range")
	}
	kb, acc := new(big.Float).SetFloat64(k).Int(nil)
	if acc != big.Exact {
		return nil, errors.New("noise: partition threshold out of range")
	}
	return g.fromGrid(kb.Add(kb, c)), nil
}

// errPartitionDelta is returned for a per-partition δ outside (0, 1).
var errPartitionDelta = errors.New("noise: partition selection needs a per-partition delta in (0, 1)")

// laplaceThresholdSteps returns the smallest whole k ≥ 1 with
// P(Z ≥ k) = q^k/(1+q) ≤ dp for discrete Laplace of scale t, q = e^{−1/t}:
// the closed form k = ⌈t·(−ln dp − ln(1+q))⌉ settled on the exact
// criterion (settleWhole, bounded steps). When t·ln(1/dp) exceeds 2⁵³ (e.g.
// t = 2⁴⁸ and dp < e^{−32}), k is above 2⁵³ and the steps are one float64 each; the
// relative 10⁻⁶ of thresholdSafety (t·10⁻⁶ grid steps) covers the float64
// error of q^k there (t·745·2⁻⁵³ steps) many times over.
func laplaceThresholdSteps(t, dp float64) (float64, error) {
	if err := checkGridScale(t); err != nil {
		return 0, err
	}
	if !(dp > 0 && dp < 1) {
		return 0, errPartitionDelta
	}
	// In logs: ln P(Z ≥ k) = −k/t − ln(1+q) ≤ ln dp, which neither
	// underflows for a tiny (even denormal) dp nor stops decreasing in k.
	l1q := math.Log1p(math.Exp(-1 / t))
	logDp := math.Log(dp)
	k := math.Ceil(t * (-logDp - l1q))
	return settleWhole(k, 1, func(k float64) bool { return -k/t-l1q <= logDp })
}
