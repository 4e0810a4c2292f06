// Privacy-critical: needs DP review.

package release

import (
	"context"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// This file releases sample-and-aggregate plans (rewrite/sampleagg.go has
// the mechanism and its guarantee). Per query:
//
//  1. mechanisms: when k is chosen from a noisy count, the count of
//     distinct units (L∞ = 1) gets the share CountShare of ε (and δ); the
//     rest is split equally between the m statistics, each calibrated to
//     per-group sensitivity L∞ = u − l (the sum S over blocks of clipped,
//     centred block answers moves by at most u − l when one unit is added
//     or removed) over L0 = Plan.MaxGroupsPerUnit groups: L1 = L0·(u − l)
//     for Laplace, L2 = √L0·(u − l) for Gaussian, as for a grouped SUM
//     (L0 = 1 when ungrouped);
//  2. reserve all of them in one ledger charge, before any data is read;
//  3. run the plan's SQL with the key as bind parameters: one row per
//     (group, block count k) with S per statistic and n;
//  4. per released group (every value of the public key domains, also
//     those without rows, whose S and n are 0): noise n, choose
//     k_g = ChooseBlocks(ñ_g) (post-processing), noise the S of level k_g
//     only; release c + S̃/k_g clamped to [l, u] (post-processing), so the
//     noise on the average has scale L1/(k_g·ε_i) for Laplace;
//  5. record the answer; the NOTICE says that sample-and-aggregate was used
//     and with which k (per group: how many groups got each k).
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
		if plan.PrivateGroups() {
			// The threshold takes its share first (saThresholdDelta).
			thr := saThresholdDelta(req)
			del = shrinkToFit(req.Delta-thr, func(d float64) bool { return d+thr <= req.Delta })
		}
	}
	statEps, statDel := eps, del
	if sa.CountMeasure >= 0 {
		nStats--
		if !(sa.CountShare > 0 && sa.CountShare < 1) || sa.CountMeasure != nStats {
			return nil, nil, pgerr.New(pgerr.InternalError, "internal error: malformed sample-and-aggregate plan")
		}
		countEps := splitDown(eps*sa.CountShare, 1)
		// Keep the sum within ε despite rounding.
		statEps = shrinkToFit(splitDown(eps-countEps, 1), func(s float64) bool { return countEps+s <= eps })
		countDel, statDelta := 0.0, 0.0
		if del > 0 {
			countDel = del * sa.CountShare
			statDelta = shrinkToFit(del-countDel, func(d float64) bool { return countDel+d <= del })
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
		if ms.Kind != dpplan.MeasureSampleAgg || !(ms.Upper > ms.Lower) {
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

// saThresholdDelta is δ_thr, the δ of the partition-selection threshold of
// a plan with private keys: the whole δ under Laplace (the noise is pure
// ε-DP), half of it under Gaussian (the other half is the noises').
func saThresholdDelta(req Request) float64 {
	if req.Mechanism == policy.MechanismGaussian {
		return splitDown(req.Delta, 2)
	}
	return req.Delta
}

// saSelection returns the partition-selection threshold τ of a plan with
// private keys (nil for public keys): a group is released iff its noisy
// distinct-unit count (the count mechanism) is ≥ τ.
func saSelection(req Request, count noise.Mechanism) (*big.Rat, error) {
	if !req.Plan.PrivateGroups() {
		return nil, nil
	}
	if count == nil {
		return nil, pgerr.New(pgerr.InternalError, "internal error: partition selection without a count")
	}
	tau, err := noise.PartitionThreshold(count, saThresholdDelta(req), req.Plan.MaxGroupsPerUnit)
	if err != nil {
		return nil, withScaleHint(pgerr.New(pgerr.InvalidParameterValue, "cannot calibrate partition selection for this query: %v", err).
			WithHint("use a larger dp.delta (e.g. SET dp.delta = 1e-7) or dp.epsilon"), err)
	}
	if k := minUnitsOf(req.Plan); k != nil && k.Cmp(tau) > 0 {
		tau = k // min_units_per_cell: kept iff ñ ≥ max(τ, k) (minunits.go)
	}
	return tau, nil
}

// saMechanism is one mechanism of a sample-and-aggregate query: a vector
// with one cell per released group (one cell when ungrouped), of which one
// unit changes at most L0 = Plan.MaxGroupsPerUnit cells by at most lInf
// each (see the file comment), so L1 = L0·lInf and L2 = √L0·lInf.
func (r *Releaser) saMechanism(req Request, epsilon, delta, lInf float64, integer bool) (noise.Mechanism, error) {
	l0 := req.Plan.MaxGroupsPerUnit
	if l0 < 1 {
		return nil, pgerr.New(pgerr.InternalError, "internal error: malformed sample-and-aggregate plan")
	}
	bounds := sensitivity.Bounds{L0: l0, LInf: lInf}
	return r.newMechanism(req.Mechanism, bounds, epsilon, delta, integer, l0, "noise")
}

// executeSampleAgg runs a calibrated, charged sample-and-aggregate
// release (see execute).
func (r *Releaser) executeSampleAgg(ctx context.Context, cal *calibration, res *accountant.Reservation, key string) (*Result, *storedAnswer, error) {
	req, plan := cal.req, cal.req.Plan
	sa, private, groups := plan.SampleAgg, plan.PrivateGroups(), cal.groups
	count, stats, tau := cal.saCount, cal.saStats, cal.saTau
	// Per group: noise n, keep the group iff ñ ≥ τ (private keys), choose
	// k (post-processing), noise S of level k.
	var ks []int
	minUnits, suppressed := minUnitsOf(plan), 0
	var rowsOut [][]value
	var outKeys [][]string // the released rows' keys, for the streamed order
	// A group passed by partition selection is kept among the answer's
	// first groups by key (firstK) and measured after the scan.
	first := newFirstK[saGroup](plan)
	// k, the block level a group is released at, is chosen from its noisy
	// unit count ñ (post-processing).
	level := func(nt *big.Rat) int {
		if nt == nil || len(sa.Levels) == 1 {
			return sa.Levels[0]
		}
		f, _ := nt.Float64()
		return sa.ChooseBlocks(f)
	}
	finish := func(key []string, lv map[int][]*big.Rat, nt *big.Rat) error {
		k := level(nt)
		if count != nil {
			if minUnits != nil && nt.Cmp(minUnits) < 0 {
				// min_units_per_cell (minunits.go): the keys stay, the
				// statistics are NULL (post-processing of ñ). Its k is not
				// reported: chosen from ñ, it would say how large the
				// withheld group is.
				suppressed++
				row := make([]value, len(plan.Outputs))
				for i, o := range plan.Outputs {
					row[i] = value{null: true}
					if o.Kind == dpplan.OutputKey {
						t := keyText(o.PGType, key[o.Key])
						row[i] = value{key: &t}
					}
				}
				rowsOut, outKeys = append(rowsOut, row), append(outKeys, key)
				return nil
			}
		}
		ks = append(ks, k)
		noisy := make([]*big.Rat, len(stats))
		for i, m := range stats {
			v, err := m.mech.AddNoise(lv[k][i])
			if err != nil {
				return pgerr.New(pgerr.InternalError, "internal error while adding noise").Wrap(err)
			}
			noisy[i] = v
		}
		row := make([]value, len(plan.Outputs))
		for i, o := range plan.Outputs {
			switch o.Kind {
			case dpplan.OutputKey:
				t := keyText(o.PGType, key[o.Key])
				row[i] = value{key: &t}
			case dpplan.OutputSampleAgg:
				row[i] = value{num: sampleAggAnswer(noisy[o.Measure], k, o.Lower, o.Upper), decimals: 6}
			default:
				return pgerr.New(pgerr.InternalError, "internal error: malformed sample-and-aggregate plan")
			}
		}
		rowsOut, outKeys = append(rowsOut, row), append(outKeys, key)
		return nil
	}
	release := func(key []string, lv map[int][]*big.Rat) error {
		if count == nil {
			return finish(key, lv, nil)
		}
		nt, err := count.AddNoise(lv[sa.Levels[0]][sa.CountMeasure])
		if err != nil {
			return pgerr.New(pgerr.InternalError, "internal error while adding noise").Wrap(err)
		}
		if tau == nil {
			return finish(key, lv, nt)
		}
		if nt.Cmp(tau) < 0 {
			return nil // not selected: nothing of this group is released
		}
		// Only the level it is released at is kept
		// (TestReview71_SampleAggKeptGroupsHoldEveryBlockLevel).
		k := level(nt)
		return first.offer(key, func() (saGroup, error) { return saGroup{map[int][]*big.Rat{k: lv[k]}, nt}, nil })
	}
	finishKept := func() error {
		kept, err := first.sorted()
		if err != nil {
			return err
		}
		for _, g := range kept {
			if err := finish(g.key, g.v.levels, g.v.noisy); err != nil {
				return err
			}
		}
		return nil
	}

	// The key is passed as bind parameters, never in the SQL text. From
	// here on, every error is an incident (incident.go).
	if streamer, ok := req.Upstream.(RowStreamer); ok && private {
		// Private keys: the candidate groups come from the data, about
		// one row per block level each, ordered by key (the SQL's ORDER
		// BY): read one group at a time and keep only the released ones.
		// The rows are then sorted by key as the other path's are.
		gr := newGroupReader(plan, release)
		if err := streamer.QueryEach(ctx, plan.SQL, gr.add, plan.QueryArgs(req.Dataset)...); err != nil {
			return nil, nil, err
		}
		if err := gr.flush(); err != nil {
			return nil, nil, err
		}
		if err := finishKept(); err != nil {
			return nil, nil, err
		}
		idx := make([]int, len(rowsOut))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return lessKeys(plan.Keys, outKeys[idx[a]], outKeys[idx[b]]) })
		sorted := make([][]value, len(idx))
		for i, j := range idx {
			sorted[i] = rowsOut[j]
		}
		rowsOut = sorted
	} else {
		rows, err := req.Upstream.Query(ctx, plan.SQL, plan.QueryArgs(req.Dataset)...)
		if err != nil {
			return nil, nil, err
		}
		if private {
			groups = dataGroups(plan, rows)
		}
		levels, err := collectLevels(plan, groups, rows)
		if err != nil {
			return nil, nil, err
		}
		for g := range groups {
			if err := release(groups[g], levels[g]); err != nil {
				return nil, nil, err
			}
		}
		if err := finishKept(); err != nil {
			return nil, nil, err
		}
	}

	out := &Result{ReservationID: res.ID, Cost: res.Cost, Fingerprint: key}
	for _, o := range plan.Outputs {
		out.Columns = append(out.Columns, Column{Name: o.Name, PGType: o.PGType})
	}
	widths, parts := sampleAggWidths(plan, stats, ks) // text.go
	for _, r := range orderAndLimit(plan, rowsOut) {
		text := make([]*string, len(r))
		w := make([]*string, len(r))
		for i, v := range r {
			text[i] = v.text()
			if text[i] != nil {
				w[i] = widths[i]
			}
		}
		out.Rows = append(out.Rows, text)
		out.Widths = append(out.Widths, w)
	}
	errs := strings.Join(parts, ", ") + "; " + sampleAggNote(sa, plan, ks)
	if note := firstKNote(first.passed, len(first.kept)); note != "" {
		errs += "; " + note
	}
	if minUnits != nil {
		errs += "; " + minUnitsText(plan.MinUnits, req.Dataset.PrivacyUnit, suppressed, len(ks)+suppressed, "the noisy unit count of sample-and-aggregate, "+count.Name()+" noise ±"+num(count.HalfWidth(0.95))+" at 95%")
	}
	errs = capErrors(errs) // text.go
	out.Notice = notice(res.Cost, res.Status, false, errs)
	out.Errors = errs
	return out, &storedAnswer{Columns: out.Columns, Rows: out.Rows, Widths: out.Widths, Errors: errs}, nil
}

// saGroup is a selected group of sample-and-aggregate kept until the scan
// ends: its block levels' sums and its noisy unit count.
type saGroup struct {
	levels map[int][]*big.Rat
	noisy  *big.Rat
}

func mechs(ms []measurement) []noise.Mechanism {
	out := make([]noise.Mechanism, len(ms))
	for i, m := range ms {
		out[i] = m.mech
	}
	return out
}

// sampleAggAnswer is c + S̃/k clamped to [l, u]: the noisy average of the
// k clipped block answers (post-processing).
func sampleAggAnswer(s *big.Rat, k int, lower, upper float64) *big.Rat {
	a := new(big.Rat).Quo(s, new(big.Rat).SetInt64(int64(k)))
	a.Add(a, new(big.Rat).SetFloat64(dpplan.SampleMid(lower, upper)))
	lo, hi := new(big.Rat).SetFloat64(lower), new(big.Rat).SetFloat64(upper)
	if a.Cmp(lo) < 0 {
		a = lo
	}
	if a.Cmp(hi) > 0 {
		a = hi
	}
	return a
}

// dataGroups returns the groups of a plan with private keys: the distinct
// key tuples of the rows (canonical text; rows with a NULL key, which the
// SQL never returns, are skipped), sorted like release/partition.go sorts
// kept groups (lessKeys), so the order of released rows does not depend on
// the upstream's row order.
func dataGroups(plan *dpplan.Plan, rows [][]*string) [][]string {
	nk := len(plan.Keys)
	seen := map[string]bool{}
	var groups [][]string
	for _, row := range rows {
		if len(row) < nk {
			continue // collectLevels reports the shape
		}
		key, ok := rowKey(plan, row)
		if !ok {
			continue
		}
		if id := strings.Join(key, "\x00"); !seen[id] {
			seen[id] = true
			groups = append(groups, key)
		}
	}
	sort.Slice(groups, func(a, b int) bool { return lessKeys(plan.Keys, groups[a], groups[b]) })
	return groups
}

// collectLevels reads the rows of a sample-and-aggregate SQL: key_0 …
// key_{K−1}, k, S_0 … S_{m−1}[, n], into out[g][k] for the released groups
// (groupKeys order). Groups and levels without a row (no input rows) are
// all zero; rows of a group outside the domains are ignored (the SQL
// already filters them).
func collectLevels(plan *dpplan.Plan, groups [][]string, rows [][]*string) ([]map[int][]*big.Rat, error) {
	index := groupIndex(groups)
	out := make([]map[int][]*big.Rat, len(groups))
	for g := range out {
		out[g] = newLevels(plan)
	}
	seen := map[string]bool{}
	for _, row := range rows {
		key, k, vals, err := levelRow(plan, row)
		if err != nil {
			return nil, err
		}
		g, ok := index[strings.Join(key, "\x00")]
		if key == nil || !ok {
			continue
		}
		if out[g][k] == nil {
			return nil, errBlockCount()
		}
		id := strconv.Itoa(g) + "/" + strconv.Itoa(k)
		if seen[id] {
			return nil, errGroupTwice()
		}
		seen[id] = true
		out[g][k] = vals
	}
	return out, nil
}

// newLevels is a group's measures per block level, all zero.
func newLevels(plan *dpplan.Plan) map[int][]*big.Rat {
	lv := make(map[int][]*big.Rat, len(plan.SampleAgg.Levels))
	for _, k := range plan.SampleAgg.Levels {
		vs := make([]*big.Rat, len(plan.Measures))
		for i := range vs {
			vs[i] = new(big.Rat)
		}
		lv[k] = vs
	}
	return lv
}

// levelRow reads one row of a sample-and-aggregate SQL: its canonical
// keys (nil when one is NULL), its level k and its measures (NULL as 0).
func levelRow(plan *dpplan.Plan, row []*string) (key []string, k int, vals []*big.Rat, err error) {
	nk, nm := len(plan.Keys), len(plan.Measures)
	if len(row) != nk+1+nm || row[nk] == nil {
		return nil, 0, nil, pgerr.New(pgerr.InternalError, "internal error: upstream returned an unexpected row shape")
	}
	key, ok := rowKey(plan, row)
	if !ok {
		return nil, 0, nil, nil
	}
	if k, err = strconv.Atoi(*row[nk]); err != nil {
		return nil, 0, nil, errBlockCount()
	}
	vals = make([]*big.Rat, nm)
	for i := 0; i < nm; i++ {
		vals[i] = new(big.Rat)
		if row[nk+1+i] == nil {
			continue
		}
		v, ok := new(big.Rat).SetString(*row[nk+1+i])
		if !ok {
			return nil, 0, nil, pgerr.New(pgerr.InternalError, "internal error: upstream returned a non-numeric measure")
		}
		vals[i] = v
	}
	return key, k, vals, nil
}

func errBlockCount() error {
	return pgerr.New(pgerr.InternalError, "internal error: upstream returned an unexpected block count")
}

func errGroupTwice() error {
	return pgerr.New(pgerr.InternalError, "internal error: upstream returned a group twice")
}

// groupReader reads a private-key sample-and-aggregate SQL's rows one at
// a time (they come ordered by key) and hands each group's levels to
// release when the next group begins (and at flush). A group whose rows
// are not contiguous, or a level twice, is an internal error; it keeps a
// 16-byte digest per group seen for that check.
type groupReader struct {
	plan    *dpplan.Plan
	release func(key []string, lv map[int][]*big.Rat) error
	key     []string
	id      string
	lv      map[int][]*big.Rat
	got     map[int]bool
	seen    map[[16]byte]bool
}

func newGroupReader(plan *dpplan.Plan, release func([]string, map[int][]*big.Rat) error) *groupReader {
	return &groupReader{plan: plan, release: release, seen: map[[16]byte]bool{}}
}

// add takes one row.
func (gr *groupReader) add(row []*string) error {
	key, k, vals, err := levelRow(gr.plan, row)
	if err != nil || key == nil {
		return err
	}
	if id := strings.Join(key, "\x00"); gr.key == nil || id != gr.id {
		if err := gr.flush(); err != nil {
			return err
		}
		d := groupDigest(id)
		if gr.seen[d] {
			return errGroupTwice()
		}
		gr.seen[d] = true
		gr.key, gr.id, gr.lv, gr.got = key, id, newLevels(gr.plan), map[int]bool{}
	}
	if gr.lv[k] == nil {
		return errBlockCount()
	}
	if gr.got[k] {
		return errGroupTwice()
	}
	gr.got[k] = true
	gr.lv[k] = vals
	return nil
}

// flush releases the group being read, if any.
func (gr *groupReader) flush() error {
	if gr.key == nil {
		return nil
	}
	key, lv := gr.key, gr.lv
	gr.key, gr.lv = nil, nil
	return gr.release(key, lv)
}
