// Privacy-critical: needs DP review.

package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// maxGroups bounds the number of released groups of one query (the product
// of the key domains), so one query cannot make the proxy allocate without
// bound; Plan.CellsChanged counts up to it.
const maxGroups = dpplan.MaxPublicGroups

// Request is one DP query of one analyst.
type Request struct {
	Analyst   string
	Dataset   *policy.Dataset
	Plan      *dpplan.Plan
	Epsilon   float64 // the query's ε (session dp.epsilon or the policy default)
	Delta     float64 // the query's δ (Gaussian only)
	Mechanism string  // policy.MechanismLaplace or policy.MechanismGaussian
	Upstream  Upstream
	// NoCache skips the answer cache (SET dp.cache = off): the query is
	// charged and answered afresh.
	NoCache bool
	// PublishAt, when set, is the earliest moment the answer is recorded
	// in the ledger and the answer cache (and Run returns): the dataset's
	// padded response time. Recorded any earlier, a concurrent identical
	// query (another session, another proxy sharing the ledger) would get
	// the cached answer exactly when the upstream query had finished —
	// a timing oracle on the data through the cache (issue 14).
	PublishAt time.Time
	// PadStep, with PublishAt, sets the ladder of release times: an answer
	// not ready at PublishAt is recorded at the next PublishAt +
	// PadStep·(2^k − 1) (PadUntil), never as soon as it is ready.
	PadStep time.Duration
	// Contended, when not nil, reports whether a statement of another
	// analyst ran on the dataset while this one did (the proxy's
	// admission, proxy/admission.go). A time-out after the charge under
	// others' load is an availability failure, not the analyst's incident
	// (incident.go).
	Contended func() bool
}

// storedAnswer is what the ledger keeps of a released answer: exactly what
// the analyst saw.
type storedAnswer struct {
	Columns []Column    `json:"columns"`
	Rows    [][]*string `json:"rows"`
	// Widths are the cells' half-widths (Result.Widths).
	Widths [][]*string `json:"widths,omitempty"`
	// Errors is the half-width part of the NOTICE ("±… (count), …").
	Errors string `json:"errors"`
}

// measurement is one plan measure with its mechanism.
type measurement struct {
	measure dpplan.Measure
	mech    noise.Mechanism
	// quant is mech for a quantile measure (quantile.go), else nil.
	quant *quantileMech
}

// Run answers the request or returns a *pgerr.Error. Every failure after
// the charge is an incident (incident.go): one fixed error.
//
// ctx must not be the client's: a client's statement_timeout or cancel
// request choosing when a DP query stops would turn its running time into
// an answer/error bit (proxy/dp.go runs it under the proxy's own timeout).
func (r *Releaser) Run(ctx context.Context, req Request) (*Result, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	if err := r.suspendedHere(req); err != nil {
		return nil, err
	}
	return r.runCharged(ctx, req, func(ch *charged) (*Result, error) {
		return r.run(ctx, req, ch)
	})
}

// run answers one request (ordinary or sample-and-aggregate): the cache,
// else calibrate, reserve, execute, record.
func (r *Releaser) run(ctx context.Context, req Request, ch *charged) (*Result, error) {
	// A cached answer needs no mechanism: look it up before calibrating
	// (Gaussian calibration is a bisection).
	key := cacheKey(req)
	if !req.NoCache {
		if res, ok, err := r.cached(ctx, req, key); err != nil || ok {
			return res, err
		}
	}
	cal, err := r.calibrate(req) // calibrate.go
	if err != nil {
		return nil, err
	}
	// 2. Reserve: durable before any private data is read.
	res, err := r.reserve(ctx, req, cal.events, key)
	if err != nil {
		return nil, err
	}
	ch.res, ch.key = res, key
	out, sa, err := r.execute(ctx, cal, res, key)
	if err != nil {
		return nil, err
	}
	// 6. Record the released answer. The charge is already durable; a
	// failure to store the answer does not withhold it (the analyst has
	// paid). Only a recorded answer enters the in-memory cache.
	out.ReadyAt = time.Now()
	r.record(ctx, cal.req, key, res, sa)
	return out, nil
}

