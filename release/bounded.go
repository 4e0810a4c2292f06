package release

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/policy"
)

// Bounded work (SECURITY.md G5; issue 14): every check
// in this file runs before any budget is reserved, and the float loops of
// the calibration code (the ε and δ splits) take a bounded number of steps
// for every float64 argument.

// maxShrinkSteps bounds shrinkToFit. Its loops start at a quotient x/m (or
// a difference) that is within a few ulps of fitting, and each step down
// by one float64 lowers the rounded product or sum by at least one ulp of
// the limit, so two or three steps suffice for every finite positive
// argument (denormals included: there the quotient is off by at most half
// a denormal step, and one step fixes it). 64 is a wide margin.
const maxShrinkSteps = 64

// shrinkToFit returns the largest float64 y ≤ x, stepping down from x one
// float64 at a time, with fits(y), for a fits that holds at 0 and is
// monotone (false above some point, true below). It returns 0 when x is
// not a finite number > 0 or no such y is found within maxShrinkSteps
// steps: a zero ε or δ share is refused by the mechanisms' constructors
// (noise.ErrEpsilon, noise.ErrDelta), so the query fails before any charge
// instead of looping. It replaces loops of the form
// "for y·m > x { y = Nextafter(y, 0) }", which for a negative or NaN x
// never ended (Nextafter(0, 0) is 0, and 0 > x stays true).
func shrinkToFit(x float64, fits func(float64) bool) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 {
		return 0
	}
	y := x
	for i := 0; i <= maxShrinkSteps; i++ {
		if fits(y) {
			return y
		}
		y = math.Nextafter(y, 0)
	}
	return 0
}

// scaleHint is the hint of a query whose noise scale is beyond the range
// the mechanisms compute exactly (noise.ErrScale): the scale is the
// sensitivity, set by the clipping bounds and the expression, over ε.
const scaleHint = "narrow the clipping bounds in the policy, or simplify the expression, or raise dp.epsilon"

// withScaleHint gives e the scaleHint when err is noise.ErrScale: the
// query's noise scale (sensitivity over ε) is beyond the range float64
// handles exactly (noise.MaxGridScale and the other ceilings of
// noise/bounded.go). Such a query is refused when its mechanisms are
// built, in Run and in Explain alike, before any budget is reserved.
func withScaleHint(e *pgerr.Error, err error) *pgerr.Error {
	if errors.Is(err, noise.ErrScale) {
		return e.WithHint(scaleHint)
	}
	return e
}

// EpsilonFloorHint is the hint of a refused ε below the dataset's floor
// (budget.min_epsilon_per_query): the floor, and who can change it.
func EpsilonFloorHint(ds *policy.Dataset) string {
	floor := ds.Budget.EpsilonFloor()
	return fmt.Sprintf("the smallest epsilon per query on %s is %s: SET dp.epsilon = %s or more; a data steward can lower it with budget.min_epsilon_per_query in the policy",
		ds.Name, num(floor), num(floor))
}

// checkQueryBounds refuses, before anything is calibrated or charged, a
// query ε below the dataset's floor and a δ that is NaN, negative or ≥ 1.
// The proxy refuses both when they are SET; this is the defence in depth
// (a policy reload may raise the floor under a session's dp.epsilon, and
// other callers build Requests too).
func checkQueryBounds(req Request) error {
	if err := checkAnswerCells(req.Plan); err != nil {
		return err
	}
	if floor := req.Dataset.Budget.EpsilonFloor(); req.Epsilon < floor {
		return pgerr.New(pgerr.InvalidParameterValue, "dp.epsilon %s is below the minimum epsilon per query (%s) on %s",
			num(req.Epsilon), num(floor), req.Dataset.Name).WithHint("%s", EpsilonFloorHint(req.Dataset))
	}
	if math.IsNaN(req.Delta) || req.Delta < 0 || req.Delta >= 1 {
		return pgerr.New(pgerr.InvalidParameterValue, "dp.delta must be a number with 0 <= delta < 1").
			WithHint("SET dp.delta = 1e-7 (or 0 for the Laplace mechanism)")
	}
	return nil
}

