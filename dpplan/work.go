// Privacy-critical: needs DP review.

package dpplan

import (
	"math"
	"time"

	"github.com/dpproxy/dpproxy/policy"
)

// The work bound of a plan (issue 27, SECURITY.md "Time").
//
// How long a DP answer takes upstream is an output too: if one person's
// rows could change it by much, the time to answer would release their
// data at ε = ∞. A plan's Work bounds the rows its upstream queries read
// and make, from public quantities only: the policy's declared table sizes
// (max_rows), contribution limits, join multiplicities and the plan's
// shape, never the data's real sizes (an exact row count is itself a
// statistic). With it the proxy fixes the answer's time slot before the
// charge (proxy/dp.go) and refuses a plan whose slot exceeds the statement
// time-out, so no accepted query's work can reach the time-out however
// the data is made.
//
// Per scan (one upstream query), with N_T the declared rows of table T:
//
//   - one table: N_T;
//   - joins: every input is read once (Σ N_T) and the joined rows are at
//     most N_first · fan-out, where a row of the first protected table
//     meets at most F = Π C_T rows of the other protected tables of a unit
//     join (each cut to C_T rows per unit first: join.go), and, per public table,
//     at most its join column's max_rows_per_value, or its N_T when that is
//     undeclared.
//
// Each row also costs the work of its predicates and expressions: a plan's
// RowOps (the WHERE clause's units, PredWork, plus the arithmetic and CASE
// conditions inside its aggregates) multiplies the rows by 1 + RowOps/16,
// a cautious weight (a LIKE of 248 characters, 16.5 units, measured about
// a third of a row's own cost in the per-unit GROUP BY).
//
// A quantile measure (percentile_cont, percentile_disc, MIN, MAX;
// pgemit/quantile_sql.go) adds per row a window sort over the (unit,
// group), and per (unit, group) an array padded to R = max_rows_per_unit
// values, all of which are unnested and bucketed at the end: at most
// rows · R entries, since every (unit, group) has a row. Each weighs
// 1 + R/10 per row (measured at 1.3–2 rows' work per row at R = 20:
// TestAttack60_QuantileWorkUncounted).
//
// Sample-and-aggregate (corr, regr_r2: sampleagg.go) sorts every row
// once per block level, each level's ordered aggregates sorting each
// block again per statistic: its rows weigh 1 + L·(1 + m)/2 for L levels
// and m statistics (TestAttack43_SampleAggWorkUncounted).
//
// Partition selection (a plan with a private key) draws noise in the
// proxy for every candidate group as the scan's result streams in: the
// groups come from the data, at most one per row of one scan
// (Work.Candidates), each costing CandidateCost.
//
// A plan reads its tables once, plus once more with automatic bounds (the
// chosen plan's own query after the combined profile) and once more with
// automatic clipping (the histogram). The bound is unknown (Rows 0) when a
// table of the plan declares no max_rows.

// Work is a plan's bound on its upstream work.
type Work struct {
	// Rows bounds the rows all the plan's upstream queries read and join
	// (0: unknown, see Undeclared).
	Rows int64 `json:",omitempty"`
	// Scans is the number of upstream queries that read the tables.
	Scans int `json:",omitempty"`
	// Undeclared names the plan's tables without max_rows (Rows is 0).
	Undeclared []string `json:",omitempty"`
	// Candidates bounds the candidate groups of partition selection (a
	// plan with a private key), for each of which the proxy draws noise
	// while the upstream query streams them (CandidateCost): at most one
	// per row of the plan's scan, since every group has a row, each
	// weighing 1 + L·(1 + m)/2 under sample-and-aggregate (L block levels,
	// m statistics), as its rows do upstream.
	Candidates int64 `json:",omitempty"`
}

// CandidateCost is the proxy's CPU per candidate group of partition
// selection: canonicalising and digesting its keys, drawing its unit
// count's noise exactly and comparing it with the threshold. Measured at
// 3.4 µs on the 2-core review machine (a GROUP BY of a private key with
// 100,000 candidates of one key, COUNT and AVG, BENCHMARKS.md "Candidate
// groups"), and rounded up. The number of candidates comes from the data
// (how many distinct values the key takes); the slot counts the most there
// can be (Work.Candidates), so that it does not show (SECURITY.md,
// "Groups of a private key").
const CandidateCost = 4 * time.Microsecond

// maxWorkRows caps Rows (it saturates): far beyond any time slot.
const maxWorkRows = int64(1) << 60