// reserve charges events durably, before any private data is read.
func (r *Releaser) reserve(ctx context.Context, req Request, events []accountant.Event, key string) (*accountant.Reservation, error) {
	if err := stale(req.Upstream); err != nil {
		return nil, err
	}
	return r.ledger.Reserve(ctx, accountant.Charge{
		Analyst:       req.Analyst,
		Dataset:       req.Dataset.Name,
		Events:        events,
		Fingerprint:   key,
		PolicyVersion: req.Dataset.Version,
		Policy:        req.Dataset,
	})
}

// stale is up's Stale error (Staler), nil when it has none: a query its
// pool would withhold is refused before the charge.
func stale(up Upstream) error {
	if s, ok := up.(Staler); ok {
		return s.Stale()
	}
	return nil
}

// execute runs a calibrated, charged release: the upstream queries, the
// choices made by DP, the noise and the post-processing. Every error is
// after the charge (an incident, incident.go).
func (r *Releaser) execute(ctx context.Context, cal *calibration, res *accountant.Reservation, key string) (*Result, *storedAnswer, error) {
	if cal.req.Plan.SampleAgg != nil {
		return r.executeSampleAgg(ctx, cal, res, key) // sampleagg.go
	}
	req, plan := cal.req, cal.req.Plan
	clip, ms, auto, sel, events, groups := cal.clip, cal.ms, cal.auto, cal.sel, cal.events, cal.groups

	// 3. Run the emitted SQL. From here on, every error is an incident.
	// With auto clipping, first choose the clamping bounds (autoclip.go).
	clipNote := ""
	if clip != nil {
		hist, err := req.Upstream.Query(ctx, plan.Clip.SQL)
		if err != nil {
			return nil, nil, err
		}
		chosen, err := clip.choose(hist)
		if err != nil {
			return nil, nil, err
		}
		used := false
		if slices.ContainsFunc(chosen, func(c clipResult) bool { return c.changed }) {
			if np, nms, nauto, ok := r.clipPlan(req, chosen, events[1:], cal.cells); ok {
				plan, ms, auto, used = np, nms, nauto, true
				req.Plan = np
			}
		}
		clipNote = clipText(clip, chosen, !used)
	}
	// With auto bounds, choose the plan (autobounds.go).
	autoNote := ""
	if plan.OneWeight {
		autoNote = oneWeightText(plan, req.Dataset) // text.go
	}
	var rows [][]*string
	if auto != nil {
		combined, err := req.Upstream.Query(ctx, plan.Auto.CombinedSQL)
		if err != nil {
			return nil, nil, err
		}
		own, prof, err := auto.split(combined)
		if err != nil {
			return nil, nil, err
		}
		i, err := auto.choose(prof)
		if err != nil {
			return nil, nil, err
		}
		plan, ms = auto.plans[i], auto.mechs[i]
		req.Plan = plan
		autoNote = autoText(auto, i, len(plan.Keys) > 0)
		if i == len(auto.plans)-1 {
			rows = own // the plan's own bound: answered by the same scan
		}
	}
	var values [][]*big.Rat
	var raw [][]*string  // quantile summaries (quantile.go)
	var units []*big.Rat // the groups' unit counts (minunits.go)
	var selNote string   // selected groups beyond the answer's (partition.go)
	var err error
	streamer, stream := req.Upstream.(RowStreamer)
	stream = stream && rows == nil && sel != nil && cal.cells == nil
	switch {
	case stream:
		// Partition selection over candidates read one at a time: only
		// the kept groups are held (partition.go).
		gs := newGroupSelector(plan, sel)
		if err := streamer.QueryEach(ctx, plan.SQL, gs.add); err != nil {
			return nil, nil, err
		}
		groups, values, raw, err = gs.result()
		selNote = gs.note()
	case rows == nil:
		if rows, err = req.Upstream.Query(ctx, plan.SQL); err != nil {
			return nil, nil, err
		}
	}
	if cal.cells != nil {
		if rows, units, err = unitCounts(plan, groups, rows); err != nil {
			return nil, nil, err
		}
	}
	switch {
	case stream:
	case sel != nil:
		// Partition selection: only the kept groups go on (their
		// quantile summaries too, partition.go).
		groups, values, raw, selNote, err = selectGroups(plan, sel, rows)
	default:
		values, raw, err = collect(plan, groups, rows)
	}
	if err != nil {
		return nil, nil, err
	}

	// 4. Noise every measurement of every group.
	noisy := make([][]*big.Rat, len(groups))
	for g := range groups {
		noisy[g] = make([]*big.Rat, len(ms))
		for i, m := range ms {
			if m.quant != nil {
				v, err := m.quant.releaseGroup(raw[g][i])
				if err != nil {
					return nil, nil, err
				}
				noisy[g][i] = v
				continue
			}
			v, err := m.mech.AddNoise(values[g][i])
			if err != nil {
				return nil, nil, pgerr.New(pgerr.InternalError, "internal error while adding noise").Wrap(err)
			}
			noisy[g][i] = v
		}
	}

	// 5. Post-process.
	out := &Result{ReservationID: res.ID, Cost: res.Cost, Fingerprint: key}
	for _, o := range plan.Outputs {
		out.Columns = append(out.Columns, Column{Name: o.Name, PGType: o.PGType})
	}
	rowsOut := make([][]value, len(groups))
	for g := range groups {
		rowsOut[g] = outputRow(plan, groups[g], noisy[g])
	}
	// min_units_per_cell: a group whose noisy unit count is below the
	// minimum keeps its keys and has its other cells NULL
	// (post-processing, minunits.go).
	suppressed := 0
	var hidden []bool // per group: withheld by min_units_per_cell
	if cal.cells != nil {
		hidden = make([]bool, len(groups))
		for g := range groups {
			off, err := cal.cells.suppressed(units[g])
			if err != nil {
				return nil, nil, err
			}
			if off {
				suppressed++
				hidden[g] = true
				suppress(rowsOut[g])
			}
		}
	}
	// Each cell's 95% half-width travels with its row (post.go).
	widths := releasedWidths(hidden, plan, ms, noisy) // post.go
	widenAtBounds(plan, rowsOut, noisy, widths)
	base := len(plan.Outputs) + len(plan.Hidden)
	widthCells(rowsOut, widths)
	rowsOut = orderAndLimit(plan, having(plan, rowsOut))
	for _, row := range rowsOut {
		text := make([]*string, len(plan.Outputs))
		for i, v := range row[:len(plan.Outputs)] {
			text[i] = v.text()
		}
		out.Rows = append(out.Rows, text)
		out.Widths = append(out.Widths, rowWidths(row, base, widths))
	}
	// The NOTICE speaks of released cells only: a withheld group's
	// half-width or bias estimate would say how large it is
	// (TestAttack67_MinUnitsSuppressedCellHalfWidthInNotice).
	tn, tg, tw := releasedOnly(hidden, noisy, groups, widths) // text.go
	errs := errorsText(req, ms, tn, tg, tw)
	if sel != nil {
		errs += "; " + sel.describe() + "; " + selectionBoundText(plan)
		if selNote != "" {
			errs += "; " + selNote
		}
	}
	if cal.cells != nil {
		errs += "; " + minUnitsText(plan.MinUnits, req.Dataset.PrivacyUnit, suppressed, len(groups), cal.cells.describe()+weightedUnitsText(plan, req.Dataset.PrivacyUnit))
	}
	if autoNote != "" {
		errs += "; " + autoNote
	}
	if clipNote != "" {
		errs += "; " + clipNote
	}
	errs = capErrors(errs) // text.go
	out.Notice = notice(res.Cost, res.Status, false, errs)
	out.Errors = errs

	return out, &storedAnswer{Columns: out.Columns, Rows: out.Rows, Widths: out.Widths, Errors: errs}, nil
}