// maxAnswerCells bounds a plan's noisy cells, a quantile weighing its
// worst exponential-mechanism work (dpplan.MaxAnswerCells and
// dpplan.QuantileCellWeight, "The proxy's CPU per answer"). Groups of
// private keys come from partition selection; their number is the data's,
// and an answer holds at most dpplan.MaxSelectedGroups of them (partition.go).
const maxAnswerCells = dpplan.MaxAnswerCells

// AnswerCellBytes is a released cell's size in the proxy
// (dpplan.AnswerCellBytes).
const AnswerCellBytes = dpplan.AnswerCellBytes

// MaxAnswerBytes bounds AnswerBytes of a plan (dpplan.MaxAnswerBytes).
const MaxAnswerBytes = dpplan.MaxAnswerBytes

// AnswerBytes estimates the size in the proxy of the answer of a plan,
// with extra more columns of numbers per row (error columns): its groups
// (the product of the public key domains, capped at 2²⁰, or with a private
// key the most an answer holds, dpplan.MaxSelectedGroups) times a row
// (dpplan.AnswerRowBytes).
func AnswerBytes(p *dpplan.Plan, extra int) int {
	groups := 1
	if p.PrivateGroups() {
		groups = dpplan.MaxSelectedGroups(p)
	} else {
		for _, k := range p.Keys {
			groups = min(groups*len(k.Domain), 1<<20)
		}
	}
	return groups * dpplan.AnswerRowBytes(p, extra)
}

// checkAnswerCells refuses a plan whose answer would cost more than
// maxAnswerCells cells of proxy CPU, or hold more than MaxAnswerBytes.
func checkAnswerCells(p *dpplan.Plan) error {
	if p == nil {
		return nil
	}
	if p.PrivateGroups() {
		// The groups come from the data and an answer holds at most
		// dpplan.MaxSelectedGroups of them; one must fit (review 71: 99
		// quantiles by a private key weighed 147,510 cells a group).
		if w := dpplan.CellWeight(p); w > maxAnswerCells {
			return pgerr.New(pgerr.ProgramLimitExceeded, "this query would release more than %d noisy cells for one group (a quantile weighing one cell per %d buckets of its grid)", maxAnswerCells, dpplan.QuantileBucketsFor(1)).
				WithDetail("Each noisy value costs the proxy CPU; the bound keeps every answer near a second. The query was not run and nothing was charged.").
				WithHint("ask for fewer quantiles or aggregates in one query")
		}
		return nil
	}
	// The answer has a column per output, and equal aggregates share one
	// measurement: 1,662 COUNT(*) are two measures but 1,662 columns
	// (attack round 52). CellWeight takes the larger: it bounds the
	// answer's size, which the proxy keeps for the client, as well as its
	// CPU.
	weight := dpplan.CellWeight(p)
	if weight == 0 {
		return nil
	}
	quantiles := 0
	for _, m := range p.Measures {
		if m.Kind == dpplan.MeasureQuantile && m.Quantile != nil {
			quantiles++
		}
	}
	groups := dpplan.AnswerGroups(p)
	if groups > maxAnswerCells/weight {
		hint := "group by fewer or coarser keys (e.g. date_trunc('month', …) instead of days), or ask for fewer aggregates"
		if quantiles > 0 {
			hint = "a quantile needs an exact exponential mechanism per group: group by fewer or coarser keys (at most " + strconv.Itoa(maxAnswerCells/weight) + " groups for this query), or ask for fewer quantiles"
		}
		return pgerr.New(pgerr.ProgramLimitExceeded, "this query would release more than %d noisy cells (groups × aggregates, a quantile weighing one cell per %d buckets of its grid)", maxAnswerCells, dpplan.QuantileBucketsFor(1)).
			WithDetail("Each noisy value costs the proxy CPU; the bound keeps every answer near a second. The query was not run and nothing was charged.").
			WithHint("%s", hint)
	}
	// A key's cells are as long as its values: a CASE key's labels are
	// the analyst's constants (attack round 55: two 20 KB labels by 1,000
	// buckets made a 40 MB answer of 6,000 cells).
	if AnswerBytes(p, 0) > MaxAnswerBytes {
		return pgerr.New(pgerr.ProgramLimitExceeded, "this query's answer would hold more than %d MiB (its groups × the width of a row)", MaxAnswerBytes>>20).
			WithDetail("The proxy keeps an answer whole for the client; the query was not run and nothing was charged.").
			WithHint("group by fewer keys, or with shorter labels")
	}
	return nil
}