// WorkOf returns the work bound of p over the tables of ds.
func WorkOf(ds *policy.Dataset, p *Plan) Work {
	w := Work{Scans: 1}
	if p.Auto != nil {
		w.Scans++
	}
	if p.Clip != nil {
		w.Scans++
	}
	var rows float64
	if p.Join == nil {
		t, ok := ds.Table(p.Table)
		if !ok || t.MaxRows == 0 {
			w.Undeclared = []string{p.Table}
			return w
		}
		rows = float64(t.MaxRows)
	} else {
		var ok bool
		if rows, ok = joinRows(ds, p.Join, &w); !ok {
			return w
		}
	}
	perRow := 1 + float64(p.RowOps)/16 + float64(quantiles(p))*(1+float64(quantileSlots(ds, p))/10)
	total := rows * float64(w.Scans) * perRow
	if sa := p.SampleAgg; sa != nil {
		total *= 1 + float64(len(sa.Levels))*float64(1+len(sa.Calls))/2
	}
	w.Rows = saturate(total)
	if p.PrivateGroups() {
		candidates := rows
		if sa := p.SampleAgg; sa != nil {
			// A candidate of sample-and-aggregate is a row per block
			// level, each with its statistics' sums to read: weighed as
			// its rows are upstream
			// (TestAttack70_SampleAggCandidateRowsCounted).
			candidates *= 1 + float64(len(sa.Levels))*float64(1+len(sa.Calls))/2
		}
		w.Candidates = saturate(candidates)
	}
	return w
}

// saturate is x rounded up, capped at maxWorkRows.
func saturate(x float64) int64 {
	if x >= float64(maxWorkRows) {
		return maxWorkRows
	}
	return int64(math.Ceil(x))
}

// quantiles is the number of quantile measures of p.
func quantiles(p *Plan) int {
	n := 0
	for _, m := range p.Measures {
		if m.Kind == MeasureQuantile {
			n++
		}
	}
	return n
}

// quantileSlots bounds the values a (unit, group) keeps for one quantile:
// the largest rows-per-unit limit of the plan's protected tables.
func quantileSlots(ds *policy.Dataset, p *Plan) int {
	r := p.RowsPerUnit
	names := []string{p.Table}
	if p.Join != nil {
		names = names[:0]
		for _, jt := range p.Join.Tables {
			names = append(names, jt.Name)
		}
	}
	for _, name := range names {
		if t, ok := ds.Table(name); ok && !t.Public {
			r = max(r, t.MaxRowsPerUnit)
		}
	}
	return r
}

// joinRows is one scan's bound for a join: Σ N_T read plus the joined rows.
func joinRows(ds *policy.Dataset, j *Join, w *Work) (float64, bool) {
	n := make([]float64, len(j.Tables))
	for k, jt := range j.Tables {
		t, ok := ds.Table(jt.Name)
		if !ok || t.MaxRows == 0 {
			w.Undeclared = append(w.Undeclared, jt.Name)
			continue
		}
		n[k] = float64(t.MaxRows)
	}
	if len(w.Undeclared) > 0 {
		return 0, false
	}
	read, first := 0.0, -1
	for k, jt := range j.Tables {
		read += n[k]
		if !jt.Public && first < 0 {
			first = k
		}
	}
	dist := joinDistances(j, first)
	fanout := 1.0
	for k, jt := range j.Tables {
		switch {
		case k == first:
		case !jt.Public && j.Shape == JoinUnit:
			fanout *= float64(j.RowsPerUnit[k]) // C_T
		case jt.Public:
			fanout *= publicFanout(ds, j, k, n[k], dist)
		}
	}
	return read + n[first]*fanout, true
}

// joinDistances are the tables' distances from table root in the graph of
// the ON equalities (-1: not connected).
func joinDistances(j *Join, root int) []int {
	dist := make([]int, len(j.Tables))
	for i := range dist {
		dist[i] = -1
	}
	dist[root] = 0
	for changed := true; changed; {
		changed = false
		for k, jt := range j.Tables {
			for _, on := range jt.On {
				for _, e := range [2][2]int{{k, on.Table}, {on.Table, k}} {
					if d := dist[e[1]]; d >= 0 && (dist[e[0]] < 0 || dist[e[0]] > d+1) {
						dist[e[0]], changed = d+1, true
					}
				}
			}
		}
	}
	return dist
}

