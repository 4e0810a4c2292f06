// Package pgemit is the SQL emitter: it turns a validated plan (package
// dpplan) into the PostgreSQL SQL that is sent upstream. The security
// invariant rests here and on the planner: what reaches the private
// database is SQL this package assembles from plan values. It writes the
// SQL's shape, quotes every policy name and writes its own constants; the
// fragments that are plan data were written by the planner from
// validated AST nodes, with names quoted and literals re-encoded, never
// analyst text pasted: the literals of WHERE conditions
// (pred.go, literal.go, likepattern.go) and the constants of key
// expressions (casekey.go, keyexpr.go, datekey.go). A review of what
// reaches the database reads this package and those planner files.
//
//	bounds_sql.go    Privacy-critical: SQL and ProfileSQL, the emitted SQL
//	                 of a plan: clamping (ClampSQL), contribution bounding
//	                 by weights or by hash order (its shape in the file
//	                 comment; the argument in dpplan/bounds.go), keys
//	                 restricted to their domains, exact numeric sums.
//	value_sql.go     Privacy-critical: ValueSQL, a row value (dpplan.Value,
//	                 the expression inside an aggregate) with every column
//	                 and quotient clamped to the interval dpplan computed;
//	                 RatConst and DecimalText, exact numeric constants.
//	size.go          CheckSize: the emitted SQL's size limit.
//	check.go         Privacy-critical: CheckInputs, what the emitter pastes
//	                 as it stands (constants, quoted columns, closed sets
//	                 of words) checked before any release (release/verify.go).
//	join_sql.go      Privacy-critical: the joined relation bounded after
//	                 the join.
//	quantile_sql.go  Privacy-critical: quantile measures: bucket counts
//	                 (exponential method).
//	sampleagg_sql.go  Privacy-critical: sample-and-aggregate (keyed-hash
//	                 blocks, clipped per-block answers, their sum).
//	bias_sql.go      Privacy-critical: the bias estimate's SQL (rows
//	                 removed by bounding, rows outside the bounds).
//	autoclip_sql.go  Privacy-critical: the histogram query of auto clipping.
//	bootstrap.go     Privacy-critical: the bounds probe of policy init.
//	key_sql.go       group keys and key expressions (date_trunc,
//	                 width_bucket, EXTRACT, epoch buckets) as SQL.
//	pred.go          PredSQL: a validated WHERE condition as SQL.
//	quote.go         QuoteIdent and QuoteString.
//
// It imports only policy and dpplan, never the planner (package rewrite),
// which calls it; it does no I/O and no logging. Its SQL is tested through
// the planner: the goldens, the differential corpus, the neighbour audits
// and the totality fuzzer of package rewrite.
//
// It is a top-level package so that release reads plans without importing
// the parser (issue 28: `go list -deps ./release` names no pingcap
// package). Only rewrite calls it with plans built from analyst text; a
// test (dpplan's TestArch_OnlyRewriteBuildsPlans) keeps other packages
// from building plans or emitter inputs.
package pgemit
