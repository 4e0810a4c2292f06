package rewrite

import (
	"slices"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/sensitivity"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// This file plans sample-and-aggregate (Nissim, Raskhodnikova and Smith,
// "Smooth Sensitivity and Sampling in Private Data Analysis", STOC 2007,
// §4; used for SQL by GUPT, Mohan et al., SIGMOD 2012) for the aggregates
// whose sensitivity no static bound gives: corr and regr_r2. (covar_pop,
// covar_samp, regr_slope and regr_intercept are answered from noisy sums,
// regrstats.go, which measured more accurate for them.)
//
// # Mechanism
//
// The privacy units are split into k disjoint blocks by a keyed hash of the
// unit value, the least HMAC-SHA-256(key, unit::text) over the unit's rows
// (one block per unit also where PostgreSQL's equality is looser than the
// text: 1000 and 1000.0, 'Zed' and 'zed' of a citext; attack round 56),
// where the key is the dataset's secret (policy.Dataset.SampleKey): an
// analyst can neither predict nor steer the block of a unit. The aggregate f is computed by PostgreSQL in
// each block b, giving f_b, which is clipped to the output range [l, u];
// a block with no rows, or whose f_b is NULL (e.g. corr over fewer than two
// rows or a constant column), counts as the midpoint c = (l + u)/2. The
// answer is the average over the k blocks
//
//	A = c + S/k,   S = Σ_b (clip(f_b, l, u) − c)   (empty and NULL blocks add 0)
//
// The emitted SQL computes S exactly in numeric (each f_b is cast to
// numeric before clipping, so S is a sum of values in [l − c, u − c] and no
// rounding can leave that range). release adds noise to S with sensitivity
// u − l and returns c + S̃/k clamped to [l, u] (post-processing); the noise
// on A is therefore calibrated to (u − l)/k.
//
// # Guarantee
//
// Adding or removing all rows of one unit changes the rows of exactly one
// block (the unit's hash is a fixed function of its value and the key,
// independent of the other units), so it changes one term of S, from one
// value of [l − c, u − c] ∪ {0} to another: |ΔS| ≤ u − l, |ΔA| ≤ (u − l)/k
// (rewrite/sampleagg_test.go audits this on neighbouring databases). This
// holds for every f, however sensitive f itself is, and whatever the data;
// contribution bounding (at most max_rows_per_unit rows per unit, chosen at
// random) and clamping of the inputs to the policy bounds still apply, so f
// sees the same bounded rows as the other aggregates.
//
// # GROUP BY (public keys)
//
// Keys are those the other aggregates accept with a public domain (columns
// with public_values, CASE keys, date_trunc/width_bucket/EXTRACT keys,
// keyexpr.go and casekey.go). Every group g of the domain product is
// released, and its statistic is computed within the group exactly as
// above: f_{g,b} over the rows of group g whose unit is in block b, and
//
//	A_g = c + S_g/k_g,   S_g = Σ_b (clip(f_{g,b}, l, u) − c).
//
// A group without rows has S_g = 0 at every level: it is released as
// c + noise/k_g (like the noisy zero of an empty COUNT group), with k_g the
// smallest level when k comes from its noisy count (≈ 0).
//
// Contribution bounding is that of the other grouped aggregates
// (dpplan/bounds.go): each unit keeps at most max_rows_per_unit rows per group
// (random choice) and at most L0 = Plan.MaxGroupsPerUnit groups (a random
// order of the unit's groups, drawn once per (unit, group); omitted when L0
// is at least the number of groups). Sensitivity: adding or removing a
// unit x changes only the rows of x, so only the ≤ L0 groups x keeps; in
// each of them x lies in one block (its hash does not depend on the group),
// so S_g changes in one term, by at most u − l. The vector (S_g)_g has
//
//	L0 non-zero changes, each ≤ L∞ = u − l:  L1 ≤ L0·(u − l),  L2 ≤ √L0·(u − l),
//
// exactly the shape of a grouped SUM (Wilson et al., PoPETs 2020, §3), and
// release calibrates the noise to L1 (Laplace) or L2 (Gaussian) like it
// does for SUM. The same holds at every level, and for the vector of
// distinct-unit counts n_g (L∞ = 1): with per-group k_g = ChooseBlocks(ñ_g)
// the levels are post-processing of the released ñ, and for every choice
// of levels the released vector (S_{g,k_g})_g has the bounds above, so the
// two releases compose (adaptive basic composition) to the query's ε.
// rewrite/sampleagg_group_test.go audits this on neighbouring databases:
// one unit changes one block per group, at most L0 groups, each average by
// at most (u − l)/k.
//
// # GROUP BY a private key (DP partition selection)
//
// A key without public values (partition.go) has no domain: the groups
// come from the data and are released only if they pass DP partition
// selection, exactly as for COUNT/SUM (release/partition.go): the SQL
// returns the groups present after contribution bounding (NULL keys
// excluded) with their distinct-unit count n_g; release noises n_g (the
// same noisy count that chooses k_g, so the count is always computed, also
// with a fixed k), keeps g iff ñ_g ≥ τ = noise.PartitionThreshold(count
// mechanism, δ_thr, L0), and releases S_{g,k_g} (noised as above) for the
// kept groups only. The argument of release/partition.go carries over
// unchanged: the groups only a unit x populates are kept with probability
// at most δ_thr in total, and on the other groups the releases are those
// of the public-key case. So the query is (ε, δ)-DP with δ ≥ δ_thr > 0:
// release refuses δ = 0 with a hint (checkSelection).
//
// # Joins
//
// The join shapes join.go bounds after the join are accepted: a protected
// table joined to public tables (on any key), and protected tables joined
// on the unit. In both every joined row contains rows of exactly one unit
// (public rows belong to no one), so the joined rows of x are exactly
// those containing a row of x, they all carry x's unit value and hence
// x's block: the argument above holds on the joined relation unchanged,
// with the contribution limits of join.go (the largest of the joined
// tables'). Protected tables joined on another key are refused before
// any plan (join_shape.go).
//
// # Choice of k (data-independent, or from a noisy count)
//
// With SET dp.sample_blocks = k the SQL uses that k (public: the analyst
// chose it). Otherwise the SQL computes S for every k in sampleLevels
// (powers of two, 2 … 4096; blocks of k are unions of blocks of 2k) and
// the number of distinct units n; release noises n with a share of the
// query's ε (sampleCountShare) and picks k = the largest level with
// k·sampleBlockUnits ≤ ñ (at least the smallest level), then noises S of
// that level only. The choice is post-processing of the DP count ñ, and
// for each possible ñ the second release is DP with the sensitivity above,
// so the two compose (adaptive basic composition): the query costs the sum
// of their ε. The S of the other levels are read but never released.
//
// Why ñ/sampleBlockUnits: the noise on A shrinks like (u − l)/(kε) while
// each block's estimate gets worse as its units n/k shrink (e.g. the bias
// of a correlation coefficient over m pairs is about ρ(1 − ρ²)/(2m),
// Fisher 1915). For correlations at ε ≈ 1 over 10⁴ units the two balance
// at a few dozen units per block; 32 keeps block answers meaningful for
// slopes too.
//
// # Output ranges
//
// corr lies in [−1, 1] and regr_r2 in [0, 1]: these natural ranges are the
// output ranges [l, u], fixed by the function alone (public). A block
// answer outside its range can only come from rounding in PostgreSQL's
// float8 arithmetic; the clip removes it all the same, and the guarantee
// above holds for any answer f_b whatever.

// sampleLevels are the block counts k computed when k is chosen from the
// noisy unit count: powers of two, so that one sort per level suffices.
var sampleLevels = []int{2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}

// sampleBlockUnits is the target number of units per block (see "Choice
// of k").
const sampleBlockUnits = 32

// sampleCountShare is the share of the query's ε (and δ) spent on the
// noisy unit count that chooses k: a count only needs to be right within a
// factor of two, so a tenth suffices (at ε = 0.1 its Laplace scale is 100
// units).
const sampleCountShare = 0.1

// maxSampleBlocks bounds SET dp.sample_blocks.
const maxSampleBlocks = 1 << 20

// sampleAggFuncs are the functions answered by sample-and-aggregate, with
// their natural output ranges [l, u] (see "Output ranges").
var sampleAggFuncs = map[string][2]float64{"corr": {-1, 1}, "regr_r2": {0, 1}}

func isSampleAggFunc(name string) bool {
	_, ok := sampleAggFuncs[strings.ToLower(name)]
	return ok
}

const sampleAggHint = "sample-and-aggregate answers corr and regr_r2 of two bounded numeric columns, e.g. SELECT department, corr(cost, age) FROM visits GROUP BY department (keys with public values), without other aggregates in the same query"

// sampleAggCall checks one call such as corr(cost, age) and returns its
// output; the measures are built by sampleAggPlan.
func (b *builder) sampleAggCall(fc *ast.FuncCallExpr) (Output, error) {
	fn := strings.ToLower(fc.FnName.O)
	if len(fc.Args) != 2 {
		return Output{}, b.errAt(fc, "42883", "function %s with %d arguments does not exist", fn, len(fc.Args)).
			WithHint("%s takes two columns: %s(y, x)", fn, fn)
	}
	var cols [2]colInfo
	for i, a := range fc.Args {
		if pe, ok := a.(*ast.ParenthesesExpr); ok {
			a = pe.Expr
		}
		c, ok := a.(*ast.ColumnNameExpr)
		if !ok {
			return Output{}, b.errAt(a, pgerr.FeatureNotSupported, "expressions inside %s are not supported", fn).
				WithHint("%s", sampleAggHint)
		}
		ci, err := b.column(c)
		if err != nil {
			return Output{}, err
		}
		switch {
		case ci.unit || ci.col == nil:
			return Output{}, b.errAt(c, pgerr.FeatureNotSupported, "%s of the unit column %s is not supported", fn, ci.name).
				WithHint("%s", sampleAggHint)
		case !ci.col.Type.Numeric():
			return Output{}, b.errAt(c, pgerr.FeatureNotSupported, "%s needs numeric columns; %s is %s", fn, ci.name, ci.col.Type).
				WithHint("%s", sampleAggHint)
		case !ci.col.HasBounds:
			return Output{}, b.errAt(c, pgerr.FeatureNotSupported, "%s(%s) needs bounds: the policy declares no lower/upper for %s", fn, ci.name, ci.name).
				WithHint("ask the data steward to declare lower and upper for %s", ci.name)
		}
		cols[i] = ci
	}
	lo, hi := sampleAggFuncs[fn][0], sampleAggFuncs[fn][1]
	spec := dpplan.SampleCall{Fn: fn, Y: cols[0].name, X: cols[1].name, Lower: lo, Upper: hi}
	idx := b.internSA(spec)
	return Output{Name: fn, Kind: OutputSampleAgg, Measure: idx, PGType: "float8", Lower: lo, Upper: hi}, nil
}

// sampleAggPlan completes a plan whose select list has sample-and-aggregate
// calls: checks the shape, builds the measures and emits the SQL.
func (b *builder) sampleAggPlan(sel *ast.SelectStmt, p *Plan) error {
	switch {
	case p.Having != nil:
		return b.errAt(sel, pgerr.FeatureNotSupported, "HAVING with sample-and-aggregate functions is not supported").
			WithHint("drop HAVING and filter the released rows yourself; %s", sampleAggHint)
	case len(b.measures) > 0 || len(p.Hidden) > 0:
		return b.errAt(sel, pgerr.FeatureNotSupported, "%s cannot be combined with other aggregates in one query", b.sampleAggNames()).
			WithHint("ask for %s in a query of its own and the other aggregates in another; %s", b.sampleAggNames(), sampleAggHint)
	}
	for _, o := range p.Outputs {
		if o.Kind != OutputSampleAgg && o.Kind != OutputKey {
			return b.errAt(sel, pgerr.FeatureNotSupported, "sample-and-aggregate functions cannot be combined with other outputs in one query").
				WithHint("%s", sampleAggHint)
		}
	}
	if b.join != nil {
		b.finishJoin(p)
	}
	key := b.ds.SampleKey()
	if len(key) == 0 {
		return b.errAt(sel, pgerr.FeatureNotSupported, "dataset %s has no sample-and-aggregate key", b.ds.Name).
			WithHint("ask the data steward to set sample_key_file in the policy")
	}
	sa := &SampleAgg{Levels: sampleLevels, CountMeasure: -1, BlockUnits: sampleBlockUnits, CountShare: sampleCountShare}
	if k := b.opts.SampleBlocks; k > 0 {
		if k < 2 || k > maxSampleBlocks {
			return b.errAt(sel, pgerr.InvalidParameterValue, "dp.sample_blocks must be between 2 and %d", maxSampleBlocks).
				WithHint("SET dp.sample_blocks = 64, or RESET dp.sample_blocks to choose k from a noisy count")
		}
		sa.Levels = []int{k}
	}
	for _, s := range b.sa {
		p.Measures = append(p.Measures, Measure{Kind: MeasureSampleAgg, Column: s.Label(),
			Lower: s.Lower, Upper: s.Upper, LInf: sensitivity.SampleAggLInf(s.Lower, s.Upper)})
	}
	if len(sa.Levels) > 1 || p.PrivateGroups() || p.MinUnits > 0 {
		// The count chooses k, and with private keys also selects the
		// released groups (see "GROUP BY a private key"); with a minimum
		// of units per cell it also suppresses groups with fewer units
		// (release/minunits.go), so it is measured when k is fixed too.
		sa.CountMeasure = len(p.Measures)
		// COUNT(DISTINCT unit) of the bounded rows: one unit adds 1.
		p.Measures = append(p.Measures, Measure{Kind: MeasureUnits, Column: b.table.UnitColumn, Integer: true, LInf: 1})
	}
	sa.Calls = b.sa
	p.SampleAgg = sa
	p.SQL = pgemit.SampleAggSQL(b.table, p, b.where)
	dpplan.SetSource(p, b.table, b.where)
	return nil
}

// internSA returns the index of spec in the query's sample-and-aggregate
// statistics, adding it if it is new: the same statistic asked twice is
// computed (and charged) once.
func (b *builder) internSA(spec dpplan.SampleCall) int {
	for i, s := range b.sa {
		if s == spec {
			return i
		}
	}
	b.sa = append(b.sa, spec)
	return len(b.sa) - 1
}

// sampleAggNames names the plan's sample-and-aggregate calls for an error
// ("corr", "corr and regr_r2").
func (b *builder) sampleAggNames() string {
	var names []string
	for _, s := range b.sa {
		if !slices.Contains(names, s.Fn) {
			names = append(names, s.Fn)
		}
	}
	if len(names) == 0 {
		return "sample-and-aggregate functions"
	}
	return strings.Join(names, " and ")
}
