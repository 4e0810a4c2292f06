// Privacy-critical: needs DP review.

package rewrite

// This file and bounds_sql.go hold all clamping and contribution bounding
// of dpproxy: the per-measure sensitivity bounds of the plan
// (measureBounds, maxGroupsPerUnit, here) and the SQL that enforces them
// (emitSQL, bounds_sql.go). Nothing else in the project clamps values or
// limits contributions; the noise added downstream is calibrated to the
// numbers computed here, so the two must agree, and they are kept side by
// side in this package.
//
// # Guarantee
//
// Neighbouring databases differ by all rows of one privacy unit (the rows
// sharing one value of the table's unit_column). The SQL built by emitSQL
// guarantees, for every such unit u and whatever the data:
//
//  1. u contributes to at most Plan.MaxGroupsPerUnit released groups
//     (L0 bound), and to no group outside the public key domain (private
//     keys, partition.go: to no group whose private key is NULL), and
//     when the plan has private keys, u adds exactly 1 to the distinct-unit
//     count (the last column) of each group it contributes to;
//  2. in each group, u changes a count measure by at most max_rows_per_unit,
//     a sum measure over column c by at most
//     max_rows_per_unit · max(|lower_c|, |upper_c|), a sum of squares by at
//     most max_rows_per_unit · max(lower_c², upper_c²), and a count of
//     distinct units by at most 1 (L∞ bound, Measure.LInf).
//
// Hence the L1 sensitivity of the vector of one measure over all groups is
// at most L0·L∞ and the L2 sensitivity at most √L0·L∞ (the standard bounds
// for user-level contribution bounding; see Wilson et al., "Differentially
// Private SQL with Bounded User Contribution", PoPETs 2020, §3).
//
// # How the SQL enforces it
//
// Reading from the inside out:
//
//	dp_rows         one row per input row that passes the analyst's WHERE and
//	                whose keys are in the public domain (key IN (…), where
//	                a key is a column or a key expression of keyexpr.go
//	                whose domain comes from the policy or the query's
//	                constants, never from the data); summed
//	                columns are clamped per row:
//	                  CASE WHEN c IS NULL THEN NULL
//	                       ELSE LEAST(GREATEST(c::numeric, lower), upper) END
//	                (the CASE keeps NULL as NULL: GREATEST ignores NULLs and
//	                would otherwise turn NULL into lower). Squared columns
//	                are the clamped value times itself. Quantile values get
//	                their rank by value within the (unit, group).
//	dp_unit_groups  per (unit, group): for each measure n, the number of
//	                rows that count for it (non-NULL values after FILTER),
//	                and s, the exact numeric sum of their values; for
//	                quantiles at most R of the values, evenly spaced in rank
//	                (quantile.go).
//	dp_counted      (grouped, when a unit could reach more than L0 groups)
//	                per measure t = Σ over the unit's groups of min(n, R),
//	                its bounded rows in all, and g, its number of groups,
//	                for distinct units (groupsScale); or the rank of the
//	                group among the unit's groups by a hash of (unit, keys)
//	                (groupsSelect: private keys, quantiles).
//	dp_bounded      per (unit, group) the bounded value of each measure:
//	                counts min(n, R), sums s·min(n, R)/n, each weighted by
//	                min(1, T/t) with T = L0·R the unit's allowance over all
//	                groups (distinct units by min(1, L0/g)) (groupsScale),
//	                or only the L0 groups of smallest rank (groupsSelect);
//	                weighted values truncated towards zero in exact numeric
//	                (weighted).
//	final           summed per group in numeric (exact: no rounding can
//	                exceed the bounds) and cast to text; with private keys
//	                also COUNT(*), the number of (unit, group) rows of the
//	                group, i.e. its distinct units after bounding.
//
// # Two levels of bounding
//
// Nothing is chosen at random: every bounded value is a function of the
// unit's own rows. A unit's mean value times min(n, R) is bounded like R
// clamped rows (|mean| ≤ max(|lower|, |upper|)). With public keys the
// unit's bounded rows over all groups, t = Σ_g min(n_g, R), are scaled to
// at most its allowance T = L0·R: each group's value is weighted by
// min(1, T/t). For a measure with L∞ = R·M (M the largest |value|, 1 for
// counts) the group values c_g then satisfy |c_g| ≤ min(n_g, R)·M·min(1,
// T/t), so
//
//	L∞: |c_g| ≤ R·M
//	L1: Σ_g |c_g| ≤ t·M·min(1, T/t) ≤ T·M = L0·L∞
//	L2: Σ_g c_g² ≤ max_g |c_g| · Σ_g |c_g| ≤ L∞ · L0·L∞, so L2 ≤ √L0·L∞
//
// the same sensitivities as keeping at most L0 groups, without dropping
// or weighting a unit that is in more than L0 groups but within its
// allowance. Distinct-unit counts (1 per group, L1 ≤ L0) are weighted by
// min(1, L0/g) for g groups instead. Other units' values do not depend on
// whether u is present, so the bounds hold for u alone (PRIVACY.md, "Two
// levels of bounding").
// No random() also means PostgreSQL may run the scan and the first
// aggregation in parallel workers (random() is parallel-restricted).

// # NULL unit values
//
// Rows whose unit column is NULL are excluded (WHERE unit IS NOT NULL).
// Pooling them into one pseudo-unit is NOT safe: adding a person whose rows
// have a NULL unit redraws the pool's random choice of rows and groups, so
// up to 2·L0 groups change (found by rewrite/audit_test.go). Excluded rows
// contribute nothing, so adding or removing them changes nothing. Answers
// therefore differ from PostgreSQL's own on rows without a unit; a steward
// who wants them counted must give them a unit (or declare the column NOT
// NULL upstream).
//
// # Ungrouped queries
//
// Without GROUP BY every unit contributes to the single group, so
// MaxGroupsPerUnit is 1 and the dp_counted step is omitted. The final
// aggregate then returns exactly one row even over no input (with NULL
// measures, which release treats as 0).

// # Bounds per query
//
// The policy gives each unit an allowance per query: at most
// max_groups_per_unit groups and max_rows_per_unit rows in each, so at
// most L0·L∞ rows in all and an L1 sensitivity of L0·L∞ (per row bound)
// for one measure over all groups. An ungrouped query has one group, so
// the unit's whole allowance goes to it: L∞ = max_groups_per_unit ·
// max_rows_per_unit rows, with L0 = 1, and the L1 sensitivity is the
// same L0·L∞ the policy already allows a grouped query (for the Gaussian
// mechanism the L2 sensitivity L0·L∞ is larger than a grouped query's
// √L0·L∞: the policy's L0·L∞ rows of one unit may all lie in the one
// group). Keeping only max_rows_per_unit rows there would drop rows the
// policy allows, biasing counts and sums down (the demo's first query lost
// 24% of its rows). The session may tighten either bound (SET
// dp.max_rows_per_unit / dp.max_groups_per_unit, like BigQuery's
// per-query contribution bounds), never loosen it. queryBounds gives the
// builder a view of the table with the bounds of this query; release
// checks Plan.RowsPerUnit against the policy (release/join.go).
