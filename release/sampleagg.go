// Privacy-critical: needs DP review.

package release

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// This file releases sample-and-aggregate plans (rewrite/sampleagg.go has
// the mechanism and its guarantee). Per query:
//
//  1. mechanisms: when k is chosen from a noisy count, the count of
//     distinct units (L∞ = 1) gets the share CountShare of ε (and δ); the
//     rest is split equally between the m statistics, each calibrated to
//     sensitivity u − l (the sum S over blocks of clipped, centred block
//     answers moves by at most u − l when one unit is added or removed);
//  2. reserve all of them in one ledger charge, before any data is read;
//  3. run the plan's SQL: one row per block count k (S per statistic, n);
//  4. noise n, choose k = ChooseBlocks(ñ) (post-processing), noise the S of
//     level k only; release c + S̃/k clamped to [l, u]
//     (post-processing), so the noise on the average has scale
//     (u − l)/(kε_i) for Laplace;
//  5. record the answer; the NOTICE says that sample-and-aggregate was used
//     and with which k.
//
// By basic composition (adaptive: k depends on the released ñ only) the
// query costs the sum of the mechanisms' ε and δ, which is at most the
// query's ε and δ.

// saMechanisms builds the count mechanism (nil when k is fixed) and one
// mechanism per statistic.
func (r *Releaser) saMechanisms(req Request) (count noise.Mechanism, stats []measurement, err error) {
	plan, sa := req.Plan, req.Plan.SampleAgg
	table, ok := req.Dataset.Table(plan.Table)
	if !ok || table.Public {
		return nil, nil, pgerr.New(pgerr.InternalError, "internal error: plan names no protected table")
	}
	nStats := len(plan.Measures)
	eps, del := req.Epsilon, 0.0
	if req.Mechanism == policy.MechanismGaussian {
		del = req.Delta
	}
	statEps, statDel := eps, del
	if sa.CountMeasure >= 0 {
		nStats--
		if !(sa.CountShare > 0 && sa.CountShare < 1) || sa.CountMeasure != nStats {
			return nil, nil, pgerr.New(pgerr.InternalError, "internal error: malformed sample-and-aggregate plan")
		}
		countEps := splitDown(eps*sa.CountShare, 1)
		statEps = splitDown(eps-countEps, 1)
		for countEps+statEps > eps { // keep the sum within ε despite rounding
			statEps = math.Nextafter(statEps, 0)
		}
		countDel, statDelta := 0.0, 0.0
		if del > 0 {
			countDel = del * sa.CountShare
			statDelta = del - countDel
			for countDel+statDelta > del {
				statDelta = math.Nextafter(statDelta, 0)
			}
		}
		statDel = statDelta
		count, err = r.saMechanism(req, countEps, countDel, sensitivity.UnitCountLInf(), true)
		if err != nil {
			return nil, nil, err
		}
	}
	statEps = splitDown(statEps, nStats)
	if del > 0 {
		statDel = splitDown(statDel, nStats)
	}
	for i, ms := range plan.Measures[:nStats] {
		if ms.Kind != rewrite.MeasureSampleAgg || !(ms.Upper > ms.Lower) {
			return nil, nil, pgerr.New(pgerr.InternalError, "internal error: malformed sample-and-aggregate plan")
		}
		// Cross-check the planner: S moves by at most u − l.
		if ms.LInf < sensitivity.SampleAggLInf(ms.Lower, ms.Upper) {
			return nil, nil, pgerr.New(pgerr.InternalError, "internal error: plan sensitivity below the policy bound")
		}
		m, err := r.saMechanism(req, statEps, statDel, ms.LInf, false)
		if err != nil {
			return nil, nil, err
		}
		stats = append(stats, measurement{measure: plan.Measures[i], mech: m})
	}
	return count, stats, nil
}

// saMechanism is one mechanism of a sample-and-aggregate query: one cell
// (ungrouped), sensitivity lInf.
func (r *Releaser) saMechanism(req Request, epsilon, delta, lInf float64, integer bool) (noise.Mechanism, error) {
	var mech noise.Mechanism
	var err error
	switch req.Mechanism {
	case policy.MechanismLaplace:
		mech, err = noise.NewLaplace(noise.Params{Epsilon: epsilon, Sensitivity: lInf, Integer: integer, Cells: 1, Rand: r.testOnlyRand})
	case policy.MechanismGaussian:
		mech, err = noise.NewGaussian(noise.Params{Epsilon: epsilon, Delta: delta, Sensitivity: lInf, Integer: integer, Cells: 1, Rand: r.testOnlyRand})
	default:
		return nil, pgerr.New(pgerr.InvalidParameterValue, "unknown mechanism %q", req.Mechanism).WithHint("SET dp.mechanism = laplace")
	}
	if err != nil {
		return nil, pgerr.New(pgerr.InvalidParameterValue, "cannot calibrate noise for this query: %v", err).
			WithHint("use a larger dp.epsilon (e.g. SET dp.epsilon = 0.1)")
	}
	return mech, nil
}

