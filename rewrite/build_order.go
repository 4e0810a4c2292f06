package rewrite

import (
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// ORDER BY and LIMIT/OFFSET, resolved to outputs (applied by release to
// the noisy rows). See build.go for the builder.

// orderBy resolves ORDER BY items to outputs (PostgreSQL resolves ORDER BY
// names as output names first, then as input columns).
func (b *builder) orderBy(sel *ast.SelectStmt, p *Plan) error {
	if sel.OrderBy == nil {
		return nil
	}
	for _, item := range sel.OrderBy.Items {
		e := item.Expr
		if pe, ok := e.(*ast.ParenthesesExpr); ok {
			e = pe.Expr
		}
		idx := -1
		switch x := e.(type) {
		case *ast.ColumnNameExpr:
			if x.Name.Table.O == "" {
				for i, o := range p.Outputs {
					if o.Name == x.Name.Name.O {
						if idx >= 0 {
							return b.errAt(x, "42702", "ORDER BY %q is ambiguous", o.Name).WithHint("order by output position instead")
						}
						idx = i
					}
				}
			}
			if idx < 0 {
				ci, err := b.column(x)
				if err != nil {
					return err
				}
				for i, o := range p.Outputs {
					if o.Kind == OutputKey && b.keys[o.Key].Column == ci.name && b.keys[o.Key].Func == "" {
						idx = i
						break
					}
				}
				if idx < 0 {
					return b.errAt(x, pgerr.FeatureNotSupported, "ORDER BY %s: only output columns can be ordered", ci.name).
						WithHint("add %s to the select list or order by an output column", ci.name)
				}
			}
		case *ast.FuncCallExpr:
			if regrFuncs[strings.ToLower(x.FnName.O)] {
				// ORDER BY covar_pop(cost, age): the select list's.
				i, ok := b.regrOutputs[regrKey(x)]
				if !ok {
					return b.errAt(x, pgerr.FeatureNotSupported, "ORDER BY an aggregate that is not in the select list is not supported").
						WithHint("add the aggregate to the select list, or order by its output position")
				}
				idx = i
				break
			}
			// A group key written again (Metabase, Superset: ORDER BY
			// date_trunc('month', d) after GROUP BY date_trunc('month', d)).
			k, _, err := b.exprKey(x)
			if err != nil {
				return err
			}
			idx = b.outputOfKey(p, k)
			if idx < 0 {
				return b.errAt(x, pgerr.FeatureNotSupported, "ORDER BY a group key that is not in the select list is not supported").
					WithHint("add the expression to the select list, or order by an output column name, alias or position")
			}
		case *ast.BinaryOperationExpr:
			k, _, ok, err := b.bucketKey(x)
			if err != nil {
				return err
			}
			if ok {
				idx = b.outputOfKey(p, k)
			}
			if idx < 0 {
				return b.errAt(x, pgerr.FeatureNotSupported, "ORDER BY expressions are not supported").
					WithHint("order by an output column name, alias or position")
			}
		case *ast.AggregateFuncExpr:
			saved := len(b.measures)
			spec, _, err := b.aggregate(x)
			if err != nil {
				return err
			}
			for i, s := range b.aggs {
				if s.same(spec) {
					idx = i
					break
				}
			}
			if idx < 0 || len(b.measures) != saved {
				return b.errAt(x, pgerr.FeatureNotSupported, "ORDER BY an aggregate that is not in the select list is not supported").
					WithHint("add the aggregate to the select list, or order by its output position")
			}
		default:
			l, ok := b.lit(e)
			if !ok {
				return b.errAt(e, pgerr.FeatureNotSupported, "ORDER BY expressions are not supported").
					WithHint("order by an output column name, alias or position")
			}
			pos, err := b.position(e, l, len(p.Outputs), "ORDER BY")
			if err != nil {
				return err
			}
			idx = pos
		}
		p.OrderBy = append(p.OrderBy, OrderItem{Output: idx, Desc: item.Desc})
	}
	return nil
}

// outputOfKey is the position of the output that is group key k, or -1.
func (b *builder) outputOfKey(p *Plan, k Key) int {
	for i, o := range p.Outputs {
		if o.Kind == OutputKey && sameKey(b.keys[o.Key], k) {
			return i
		}
	}
	return -1
}

// limit reads LIMIT and OFFSET (non-negative integer literals; LIMIT ALL
// and LIMIT NULL mean no limit, OFFSET NULL means 0).
func (b *builder) limit(p *Plan) error {
	read := func(l *literal, what string) (int64, bool, error) {
		if l == nil || l.kind == litNull {
			return 0, false, nil
		}
		at := pgsql.CharPos(b.src, l.pos)
		v, err := strconv.ParseInt(l.val, 10, 64)
		if err != nil {
			return 0, false, pgerr.New("22P02", "invalid %s %s", what, l.val).WithPosition(at).
				WithHint("write a non-negative integer")
		}
		if v < 0 {
			code := "2201W"
			if what == "OFFSET" {
				code = "2201X"
			}
			return 0, false, pgerr.New(code, "%s must not be negative", what).WithPosition(at).
				WithHint("write a non-negative integer")
		}
		return v, true, nil
	}
	v, ok, err := read(b.norm.limit, "LIMIT")
	if err != nil {
		return err
	}
	if ok {
		p.Limit = v
	}
	v, _, err = read(b.norm.offset, "OFFSET")
	if err != nil {
		return err
	}
	p.Offset = v
	return nil
}
