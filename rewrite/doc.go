// Package rewrite turns aggregate queries over one protected table (or a
// join of protected and public tables, join.go) into a validated [Plan]
// whose SQL is produced by our own PostgreSQL emitter. It is the planner:
// the plan's types and bounds math are package dpplan (aliased here:
// rewrite.Plan = dpplan.Plan, …) and the emitter is package pgemit. It also answers
// SELECT DISTINCT of a column with public values from the policy
// (distinct.go, PublicDistinct). Lexing, splitting, routing (Classify) and
// session statements are package pgsql, the PostgreSQL front end.
//
// It imports only pgsql (the lexer), dpplan (the plan), pgemit (the
// emitter), policy, sensitivity (interval arithmetic), internal/pgerr and
// the TiDB parser; none of pgsql, dpplan and pgemit imports it, and pgemit
// imports dpplan, never the reverse.
// It does no I/O and no logging, holds no global mutable state, and is
// safe for concurrent use.
//
// # What a privacy review reads here
//
// Nothing: every plan, joins included, is checked by release before it is
// calibrated (release/verify.go): each query it runs upstream must be what
// pgemit writes for the plan, from a table that agrees with the policy, and
// every sensitivity, range and integrality claim is recomputed from the
// plan's own data (dpplan, release/release.go mechanisms). A mistake in
// the rest of this package changes which query is answered, or refuses
// one; it cannot release more than the charge. The SQL fragments the
// planner still writes (WHERE literals: pred.go, literal.go,
// likepattern.go; key constants: casekey.go, keyexpr.go, datekey.go;
// statistics: sampleagg.go) are checked by pgemit.CheckInputs to be
// constants, quoted columns of the table or words of a closed set, so no
// condition, key or value can read other rows.
//
// # Pipeline
//
//	pgsql.Lex     PostgreSQL tokens (package pgsql).
//	normalize.go  PostgreSQL tokens → text the TiDB parser reads with the same
//	              structure; literals are kept aside and replaced by ? markers,
//	              every name is quoted (EXTRACT(YEAR|QUARTER|MONTH FROM …) is
//	              passed as keywords, other fields as "extract"('field', …)),
//	              everything without an exact mapping is
//	              refused with its position.
//	normalize_pieces.go  passes over the normalized pieces: IS [NOT]
//	              DISTINCT FROM, rendering with offsets, parse error
//	              positions, the LIMIT/OFFSET tail.
//	cast.go       value-preserving casts of columns, rewritten before
//	              normalizing (offsets kept).
//	datefold.go   timestamp literals and to_timestamp compared with date
//	              columns: the exact date comparison (session TimeZone).
//	datekey.go    EXTRACT/date_part fields and epoch buckets as keys
//	              (Grafana's $__timeGroup, $__unixEpochGroup).
//	post.go       Post: statements whose leaves are DP aggregates and whose
//	              outer parts are SQL over them (POSTPROCESSING.md);
//	              post_split.go splits statements, WITH and set operations
//	              into DP leaves, post_select.go one SELECT's clauses and
//	              aggregate calls; postflat.go flattens projection
//	              subqueries and CTEs.
//	build.go      TiDB AST → checked against the policy → Plan: the
//	              builder, its entry (plan, build), FROM and columns.
//	build_select.go  the select list: outputs, aggregates, their measures.
//	build_keys.go  GROUP BY keys and their PostgreSQL types.
//	build_bounds.go  a measure's magnitude limit
//	              (addMeasure) and the contribution bounds per query
//	              (queryBounds).
//	build_order.go  ORDER BY and LIMIT/OFFSET over the outputs.
//	pred.go       WHERE conditions: column op literal, typed by us, planned
//	              as a dpplan.Pred (written as SQL by pgemit.PredSQL).
//	rowexpr.go    expressions inside aggregates (+ - * /, CASE, COALESCE,
//	              NULLIF, LEAST, GREATEST, ABS, constants) translated into
//	              the typed row value dpplan.Value, which dpplan bounds
//	              (value.go) and pgemit writes (value_sql.go).
//	filter.go     agg(…) FILTER (WHERE cond): normalizer marker and plan.
//	centre.go     SUM derived from AVG's normalized sums.
//	keyexpr.go    GROUP BY expressions with public derived domains.
//	casekey.go    GROUP BY CASE buckets (domain: the THEN/ELSE constants).
//	partition.go  GROUP BY columns without public values
//	              (private keys, DP partition selection; needs δ > 0).
//	expr.go       HAVING and arithmetic over aggregates: post-processing
//	              expressions over released values (dpplan.Expr, Cond).
//	aliases.go    the plan's types and constants as aliases of dpplan's.
//	bias.go       the bias estimate's measure
//	              (addRemoved).
//	autobounds.go, autoclip.go  contribution bounds
//	              and clamping bounds chosen per query: candidate plans,
//	              the clipped columns and the replanning (their plan data
//	              is dpplan/auto.go, their SQL pgemit's).
//	regrstats.go  covar_pop, covar_samp, regr_slope, regr_intercept as
//	              expressions over noisy sums.
//	sampleagg.go  corr and regr_r2 by sample-and-aggregate (keyed-hash
//	              blocks, per-block answers clipped to the statistic's
//	              natural range, averaged; k from
//	              SET dp.sample_blocks or a noisy unit count), per group
//	              of public keys and over joins bounded after the join;
//	              the secret key is a bind parameter (Plan.QueryArgs).
//	join.go       FROM clauses with joins, parsed into a dpplan.Join
//	              (tables, ON/USING equalities, the columns read);
//	              join_shape.go classifies the join (protected + public
//	              tables; protected tables on the unit); join_resolve.go
//	              resolves qualified columns to the joined relation's
//	              (dpplan.JoinedTable); join_partition.go refuses private
//	              keys where partition selection does not hold;
//	              join_quantile.go plans quantiles over joins. The shapes'
//	              argument is dpplan/join.go, and release re-derives every
//	              fact of it from the policy (dpplan.VerifyJoin).
//	quantile.go   percentile_cont/percentile_disc WITHIN
//	              GROUP, MIN and MAX as quantile measures (their SQL, per
//	              group the bucket counts of the bounded values, is
//	              pgemit/quantile_sql.go).
//	quantile_expr.go  quantiles of expressions
//	              (percentile_cont/disc WITHIN GROUP (ORDER BY expr),
//	              MIN/MAX(expr)): the row value is the rowexpr.go
//	              expression, the grid its interval (refused
//	              when empty, a point, not finite or too wide for the
//	              grid).
//	rewrite.go    the entry points: Rewrite, RewriteWith and Options.
//	explain.go    ExplainTarget: EXPLAIN of a DP query.
//	depth.go      the nesting limit of the analyst's statement.
//	literal.go    literals typed against a policy column
//	              and re-encoded (never the analyst's text).
//	likepattern.go  LIKE patterns re-encoded.
//	narrow.go     key domains narrowed by public WHERE
//	              conditions.
//
// # Verification
//
//   - Goldens (testdata/*.txtar): policy, query, and the emitted SQL or the
//     error with its SQLSTATE and HINT; `go test ./rewrite -run Golden
//     -update` regenerates them for review.
//   - The differential corpus (testdata/corpus.sql, TestRewrite_Corpus): at
//     least 200 analyst queries over the hospital policy, each of which must
//     be accepted; on a real PostgreSQL loaded with data within the policy's
//     bounds and contribution limits (at most 4 visits per patient), the
//     emitted SQL released without noise must return exactly what
//     PostgreSQL returns for the query itself. New supported shapes get
//     corpus lines; refused shapes get goldens. TestRewrite_Postgres does
//     the same for the accepted goldens.
//   - FuzzRewrite (make fuzz, part of make test; longer runs in
//     docs/TESTING.md, "Fuzzing"): no panics; refusals are *pgerr.Error; every
//     accepted query has outputs resting on measures of finite, positive
//     sensitivity and emitted SQL that lexes as one balanced statement.
//     TestRewrite_PostgresParses PREPAREs the emitted SQL of every accepted
//     seed, golden and corpus query on a real PostgreSQL.
//   - Totality (issue 14; an error that depends on the data is a one-bit
//     release): TestEmittedSQL_Total runs the emitted SQL of every
//     accepted golden and of totalQueries, and TestEmittedSQL_TotalityFuzz
//     that of generated queries (totality_gen_test.go, for a bounded time;
//     `make fuzz-totality` for longer), on five adversarial table sets of
//     every test policy (total_test.go); no run may fail.
//   - BenchmarkRewrite_Latency: the p50 of normalize + parse + plan + emit
//     (goal ≤ 50 µs; figures in BENCHMARKS.md).
//
// # The security invariant
//
// Plan.SQL is built by package pgemit from plan values only: quoted
// policy names, literals re-encoded by this package, and fixed SQL. No
// analyst text is pasted and the TiDB parser's Restore is never used.
//
// # Routing decisions
//
// Classify, in package pgsql (see its doc.go), decides which statements
// reach Rewrite.
//
// # Joins (issue 9)
//
// FROM a [LEFT] JOIN b ON a.x = b.y [AND …] [JOIN c USING (z) …]: join
// conditions are conjunctions of equalities between a column of the joined
// table and a column of an earlier one (PostgreSQL's USING too). The
// joined relation's columns are named by their bare name when only one
// table has it, else table.column (table#position.column in self-joins,
// so that no analyst text reaches the SQL); that is
// what Key.Column, Measure.Column and the unit column of the plan name.
// Plan.Table is the first protected table and Plan.Join the join. A
// qualified name resolves as in PostgreSQL (the alias hides the table
// name), an unqualified one must be unambiguous (42702), a USING column
// is the left table's. Comma, CROSS, NATURAL, RIGHT and FULL joins,
// joined subqueries and parenthesized right-hand joins are refused. The
// sensitivity of each shape is derived in join.go and PRIVACY.md.
// Quantiles (join_quantile.go) and private group keys (join_partition.go)
// are answered over both shapes.
//
// # What the first cut answers (issue 2) and known differences
//
// SELECT of public-domain keys and COUNT(*), COUNT(col), COUNT(DISTINCT
// unit_column), SUM(col), AVG(col), VAR_POP, VAR_SAMP, VARIANCE, STDDEV,
// STDDEV_POP, STDDEV_SAMP (with PostgreSQL's meanings: variance = var_samp,
// stddev = stddev_samp), percentile_cont(q)/percentile_disc(q) WITHIN GROUP
// (ORDER BY col), MIN(col) and MAX(col) (quantiles, answered up to the
// noise and a bucket width, quantile.go; of expressions too,
// quantile_expr.go, with PostgreSQL's result types: percentile_cont
// float8, the others the expression's int8, numeric or float8) from one
// protected table, with
// WHERE over column-vs-literal conditions,
// GROUP BY public-domain columns (by name, alias or position), ORDER BY
// outputs, LIMIT/OFFSET (applied downstream to noisy rows). On data within
// the policy's bounds and contribution limits, the emitted SQL computes
// exactly what PostgreSQL computes for the analyst's query (tested on a
// real PostgreSQL), except:
//
//   - rows whose key is NULL or outside the key's public values are not
//     counted (the released groups are exactly the public values); a key
//     without public values (partition.go) releases only the groups that
//     pass DP partition selection, and never the NULL group;
//   - GROUP BY width_bucket(col, low, high, count) (domain 0…count+1, from
//     the query's constants) and date_trunc('month'|'year', date_col)
//     (domain: the months/years of the policy's date bounds), see
//     keyexpr.go. date_trunc keys are released as dates where PostgreSQL
//     returns timestamptz at midnight; width_bucket is computed over numeric
//     (PostgreSQL uses its float8 variant for float columns); and
//     EXTRACT(YEAR FROM date_col) (domain: the years of the bounds); and
//     CASE buckets (domain: the THEN/ELSE constants; a row no WHEN matches
//     without ELSE has a NULL key and is not counted, see casekey.go);
//   - HAVING (AND/OR/NOT of comparisons of aggregates, + - * / and numeric
//     constants) and arithmetic over aggregates in the select list are
//     planned as Expr/Cond over released values (expr.go) and evaluated by
//     release after noise; aggregates they use that are not in the select
//     list become Plan.Hidden values whose measures are charged. A division
//     by zero gives NULL (PostgreSQL raises 22012, which would reveal that a
//     noisy value is zero); a division PostgreSQL would type as integer
//     (truncating) is refused with a hint to multiply by 1.0;
//   - the variance family is released from three noisy measurements (count,
//     sum and sum of squares of the clamped column) and post-processed in
//     release (see release/post.go);
//   - AVG and the variance family use normalized sums centred at the
//     midpoint c of the value's bounds (Σ (x − c), Σ (x − c)²; L∞ halved
//     and quartered for bounds like [0, u]); release adds c back. A SUM of
//     the same value in the same query is released as S̃_c + c·C̃ from those
//     measurements (centre.go) instead of a separate one;
//   - expressions inside aggregates (rowexpr.go) are evaluated on clamped
//     columns in numeric: PostgreSQL's integer division (int / int, which
//     truncates) is refused, a divisor that is 0 gives NULL (PostgreSQL
//     raises 22012), a quotient is clamped to its computed interval (a
//     no-op up to numeric rounding), and a simple CASE is supported only
//     over a column compared with literals;
//   - agg(…) FILTER (WHERE cond) applies the condition after contribution
//     bounding (see rowValue in pgemit/bounds_sql.go): on data within the limits
//     the answer is PostgreSQL's;
//   - a GROUP BY name that is no column of the policy falls back to an
//     output alias even if the real table has such an undeclared column.
package rewrite
