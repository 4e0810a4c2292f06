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
// noisy bins (post-processing: clipwalk.go), so it is ε_clip-DP; the
// plan of the chosen bounds is then released with the rest of ε, at
// sensitivities derived from those bounds.
//
// The values beyond the chosen bounds are clamped like any value beyond a
// declared bound; the NOTICE states the noisy count of units that have
// one.
//
// The charge is reserved before the histogram reads any row, with the
// events of the declared bounds: the plan of tighter bounds has the same
// measures, ε and δ and sensitivities no larger. Release checks that its
// events are covered (ε, δ no larger, noise multiplier no smaller) and
// otherwise keeps the declared bounds, so no choice can cost more than
// was reserved.

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
		out[i] = cc.bounds(col, noisy[0], noisy[1], cc.centred[i]) // clipwalk.go
	}
	return out, nil
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