// runSampleAgg answers a sample-and-aggregate plan (see the file comment).
func (r *Releaser) runSampleAgg(ctx context.Context, req Request) (*Result, error) {
	plan, sa := req.Plan, req.Plan.SampleAgg
	if len(plan.Keys) > 0 || len(sa.Levels) == 0 {
		return nil, pgerr.New(pgerr.InternalError, "internal error: malformed sample-and-aggregate plan")
	}
	key := cacheKey(req)
	if !req.NoCache {
		if res, ok, err := r.cached(ctx, req, key); err != nil || ok {
			return res, err
		}
	}
	count, stats, err := r.saMechanisms(req)
	if err != nil {
		return nil, err
	}
	var events []accountant.Event
	for _, m := range append([]noise.Mechanism{count}, mechs(stats)...) {
		if m == nil {
			continue
		}
		events = append(events, accountant.Event{Mechanism: m.Name(), Epsilon: m.Epsilon(), Delta: m.Delta(), NoiseMultiplier: m.NoiseMultiplier()})
	}
	res, err := r.ledger.Reserve(ctx, accountant.Charge{
		Analyst: req.Analyst, Dataset: req.Dataset.Name, Events: events,
		Fingerprint: key, PolicyVersion: req.Dataset.Version, Policy: req.Dataset,
	})
	if err != nil {
		return nil, err
	}
	rows, err := req.Upstream.Query(ctx, plan.SQL, plan.QueryArgs(req.Dataset)...)
	if err != nil {
		return nil, upstreamError(ctx, err)
	}
	levels, err := collectLevels(plan, rows)
	if err != nil {
		return nil, err
	}

	k := sa.Levels[0]
	if count != nil {
		n := levels[sa.Levels[0]][sa.CountMeasure]
		nt, err := count.AddNoise(n)
		if err != nil {
			return nil, pgerr.New(pgerr.InternalError, "internal error while adding noise").Wrap(err)
		}
		f, _ := nt.Float64()
		k = sa.ChooseBlocks(f)
	}
	noisy := make([]*big.Rat, len(stats))
	for i, m := range stats {
		v, err := m.mech.AddNoise(levels[k][i])
		if err != nil {
			return nil, pgerr.New(pgerr.InternalError, "internal error while adding noise").Wrap(err)
		}
		noisy[i] = v
	}

	out := &Result{ReservationID: res.ID}
	row := make([]value, len(plan.Outputs))
	var parts []string
	for i, o := range plan.Outputs {
		out.Columns = append(out.Columns, Column{Name: o.Name, PGType: o.PGType})
		row[i] = value{num: sampleAggAnswer(noisy[o.Measure], k, o.Lower, o.Upper), decimals: 6}
		m := stats[o.Measure].mech
		parts = append(parts, fmt.Sprintf("±%s (%s, %s)", num(m.HalfWidth(0.95)/float64(k)), o.Name, costText(m.Epsilon(), m.Delta())))
	}
	for _, r := range orderAndLimit(plan, [][]value{row}) {
		text := make([]*string, len(r))
		for i, v := range r {
			text[i] = v.text()
		}
		out.Rows = append(out.Rows, text)
	}
	errs := strings.Join(parts, ", ") + "; " + sampleAggNote(sa, k)
	out.Notice = notice(res.Cost, res.Status, false, errs)
	r.record(ctx, req, key, res, &storedAnswer{Columns: out.Columns, Rows: out.Rows, Errors: errs})
	return out, nil
}

func mechs(ms []measurement) []noise.Mechanism {
	out := make([]noise.Mechanism, len(ms))
	for i, m := range ms {
		out[i] = m.mech
	}
	return out
}

// sampleAggNote is the NOTICE's account of the mechanism.
func sampleAggNote(sa *rewrite.SampleAgg, k int) string {
	how := "fixed by dp.sample_blocks"
	if sa.CountMeasure >= 0 {
		how = fmt.Sprintf("chosen from a noisy unit count, about %d units per block", sa.BlockUnits)
	}
	return fmt.Sprintf("sample-and-aggregate over k=%d blocks (%s; each block's answer clipped to the output range)", k, how)
}

