// Privacy-critical: needs DP review.

package rewrite

// Quantiles (percentile_cont, percentile_disc, MIN, MAX; quantile.go) over
// joins and with private group keys (issue 9).
//
// Every quantile method rests on one fact about the values a group's SQL
// summary is computed from: adding or removing one unit adds or removes at
// most R values of each group, in at most L0 groups (R = Quantile.Rows =
// Measure.LInf). The exponential method's utilities then move by at most R
// (release/quantile.go), and the smooth and ptr methods' order statistics
// satisfy y_i ∈ [x_{i−R}, x_{i+R}] for neighbours (pgemit/quantile_sql.go). So
// a quantile is answered over a join exactly when the join shape gives such
// an R:
//
//   - JoinPublic and JoinUnit: the joined relation is bounded per unit
//     after the join by dpplan/bounds.go (join.go: every joined row holds rows of
//     exactly one unit), with R = the join's max_rows_per_unit and L0 = its
//     max_groups_per_unit (capped by the number of groups); the quantile SQL
//     is the single-table one (per (unit, group) arrays of at most R values,
//     quantileUnitSQL) over the joined relation. All three methods hold.
//   - JoinKey (elastic): no per-unit bound after the join. One unit changes
//     at most E joined rows (join.go), each joined row holds one value of
//     one group, so R = E (joinTable sets the synthetic table's
//     max_rows_per_unit to E, and dpplan.MeasureBounds gives LInf = E). The SQL
//     summarises all the group's joined rows' values directly
//     (elasticQuantileSQL: the same bucket counts or order statistics, over
//     array_agg of the per-row values instead of per-unit arrays). All three
//     methods hold with R = E. Moreover the E changed rows are shared by
//     all groups: Σ_g (values changed in g) ≤ E, the direct L1 bound of
//     dpplan/join_l1.go, which lets the exponential method give each group the
//     whole ε of the measure (release/quantile.go, "Groups").
//
// With a private group key (partition.go, join_partition.go) the groups
// are chosen by DP partition selection and the quantile is released for
// the kept groups only (release/partition.go); the per-group facts above
// are unchanged, since partition selection only adds the unit-count column.
// Private keys are refused in elastic joins (join_partition.go), so this
// combination only meets the bounded-after-the-join shapes.
