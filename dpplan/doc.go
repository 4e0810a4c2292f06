// Package dpplan holds the plan of a DP query: what is measured and how
// much one privacy unit can change it, and the bounds math over it. It is
// the privacy-critical core of the rewriter. The L∞ and L1 bounds it
// holds are computed by the planner (rewrite/build_bounds.go, centre.go,
// join_shape.go), and release recomputes and cross-checks them, with this package's functions and package sensitivity;
// a review of the bounds reads those files with this one. Expressions
// inside aggregates are a typed row value (value.go) whose interval this
// package computes; release re-checks every sum's range against it.
//
// Files:
//
//	plan.go       Plan, Key, Measure (kinds, bounds L∞ and L1), Output,
//	              OrderItem; SourceOf/SetSource: the emitter's inputs (the
//	              policy table and the WHERE condition, not part of the
//	              canonical plan); PrivateGroups.
//	bounds.go     Privacy-critical: the bounding argument (the guarantee,
//	              the two levels of bounding, the bounds per query) and the
//	              bounds math: MeasureBounds, ExprBounds (L∞ of a measure),
//	              MaxGroupsPerUnit (L0), GroupBounding (how the SQL
//	              enforces L0), CellsChanged, ScaledMeasures.
//	bias.go       Privacy-critical: which plans bound by weights only, the
//	              summed columns, HasBias (the bias estimate's measure).
//	join.go       Privacy-critical: Join, the FROM clause of a join query,
//	              and the argument of its shapes (public, unit, key), the
//	              work of a unit join, private keys and quantiles in joins.
//	join_check.go Privacy-critical: VerifyJoin, every fact of that argument
//	              re-derived from the policy, and JoinedTable, the joined
//	              relation the emitter bounds.
//	quantile.go   Quantile: a quantile measure and the quantile methods.
//	sampleagg.go  SampleAgg and SampleCall: a sample-and-aggregate plan, its
//	              statistics, the HMAC key pads of its bind parameters
//	              (QueryArgs) and the midpoint of an output range.
//	auto.go       AutoBounds and AutoClip: what release needs to choose a
//	              plan's rows per unit or clamping bounds by DP.
//	pred.go       Pred: the validated WHERE condition (column op literal,
//	              AND/OR/NOT, IN, BETWEEN, IS NULL, LIKE), typed and quoted
//	              by the planner; package pgemit writes it as SQL.
//	expr.go       Expr and Cond: arithmetic over aggregates and HAVING,
//	              evaluated on released values (post-processing).
//	value.go      Privacy-critical: Value, the typed per-row value inside
//	              an aggregate (columns, constants, + − × ÷, CASE,
//	              COALESCE, LEAST, GREATEST, ABS, NULLIF), its interval
//	              (ValueInterval: the soundness argument and the limits on
//	              constants, magnitudes and divisions) and work (ValueOps).
//	fingerprint.go  Fingerprint: the hash of the canonical plan.
//
// It imports only policy and sensitivity (interval arithmetic): never the
// planner (package rewrite) nor the emitter (package pgemit), which both
// import it. It does no I/O and no logging and builds no SQL beyond the
// SQL fragments that are plan data (Plan.SQL and the SQL of automatic
// bounds and clipping, written by the emitter and verified by release;
// the literals of Pred nodes, written by the planner).
//
// Package rewrite re-exports the plan's types and constants as aliases
// (rewrite.Plan = dpplan.Plan, …) for its callers.
//
// It is a top-level package, parser-free, so that release and a privacy
// review read plans without the TiDB parser (issue 28). Only the planner
// (rewrite) builds plans, their WHERE nodes and emitter inputs
// (SetSource): TestArch_OnlyRewriteBuildsPlans fails when a non-test file
// elsewhere writes a Plan literal, calls SetSource or NewAutoClip;
// rewrite re-exports the types callers read.
package dpplan
