package rewrite

import (
	"strconv"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// GROUP BY: the builder's keys (public domains, key expressions, CASE
// buckets, private keys) and their PostgreSQL types. See build.go for the
// builder.

// groupBy resolves GROUP BY items to public-domain keys.
func (b *builder) groupBy(sel *ast.SelectStmt) error {
	if sel.GroupBy == nil {
		return nil
	}
	if sel.GroupBy.Rollup {
		return b.errAt(sel, pgerr.FeatureNotSupported, "GROUP BY … WITH ROLLUP is not supported").WithHint("GROUP BY plain columns")
	}
	fields := sel.Fields.Fields
	for _, item := range sel.GroupBy.Items {
		e := item.Expr
		if item.Desc {
			return b.errAt(e, pgerr.SyntaxError, "syntax error: ASC/DESC in GROUP BY").WithHint("order with ORDER BY")
		}
		if p, ok := e.(*ast.ParenthesesExpr); ok {
			e = p.Expr
		}
		var ref *ast.ColumnNameExpr
		switch x := e.(type) {
		case *ast.ColumnNameExpr:
			ref = x
			// PostgreSQL resolves GROUP BY names as input columns first,
			// then as output column names.
			// Only names that are no column of the policy fall back to
			// aliases (a hidden column keeps its PostgreSQL meaning and
			// is refused).
			if _, err := b.column(x); err != nil && x.Name.Table.O == "" && isUndefinedColumn(err) {
				for _, f := range fields {
					if f.AsName.O == x.Name.Name.O {
						if c, ok := f.Expr.(*ast.ColumnNameExpr); ok {
							ref = c
						} else if fc, ok := f.Expr.(*ast.FuncCallExpr); ok {
							if err := b.addExprKey(fc); err != nil {
								return err
							}
							ref = nil
						} else if ce, ok := f.Expr.(*ast.CaseExpr); ok {
							if err := b.addCaseKey(ce); err != nil {
								return err
							}
							ref = nil
						} else if ok, err := b.addBucketKey(f.Expr); ok || err != nil {
							if err != nil {
								return err
							}
							ref = nil
						} else {
							return b.errAt(x, pgerr.FeatureNotSupported, "GROUP BY %q refers to an expression", x.Name.Name.O).
								WithHint("%s", keyExprHint)
						}
					}
				}
			}
		case *ast.FuncCallExpr:
			if err := b.addExprKey(x); err != nil {
				return err
			}
			continue
		case *ast.CaseExpr:
			if err := b.addCaseKey(x); err != nil {
				return err
			}
			continue
		default:
			if ok, err := b.addBucketKey(e); ok || err != nil {
				if err != nil {
					return err
				}
				continue
			}
			l, ok := b.lit(e)
			if !ok {
				return b.errAt(e, pgerr.FeatureNotSupported, "GROUP BY expressions are not supported yet").
					WithHint("%s", keyExprHint)
			}
			pos, err := b.position(e, l, len(fields), "GROUP BY")
			if err != nil {
				return err
			}
			if fc, ok := fields[pos].Expr.(*ast.FuncCallExpr); ok {
				if err := b.addExprKey(fc); err != nil {
					return err
				}
				continue
			}
			if ce, ok := fields[pos].Expr.(*ast.CaseExpr); ok {
				if err := b.addCaseKey(ce); err != nil {
					return err
				}
				continue
			}
			if ok, err := b.addBucketKey(fields[pos].Expr); ok || err != nil {
				if err != nil {
					return err
				}
				continue
			}
			c, ok := fields[pos].Expr.(*ast.ColumnNameExpr)
			if !ok {
				if _, agg := fields[pos].Expr.(*ast.AggregateFuncExpr); agg {
					return b.errAt(e, "42803", "aggregate functions are not allowed in GROUP BY").
						WithHint("GROUP BY a column with public values")
				}
				return b.errAt(e, pgerr.FeatureNotSupported, "GROUP BY position %d refers to an expression", pos+1).
					WithHint("%s", keyExprHint)
			}
			ref = c
		}
		if ref == nil {
			continue // an alias of a key expression, added above
		}
		ci, err := b.column(ref)
		if err != nil {
			return err
		}
		if err := b.addKey(ref, ci); err != nil {
			return err
		}
	}
	return nil
}

// position reads a 1-based output position.
func (b *builder) position(e ast.Node, l literal, n int, clause string) (int, error) {
	if l.kind != litNumber || l.typ != "" {
		return 0, b.errAt(e, pgerr.SyntaxError, "non-integer constant in %s", clause).
			WithHint("%s a column name, an output alias or an output position", clause)
	}
	p, err := strconv.Atoi(l.val)
	if err != nil || p < 1 || p > n {
		return 0, b.errAt(e, "42P10", "%s position %s is not in select list", clause, l.val).
			WithHint("positions count output columns from 1 to %d", n)
	}
	return p - 1, nil
}

func (b *builder) addKey(at ast.Node, ci colInfo) error {
	for _, k := range b.keys {
		if k.Column == ci.name && k.Func == "" {
			return nil // GROUP BY a, a
		}
	}
	if ci.col == nil || ci.unit || len(ci.col.PublicValues) == 0 {
		// No public domain: partition selection (partition.go).
		k, err := b.privateKey(at, ci)
		if err != nil {
			return err
		}
		b.keys = append(b.keys, k)
		b.keyCols = append(b.keyCols, ci.col)
		return nil
	}
	b.keys = append(b.keys, Key{Column: ci.name, Type: ci.col.Type, Domain: append([]string(nil), ci.col.PublicValues...)})
	b.keyCols = append(b.keyCols, ci.col)
	return nil
}

func (b *builder) publicKeys() []string {
	var out []string
	for _, n := range b.table.ColumnOrder {
		if c := b.table.Columns[n]; !c.Hidden && len(c.PublicValues) > 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		out = []string{"none in this table"}
	}
	return out
}

// addBucketKey adds floor(X/W)*W as a key (datekey.go); ok is false when
// e has another shape.
func (b *builder) addBucketKey(e ast.ExprNode) (bool, error) {
	k, col, ok, err := b.bucketKey(e)
	if !ok || err != nil {
		return ok, err
	}
	b.appendKey(k, col)
	return true, nil
}

// keyOutput returns the index of a planned key equal to k, or -1.
func (b *builder) keyOutput(k Key) int {
	for i, have := range b.keys {
		if sameKey(have, k) {
			return i
		}
	}
	return -1
}

func (b *builder) appendKey(k Key, col *policy.Column) {
	if b.keyOutput(k) >= 0 {
		return
	}
	b.keys = append(b.keys, k)
	b.keyCols = append(b.keyCols, col)
}

// addExprKey adds a GROUP BY expression key (see exprKey).
func (b *builder) addExprKey(fc *ast.FuncCallExpr) error {
	k, col, err := b.exprKey(fc)
	if err != nil {
		return err
	}
	b.appendKey(k, col)
	return nil
}

func (b *builder) keyIndex(name string) int {
	for i, k := range b.keys {
		if k.Column == name && k.Func == "" {
			return i
		}
	}
	return -1
}

// keyPGType is the PostgreSQL type reported for a key column.
func keyPGType(k Key) string {
	if k.Private {
		return privateKeyPGType(k.Type)
	}
	if t := dateKeyPGType(k); t != "" {
		return t // PostgreSQL 14+: EXTRACT returns numeric, date_part float8
	}
	if k.Type != policy.TypeInt {
		return privateKeyPGType(k.Type) // partition.go: the same for the other types
	}
	// A public int key: int4 when every value of its domain fits.
	for _, v := range k.Domain {
		if x, err := strconv.ParseInt(v, 10, 64); err != nil || x > 1<<31-1 || x < -1<<31 {
			return "int8"
		}
	}
	return "int4"
}
