// Privacy-critical: needs DP review.

package release

import (
	"math/big"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/pgemit"
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
	// req is the request as calibrated: its plan with the quantile method
	// applied (and its SQL emitted for it), its ε what is left for the
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
	plan, err := withQuantileMethod(req.Plan, req.QuantileMethod)
	if err != nil {
		return nil, err
	}
	req.Plan = plan
	c := &calibration{}
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
	if req.Plan, err = withSmoothness(req.Plan, c.ms); err != nil {
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

// ptrBoundFraction is the ptr method's proposed local-sensitivity bound as
// a fraction of upper − lower: the noise of a release that passes the test
// is Laplace of scale b/ε₂. A data-independent proposal; the test checks
// it against the data (quantile.go).
const ptrBoundFraction = 1.0 / 64

// withQuantileMethod returns the plan with its quantile measures answered
// by method (dpplan.QuantileExponential, QuantileSmooth or QuantilePTR; ""
// keeps the plan's). The planner builds quantile measures for the
// exponential method; the smooth method's β is set by withSmoothness once
// its mechanisms are calibrated, and the SQL is emitted again then.
func withQuantileMethod(p *dpplan.Plan, method string) (*dpplan.Plan, error) {
	if !p.HasQuantile() || method == "" {
		return p, nil
	}
	switch method {
	case dpplan.QuantileExponential, dpplan.QuantileSmooth, dpplan.QuantilePTR:
	case dpplan.QuantileSample:
		// Sample-and-aggregate quantiles are planned as such
		// (rewrite/quantile_expr.go); a plan with quantile measures was not.
		return nil, pgerr.New(pgerr.InternalError, "internal error: plan not built for quantile method sample")
	default:
		return nil, pgerr.New(pgerr.InvalidParameterValue, "unknown quantile method %q", method).
			WithHint("SET dp.quantile_method = exponential, smooth, ptr or sample")
	}
	c := *p
	c.Measures = append([]dpplan.Measure(nil), p.Measures...)
	changed := false
	for i, m := range c.Measures {
		if m.Kind != dpplan.MeasureQuantile {
			continue
		}
		q := *m.Quantile
		if q.Method == method {
			continue
		}
		q.Method, q.Beta, q.Bound = method, 0, 0
		if method == dpplan.QuantilePTR {
			q.Bound = (m.Upper - m.Lower) * ptrBoundFraction
		}
		c.Measures[i].Quantile = &q
		changed = true
	}
	if !changed {
		return p, nil
	}
	return emitted(&c)
}

// withSmoothness sets the β of each smooth quantile measure to the one its
// calibrated mechanism needs (the SQL computes a β-smooth bound S for
// it) and emits the SQL again; other plans are returned as they are.
func withSmoothness(p *dpplan.Plan, ms []measurement) (*dpplan.Plan, error) {
	var c *dpplan.Plan
	for i, m := range ms {
		if m.quant == nil || m.quant.smooth == nil || m.measure.Quantile.Beta == m.quant.smooth.Beta() {
			continue
		}
		if c == nil {
			cp := *p
			cp.Measures = append([]dpplan.Measure(nil), p.Measures...)
			c = &cp
		}
		q := *c.Measures[i].Quantile
		q.Beta = m.quant.smooth.Beta()
		c.Measures[i].Quantile = &q
		m.measure.Quantile = &q
		ms[i] = m
	}
	if c == nil {
		return p, nil
	}
	return emitted(c)
}

// emitted returns c with its SQL emitted from its plan and its
// fingerprint taken again.
func emitted(c *dpplan.Plan) (*dpplan.Plan, error) {
	t, where := dpplan.SourceOf(c)
	if t == nil {
		return nil, pgerr.New(pgerr.InternalError, "internal error: plan cannot be emitted again")
	}
	c.SQL = pgemit.SQL(t, c, where)
	if err := pgemit.CheckSize(c.SQL); err != nil {
		return nil, err
	}
	c.Fingerprint = dpplan.Fingerprint(c)
	return c, nil
}

// quantileMethodOf is the quantile method req applies to a plan whose
// quantile measures are planned for another, else "".
func quantileMethodOf(req Request) string {
	for _, m := range req.Plan.Measures {
		if m.Kind == dpplan.MeasureQuantile && req.QuantileMethod != "" && m.Quantile.Method != req.QuantileMethod {
			return req.QuantileMethod
		}
	}
	return ""
}
