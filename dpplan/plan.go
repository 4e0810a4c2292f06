// Privacy-critical: needs DP review.

package dpplan

import (
	"github.com/dpproxy/dpproxy/policy"
)

// Plan is a validated DP query over one protected table, ready to run.
// Immutable; safe for concurrent use.
//
// The emitted SQL (Plan.SQL) returns one row per group that has at least one
// contributing unit, with columns, all cast to text:
//
//	key_0, …, key_{k-1}, measure_0, …, measure_{m-1}
//
// Keys come in the order of Plan.Keys and measures in the order of
// Plan.Measures. When the plan has a private key (PrivateGroups), one more
// column follows the measures: the number of distinct units that
// contribute to the group after contribution bounding (rewrite/partition.go). Without GROUP BY there are no key columns and the SQL
// returns exactly one row, even when no row matches. Key values come out as
// PostgreSQL's text output of the column (dates as YYYY-MM-DD under the
// ISO DateStyle; int keys as plain integers), and only values of the key's
// Domain can appear (rows with a NULL or undeclared key are not counted). A measure's value is NULL when the group has no
// contribution to it (e.g. SUM over no non-null values); release treats NULL
// as 0 before adding noise. Contribution bounding (max_rows_per_unit,
// max_groups_per_unit) and clamping to the policy bounds are already applied
// by the SQL, so each unit changes each measure of each group by at most
// Measure.LInf and contributes to at most Plan.MaxGroupsPerUnit groups.
type Plan struct {
	Dataset string // policy dataset name
	Table   string // lower-case protected table name
	SQL     string // the emitted SQL: the only text sent upstream

	Keys     []Key
	Measures []Measure
	Outputs  []Output // the analyst's select list, in order

	// MaxGroupsPerUnit is the L0 bound the SQL enforces: min(policy
	// max_groups_per_unit, number of released groups). 1 when ungrouped.
	MaxGroupsPerUnit int
	// RowsPerUnit, when > 0, is the number of rows one unit may contribute
	// to one group that the SQL enforces for this query, in place of the
	// table's max_rows_per_unit (bounds.go, "Bounds per query"): the
	// unit's whole allowance max_groups_per_unit · max_rows_per_unit
	// when ungrouped, or less when the session tightened it. 0: the
	// policy's max_rows_per_unit (joins).
	RowsPerUnit int `json:",omitempty"`
	// Warnings are NOTICEs the client gets before the answer, about the
	// statement's text (a value compared with that is not among its
	// column's declared public values); they read no data.
	Warnings []string `json:",omitempty"`
	// OneWeight: dp.contribution = auto bounded each unit to one row's
	// weight in all (RowsPerUnit 1, MaxGroupsPerUnit 1) because the plan
	// releases only averages and deviations
	// (rewrite/autobounds.go). Text only: release derives the bounds from
	// RowsPerUnit, MaxGroupsPerUnit and the policy, as for any plan.
	OneWeight bool `json:",omitempty"`

	// MinUnits, when > 0, is the dataset's min_units_per_cell: the SQL
	// also returns each group's distinct units after bounding
	// (UnitsCounted), release adds noise to that count and releases the
	// measures of a group whose noisy count is below MinUnits as NULL
	// (release/minunits.go). Release refuses a plan whose MinUnits is not
	// the policy's.
	MinUnits int `json:",omitempty"`
	// GroupsCap, when > 0, lowers MaxSelectedGroups: a post-processing
	// statement's leaves with private keys share the bytes its answers may
	// hold together (pipeline.CheckLeaves).
	GroupsCap int `json:",omitempty"`

	// Hidden are values computed like Outputs but not returned: the
	// aggregates that Output.Expr and Having refer to (Expr.Ref indexes
	// Outputs ++ Hidden). Their measures are in Measures and charged.
	Hidden []Output `json:",omitempty"`

	// Post-processing on noisy rows: HAVING first, then ORDER BY, OFFSET,
	// LIMIT.
	Having  *Cond `json:",omitempty"`
	OrderBy []OrderItem
	Limit   int64 // -1 when absent
	Offset  int64

	// Join, when not nil, is the join of the FROM clause (join.go): Table
	// is then its first protected table and column names are those of the
	// joined relation.
	Join *Join `json:",omitempty"`

	// SampleAgg, when not nil, makes this a sample-and-aggregate plan
	// (sampleagg.go): Plan.SQL returns one row per block count k, and
	// release answers it with its own path (release/sampleagg.go).
	SampleAgg *SampleAgg `json:",omitempty"`

	// Auto, when not nil, lets release choose the rows per unit of this
	// query by DP among candidate plans (rewrite/autobounds.go, dp.contribution =
	// auto).
	Auto *AutoBounds `json:",omitempty"`
	// Clip, when not nil, lets release choose tighter clamping bounds of
	// the summed columns by DP (rewrite/autoclip.go, dp.clipping = auto).
	Clip *AutoClip `json:",omitempty"`

	// RowOps is the per-row work of the plan's WHERE clause (PredWork) and
	// of the arithmetic and conditions inside its aggregates, in units of
	// one comparison (work.go).
	RowOps int `json:",omitempty"`
	// Work bounds the rows the plan's upstream queries process, from the
	// policy's declared sizes (work.go); the proxy fixes the answer's time
	// slot from it before the charge.
	Work Work

	// Fingerprint is a hash of the canonical plan (not of the analyst's
	// text): equal fingerprints mean equal emitted SQL and measures.
	Fingerprint string

	// table and where let release re-emit the SQL for another
	// quantile method (not part of the canonical plan: the SQL is).
	table *policy.Table
	where Pred
}

