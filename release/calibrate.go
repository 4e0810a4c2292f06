// Privacy-critical: needs DP review.

package release

import (
	"math/big"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// calibration is what one release of a plan samples from and charges: the
// mechanism of every measurement, of the choices made by DP before them
// (clamping bounds, rows per unit, released groups) and the ledger events
// of all of them. It is a function of the plan, the policy and the
// privacy parameters only, never of data, and the one place they are
// turned into noise: Run (the ordinary and the sample-and-aggregate path)
// and Explain all calibrate with it, so what EXPLAIN reports is what a
// release charges.
type calibration struct {
	// req is the request as calibrated: its ε is what is left for the
	// measurements once the clamping bounds' share is taken.
	req Request

	// An ordinary plan: the clamping bounds' choice (nil without
	// dp.clipping = auto), the measurements, the rows-per-unit choice (nil
	// without dp.contribution = auto) and partition selection (nil without
	// private keys).
	clip *clipChoice
	ms   []measurement
	auto *autoChoice
	sel  *selection
	// cells is the unit count of min_units_per_cell (nil without a
	// minimum, or with private keys, whose selection applies it).
	cells *cellCount

	// A sample-and-aggregate plan: the noisy unit count that chooses the
	// block count (nil when fixed), the statistics, and the selection
	// threshold (nil without private keys).
	saCount noise.Mechanism
	saStats []measurement
	saTau   *big.Rat

	// groups are the released groups of a plan over public keys (every
	// combination of their domains; nil with private keys, whose groups
	// come from the data).
	groups [][]string

	// events are the ledger events of the whole release, reserved in one
	// charge before any private row is read.
	events []accountant.Event
}

// calibrate checks req and builds its calibration.
func (r *Releaser) calibrate(req Request) (*calibration, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	if err := verifyPlan(req.Dataset, req.Plan); err != nil { // verify.go
		return nil, err
	}
	if err := verifyWork(req.Dataset, req.Plan); err != nil { // verify.go
		return nil, err
	}
	plan := req.Plan
	c := &calibration{}
	var err error
	if !plan.PrivateGroups() {
		if c.groups, err = groupKeys(plan.Keys); err != nil {
			return nil, err
		}
	}
	if sa := plan.SampleAgg; sa != nil {
		if len(sa.Levels) == 0 || plan.PrivateGroups() && sa.CountMeasure < 0 {
			return nil, pgerr.New(pgerr.InternalError, "internal error: malformed sample-and-aggregate plan")
		}
		if c.saCount, c.saStats, err = r.saMechanisms(req); err != nil { // sampleagg.go
			return nil, err
		}
		if c.saTau, err = saSelection(req, c.saCount); err != nil {
			return nil, err
		}
		for _, m := range append([]noise.Mechanism{c.saCount}, mechs(c.saStats)...) {
			if m != nil {
				c.events = append(c.events, eventOf(m))
			}
		}
		if c.saTau != nil {
			c.events = append(c.events, accountant.Event{Mechanism: thresholdMechanism, Delta: saThresholdDelta(req)})
		}
		c.req = req
		return c, nil
	}
	// With auto clipping a tenth of ε chooses the clamping bounds
	// (autoclip.go); the rest goes to the plan.
	clip, rest, err := r.newClipChoice(req)
	if err != nil {
		return nil, err
	}
	req.Epsilon = rest
	if c.ms, err = r.mechanisms(req); err != nil {
		return nil, err
	}
	if plan.Auto != nil {
		if c.auto, err = r.newAutoChoice(req); err != nil { // autobounds.go
			return nil, err
		}
	}
	if plan.PrivateGroups() {
		if c.sel, err = r.newSelection(req, splitBudget(req)); err != nil { // partition.go
			return nil, err
		}
	} else if plan.MinUnits > 0 {
		b := splitBudget(req)
		if c.cells, err = r.newCellCount(req, b.epsilon, b.countDelta); err != nil { // minunits.go
			return nil, err
		}
	}
	c.clip = clip
	c.events = eventsOf(c.ms, c.sel, c.auto, c.cells)
	if clip != nil {
		c.events = append([]accountant.Event{clip.event()}, c.events...)
	}
	c.req = req
	return c, nil
}

// eventOf is the ledger event of one mechanism.
func eventOf(m noise.Mechanism) accountant.Event {
	return accountant.Event{Mechanism: m.Name(), Epsilon: m.Epsilon(), Delta: m.Delta(), NoiseMultiplier: m.NoiseMultiplier()}
}

// newMechanism is the one place a measurement's noise is calibrated: the
// mechanism req.Mechanism names, for sensitivity bounds b — Laplace from
// their L1 at ε (pure DP), Gaussian from their L2 at (ε, δ). integer says
// the measured value is a whole number (Laplace's integer mode also needs
// a whole L1); cells is how many cells one unit changes, each on the
// noise grid (noise.Params.Cells). what names the measurement in the
// error a calibration that fails returns.
func (r *Releaser) newMechanism(mechanism string, b sensitivity.Bounds, epsilon, delta float64, integer bool, cells int, what string) (noise.Mechanism, error) {
	var mech noise.Mechanism
	var err error
	switch mechanism {
	case policy.MechanismLaplace:
		l1, e := sensitivity.L1(b)
		if e != nil {
			return nil, pgerr.New(pgerr.InternalError, "internal error: invalid sensitivity").Wrap(e)
		}
		mech, err = noise.NewLaplace(noise.Params{Epsilon: epsilon, Sensitivity: l1, Integer: integer && isInteger(l1), Cells: cells, Rand: r.testOnlyRand})
	case policy.MechanismGaussian:
		l2, e := sensitivity.L2(b)
		if e != nil {
			return nil, pgerr.New(pgerr.InternalError, "internal error: invalid sensitivity").Wrap(e)
		}
		mech, err = noise.NewGaussian(noise.Params{Epsilon: epsilon, Delta: delta, Sensitivity: l2, Integer: integer, Cells: cells, Rand: r.testOnlyRand})
	default:
		return nil, pgerr.New(pgerr.InvalidParameterValue, "unknown mechanism %q", mechanism).WithHint("SET dp.mechanism = laplace")
	}
	if err != nil {
		return nil, withScaleHint(pgerr.New(pgerr.InvalidParameterValue, "cannot calibrate %s for this query: %v", what, err).
			WithHint("use a larger dp.epsilon (e.g. SET dp.epsilon = 0.1)"), err)
	}
	return mech, nil
}
