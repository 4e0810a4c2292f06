// Privacy-critical: needs DP review.

package release

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strconv"

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
// and selects, for each quantile q, a candidate bound by the exponential
// mechanism (noise.Exponential, McSherry–Talwar 2007) with the utility of
// BoundUtilities: the rank error −|below_j − q·n| minus a width term that
// makes the tightest of the candidates that fit the data equally well the
// most likely (every candidate beyond the data has the same rank error).
// Sensitivity BoundUtilitySensitivity; with probability ≥ 1 − β the
// selected candidate's utility is within (2Δu/ε)·ln(B/β) of the best. It
// returns out[probe][quantile] = the index of the selected candidate. Only
// the selections are released.
func (r *Releaser) ProposeQuantiles(ctx context.Context, req QuantileRequest) ([][]int, float64, error) {
	sel := len(req.Probes) * len(req.Quantiles)
	if sel == 0 || req.Dataset == nil || req.Upstream == nil || !(req.Epsilon > 0) {
		return nil, 0, pgerr.New(pgerr.InternalError, "internal error: incomplete quantile request")
	}
	each := splitDown(req.Epsilon, sel)
	mech, err := noise.NewExponential(noise.ExponentialParams{Epsilon: each, Sensitivity: BoundUtilitySensitivity, Rand: r.testOnlyRand})
	if err != nil {
		return nil, 0, pgerr.New(pgerr.InvalidParameterValue, "cannot calibrate the quantile mechanism: %v", err).
			WithHint("use a larger --epsilon")
	}
	events := make([]accountant.Event, sel)
	for i := range events {
		events[i] = accountant.Event{Mechanism: "exponential", Epsilon: each}
	}
	res, err := r.ledger.Reserve(ctx, accountant.Charge{
		Analyst: req.Analyst, Dataset: req.Dataset.Name, Events: events,
		Fingerprint: "policy-init", PolicyVersion: req.Dataset.Version, Policy: req.Dataset,
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([][]int, len(req.Probes))
	for i, p := range req.Probes {
		rows, err := req.Upstream.Query(ctx, pgemit.BoundsProbeSQL(p))
		if err != nil {
			return nil, 0, upstreamError(ctx, err)
		}
		hist, err := probeHistogram(rows, len(p.Candidates))
		if err != nil {
			return nil, 0, err
		}
		for _, q := range req.Quantiles {
			j, err := mech.Select(BoundUtilities(hist, q))
			if err != nil {
				return nil, 0, pgerr.New(pgerr.InternalError, "internal error in the exponential mechanism").Wrap(err)
			}
			out[i] = append(out[i], j)
		}
	}
	// The chosen candidates are the charge's answer, recorded on it (DP
	// outputs; a failure to record them changes nothing that was charged).
	if answer, err := json.Marshal(out); err == nil {
		_ = r.ledger.Release(ctx, res, answer)
	}
	return out, each, nil
}

// probeHistogram reads the probe's rows (bucket b, count; b is the number
// of candidates ≤ the value, 0 … B) into hist[0 … B].
func probeHistogram(rows [][]*string, candidates int) ([]int64, error) {
	hist := make([]int64, candidates+1)
	for _, row := range rows {
		if len(row) != 2 || row[0] == nil || row[1] == nil {
			return nil, pgerr.New(pgerr.InternalError, "internal error: unexpected probe result shape")
		}
		b, err1 := strconv.Atoi(*row[0])
		c, err2 := strconv.ParseInt(*row[1], 10, 64)
		if err1 != nil || err2 != nil || b < 0 || b > candidates || c < 0 {
			return nil, pgerr.New(pgerr.InternalError, "internal error: malformed probe count")
		}
		hist[b] += c
	}
	return hist, nil
}

// boundWidthWeight is α of BoundUtilities, and boundWidthScale the integer
// scale of its per-unit width term.
const (
	boundWidthWeight = 0.25
	boundWidthScale  = 1 << 20
)

// BoundUtilitySensitivity is Δu of BoundUtilities: 1 for the rank term
// plus α for the width term.
const BoundUtilitySensitivity = 1 + boundWidthWeight

// BoundUtilities returns the utilities of the B candidates c_0 < … < c_{B−1}
// as a lower bound (q < 1/2) or an upper bound (q ≥ 1/2), from the
// histogram of one value per unit over the candidates: hist[b] counts the
// values v with exactly b candidates ≤ v (b = 0 … B). With below_j the
// values < c_j (hist[0] + … + hist[j]) and n all values,
//
//	u_j = −|below_j − q·n| − α·Σ_units g(d_j(v)),
//	g(d) = (d/(1+d) + ln(1+d)/ln(1+B))/2 ∈ [0, 1],   α = 1/4,
//
// where d_j(v) counts the grid steps by which c_j lies beyond the unit's
// value on the side it bounds: for an upper bound and v < c_j, the
// candidates in (v, c_j) (0 when c_j is the first candidate above v); for
// a lower bound and v ≥ c_j, the candidates in (c_j, v]; 0 for a value the
// bound clips (its cost is in the rank term).
//
// Why the width term: the rank term alone gives every candidate beyond
// the data the same utility (below_j = n above the largest value, 0 below
// the smallest), so the mechanism chose uniformly among them; the width
// term makes the tightest of them the most likely, and moves a bound
// inside the data outwards only at a cost of about α times the units just
// inside it (accuracy: cmd/dpproxy TestPolicyInit_Demo).
//
// Sensitivity: adding or removing one unit moves n by 1 and each below_j
// by 0 or 1 in the same direction, so q·n − below_j moves by at most
// max(q, 1 − q) ≤ 1; it adds or removes one term g(d) ∈ [0, 1] of the
// width sum and changes no other unit's term (each depends on that unit's
// value and the public grid only). Hence Δu ≤ 1 + α
// (BoundUtilitySensitivity), and the exponential mechanism calibrated to
// it is ε-DP (McSherry and Talwar 2007, Theorem 6). g is evaluated once
// per d as the integer ⌊K·g(d)⌋ clamped to [0, K] (K = 2²⁰), a function of
// d and B only (a rounding there changes which data-independent function
// is used, never the sensitivity), so the utilities are exact rationals.
func BoundUtilities(hist []int64, q float64) []*big.Rat {
	b := len(hist) - 1
	if b < 1 {
		return nil
	}
	g := make([]int64, b)
	for d := range g {
		// ⌊K·(d/(1+d) + ln(1+d)/ln(1+B))/2⌋ ∈ [0, K]
		near := float64(d) / float64(1+d)
		far := math.Log1p(float64(d)) / math.Log1p(float64(b))
		g[d] = min(max(int64(math.Floor(boundWidthScale*(near+far)/2)), 0), boundWidthScale)
	}
	var n int64
	var nonEmpty []int
	for k, c := range hist {
		n += c
		if c > 0 {
			nonEmpty = append(nonEmpty, k)
		}
	}
	target := new(big.Rat).Mul(new(big.Rat).SetFloat64(q), new(big.Rat).SetInt64(n))
	weight := new(big.Rat).SetFrac64(int64(boundWidthWeight*boundWidthScale), boundWidthScale*boundWidthScale)
	out := make([]*big.Rat, b)
	var below int64
	for j := 0; j < b; j++ {
		below += hist[j]
		var width int64 // Σ over units of K·g(d_j(v))
		for _, k := range nonEmpty {
			// Bucket k holds the values with k candidates ≤ v:
			// c_{k−1} ≤ v < c_k.
			if q >= 0.5 && k <= j {
				width += hist[k] * g[j-k] // candidates c_k … c_{j−1} lie in (v, c_j)
			} else if q < 0.5 && k > j {
				width += hist[k] * g[k-1-j] // candidates c_{j+1} … c_{k−1} lie in (c_j, v]
			}
		}
		d := new(big.Rat).Sub(new(big.Rat).SetInt64(below), target)
		d.Abs(d)
		d.Add(d, new(big.Rat).Mul(weight, new(big.Rat).SetInt64(width)))
		out[j] = d.Neg(d)
	}
	return out
}

// upstreamError maps an upstream failure to one generic error. The text of
// the upstream error is never forwarded: it could depend on the data.
func upstreamError(ctx context.Context, err error) error {
	if ctx.Err() != nil || isCancel(err) {
		return pgerr.New(pgerr.QueryCanceled, "canceling statement: the DP query was cancelled or timed out").
			WithDetail("The privacy budget for this query stays charged.").Wrap(err)
	}
	var pe *pgerr.Error
	if errors.As(err, &pe) {
		return pe
	}
	return pgerr.New(pgerr.SystemError, "the DP query could not be answered by the database").
		WithDetail("The privacy budget for this query stays charged.").
		WithHint("retry later; if it persists, ask the data steward to check the proxy log").Wrap(err)
}

func isCancel(err error) bool {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		return s.SQLState() == pgerr.QueryCanceled
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
