// Privacy-critical: needs DP review.

package release

import (
	"context"
	"math/big"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
)

// QuantileRequest asks for DP quantiles of several columns, for
// `dpproxy policy init` (bounds are proposed from them, never from exact
// minima and maxima). Each probe's SQL (pgemit.BoundsProbeSQL) gives at
// most one value per unit, so each count moves by at most 1 per unit.
type QuantileRequest struct {
	// Analyst and Dataset name the steward budget charged in the ledger;
	// Dataset.Budget (and AnalystBudget(Analyst)) are its limits.
	Analyst string
	Dataset *policy.Dataset
	// Epsilon is the total ε, split equally over len(Probes)·len(Quantiles)
	// selections (basic composition).
	Epsilon   float64
	Quantiles []float64
	Probes    []pgemit.BoundsProbe
	Upstream  Upstream
}

// ProposeQuantiles reserves the request's ε in the ledger, runs each probe
// and selects, for each quantile q, a candidate by the exponential
// mechanism (noise.Exponential, McSherry–Talwar 2007) with utility
// −|below_j − q·n| (sensitivity 1): with probability ≥ 1 − β the selected
// candidate's utility is within (2/ε)·ln(B/β) of the best. It returns
// out[probe][quantile] = the index of the selected candidate. Only the
// selections are released.
func (r *Releaser) ProposeQuantiles(ctx context.Context, req QuantileRequest) ([][]int, float64, error) {
	sel := len(req.Probes) * len(req.Quantiles)
	if sel == 0 || req.Dataset == nil || req.Upstream == nil || !(req.Epsilon > 0) {
		return nil, 0, pgerr.New(pgerr.InternalError, "internal error: incomplete quantile request")
	}
	each := splitDown(req.Epsilon, sel)
	// Utility −|below_j − q·n|: one unit moves below_j and n by at most 1
	// in the same direction, so the utility by at most max(q, 1 − q) ≤ 1.
	mech, err := noise.NewExponential(noise.ExponentialParams{Epsilon: each, Sensitivity: 1, Rand: r.testOnlyRand})
	if err != nil {
		return nil, 0, pgerr.New(pgerr.InvalidParameterValue, "cannot calibrate the quantile mechanism: %v", err).
			WithHint("use a larger --epsilon")
	}
	events := make([]accountant.Event, sel)
	for i := range events {
		events[i] = accountant.Event{Mechanism: "exponential", Epsilon: each}
	}
	if _, err := r.ledger.Reserve(ctx, accountant.Charge{
		Analyst: req.Analyst, Dataset: req.Dataset.Name, Events: events,
		Fingerprint: "policy-init", PolicyVersion: req.Dataset.Version, Policy: req.Dataset,
	}); err != nil {
		return nil, 0, err
	}
	out := make([][]int, len(req.Probes))
	for i, p := range req.Probes {
		rows, err := req.Upstream.Query(ctx, pgemit.BoundsProbeSQL(p))
		if err != nil {
			return nil, 0, upstreamError(ctx, err)
		}
		if len(rows) != 1 || len(rows[0]) != 1+len(p.Candidates) {
			return nil, 0, pgerr.New(pgerr.InternalError, "internal error: unexpected probe result shape")
		}
		var counts []int64
		for _, v := range rows[0] {
			if v == nil {
				return nil, 0, pgerr.New(pgerr.InternalError, "internal error: NULL probe count")
			}
			c, ok := new(big.Int).SetString(*v, 10)
			if !ok || !c.IsInt64() {
				return nil, 0, pgerr.New(pgerr.InternalError, "internal error: non-integer probe count")
			}
			counts = append(counts, c.Int64())
		}
		for _, q := range req.Quantiles {
			target := new(big.Rat).Mul(new(big.Rat).SetFloat64(q), new(big.Rat).SetInt64(counts[0]))
			utilities := make([]*big.Rat, len(counts)-1)
			for j, c := range counts[1:] {
				d := new(big.Rat).Sub(new(big.Rat).SetInt64(c), target)
				d.Abs(d)
				utilities[j] = d.Neg(d)
			}
			j, err := mech.Select(utilities)
			if err != nil {
				return nil, 0, pgerr.New(pgerr.InternalError, "internal error in the exponential mechanism").Wrap(err)
			}
			out[i] = append(out[i], j)
		}
	}
	return out, each, nil
}