// SourceOf returns the inputs of the emitter that p was built from: the
// policy table (a copy with the query's bounds) and the validated WHERE
// condition (nil when the query has none). nil table: the plan cannot be
// emitted again.
//
// SourceOf and SetSource are functions, not methods, so that only the
// planner (package rewrite, which may import this internal package) can
// reach them: a method would be callable through the rewrite.Plan alias
// by any package.
func SourceOf(p *Plan) (*policy.Table, Pred) { return p.table, p.where }

// SetSource records the emitter's inputs of p. The planner calls it once,
// while building the plan, before the plan is shared (a plan is immutable
// once built).
func SetSource(p *Plan, t *policy.Table, where Pred) { p.table, p.where = t, where }

// Key is one GROUP BY key. A key with a public domain releases exactly the
// Domain values, in the given order (groups absent from the data get a
// noisy zero). A Private key (a column without public values) has no
// Domain: its values come from the data, and a plan with a private key
// releases only the groups that pass DP partition selection (see
// Plan.PrivateGroups and rewrite/partition.go).
type Key struct {
	Column string      // lower-case column name
	Type   policy.Type // declared column type
	Domain []string    // public values, from the policy; nil when Private
	// Private marks a key without public values (partition selection).
	Private bool `json:",omitempty"`
	// Func, when not "", makes the key an expression of Column whose
	// domain is derived from public data (rewrite/keyexpr.go): "width_bucket"
	// (Args: low, high, count), "date_trunc" (Args: "day", "week", "month", "quarter" or "year"),
	// "extract" (Args: the field — year, quarter, month, day, dow, isodow, doy, week —
	// then, for date_part's float8 result, "float8" and the policy bounds), "epoch"
	// (Args: bucket width or "" for the plain epoch, "numeric" or "float8", bounds)
	// or "int_bucket" (Args: width, bounds); see rewrite/datekey.go.
	Func string   `json:",omitempty"`
	Args []string `json:",omitempty"`
}

// MeasureKind is what a measure computes per group.
type MeasureKind int

// Measure kinds.
const (
	// MeasureCount counts bounded rows: COUNT(*) when Column is "", else
	// COUNT(column) (non-null values).
	MeasureCount MeasureKind = iota
	// MeasureSum sums the column's values clamped to [Lower, Upper].
	MeasureSum
	// MeasureUnits counts the distinct non-null units (COUNT(DISTINCT
	// unit_column)): after bounding, each unit adds 1 to each group it
	// contributes to.
	MeasureUnits
	// MeasureSumSq sums the squares of the column's values clamped to
	// [Lower, Upper] (for the variance family).
	MeasureSumSq
	// MeasureSampleAgg is one sample-and-aggregate statistic: the sum over
	// the k blocks of (block answer clipped to [Lower, Upper]) − midpoint
	// (sampleagg.go). LInf = Upper − Lower.
	MeasureSampleAgg
	// MeasureQuantile is a quantile of the column's values clamped to
	// [Lower, Upper] (percentile_cont, percentile_disc, MIN, MAX), released
	// by the method of Measure.Quantile (quantile.go).
	MeasureQuantile
	// MeasureRemoved is the bias estimate of contribution bounding
	// (bias.go): per group, the rows of the query that bounding removed,
	// with each unit's removed rows over all groups clipped to
	// L1 = LInf = L0·R. It has no output; release states its noisy total
	// in the NOTICE.
	MeasureRemoved
)