// sampleAggAnswer is c + S̃/k clamped to [l, u]: the noisy average of the
// k clipped block answers (post-processing).
func sampleAggAnswer(s *big.Rat, k int, lower, upper float64) *big.Rat {
	a := new(big.Rat).Quo(s, new(big.Rat).SetInt64(int64(k)))
	a.Add(a, new(big.Rat).SetFloat64(rewrite.SampleMid(lower, upper)))
	lo, hi := new(big.Rat).SetFloat64(lower), new(big.Rat).SetFloat64(upper)
	if a.Cmp(lo) < 0 {
		a = lo
	}
	if a.Cmp(hi) > 0 {
		a = hi
	}
	return a
}

// collectLevels reads the rows of a sample-and-aggregate SQL: k, S_0 …
// S_{m−1}[, n]. Levels without a row (no input rows) are all zero.
func collectLevels(plan *rewrite.Plan, rows [][]*string) (map[int][]*big.Rat, error) {
	nm := len(plan.Measures)
	out := make(map[int][]*big.Rat, len(plan.SampleAgg.Levels))
	for _, k := range plan.SampleAgg.Levels {
		vs := make([]*big.Rat, nm)
		for i := range vs {
			vs[i] = new(big.Rat)
		}
		out[k] = vs
	}
	seen := map[int]bool{}
	for _, row := range rows {
		if len(row) != 1+nm || row[0] == nil {
			return nil, pgerr.New(pgerr.InternalError, "internal error: upstream returned an unexpected row shape")
		}
		k, err := strconv.Atoi(*row[0])
		if err != nil || out[k] == nil || seen[k] {
			return nil, pgerr.New(pgerr.InternalError, "internal error: upstream returned an unexpected block count")
		}
		seen[k] = true
		for i := 0; i < nm; i++ {
			if row[1+i] == nil {
				continue
			}
			v, ok := new(big.Rat).SetString(*row[1+i])
			if !ok {
				return nil, pgerr.New(pgerr.InternalError, "internal error: upstream returned a non-numeric measure")
			}
			out[k][i] = v
		}
	}
	return out, nil
}

// explainSampleAgg is Explain for a sample-and-aggregate plan: the same
// mechanisms Run would build (never sampled), the rule for k and the SQL
// with the secret key redacted.
func explainSampleAgg(req Request) ([]Column, [][]*string, error) {
	plan, sa := req.Plan, req.Plan.SampleAgg
	count, stats, err := (&Releaser{}).saMechanisms(req)
	if err != nil {
		return nil, nil, err
	}
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	var eps, del float64
	for _, m := range append([]noise.Mechanism{count}, mechs(stats)...) {
		if m != nil {
			eps += m.Epsilon()
			del += m.Delta()
		}
	}
	add("DP Sample-and-aggregate on %s.%s  (mechanism=%s statistics=%d)", plan.Dataset, plan.Table, req.Mechanism, len(stats))
	cost := fmt.Sprintf("  Cost: epsilon=%s", num(eps))
	if del > 0 {
		cost += fmt.Sprintf(" delta=%s", num(del))
	}
	lines = append(lines, cost+" (the accountant may charge less under its composition)")
	if count != nil {
		add("  Blocks: k chosen at run time from a noisy count of distinct units (epsilon=%s, half_width_95=%s): the largest k in %v with k·%d ≤ count, else %d",
			num(count.Epsilon()), num(count.HalfWidth(0.95)), sa.Levels, sa.BlockUnits, sa.Levels[0])
	} else {
		add("  Blocks: k=%d (SET dp.sample_blocks)", sa.Levels[0])
	}
	add("  Units are split into the k blocks by HMAC-SHA-256 of the unit under the dataset's secret key; each unit is in exactly one block")
	for _, o := range plan.Outputs {
		m := stats[o.Measure]
		line := fmt.Sprintf("  Output %s (%s): %s per block, clipped to [%s, %s] (empty or NULL blocks count as %s), averaged over k blocks; sensitivity (u−l)/k = %s/k, noise_scale=%s/k",
			o.Name, o.PGType, m.measure.Column, num(o.Lower), num(o.Upper), num(rewrite.SampleMid(o.Lower, o.Upper)),
			num(m.measure.LInf), num(m.mech.NoiseMultiplier()*m.measure.LInf))
		if count == nil {
			line += fmt.Sprintf(" (half_width_95=%s)", num(m.mech.HalfWidth(0.95)/float64(sa.Levels[0])))
		} else {
			line += fmt.Sprintf(" (half_width_95=%s/k)", num(m.mech.HalfWidth(0.95)))
		}
		lines = append(lines, line)
	}
	add("  SQL: %s", plan.RedactedSQL())
	rows := make([][]*string, len(lines))
	for i := range lines {
		rows[i] = []*string{&lines[i]}
	}
	return []Column{ExplainColumn}, rows, nil
}