// publicFanout bounds the rows of public table k that one joined row
// meets: the smallest declared max_rows_per_value of its columns equated
// with a table nearer the first protected table (dist; a row of that
// table is fixed when k's rows are counted), else its declared rows. A
// column k is joined on only by tables farther out does not bound k's
// rows per joined row: it bounds theirs
// (TestAttack60_LookupJoinShrinksWorkBound).
func publicFanout(ds *policy.Dataset, j *Join, k int, rows float64, dist []int) float64 {
	t, _ := ds.Table(j.Tables[k].Name)
	best := rows
	nearer := func(i int) bool { return dist[i] >= 0 && dist[k] >= 0 && dist[i] < dist[k] }
	cols := []string{}
	for _, on := range j.Tables[k].On {
		if nearer(on.Table) {
			cols = append(cols, on.Other)
		}
	}
	for i, tk := range j.Tables {
		for _, on := range tk.On {
			if on.Table == k && i != k && nearer(i) {
				cols = append(cols, on.Column)
			}
		}
	}
	for _, c := range cols {
		if col := t.Columns[c]; col != nil && col.MaxRowsPerValue > 0 {
			best = math.Min(best, float64(col.MaxRowsPerValue))
		}
	}
	return best
}

// PredWork is the per-row work of a condition in units of one comparison:
// 1 per comparison, NULL test, BETWEEN or boolean column, 1 + n/1000 for
// an IN list of n values (PostgreSQL 14 and later probe a hash table built
// once per query), and 1 + len/16 for a LIKE or ILIKE (its cost grows with
// the pattern: one of 248 characters measured about 17 comparisons), plus
// LikeWork for a '%' followed by more pattern, whose cost grows with the
// value's bytes too (like.go). The planner bounds a WHERE clause's PredWork (rewrite/build.go)
// and the work bound counts it (WorkOf).
func PredWork(p Pred) int {
	switch x := p.(type) {
	case nil:
		return 0
	case PredBool:
		return PredWork(x.L) + PredWork(x.R)
	case PredNot:
		return PredWork(x.X)
	case PredIn:
		return 1 + len(x.Lits)/1000
	case PredConst:
		return 0
	case PredLike:
		return 1 + len(x.Pattern)/16 + LikeWork(x.Pattern, x.ILike)
	}
	return 1
}

// CondWork is the per-row work of the conditions a plan holds as they are
// evaluated by the SQL pgemit writes: its WHERE clause once, and each
// measure's FILTER once for each measure that carries it (the emitter
// writes a CASE per measure, so an AVG's FILTER is evaluated twice and a
// variance's three times; PostgreSQL does not share equal expressions of a
// select list). A CASE key's conditions are not plan data (Key.Args holds
// their SQL text): the planner adds their work to RowOps.
func CondWork(p *Plan, where Pred) int {
	n := PredWork(where)
	for _, m := range p.Measures {
		n += PredWork(m.Filter)
	}
	return n
}

// RowOpsOf is the least per-row work a plan's RowOps may claim: CondWork
// and every measure's value (MeasureValueOps). Release refuses a plan
// whose RowOps is less, or whose Work is not WorkOf's (verifyWork): the
// work bound fixes the answer's time slot before the charge.
func RowOpsOf(p *Plan, where Pred) int {
	n := CondWork(p, where)
	for _, m := range p.Measures {
		n = min(n+MeasureValueOps(m), 1<<40)
	}
	return n
}

// The proxy's CPU per answer (issue 27, "bounded proxy CPU"). An answer
// costs the proxy up to about 15 µs per noisy cell on a loaded 2-core
// machine (a group's measurement: sampling the noise exactly, its
// half-width, the row; BENCHMARKS.md "Proxy CPU per answer"), and a
// quantile's exact exponential mechanism (noise.Exponential) about 1.3 µs
// per trial: it draws a bucket uniformly and accepts it with probability
// e^{−γ}, where the bucket of largest utility has γ = 0, so it takes at
// most B trials in expectation for B buckets, and that many when one
// bucket holds the quantile and the others are far away
// (TestAttack64_PeakedQuantilesOutrunCellCap).
// A plan over public keys is refused before the charge when its groups
// times its measurements' weights exceed MaxAnswerCells (release
// checkAnswerCells), so the worst accepted answer costs the proxy about a
// second of CPU; the planner lowers a grouped quantile's bucket count
// until its plan fits (rewrite's fitQuantileGrids). The number of groups
// is the product of the public key domains: a public quantity.
const MaxAnswerCells = 60_000

// CellWeight is a plan's noisy cells per group: one per measurement, a
// quantile weighing QuantileCellWeight of its grid, one more for the unit
// count min_units_per_cell noises; at least the plan's outputs (equal
// aggregates share one measurement but each is a column of the answer),
// and 0 for a plan with no measurement.
func CellWeight(p *Plan) int {
	weight := 0
	for _, m := range p.Measures {
		if m.Kind == MeasureQuantile && m.Quantile != nil {
			weight += QuantileCellWeight(m.Quantile.Buckets)
		} else {
			weight++
		}
	}
	if p.MinUnits > 0 && weight > 0 {
		weight++
	}
	if weight == 0 {
		return 0
	}
	return max(weight, len(p.Outputs))
}