// Measure is one noisy measurement per group.
type Measure struct {
	Kind   MeasureKind
	Column string // "" for COUNT(*)
	// Integer is true when every value of the measure is an integer (counts,
	// sums of int columns with integer bounds): integer noise applies.
	Integer bool
	// Whole is true when every row's value is an integer, though a
	// unit's weighted sum may not be (bounds.go): release prints the
	// noisy sum as a whole number, as PostgreSQL's SUM of integers.
	Whole bool `json:",omitempty"`
	// Lower, Upper are the clamping bounds of a sum's column (0 for counts),
	// or for an expression the interval of its values, rounded outwards.
	Lower, Upper float64
	// Expr, when not nil, is the per-row value: an expression inside the
	// aggregate (value.go), every column in it clamped; sums sum it,
	// counts count its non-NULL values.
	Expr *Value `json:",omitempty"`
	// Filter, when not nil, is the aggregate's FILTER (WHERE …) condition:
	// rows where it is not true add nothing to the measure.
	Filter Pred `json:",omitempty"`
	// Centre, when not "", makes a sum (sum of squares) a normalized sum:
	// of x − Centre (of (x − Centre)²), with Centre the midpoint of
	// [Lower, Upper] as an exact decimal. Used for AVG and the variance
	// family; release adds Centre back (avg = Centre + S̃/C̃).
	Centre string `json:",omitempty"`
	// LInf bounds how much one unit can change this measure in one group:
	// max_rows_per_unit for counts, max_rows_per_unit·max(|Lower|,|Upper|)
	// for sums, 1 for distinct units, max_rows_per_unit·max(Lower², Upper²)
	// for sums of squares; for centred ones max_rows_per_unit·(Upper −
	// Lower)/2 and max_rows_per_unit·((Upper − Lower)/2)²; max_rows_per_unit
	// (in ranks) for quantiles.
	LInf float64
	// L1, when > 0, bounds directly how much one unit can change this
	// measure summed over all groups (Σ_g |Δ_g|), where L0·LInf would be
	// loose: the bias estimate (MeasureRemoved) clips each unit's total
	// over its groups, so L1 = LInf. 0 means no such bound (L1
	// sensitivity L0·LInf).
	L1 float64 `json:",omitempty"`
	// Outside, for MeasureRemoved, makes the estimate count the rows one
	// of whose summed columns lies outside its bounds too (bias.go), whose
	// values clamping changed; the emitter writes the condition
	// (pgemit.OutsideSQL).
	Outside bool `json:",omitempty"`
	// Units, for MeasureRemoved, makes the estimate count what weighting
	// removed from distinct-unit counts instead of rows: per group, a unit
	// in g > L0 groups counts L0/g there (bounds.go), so 1 − L0/g of it
	// is missing; each unit's total over its groups, g − L0, is clipped
	// to LInf (rewrite/bias.go, pgemit.SQL).
	Units bool `json:",omitempty"`
	// Quantile describes a MeasureQuantile; nil for other kinds.
	Quantile *Quantile `json:",omitempty"`
}

// OutputKind says how an output column is computed from keys and noisy
// measures.
type OutputKind int

// Output kinds.
const (
	OutputKey   OutputKind = iota // Keys[Key]
	OutputCount                   // noisy Measures[Measure], a count
	OutputSum                     // noisy Measures[Measure], a sum
	OutputAvg                     // noisy Measures[Measure] / noisy Measures[CountMeasure]
	// OutputVariance is VAR_POP/VAR_SAMP (and with Sqrt, STDDEV_POP/
	// STDDEV_SAMP) from the noisy count C̃ (CountMeasure), sum S̃ (Measure)
	// and sum of squares Q̃ (SumSqMeasure):
	//	pop  = (Q̃ − S̃²/C̃) / C̃,   samp = (Q̃ − S̃²/C̃) / (C̃ − 1)
	OutputVariance
	// OutputExpr is Expr evaluated on the row's noisy values (arithmetic
	// over aggregates in the select list, e.g. SUM(cost) / COUNT(*)).
	OutputExpr
	// OutputSampleAgg is midpoint + noisy Measures[Measure] / k, clamped to
	// [Lower, Upper]: the average of the k clipped block answers of a
	// sample-and-aggregate plan (sampleagg.go).
	OutputSampleAgg
	// OutputQuantile is the released quantile Measures[Measure] (a
	// MeasureQuantile), printed in PGType.
	OutputQuantile
)

// Output is one column of the analyst's result.
type Output struct {
	Name         string // column name as the analyst will see it
	Kind         OutputKind
	Key          int // index into Plan.Keys for OutputKey
	Measure      int // index into Plan.Measures
	CountMeasure int // for OutputAvg and OutputVariance: the COUNT(column) measure
	SumSqMeasure int // for OutputVariance: the sum-of-squares measure
	// Sample (OutputVariance) selects the sample form (divide by n − 1);
	// Sqrt takes the square root (standard deviation).
	Sample, Sqrt bool
	// PGType is the PostgreSQL result type: "int8" (counts), "numeric"
	// (sums, averages), or the key's type ("text", "int4", "date", "bool").
	PGType string
	// Scale, when > 0, prints a sum with that many decimals, as
	// PostgreSQL prints the SUM of a numeric(p, Scale) column.
	Scale int `json:",omitempty"`
	// Expr (OutputExpr) is computed from Outputs ++ Hidden after noise.
	Expr *Expr `json:",omitempty"`
	// Lower, Upper are the column's bounds: they clamp a released average
	// and bound a released variance (post-processing).
	Lower, Upper float64
}

// OrderItem orders released rows by an output column.
type OrderItem struct {
	Output int // index into Plan.Outputs
	Desc   bool
}

// PrivateGroups reports whether some key of the plan is private: the
// released groups are then chosen by partition selection, and the SQL
// returns the distinct-unit count of each group after the measures.
func (p *Plan) PrivateGroups() bool {
	for _, k := range p.Keys {
		if k.Private {
			return true
		}
	}
	return false
}

// UnitsCounted reports whether the SQL returns each group's distinct-unit
// count after the measures: for partition selection (PrivateGroups) or a
// minimum of units per cell (MinUnits).
func (p *Plan) UnitsCounted() bool {
	return p.MinUnits > 0 || p.PrivateGroups()
}
