// Privacy-critical: needs DP review.

package release

import (
	"math"
	"math/big"
	"slices"
	"strconv"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
)

// # Clamping bounds chosen per query
//
// A plan with Clip (rewrite/autoclip.go) is answered under one charge in
// two steps: the histogram query gives, per summed column, the units
// whose largest value falls in each bin of the declared range and the
// units whose smallest value does; every bin, empty or not, gets discrete
// Laplace noise of scale 2k/ε_clip (k columns; ε_clip is a tenth of the
// query's ε); then, from the declared upper bound inwards, each candidate
// e is accepted as the upper bound while the noisy units with a value at
// or above it, plus twice their noise's standard deviation (√(2j)·2k/ε_clip
// for j bins), are at most 2% of the units the histogram counts; the walk
// stops at the first candidate that fails. The lower bound walks up the
// histogram of the smallest values the same way, never past 0 for a
// column that only plain sums use (zeroCap). The choice reads only
// noisy bins (post-processing), so it is ε_clip-DP; the plan of the
// chosen bounds is then released with the rest of ε.
//
// Where the data reach the declared bounds nothing is tightened; where a
// steward declared [0, 5,000,000] for incomes that stop at 420,500 and
// the query reads enough units, the upper bound comes down to an edge at
// most 2% of them exceed, and the noise of every sum and average of the
// column with it. The values beyond the
// chosen bounds are clamped like any value beyond a declared bound; the
// NOTICE states the noisy count of units that have one. At ε 1 with one
// column the noise of one bin is about 28 units, so bounds move only for
// queries over some thousands of units (clipShare).
//
// The charge is reserved before the histogram reads any row, with the
// events of the declared bounds: the plan of tighter bounds has the same
// measures, ε and δ and sensitivities no larger. Release checks that its
// events are covered (ε, δ no larger, noise multiplier no smaller) and
// otherwise keeps the declared bounds, so no choice can cost more than
// was reserved.

// clipShare is the largest share of the query's units (as the noisy
// histogram counts them) whose values may lie beyond a chosen bound, and
// clipSigmas the confidence: a candidate passes when its noisy count of
// units beyond plus clipSigmas standard deviations of that count's noise
// is at most clipShare of the units. Passing with more than the share
// beyond then needs the noise below −2σ (about 2.5% for each candidate),
// whatever the walk saw before: a test of the count alone against 3σ√j
// let incomes of 1,000 people (PUMS, σ = 28) be cut at 39,062 — a
// quarter of them — because a negative noise early in the walk is carried
// by every later prefix sum. The price: a bound moves only where the
// query reads enough units for 2% of them to exceed the noise, about
// 5,000 at ε 1 with one column; fewer, and the declared bounds stay.
const (
	clipShare  = 0.02
	clipSigmas = 2
)

// clipChoice chooses a plan's clamping bounds from its noisy histogram.
type clipChoice struct {
	clip *dpplan.AutoClip
	lap  noise.Mechanism
	// bin is the standard deviation of one bin's noise, in units.
	bin float64
	// centred[i] is true when column i feeds a normalized (centred) sum
	// (AVG, the variance family), whose sensitivity is the width of the
	// bounds; see zeroCap.
	centred []bool
}

// newClipChoice returns the choice and the ε left for the answer, or nil
// and the whole ε when the plan chooses no clamping bounds or the query's
// ε cannot spare a tenth (then the declared bounds are used, as with
// dp.clipping = fixed).
func (r *Releaser) newClipChoice(req Request) (*clipChoice, float64, error) {
	c := req.Plan.Clip
	if c == nil || req.Plan.PrivateGroups() {
		return nil, req.Epsilon, nil
	}
	eps, rest := biasSplit(req.Epsilon, 1)
	if eps <= 0 || len(c.Columns) == 0 {
		return nil, req.Epsilon, nil
	}
	bins := 0
	for _, col := range c.Columns {
		bins += len(col.UpperEdges) + len(col.LowerEdges) + 2
	}
	// One unit moves one bin of each of the 2k histograms by one.
	lap, err := noise.NewLaplace(noise.Params{Epsilon: eps, Sensitivity: float64(2 * len(c.Columns)), Integer: true, Cells: bins, Rand: r.testOnlyRand})
	if err != nil {
		return nil, 0, withScaleHint(pgerr.New(pgerr.InvalidParameterValue, "cannot choose clamping bounds for this query: %v", err).
			WithHint("use a larger dp.epsilon, or SET dp.clipping = fixed"), err)
	}
	scale, step := lap.(noise.Scaled).NoiseScale()
	centred := make([]bool, len(c.Columns))
	for i, col := range c.Columns {
		for _, m := range req.Plan.Measures {
			if m.Column == col.Column && m.Expr == nil && m.Centre != "" {
				centred[i] = true
			}
		}
	}
	return &clipChoice{clip: c, lap: lap, bin: math.Sqrt2 * scale * step, centred: centred}, rest, nil
}

