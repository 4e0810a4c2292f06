// Not in the privacy-critical set (docs/ARCHITECTURE.md): the walk that
// picks clamping bounds from the noisy histogram of autoclip.go. It reads
// only noisy bins and the public edges, so any rule here is
// post-processing of an ε_clip-DP release; the plan of whatever bounds it
// picks is verified, calibrated to its own bounds and must be covered by
// the reserved events (autoclip.go clipPlan), so a bug here costs
// accuracy, never privacy.

package release

import (
	"math"

	"github.com/dpproxy/dpproxy/dpplan"
)

// clipShare is the largest share of the query's units (as the noisy
// histogram counts them) whose values may lie beyond a chosen bound, and
// clipSigmas the confidence: a candidate passes when its noisy count of
// units beyond plus clipSigmas standard deviations of that count's noise
// is at most clipShare of the units. Passing with more than the share
// beyond then needs the noise below −2σ (about 2.5% for each candidate),
// whatever the walk saw before. A bound moves only where the query reads
// enough units for 2% of them to exceed the noise (about 5,000 at ε 1
// with one column). Accuracy, not privacy: any rule over the noisy bins
// is post-processing.
const (
	clipShare  = 0.02
	clipSigmas = 2
)

// bounds walks the candidate bounds inwards from each declared bound and
// stops at the first that fails its test (autoclip.go's file comment and
// clipShare), or at the last candidate that can pay (zeroCap). hi[b]
// (lo[b]) is the noisy number of units whose largest (smallest) value v
// lies in bin b of UpperEdges (LowerEdges): edges[b−1] ≤ v < edges[b].
func (cc *clipChoice) bounds(col dpplan.ClipColumn, hi, lo []float64, centred bool) clipResult {
	res := clipResult{bounds: dpplan.ClipBounds{Lower: col.Lower, Upper: col.Upper}}
	mu := len(col.UpperEdges)
	maxLower, maxUpper := zeroCap(col, centred)
	// The upper bound walks down hi from its last bin, the lower bound up
	// lo from its first.
	down := make([]float64, 0, mu)
	for k := mu; k >= 1; k-- {
		down = append(down, hi[k])
	}
	nu, above, aboveVar := cc.walk(down[:maxUpper], sideUnits(hi))
	nl, below, belowVar := cc.walk(lo[:maxLower], sideUnits(lo))
	lower, upper := col.Lower, col.Upper
	if nl > 0 {
		lower = col.LowerEdges[nl-1]
	}
	if nu > 0 {
		upper = col.UpperEdges[mu-nu]
	}
	if lower >= upper || (lower == col.Lower && upper == col.Upper) {
		// Nothing moved, or both ends walked past each other (hardly
		// any units): the declared range.
		return res
	}
	res.bounds = dpplan.ClipBounds{Lower: lower, Upper: upper}
	res.changed = true
	res.beyond = math.Max(0, above+below)
	res.spread = 1.96 * math.Sqrt(aboveVar+belowVar)
	return res
}

// zeroCap returns how many of a column's lower (upper) candidate bounds
// the walk may pass: all of them for a column that feeds a normalized sum,
// else only those at or below 0 (at or above 0).
//
// Why: a sum that is not centred has sensitivity R·max(|lo|, |hi|)
// (sensitivity/, dpplan.Measure.LInf). A lower bound lo ≥ 0 leaves that
// maximum at |hi|, the same as lo = 0 or lo = L gives when L ≥ 0, so
// raising the lower bound above 0 never lowers the noise: it can only clamp
// values upwards, a bias and nothing else. An independent audit (6 units,
// every value 0, bounds [0, 100]) saw the walk pass a candidate on a
// negative noise (about 2.5% per candidate, clipShare) and the lower bound
// of a SUM jump to 50 or more; the released sum averaged +347 where the
// truth is 0. Likewise an upper bound below 0. A normalized sum's
// sensitivity is R·(hi − lo)/2, which a bound past 0 does lower, so there
// the walk's test decides. The cap depends on the declared bounds (the
// edges) and the plan's measures only, never on the data, so the choice is
// still post-processing of the noisy histogram.
func zeroCap(col dpplan.ClipColumn, centred bool) (lower, upper int) {
	lower, upper = len(col.LowerEdges), len(col.UpperEdges)
	if centred {
		return lower, upper
	}
	lower = 0
	for _, e := range col.LowerEdges { // ascending
		if e <= 0 {
			lower++
		}
	}
	upper = 0
	for _, e := range col.UpperEdges {
		if e >= 0 {
			upper++
		}
	}
	return lower, upper
}

// walk returns how many of bins (outermost first) the bound passes, and
// the noisy count and noise variance beyond it after the last: a bin
// passes when the noisy units beyond, plus clipSigmas standard
// deviations of their noise, are at most clipShare of the side's units n;
// the first that fails stops the walk.
func (cc *clipChoice) walk(bins []float64, n float64) (steps int, sum, variance float64) {
	limit := clipShare * n
	var s, v float64
	for j, b := range bins {
		s += b
		v += cc.bin * cc.bin
		if s+clipSigmas*math.Sqrt(v) > limit {
			break
		}
		steps, sum, variance = j+1, s, v
	}
	return steps, sum, variance
}

// sideUnits is the sum of a side's noisy bins: its units, as the histogram
// counts them.
func sideUnits(bins []float64) float64 {
	n := 0.0
	for _, b := range bins {
		n += b
	}
	return n
}
