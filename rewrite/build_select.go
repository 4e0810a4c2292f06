package rewrite

import (
	"fmt"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// The select list: outputs, aggregates and the measures they plan. See
// build.go for the builder, build_bounds.go for the measures' bounds.

// selectList builds outputs and measures.
func (b *builder) selectList(sel *ast.SelectStmt) error {
	regr, err := b.regrFromSums(sel) // regrstats.go
	if err != nil {
		return err
	}
	for _, f := range sel.Fields.Fields {
		if f.WildCard != nil {
			return b.errAt(sel, pgerr.InsufficientPrivilege, "only aggregate queries are answered; SELECT * returns private rows").
				WithHint("%s", aggregateHint)
		}
		out := Output{}
		var spec aggSpec
		switch x := f.Expr.(type) {
		case *ast.ColumnNameExpr:
			ci, err := b.column(x)
			if err != nil {
				return err
			}
			k := b.keyIndex(ci.name)
			if k < 0 {
				return b.errAt(x, pgerr.InsufficientPrivilege, "only aggregate queries are answered; column %q is not aggregated", ci.name).
					WithHint("%s", aggregateHint)
			}
			out = Output{Name: b.outputName(ci), Kind: OutputKey, Key: k, PGType: keyPGType(b.keys[k])}
		case *ast.AggregateFuncExpr:
			s, o, err := b.aggregate(x)
			if err != nil {
				return err
			}
			spec, out = s, o
			if out.PGType = b.aggPGType(x, out); out.PGType == "float8" || out.PGType == "float4" {
				out.Scale = 0 // a float prints its own digits
			}
		default:
			if _, ok := b.lit(f.Expr); ok {
				return b.errAt(f.Expr, pgerr.FeatureNotSupported, "constants in the select list of a DP query are not supported").
					WithHint("%s", aggregateHint)
			}
			if fc, ok := f.Expr.(*ast.FuncCallExpr); ok && isOrderedSetName(fc.FnName.O) {
				s, o, err := b.orderedSet(fc, strings.ToLower(fc.FnName.O))
				if err != nil {
					return err
				}
				spec, out = s, o
				break
			}
			if fc, ok := f.Expr.(*ast.FuncCallExpr); ok && isSampleAggFunc(fc.FnName.O) {
				o, err := b.sampleAggCall(fc)
				if err != nil {
					return err
				}
				out = o
				break
			}
			if ce, ok := f.Expr.(*ast.CaseExpr); ok {
				o, isKey, err := b.caseOutput(ce)
				if err != nil {
					return err
				}
				if isKey {
					out = o
					break
				}
			}
			if k, _, ok, err := b.bucketKey(f.Expr); ok {
				if err != nil {
					return err
				}
				idx := b.keyOutput(k)
				if idx < 0 {
					return b.errAt(f.Expr, "42803", "the bucket expression must appear in the GROUP BY clause").
						WithHint("add it to GROUP BY, e.g. GROUP BY 1")
				}
				out = Output{Name: "?column?", Kind: OutputKey, Key: idx, PGType: keyPGType(b.keys[idx])}
				break
			}
			if fc, ok := f.Expr.(*ast.FuncCallExpr); ok && !isArithFunc(fc) {
				name := strings.ToLower(fc.FnName.O)
				if name != "width_bucket" && name != "date_trunc" && name != "extract" && name != "date_part" {
					hint := aggregateHint
					if name == "median" {
						hint = "write percentile_cont(0.5) WITHIN GROUP (ORDER BY col) for a median"
					}
					return b.errAt(f.Expr, pgerr.FeatureNotSupported, "function %s is not supported in DP queries", fc.FnName.O).
						WithHint("%s", hint)
				}
				k, _, err := b.exprKey(fc)
				if err != nil {
					return err
				}
				idx := b.keyOutput(k)
				if idx < 0 {
					return b.errAt(f.Expr, "42803", "%s(…) must appear in the GROUP BY clause", name).
						WithHint("add it to GROUP BY, e.g. GROUP BY 1")
				}
				out = Output{Name: name, Kind: OutputKey, Key: idx, PGType: b.castKeyType(fc, b.keys[idx])}
				break
			}
			e, info, err := b.arith(f.Expr)
			if err != nil {
				return err
			}
			if !info.agg {
				return b.errAt(f.Expr, pgerr.FeatureNotSupported, "constants in the select list of a DP query are not supported").
					WithHint("%s", aggregateHint)
			}
			typ := "numeric"
			if info.maybeInt && intExpr(e, b.hidden) {
				typ = "int8"
			}
			if regr[f] || info.float {
				typ = "float8" // PostgreSQL's type of the covariances and regressions
			}
			out = Output{Name: exprName, Kind: OutputExpr, Expr: e, PGType: typ}
		}
		if f.AsName.O != "" {
			out.Name = strings.Clone(f.AsName.O)
		}
		b.outputs = append(b.outputs, out)
		b.aggs = append(b.aggs, spec)
	}
	if len(b.measures) == 0 && len(b.sa) == 0 {
		return b.errAt(sel, pgerr.InsufficientPrivilege, "only aggregate queries are answered").WithHint("%s", aggregateHint)
	}
	return nil
}

// aggPGType is the PostgreSQL type of the aggregate x planned as o: that
// of a numeric or float cast around the call (AVG(cost)::float8), else,
// for SUM, AVG and the variance family of a float column (or of a column
// cast to a float type: SUM(cost::float8)), PostgreSQL's: SUM keeps
// float4 and float8, the others are float8. The values are the same
// noisy numbers, printed as the type prints them (release/post.go).
func (b *builder) aggPGType(x *ast.AggregateFuncExpr, o Output) string {
	switch t := b.intCasts[b.norm.srcPos(x.OriginTextPosition())]; t {
	case "float8", "float4", "numeric":
		if o.Kind == OutputCount || o.Kind == OutputSum || o.Kind == OutputAvg || o.Kind == OutputVariance {
			return t
		}
	}
	if o.Kind != OutputSum && o.Kind != OutputAvg && o.Kind != OutputVariance || len(x.Args) != 1 {
		return o.PGType
	}
	c, ok := unparen(x.Args[0]).(*ast.ColumnNameExpr)
	if !ok {
		return o.PGType
	}
	arg := b.intCasts[b.norm.srcPos(c.OriginTextPosition())]
	if arg == "" {
		if ci, err := b.column(c); err == nil && ci.col != nil {
			arg = ci.col.PGType
		}
	}
	switch {
	case arg != "float4" && arg != "float8":
		return o.PGType
	case o.Kind == OutputSum:
		return arg
	}
	return "float8"
}

// aggregate checks an aggregate call and adds its measures.
func (b *builder) aggregate(x *ast.AggregateFuncExpr) (aggSpec, Output, error) {
	spec, o, err := b.planAggregate(x)
	if err == nil && b.rangeErr != nil {
		err = b.rangeErr.WithPosition(pgsql.CharPos(b.src, b.norm.srcPos(x.OriginTextPosition())))
	}
	return spec, o, err
}

func (b *builder) planAggregate(x *ast.AggregateFuncExpr) (aggSpec, Output, error) {
	fn := strings.ToLower(x.F)
	if x.Order != nil {
		return aggSpec{}, Output{}, b.errAt(x, pgerr.FeatureNotSupported, "ORDER BY inside an aggregate is not supported").WithHint("remove it")
	}
	if x.Distinct {
		return b.countDistinct(x, fn)
	}
	switch fn {
	case "count", "sum", "avg", "var_pop", "var_samp", "stddev_pop", "stddev_samp":
	case "min", "max":
		return b.minMax(x, fn)
	default:
		return aggSpec{}, Output{}, b.errAt(x, pgerr.FeatureNotSupported, "aggregate %s is not supported yet", fn).
			WithHint("use COUNT(*), COUNT(col), SUM(col) or AVG(col)")
	}
	arg, err := b.oneArg(x, fn)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	filter, err := b.aggFilter(x)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	if fn == "count" {
		if _, star := arg.(*test_driver.ValueExpr); star {
			return aggSpec{fn: "count", filter: filter}, Output{Name: "count", Kind: OutputCount, Measure: b.addMeasure(Measure{Kind: MeasureCount, Filter: filter}, nil, nil), PGType: "int8"}, nil
		}
		if l, ok := b.lit(arg); ok {
			if l.kind == litNull {
				return aggSpec{}, Output{}, b.errAt(arg, pgerr.FeatureNotSupported, "COUNT(NULL) is always 0").WithHint("use COUNT(*)")
			}
			// COUNT(constant) counts every row, like COUNT(*).
			return aggSpec{fn: "count", filter: filter}, Output{Name: "count", Kind: OutputCount, Measure: b.addMeasure(Measure{Kind: MeasureCount, Filter: filter}, nil, nil), PGType: "int8"}, nil
		}
	}
	c, ok := arg.(*ast.ColumnNameExpr)
	if !ok {
		// An expression inside the aggregate (rowexpr.go).
		v, err := b.rowValue(arg)
		if err != nil {
			return aggSpec{}, Output{}, err
		}
		if v.iv.Empty() {
			return aggSpec{}, Output{}, b.errAt(arg, pgerr.FeatureNotSupported, "the expression inside %s is always NULL", strings.ToUpper(fn)).
				WithHint("%s", rowExprHint)
		}
		spec := aggSpec{fn: fn, expr: v.val, filter: filter}
		if fn == "count" {
			// COUNT(expr) counts the rows where expr is not NULL.
			m := b.addMeasure(Measure{Kind: MeasureCount, Expr: v.val, Filter: filter}, nil, &v.iv)
			return spec, Output{Name: "count", Kind: OutputCount, Measure: m, PGType: "int8"}, nil
		}
		return b.valueAggregate(x, fn, spec, v.iv)
	}
	ci, err := b.column(c)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	if fn == "count" {
		m := b.addMeasure(Measure{Kind: MeasureCount, Column: ci.name, Filter: filter}, ci.col, nil)
		return aggSpec{fn: "count", col: ci.name, filter: filter}, Output{Name: "count", Kind: OutputCount, Measure: m, PGType: "int8"}, nil
	}
	if ci.unit {
		shown := strings.ToUpper(fn)
		if n := b.callName(x); n != "" {
			shown = strings.ToUpper(n)
		}
		return aggSpec{}, Output{}, b.errAt(c, pgerr.FeatureNotSupported, "%s of the unit column %s is not supported", shown, ci.name).
			WithHint("count units with COUNT(DISTINCT %s); apply %s to a numeric column with bounds in the policy", ci.name, shown)
	}
	if !ci.col.Type.Numeric() {
		return aggSpec{}, Output{}, b.errAt(c, pgerr.FeatureNotSupported, "%s(%s) needs a numeric column; %s is %s", strings.ToUpper(fn), ci.name, ci.name, ci.col.Type).
			WithHint("sum or average a numeric column with bounds in the policy, or use COUNT(%s)", ci.name)
	}
	if !ci.col.HasBounds {
		return aggSpec{}, Output{}, b.errAt(c, pgerr.FeatureNotSupported, "%s(%s) needs bounds: the policy declares no lower/upper for %s", strings.ToUpper(fn), ci.name, ci.name).
			WithHint("ask the data steward to declare lower and upper for %s", ci.name)
	}
	if ci.col.LowerNum == 0 && ci.col.UpperNum == 0 {
		return aggSpec{}, Output{}, b.errAt(c, pgerr.FeatureNotSupported, "%s(%s) is constant: the policy bounds are [0, 0]", strings.ToUpper(fn), ci.name).
			WithHint("ask the data steward to declare real bounds for %s", ci.name)
	}
	v, err := b.rowColumn(c)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	iv, err := dpplan.ValueInterval(v)
	if err != nil {
		return aggSpec{}, Output{}, pgerr.New(pgerr.InternalError, "internal error: invalid policy bounds")
	}
	return b.valueAggregate(x, fn, aggSpec{fn: fn, col: ci.name, filter: filter}, iv)
}

// valueAggregate plans SUM, AVG and the variance family over a bounded
// column (spec.col) or an expression (spec.expr) whose values lie in iv.
//
// SUM is one sum measure. AVG and the variance family use normalized
// (centred) sums: with m the midpoint of iv, the sum of x − m and the sum
// of (x − m)² have L∞ max_rows·(hi − lo)/2 and max_rows·((hi − lo)/2)²
// instead of max_rows·max(|lo|, |hi|) and max_rows·max(lo², hi²) (half
// and a quarter for ranges such as cost 0..20000); the average is m + S̃/C̃
// and the variance, being shift-invariant, is computed from the centred
// sums unchanged (release/post.go). See PRIVACY.md, "AVG and variance".
func (b *builder) valueAggregate(x *ast.AggregateFuncExpr, fn string, spec aggSpec, iv sensitivity.Interval) (aggSpec, Output, error) {
	base := Measure{Column: spec.col, Expr: spec.expr, Filter: spec.filter}
	var col *policy.Column
	lower, upper := sensitivity.RatDown(iv.Lo), sensitivity.RatUp(iv.Hi)
	if spec.col != "" {
		col = b.table.Columns[spec.col]
		lower, upper = col.LowerNum, col.UpperNum
	}
	if iv.MaxAbs().Sign() == 0 {
		// Every value is 0 (or NULL): nothing to measure, and L∞ would be 0.
		return aggSpec{}, Output{}, b.errAt(x, pgerr.FeatureNotSupported, "the argument of %s is always 0 or NULL", strings.ToUpper(fn)).
			WithHint("%s", rowExprHint)
	}
	if fn == "sum" {
		m := base
		m.Kind = MeasureSum
		o := Output{Name: "sum", Kind: OutputSum, Measure: b.addMeasure(m, col, &iv), PGType: "numeric"}
		switch {
		case col != nil && col.PGType == "numeric" && col.Scale > 0:
			o.Scale = col.Scale // PostgreSQL's SUM keeps the column's scale
		case col != nil && (col.PGType == "int2" || col.PGType == "int4"):
			// PostgreSQL's SUM of smallint and integer is bigint (release
			// rounds a weighted sum to a whole number).
			o.PGType = "int8"
		}
		return spec, o, nil
	}
	// Centre at the midpoint, unless the value is constant (the centred
	// sums would then be identically 0, with L∞ 0).
	centre := ""
	if mid := iv.Midpoint(); mid.Sign() != 0 && iv.Lo.Cmp(iv.Hi) != 0 {
		centre = pgemit.DecimalText(mid)
	}
	sum, cnt := base, base
	sum.Kind, sum.Centre = MeasureSum, centre
	cnt.Kind = MeasureCount
	si, ci := b.addMeasure(sum, col, &iv), b.addMeasure(cnt, col, &iv)
	if fn == "avg" {
		return spec, Output{Name: "avg", Kind: OutputAvg, Measure: si, CountMeasure: ci, PGType: "numeric",
			Lower: lower, Upper: upper}, nil
	}
	// The variance family: PostgreSQL names its output column after the
	// function it was called as; the normalizer has already mapped
	// variance/stddev to their sample forms, which PostgreSQL also names
	// variance/stddev.
	name := fn
	if n := b.callName(x); n != "" {
		name = n
	}
	sq := base
	sq.Kind, sq.Centre = MeasureSumSq, centre
	qi := b.addMeasure(sq, col, &iv)
	return spec, Output{Name: name, Kind: OutputVariance, Measure: si, CountMeasure: ci, SumSqMeasure: qi,
		Sample: strings.HasSuffix(fn, "_samp"), Sqrt: strings.HasPrefix(fn, "stddev"), PGType: "numeric",
		Lower: lower, Upper: upper}, nil
}

// callName is the function name as the analyst wrote it (lower case), so
// that VARIANCE(x) is named "variance" like in PostgreSQL even though the
// normalizer passes it on as VAR_SAMP.
func (b *builder) callName(x *ast.AggregateFuncExpr) string {
	pos := b.norm.srcPos(x.OriginTextPosition())
	toks, err := pgsql.LexN(b.src[pos:], 1)
	if err != nil || len(toks) == 0 {
		return ""
	}
	return strings.ToLower(b.src[pos+toks[0].Pos : pos+toks[0].End])
}

// countDistinct plans COUNT(DISTINCT unit_column): the number of distinct
// units in each group. Only the unit column is supported: after bounding,
// every unit adds exactly 1 to each group it contributes to (L∞ = 1),
// whereas distinct values of another column have no such bound.
func (b *builder) countDistinct(x *ast.AggregateFuncExpr, fn string) (aggSpec, Output, error) {
	hint := fmt.Sprintf("COUNT(DISTINCT %s) counts the privacy units; otherwise use COUNT(*), COUNT(col), SUM(col) or AVG(col)", b.table.UnitColumn)
	if fn != "count" || len(x.Args) != 1 {
		return aggSpec{}, Output{}, b.errAt(x, pgerr.FeatureNotSupported, "%s(DISTINCT …) is not supported", strings.ToUpper(fn)).WithHint("%s", hint)
	}
	arg := x.Args[0]
	if p, ok := arg.(*ast.ParenthesesExpr); ok {
		arg = p.Expr
	}
	c, ok := arg.(*ast.ColumnNameExpr)
	if !ok {
		return aggSpec{}, Output{}, b.errAt(arg, pgerr.FeatureNotSupported, "COUNT(DISTINCT …) of an expression is not supported").WithHint("%s", hint)
	}
	ci, err := b.column(c)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	if !ci.unit {
		return aggSpec{}, Output{}, b.errAt(c, pgerr.FeatureNotSupported, "COUNT(DISTINCT %s) is not supported: only the unit column %s can be counted distinctly", ci.name, b.table.UnitColumn).
			WithHint("%s", hint)
	}
	filter, err := b.aggFilter(x)
	if err != nil {
		return aggSpec{}, Output{}, err
	}
	m := b.addMeasure(Measure{Kind: MeasureUnits, Column: ci.name, Filter: filter}, ci.col, nil)
	return aggSpec{fn: "count_distinct", col: ci.name, filter: filter}, Output{Name: "count", Kind: OutputCount, Measure: m, PGType: "int8"}, nil
}

// oneArg returns the single argument of the aggregate x (parentheses
// removed), or 42883 when it has another number of arguments.
func (b *builder) oneArg(x *ast.AggregateFuncExpr, fn string) (ast.ExprNode, error) {
	if len(x.Args) != 1 {
		return nil, b.errAt(x, "42883", "function %s with %d arguments does not exist", fn, len(x.Args)).
			WithHint("%s takes one column", strings.ToUpper(fn))
	}
	arg := x.Args[0]
	if p, ok := arg.(*ast.ParenthesesExpr); ok {
		arg = p.Expr
	}
	return arg, nil
}