// MaxSelectedGroups is how many of the groups partition selection keeps
// (a plan with a private key) an answer holds: as many as fit
// MaxAnswerCells at the plan's CellWeight and MaxAnswerBytes at
// AnswerRowBytes with error columns, and at most GroupsCap when set.
// Which groups pass comes from the data; the answer holds the first
// MaxSelectedGroups of them by key, a function of the selected set alone
// (post-processing), so the proxy's CPU and memory for them are bounded
// before the charge like an answer over public keys.
func MaxSelectedGroups(p *Plan) int {
	n := MaxAnswerCells
	if w := CellWeight(p); w > 0 {
		n = MaxAnswerCells / w
	}
	n = min(n, MaxAnswerBytes/AnswerRowBytes(p, len(p.Outputs)))
	if p.GroupsCap > 0 {
		n = min(n, p.GroupsCap)
	}
	return max(1, n)
}

// The proxy's memory per answer: a released cell's size, a text key's
// at most, and an answer's (release.AnswerBytes).
const (
	// AnswerCellBytes is a released cell's size in the proxy: a number's
	// text, its string header and pointer, and a share of its row's.
	AnswerCellBytes = 64
	// ExprCellBytes is an expression's cell over released values: up to
	// maxExprBits (about 154 digits), a sign and 6 decimals (Expr.Eval).
	ExprCellBytes = AnswerCellBytes + 168
	// MaxPrivateKeyBytes bounds the text of a private group key's value
	// (pgemit: a longer one is not grouped).
	MaxPrivateKeyBytes = 1024
	// MaxUnitBytes bounds a variable-length unit value (text, varchar,
	// char, citext, bytea: its raw length; numeric: its stored size): a
	// row with a longer one has no unit and is excluded, as one with a
	// NULL unit is (pgemit unitKeptSQL). The unit is grouped, sorted and
	// hashed several times a row, and a value stored in the TOAST table is
	// fetched whole at each comparison (TestAttack104_LongUnitIDTime).
	MaxUnitBytes = 1024
	// MaxAnswerBytes bounds an answer's size: 60,000 cells of
	// AnswerCellBytes with their error columns (7.7 MB) fit, with room for
	// key texts of a few dozen bytes. A post-processing statement's
	// leaves, whose answers are held together, share it
	// (pipeline.CheckLeaves).
	MaxAnswerBytes = 16 << 20
)

// AnswerRowBytes bounds one row of p's answer in the proxy, with extra
// more columns of numbers (error columns): AnswerCellBytes a number
// (ExprCellBytes an expression over released values), and
// per key its longest value (a public key's domain) or MaxPrivateKeyBytes
// (a private key's).
func AnswerRowBytes(p *Plan, extra int) int {
	row := (len(p.Outputs) + extra) * AnswerCellBytes
	for _, o := range p.Outputs {
		if o.Kind == OutputExpr {
			row += ExprCellBytes - AnswerCellBytes
		}
	}
	for _, k := range p.Keys {
		longest := MaxPrivateKeyBytes
		if !k.Private {
			longest = 0
			for _, v := range k.Domain {
				longest = max(longest, len(v))
			}
		}
		row += longest + AnswerCellBytes/4
	}
	return max(row, AnswerCellBytes)
}

// AnswerGroups is the number of groups of a plan over public keys (the
// product of their domains), capped at MaxAnswerCells + 1.
func AnswerGroups(p *Plan) int {
	groups := 1
	for _, k := range p.Keys {
		groups = min(groups*len(k.Domain), MaxAnswerCells+1)
	}
	return groups
}

// quantileTrialsPerCell is how many of the exponential mechanism's trials
// cost one cell (15 µs / 1.3 µs, rounded down).
const quantileTrialsPerCell = 11

// QuantileCellWeight is a quantile measurement's weight per group in
// cells: its worst expected number of trials, buckets, at
// quantileTrialsPerCell a cell.
func QuantileCellWeight(buckets int) int {
	return max(1, (buckets+quantileTrialsPerCell-1)/quantileTrialsPerCell)
}

// QuantileBucketsFor is the largest bucket count whose weight is at most
// cells.
func QuantileBucketsFor(cells int) int { return cells * quantileTrialsPerCell }