// cacheKey identifies a query for the answer cache: the analyst, the
// canonical plan (which covers ORDER BY/LIMIT) and the privacy parameters.
// Equal keys under the same policy version get the same released answer, so
// repeating a query neither costs budget nor lets an attacker average noise
// away. Answers are cached per analyst: one analyst's answer is never
// shown to another, whose budget did not pay for it.
func cacheKey(req Request) string {
	// The bytes of fmt's "%q\x00%q\x00%q\x00%v\x00%v" (keys in the ledger
	// stay valid), built without fmt: this runs for every cached answer.
	b := make([]byte, 0, 128)
	b = strconv.AppendQuote(b, req.Analyst)
	b = append(b, 0)
	b = strconv.AppendQuote(b, req.Plan.Fingerprint)
	b = append(b, 0)
	b = strconv.AppendQuote(b, req.Mechanism)
	b = append(b, 0)
	b = strconv.AppendFloat(b, req.Epsilon, 'g', -1, 64)
	b = append(b, 0)
	b = strconv.AppendFloat(b, req.Delta, 'g', -1, 64)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// record stores a released answer on its reservation; only a recorded
// answer enters the in-memory cache. The budget figure after the charge
// refreshes the one the NOTICEs of cached answers use.
func (r *Releaser) record(ctx context.Context, req Request, key string, res *accountant.Reservation, sa *storedAnswer) {
	if !waitPublish(ctx, req) {
		return
	}
	r.statuses.put(statusKeyOf(req), res.Status)
	stored := storedJSON(sa)
	if r.ledger.Release(ctx, res, stored) == nil && stored != nil {
		// Only an answer the ledger stored: memory holds what the ledger
		// recorded, so a repetition is free on every proxy or on none
		// (TestReview87_UnstoredAnswerServedFromMemory).
		r.answers.put(answerKeyOf(req, key), sa)
	}
}

// waitPublish waits until req's publish time (PublishAt, or the step of
// the time ladder the answer reached: PadUntil) and reports whether it
// came. Never publish before PublishAt: when ctx ends first, the answer is
// not recorded (its charge stays reserved, which is safe) rather than
// recorded early.
func waitPublish(ctx context.Context, req Request) bool {
	if d := time.Until(publishTime(req, time.Now())); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// publishTime is when req's answer or error, ready at ready, is published:
// PublishAt, or the step of the time ladder ready reached (zero: at once).
func publishTime(req Request, ready time.Time) time.Time {
	if req.PadStep > 0 {
		return PadUntil(req.PublishAt.Add(-req.PadStep), req.PadStep, ready)
	}
	return req.PublishAt
}

func checkRequest(req Request) error {
	if req.Plan == nil || req.Dataset == nil || req.Upstream == nil {
		return pgerr.New(pgerr.InternalError, "internal error: incomplete DP request")
	}
	if math.IsNaN(req.Epsilon) || math.IsInf(req.Epsilon, 0) || req.Epsilon <= 0 {
		return pgerr.New(pgerr.InvalidParameterValue, "dp.epsilon must be a positive number").
			WithHint("SET dp.epsilon = 0.1")
	}
	if err := checkQueryBounds(req); err != nil { // bounded.go
		return err
	}
	switch req.Mechanism {
	case policy.MechanismLaplace:
		// δ is ignored: the Laplace mechanism is pure ε-DP (the session's
		// dp.delta is for the Gaussian mechanism and for partition
		// selection, see checkSelection).
	case policy.MechanismGaussian:
		if !(req.Delta > 0 && req.Delta < 1) {
			return pgerr.New(pgerr.InvalidParameterValue, "the Gaussian mechanism needs 0 < dp.delta < 1").
				WithHint("SET dp.delta = 1e-7, or SET dp.mechanism = laplace")
		}
	default:
		return pgerr.New(pgerr.InvalidParameterValue, "unknown mechanism %q", req.Mechanism).
			WithHint("SET dp.mechanism = laplace (or gaussian)")
	}
	if len(req.Plan.Measures) == 0 {
		return pgerr.New(pgerr.FeatureNotSupported, "the query has no aggregate to answer").
			WithHint("use COUNT(*), SUM(col) or AVG(col)")
	}
	return checkSelection(req)
}

// mechanisms builds one mechanism per measure. The query's ε and δ are split
// equally between the m measures (and the partition selection, if any; see
// splitBudget): by basic composition the releases together are (ε, δ)-DP.
func (r *Releaser) mechanisms(req Request) ([]measurement, error) {
	plan := req.Plan
	table, ok := req.Dataset.Table(plan.Table)
	if !ok || table.Public {
		return nil, pgerr.New(pgerr.InternalError, "internal error: plan names no protected table")
	}
	shares := splitBudget(req)
	epsilon, delta := shares.epsilon, shares.measureDelta
	// rows: how many rows of a group one unit changes, for the plan's
	// join shape (join.go).
	rows, err := rowsPerUnit(req.Dataset, plan, table)
	if err != nil {
		return nil, err
	}
	out := make([]measurement, len(plan.Measures))
	for i, ms := range plan.Measures {
		if err := checkL1(ms); err != nil {
			return nil, err
		}
		if err := checkMeasureRange(plan, ms); err != nil {
			return nil, err
		}
		if ms.Integer && !integerValued(plan, ms) {
			// Integer noise on a value that need not be an integer
			// would show its fraction.
			return nil, pgerr.New(pgerr.InternalError, "internal error: plan claims integer values it cannot prove")
		}
		epsilon := epsilon
		centre, centred := new(big.Rat).SetString(ms.Centre) // a normalized Σ (x − Centre)
		if !centred && ms.Centre != "" {
			return nil, pgerr.New(pgerr.InternalError, "internal error: invalid centre")
		}
		var lInf float64
		switch ms.Kind {
		case dpplan.MeasureRemoved:
			// Each unit's removed rows are clipped to its allowance
			// L0·R over all groups (rewrite/bias.go).
			if i != len(plan.Measures)-1 || ms.L1 != ms.LInf {
				return nil, pgerr.New(pgerr.InternalError, "internal error: misplaced bias measure")
			}
			lInf = float64(plan.MaxGroupsPerUnit) * sensitivity.CountLInf(rows)
			epsilon = shares.biasEpsilon
		case dpplan.MeasureQuantile:
			qm, err := r.newQuantileMech(ms, rows, plan.MaxGroupsPerUnit, epsilon)
			if err != nil {
				return nil, err
			}
			out[i] = measurement{measure: ms, mech: qm, quant: qm}
			continue
		case dpplan.MeasureCount:
			lInf = sensitivity.CountLInf(rows)
		case dpplan.MeasureSum:
			lInf = sensitivity.SumLInf(rows, ms.Lower, ms.Upper)
			if centred {
				lInf = sensitivity.CentredSumLInf(rows, ms.Lower, ms.Upper, centre)
			}
		case dpplan.MeasureSumSq:
			lInf = sensitivity.SumSqLInf(rows, ms.Lower, ms.Upper)
			if centred {
				lInf = sensitivity.CentredSumSqLInf(rows, ms.Lower, ms.Upper, centre)
			}
		case dpplan.MeasureUnits:
			lInf = sensitivity.UnitCountLInf()
		default:
			return nil, pgerr.New(pgerr.InternalError, "internal error: unknown measure kind")
		}
		// Cross-check the planner: a plan that claims a smaller bound than
		// the policy implies is refused rather than under-noised.
		if ms.LInf < lInf {
			return nil, pgerr.New(pgerr.InternalError, "internal error: plan sensitivity below the policy bound")
		}
		lInf = ms.LInf
		if lInf == 0 {
			// A sum over a column bounded to [0, 0] is always zero; give it
			// the smallest positive bound so the mechanism is well defined.
			lInf = 1
		}
		bounds := sensitivity.Bounds{L0: plan.MaxGroupsPerUnit, LInf: lInf, L1: ms.L1}
		if ms.Kind == dpplan.MeasureUnits {
			// A distinct count counts a unit whole in up to L_u groups
			// (dpplan.UnitGroups, from the rows re-derived above; the
			// SQL, re-emitted by verify, weights by the same L_u).
			bounds.L0 = dpplan.UnitGroups(plan, rows)
		}
		mech, err := r.newMechanism(req.Mechanism, bounds, epsilon, delta, ms.Integer, plan.CellsChanged(), "noise")
		if err != nil {
			return nil, err
		}
		out[i] = measurement{measure: ms, mech: mech}
	}
	return out, nil
}

// checkMeasureRange cross-checks the planner: the range [Lower, Upper] a
// sum's sensitivity is computed from must contain every value the SQL can
// sum, which is the interval of its expression (dpplan.ValueInterval: the
// emitter clamps every column and quotient in it to the same interval,
// pgemit.ValueSQL), or its column's bounds in the table the SQL is
// emitted from.
func checkMeasureRange(plan *dpplan.Plan, ms dpplan.Measure) error {
	switch {
	case ms.Kind == dpplan.MeasureSum, ms.Kind == dpplan.MeasureSumSq:
	case ms.Kind == dpplan.MeasureQuantile && ms.Quantile != nil && ms.Quantile.Type != policy.TypeDate:
		// A quantile's values are clamped to [Lower, Upper] by the SQL
		// (an expression's to its interval, a column's to its bounds).
	default:
		return nil
	}
	bad := pgerr.New(pgerr.InternalError, "internal error: plan range narrower than its SQL's")
	lo, hi := ms.Lower, ms.Upper
	switch t, _ := dpplan.SourceOf(plan); {
	case ms.Expr != nil:
		iv, err := dpplan.ValueInterval(ms.Expr)
		if err != nil {
			return bad
		}
		if iv.Empty() {
			return nil
		}
		lo, hi = sensitivity.RatDown(iv.Lo), sensitivity.RatUp(iv.Hi)
	case t != nil && t.Columns[ms.Column] != nil:
		lo, hi = t.Columns[ms.Column].LowerNum, t.Columns[ms.Column].UpperNum
	}
	if !(ms.Lower <= lo && hi <= ms.Upper) {
		return bad
	}
	return nil
}

// integerValued reports whether every value of the measure is an integer
// whatever the data: counts; sums (and sums of squares) of an integer
// column with integer bounds, or of an expression whose interval says
// integer (dpplan.ValueInterval), minus an integer centre.
func integerValued(plan *dpplan.Plan, ms dpplan.Measure) bool {
	switch ms.Kind {
	case dpplan.MeasureCount, dpplan.MeasureUnits, dpplan.MeasureRemoved:
		return true
	case dpplan.MeasureSum, dpplan.MeasureSumSq:
	default:
		return false
	}
	if c, ok := new(big.Rat).SetString(ms.Centre); ms.Centre != "" && (!ok || !c.IsInt()) {
		return false
	}
	if ms.Expr != nil {
		iv, err := dpplan.ValueInterval(ms.Expr)
		return err == nil && iv.Int
	}
	t, _ := dpplan.SourceOf(plan)
	if t == nil || t.Columns[ms.Column] == nil {
		return false
	}
	c := t.Columns[ms.Column]
	return c.Type == policy.TypeInt && isInteger(c.LowerNum) && isInteger(c.UpperNum)
}

// splitDown returns the largest float64 e with m·e ≤ x in exact
// arithmetic, so m releases of e each never compose to more than x (a plain
// x/m can round up by half an ulp). It is 0 for an x that is not a finite
// number > 0 (shrinkToFit).
func splitDown(x float64, m int) float64 {
	if m < 1 {
		return 0
	}
	total := new(big.Rat)
	limit := new(big.Rat)
	if limit.SetFloat64(x) == nil { // ±Inf or NaN
		return 0
	}
	return shrinkToFit(x/float64(m), func(e float64) bool {
		total.SetFloat64(e)
		total.Mul(total, big.NewRat(int64(m), 1))
		return total.Cmp(limit) <= 0
	})
}

func isInteger(x float64) bool { return x == math.Trunc(x) }

// groupKeys returns the released groups: the cartesian product of the key
// domains, first key outermost, in declared order. An ungrouped query has
// one group with no keys.
func groupKeys(keys []dpplan.Key) ([][]string, error) {
	n := 1
	for _, k := range keys {
		if len(k.Domain) == 0 {
			return nil, pgerr.New(pgerr.InternalError, "internal error: group key without a public domain")
		}
		n *= len(k.Domain)
		if n > maxGroups {
			return nil, pgerr.New(pgerr.FeatureNotSupported, "the query would release more than %d groups", maxGroups).
				WithHint("group by fewer columns")
		}
	}
	groups := [][]string{{}}
	for _, k := range keys {
		next := make([][]string, 0, len(groups)*len(k.Domain))
		for _, g := range groups {
			for _, v := range k.Domain {
				next = append(next, append(append([]string(nil), g...), canonicalKey(k.Type, v)))
			}
		}
		groups = next
	}
	return groups, nil
}

// rowKey is the canonical group key (canonicalKey) of an upstream row
// whose first len(plan.Keys) columns are the keys; false when a key is NULL
// (no declared group is NULL). The row must have the key columns.
func rowKey(plan *dpplan.Plan, row []*string) ([]string, bool) {
	key := make([]string, len(plan.Keys))
	for i := range key {
		if row[i] == nil {
			return nil, false
		}
		key[i] = canonicalKey(plan.Keys[i].Type, *row[i])
	}
	return key, true
}

// canonicalKey normalises a key's text so the policy's value and
// PostgreSQL's text output compare equal (e.g. "+05" and "5" for ints).
func canonicalKey(t policy.Type, v string) string {
	if t == policy.TypeInt {
		if n, ok := new(big.Int).SetString(strings.TrimPrefix(v, "+"), 10); ok {
			return n.String()
		}
	}
	return v
}

// collect maps upstream rows onto the released groups. Rows whose key is
// outside the domain are ignored (the SQL already filters them); NULL
// measures count as zero. Quantile measures are returned as their raw text
// (raw[g][i], nil when NULL) and count as zero in values.
func collect(plan *dpplan.Plan, groups [][]string, rows [][]*string) (values [][]*big.Rat, raw [][]*string, err error) {
	index := groupIndex(groups)
	values = make([][]*big.Rat, len(groups))
	raw = make([][]*string, len(groups))
	for g := range values {
		raw[g] = make([]*string, len(plan.Measures))
		values[g] = make([]*big.Rat, len(plan.Measures))
		for i := range values[g] {
			values[g][i] = new(big.Rat)
		}
	}
	nk, nm := len(plan.Keys), len(plan.Measures)
	seen := make([]bool, len(groups))
	for _, row := range rows {
		if len(row) != nk+nm {
			return nil, nil, pgerr.New(pgerr.InternalError, "internal error: upstream returned an unexpected row shape")
		}
		g, ok := groupOf(plan, index, row)
		if !ok {
			continue
		}
		if seen[g] {
			return nil, nil, pgerr.New(pgerr.InternalError, "internal error: upstream returned a group twice")
		}
		seen[g] = true
		if values[g], raw[g], err = parseMeasures(plan, row[nk:]); err != nil {
			return nil, nil, err
		}
	}
	return values, raw, nil
}

// groupIndex maps each released group's keys to its index in groups.
func groupIndex(groups [][]string) map[string]int {
	index := make(map[string]int, len(groups))
	for i, g := range groups {
		index[strings.Join(g, "\x00")] = i
	}
	return index
}

// groupOf is the index (groupIndex) of an upstream row's released group;
// false when a key is NULL or the group is not released.
func groupOf(plan *dpplan.Plan, index map[string]int, row []*string) (int, bool) {
	key, ok := rowKey(plan, row)
	if !ok {
		return 0, false
	}
	g, ok := index[strings.Join(key, "\x00")]
	return g, ok
}

// parseMeasures reads a row's measure cells (one per plan measure): NULL
// as 0, a quantile's summary as its raw text (raw[i], nil when NULL; 0 in
// values), every other cell a number, whole where the measure claims it.
func parseMeasures(plan *dpplan.Plan, cells []*string) (values []*big.Rat, raw []*string, err error) {
	values, raw = make([]*big.Rat, len(plan.Measures)), make([]*string, len(plan.Measures))
	for i := range values {
		values[i] = new(big.Rat)
		if cells[i] == nil {
			continue
		}
		if plan.Measures[i].Kind == dpplan.MeasureQuantile {
			raw[i] = cells[i]
			continue
		}
		v, ok := values[i].SetString(*cells[i])
		if !ok {
			return nil, nil, pgerr.New(pgerr.InternalError, "internal error: upstream returned a non-numeric measure")
		}
		if plan.Measures[i].Integer && !v.IsInt() {
			return nil, nil, pgerr.New(pgerr.InternalError, "internal error: integer measure is not an integer")
		}
	}
	return values, raw, nil
}

// eventsOf are the ledger events of a query's measurements, its partition
// selection and its choice of contribution bounds (which, when present,
// covers every candidate's measurements: autobounds.go).
func eventsOf(ms []measurement, sel *selection, auto *autoChoice, cells *cellCount) []accountant.Event {
	var events []accountant.Event
	if auto != nil {
		// The choice and, per measure, the most any candidate costs.
		events = auto.events()
	} else {
		for _, m := range ms {
			events = append(events, eventOf(m.mech))
		}
	}
	if sel != nil {
		// The selection is part of this query's cost (never with
		// automatic bounds, which verifyPlan refuses for private keys,
		// and charged should one come).
		events = append(events, sel.events()...)
	}
	if cells != nil {
		// The minimum of units per cell: one more measurement.
		events = append(events, cells.event())
	}
	return events
}

// PadUntil is when an answer that started at start, in a dataset whose
// answers take d (its response_time), is released when it is ready at now:
// start + d·2^k for the smallest k ≥ 0 that is not before now. The time of
// an answer is so one of a fixed ladder of steps (d, 2d, 4d, …), never the
// moment the upstream finished: a query slower than d shows at most which
// step it reached (a logarithm of its time), not its time (issue 27). With
// d ≤ 0 there is no padding: it returns now.
func PadUntil(start time.Time, d time.Duration, now time.Time) time.Time {
	if d <= 0 {
		return now
	}
	step := d
	for start.Add(step).Before(now) && step < 24*time.Hour {
		step *= 2
	}
	return start.Add(step)
}
