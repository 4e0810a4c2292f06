// It builds SQL fragments of the plan that the emitter sends upstream
// (pgemit/doc.go).

package rewrite

import (
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// caseKeyHint says how to write a CASE bucket key.
const caseKeyHint = "GROUP BY CASE WHEN condition THEN 'label' … [ELSE 'label'] END, with string or integer constants as results and WHERE-style conditions, e.g. CASE WHEN age < 18 THEN 'child' WHEN age < 65 THEN 'adult' ELSE 'senior' END"

// caseKey is planCaseKey, once per expression node (memoKey).
func (b *builder) caseKey(x *ast.CaseExpr) (Key, error) {
	d := b.memoKey(x, keyCase, func() derivedKey {
		k, err := b.planCaseKey(x)
		return derivedKey{k, nil, true, err}
	})
	return d.k, d.err
}

// planCaseKey plans a CASE bucket as a GROUP BY key:
//
//	CASE WHEN cond THEN 'a' WHEN cond THEN 'b' … [ELSE 'c'] END
//	CASE col WHEN literal THEN 'a' … [ELSE 'c'] END   (col = literal)
//
// Its domain is the set of THEN and ELSE constants, taken from the query
// text: public, so every label is released (absent ones with a noisy
// zero), like the derived keys of keyexpr.go. The conditions are planned by
// the WHERE code (pred.go), so the CASE is emitted by our emitter with the
// same meaning PostgreSQL gives it (the first true condition wins; a NULL
// condition is not true). A row that no condition matches and that has no
// ELSE (or ELSE NULL) has a NULL key and is not counted, as for every
// other key. Results must all be string constants (text key) or all
// integer constants (int key).
func (b *builder) planCaseKey(x *ast.CaseExpr) (Key, error) {
	if len(x.WhenClauses) == 0 {
		return Key{}, b.errAt(x, pgerr.SyntaxError, "syntax error: CASE without WHEN").WithHint("%s", caseKeyHint)
	}
	if len(x.WhenClauses)+1 > maxDerivedGroups {
		return Key{}, b.errAt(x, pgerr.FeatureNotSupported, "CASE with more than %d results is not supported", maxDerivedGroups-1).
			WithHint("use fewer buckets")
	}
	var typ policy.Type
	var dom []string
	seen := map[string]bool{}
	// result reads one THEN/ELSE constant; it returns "", false for NULL.
	result := func(e ast.ExprNode) (string, bool, error) {
		l, ok := b.lit(e)
		if !ok {
			return "", false, b.errAt(e, pgerr.FeatureNotSupported, "CASE results in GROUP BY must be constants").WithHint("%s", caseKeyHint)
		}
		var t policy.Type
		var v string
		switch {
		case l.kind == litNull:
			return "", false, nil
		case l.kind == litString && (l.typ == "" || l.typ == policy.TypeText):
			t, v = policy.TypeText, strings.Clone(l.val)
		case l.kind == litNumber && (l.typ == "" || l.typ == policy.TypeInt) && intRE.MatchString(l.val):
			n, err := strconv.ParseInt(strings.TrimPrefix(l.val, "+"), 10, 64)
			if err != nil {
				return "", false, b.errAt(e, "22003", "CASE result %s is out of range for bigint", l.val).WithHint("%s", caseKeyHint)
			}
			t, v = policy.TypeInt, strconv.FormatInt(n, 10)
		default:
			return "", false, b.errAt(e, pgerr.FeatureNotSupported, "CASE results in GROUP BY must be string or integer constants").WithHint("%s", caseKeyHint)
		}
		if typ != "" && t != typ {
			return "", false, b.errAt(e, "42804", "CASE types %s and %s cannot be matched", typ, t).
				WithHint("make every THEN and ELSE result a string, or every one an integer")
		}
		typ = t
		return v, true, nil
	}
	var sql strings.Builder
	sql.WriteString("CASE")
	emitResult := func(v string, ok bool) {
		switch {
		case !ok:
			sql.WriteString("NULL")
		case typ == policy.TypeText:
			sql.WriteString(pgemit.QuoteString(v) + "::text")
		default:
			sql.WriteString("(" + v + ")")
		}
		if ok && !seen[v] {
			seen[v] = true
			dom = append(dom, v)
		}
	}
	for _, w := range x.WhenClauses {
		var cond dpplan.Pred
		var err error
		if x.Value != nil {
			// Simple CASE: CASE col WHEN literal … is col = literal.
			cond, err = b.compare(w.Expr, x.Value, w.Expr, "=")
		} else {
			cond, err = b.pred(w.Expr)
		}
		if err != nil {
			return Key{}, err
		}
		// Evaluated on every row, twice while the emitted SQL writes the
		// CASE in the key and in its domain test (build.go).
		b.predOps += 2 * dpplan.PredWork(cond)
		v, ok, err := result(w.Result)
		if err != nil {
			return Key{}, err
		}
		sql.WriteString(" WHEN " + pgemit.PredSQL(cond) + " THEN ")
		emitResult(v, ok)
	}
	if x.ElseClause != nil {
		v, ok, err := result(x.ElseClause)
		if err != nil {
			return Key{}, err
		}
		sql.WriteString(" ELSE ")
		emitResult(v, ok)
	}
	sql.WriteString(" END")
	if len(dom) == 0 {
		return Key{}, b.errAt(x, pgerr.FeatureNotSupported, "every result of this CASE is NULL").WithHint("%s", caseKeyHint)
	}
	return Key{Type: typ, Domain: dom, Func: "case", Args: []string{sql.String()}}, nil
}

// addCaseKey adds a CASE bucket key (see caseKey).
func (b *builder) addCaseKey(x *ast.CaseExpr) error {
	k, err := b.caseKey(x)
	if err != nil {
		return err
	}
	b.appendKey(k, nil)
	return nil
}

// caseOutput plans a CASE of the select list: it must be one of the GROUP
// BY keys. ok is false when x is not a CASE bucket (e.g. a CASE over
// aggregates), which the caller then plans as an expression.
func (b *builder) caseOutput(x *ast.CaseExpr) (Output, bool, error) {
	k, err := b.caseKey(x)
	if err != nil {
		return Output{}, false, nil
	}
	if i := b.keyOutput(k); i >= 0 {
		return Output{Name: "case", Kind: OutputKey, Key: i, PGType: keyPGType(b.keys[i])}, true, nil
	}
	return Output{}, true, b.errAt(x, "42803", "this CASE expression must appear in the GROUP BY clause").
		WithHint("add it to GROUP BY, e.g. GROUP BY 1")
}