// event is the ledger event of the histogram.
func (cc *clipChoice) event() accountant.Event { return eventOf(cc.lap) }

// clipResult is the choice for one column.
type clipResult struct {
	bounds dpplan.ClipBounds
	// beyond is the noisy count of units with a value outside the
	// chosen bounds (0 when a bound is the declared one on that side).
	beyond, spread float64
	changed        bool
}

// choose noises the histograms (rows of Clip.SQL) and returns each
// column's bounds.
func (cc *clipChoice) choose(rows [][]*string) ([]clipResult, error) {
	cols := cc.clip.Columns
	// hist[i][side][b]: side 0 the units' largest values, 1 their smallest.
	hist := make([][2][]*big.Rat, len(cols))
	for i, col := range cols {
		for side, edges := range [][]float64{col.UpperEdges, col.LowerEdges} {
			hist[i][side] = make([]*big.Rat, len(edges)+1)
			for b := range hist[i][side] {
				hist[i][side][b] = new(big.Rat)
			}
		}
	}
	bad := pgerr.New(pgerr.InternalError, "internal error: unexpected value histogram")
	for _, row := range rows {
		if len(row) != 4 || slices.Contains(row, nil) {
			return nil, bad
		}
		i, err1 := strconv.Atoi(*row[0])
		side, err2 := strconv.Atoi(*row[1])
		b, err3 := strconv.Atoi(*row[2])
		v, ok := new(big.Rat).SetString(*row[3])
		if err1 != nil || err2 != nil || err3 != nil || !ok || i < 0 || i >= len(hist) || side < 0 || side > 1 ||
			b < 0 || b >= len(hist[i][side]) || v.Sign() < 0 || !v.IsInt() {
			return nil, bad
		}
		hist[i][side][b].Add(hist[i][side][b], v)
	}
	out := make([]clipResult, len(cols))
	for i, col := range cols {
		var noisy [2][]float64
		for side := range 2 {
			noisy[side] = make([]float64, len(hist[i][side]))
			for b, v := range hist[i][side] {
				n, err := cc.lap.AddNoise(v)
				if err != nil {
					return nil, pgerr.New(pgerr.InternalError, "internal error while adding noise").Wrap(err)
				}
				noisy[side][b], _ = n.Float64()
			}
		}
		out[i] = cc.bounds(col, noisy[0], noisy[1], cc.centred[i])
	}
	return out, nil
}

// bounds walks the candidate bounds inwards from each declared bound and
// stops at the first that fails its test (see the file comment and
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

// covered reports whether every event of got is covered by the reserved
// one at the same place: ε and δ no larger, noise multiplier no smaller.
func covered(reserved, got []accountant.Event) bool {
	if len(reserved) != len(got) {
		return false
	}
	for i, g := range got {
		r := reserved[i]
		if g.Mechanism != r.Mechanism || g.Epsilon > r.Epsilon || g.Delta > r.Delta {
			return false
		}
		if r.NoiseMultiplier > 0 && g.NoiseMultiplier < r.NoiseMultiplier {
			return false
		}
	}
	return true
}

// clipPlan plans the statement with the chosen bounds and returns it with
// its mechanisms when its events are covered by the reserved ones (see
// covered); ok is false otherwise, and the declared bounds are kept.
func (r *Releaser) clipPlan(req Request, res []clipResult, reserved []accountant.Event, cells *cellCount) (*dpplan.Plan, []measurement, *autoChoice, bool) {
	bounds := make([]dpplan.ClipBounds, len(res))
	for i, c := range res {
		bounds[i] = c.bounds
	}
	if r.planner == nil {
		return nil, nil, nil, false
	}
	np, err := r.planner(req.Dataset, req.Plan, bounds)
	if err == nil {
		err = verifyPlan(req.Dataset, np) // verify.go
	}
	if err != nil || np.PrivateGroups() {
		return nil, nil, nil, false
	}
	sub := req
	sub.Plan = np
	ms, err := r.mechanisms(sub)
	if err != nil {
		return nil, nil, nil, false
	}
	var auto *autoChoice
	if np.Auto != nil {
		if auto, err = r.newAutoChoice(sub); err != nil {
			return nil, nil, nil, false
		}
	}
	// The unit count of min_units_per_cell depends on L0 and the keys
	// only, which a replanned statement keeps (or it is not used).
	if np.MinUnits != req.Plan.MinUnits || np.MaxGroupsPerUnit != req.Plan.MaxGroupsPerUnit ||
		!covered(reserved, eventsOf(ms, nil, auto, cells)) {
		return nil, nil, nil, false
	}
	return np, ms, auto, true
}
