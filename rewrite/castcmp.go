package rewrite

import (
	"math/big"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Integer casts of a column in WHERE (issue 31): `cost::int > 100`,
// `CAST(cost AS integer) BETWEEN 1 AND 5`. PostgreSQL rounds numeric to
// the nearest integer with halves away from zero, and float8 with halves
// to even, so round(x) >= n is a comparison of x with n - 0.5, strict or
// not by the rounding of that half:
//
//	numeric: round(x) >= n ⇔ x >= n - 0.5 (n ≥ 1), x > n - 0.5 (n ≤ 0)
//	float8:  round(x) >= n ⇔ x >= n - 0.5 (n even), x > n - 0.5 (n odd)
//
// and the other comparisons follow (> n is >= n + 1, < and <= their
// complements, = both). Of an integer column the cast keeps the value.
// The predicate is planned on the column itself, so no cast reaches the
// emitter; where PostgreSQL would raise 22003 (a value beyond the integer
// type, NaN or infinity) the translation answers instead, as no DP answer
// may depend on such an error. IN lists are ORs of equalities. Casts of
// other types, and integer casts outside WHERE comparisons, BETWEEN, IN
// and IS NULL, are refused with a hint. The other
// value-preserving casts (to numeric, float8, date, timestamp) are dropped
// by cast.go.

const intCastMarker = "dp_int_cast"

const intCastHint = "compare the cast column with an integer, e.g. cost::int > 100 (planned as cost >= 100.5), or compare the column itself"

// intCast wraps the column operand just written to the pieces in the
// marker call "dp_int_cast"(col, 'type').
func (n *normalized) intCast(src string, pos int, typ string) error {
	ps := n.pieces
	j := len(ps) - 1
	if j < 0 || !ps[j].word || ps[j].lit >= 0 || len(ps[j].text) == 0 || ps[j].text[0] != '"' {
		return pgerr.New(pgerr.FeatureNotSupported, "casts of expressions are not supported").
			WithPosition(pgsql.CharPos(src, pos)).WithHint("%s", intCastHint)
	}
	for j >= 2 && ps[j-1].text == "." && len(ps[j-2].text) > 0 && ps[j-2].text[0] == '"' {
		j -= 2
	}
	operand := append([]piece(nil), ps[j:]...)
	n.pieces = append(ps[:j], piece{text: pgemit.QuoteIdent(intCastMarker), pos: pos, lit: -1, word: true},
		piece{text: "(", pos: pos, lit: -1})
	n.pieces = append(n.pieces, operand...)
	n.pieces = append(n.pieces, piece{text: ",", pos: pos, lit: -1})
	n.lits = append(n.lits, literal{kind: litString, val: typ, pos: pos})
	n.pieces = append(n.pieces, piece{text: "?", pos: pos, lit: len(n.lits) - 1, word: true}, piece{text: ")", pos: pos, lit: -1})
	return nil
}

// castColumnEnd reads CAST ( col [. col …] AS inttype ) at toks[i] (the
// CAST): the column's tokens, the type and the index of the ")".
func castColumnEnd(toks []pgsql.Token, i int) (cols []pgsql.Token, typ string, end int, ok bool) {
	k := i + 2
	for k < len(toks) && toks[k].Kind == pgsql.TokIdent && !toks[k].Is("as") {
		cols = append(cols, toks[k])
		k++
		if k < len(toks) && toks[k].IsPunct(".") {
			cols = append(cols, toks[k])
			k++
			continue
		}
		break
	}
	if len(cols) == 0 || k+2 >= len(toks) || !toks[k].Is("as") || !toks[k+2].IsPunct(")") || toks[k+1].Kind != pgsql.TokIdent || toks[k+1].Quoted {
		return nil, "", 0, false
	}
	typ, ok = intTypeNames[toks[k+1].Val]
	return cols, typ, k + 2, ok
}

// intCastCall returns e as the marker call, if it is one.
func intCastCall(e ast.ExprNode) (*ast.FuncCallExpr, bool) {
	fc, ok := unparen(e).(*ast.FuncCallExpr)
	if !ok || fc.FnName.L != intCastMarker || len(fc.Args) != 2 {
		return nil, false
	}
	return fc, true
}

// intCastColumn is the column of a marker call.
func (b *builder) intCastColumn(fc *ast.FuncCallExpr) (colInfo, error) {
	c, ok := unparen(fc.Args[0]).(*ast.ColumnNameExpr)
	if !ok {
		return colInfo{}, b.errAt(fc, pgerr.FeatureNotSupported, "casts of expressions are not supported").WithHint("%s", intCastHint)
	}
	ci, err := b.column(c)
	if err != nil {
		return colInfo{}, err
	}
	switch ci.typ() {
	case policy.TypeInt, policy.TypeNumeric, policy.TypeFloat:
		return ci, nil
	}
	return colInfo{}, b.errAt(fc, pgerr.FeatureNotSupported, "an integer cast of %s column %s is not supported", typeName(ci), ci.name).
		WithHint("compare %s with a literal of its own type", ci.name)
}

// intCastCmp plans cast(col) op literal.
func (b *builder) intCastCmp(fc *ast.FuncCallExpr, litE ast.ExprNode, op string) (dpplan.Pred, error) {
	ci, err := b.intCastColumn(fc)
	if err != nil {
		return nil, err
	}
	col := pgemit.QuoteIdent(ci.name)
	l, ok := b.lit(litE)
	if ok && l.kind == litNull {
		return dpplan.PredCmp{Col: col, Op: op, Lit: "NULL"}, nil
	}
	if !ok || l.kind != litNumber || l.typ != "" && l.typ != policy.TypeInt || !intRE.MatchString(l.val) {
		return nil, b.errAt(litE, pgerr.FeatureNotSupported, "an integer cast of %s is compared with integer constants only", ci.name).WithHint("%s", intCastHint)
	}
	n, _ := new(big.Int).SetString(strings.TrimPrefix(l.val, "+"), 10)
	if n.CmpAbs(big.NewInt(1e15)) > 0 {
		return nil, b.errAt(litE, "22003", "integer %s is out of range for this comparison", l.val).WithHint("%s", intCastHint)
	}
	if ci.typ() == policy.TypeInt {
		return dpplan.PredCmp{Col: col, Op: op, Lit: "(" + n.String() + ")"}, nil
	}
	float := ci.typ() == policy.TypeFloat
	// ge is round(col) >= m; lt its complement.
	ge := func(m *big.Int) dpplan.Pred {
		t := new(big.Rat).Sub(new(big.Rat).SetInt(m), big.NewRat(1, 2))
		strict := m.Sign() <= 0
		if float {
			strict = m.Bit(0) == 1
		}
		o := ">="
		if strict {
			o = ">"
		}
		return dpplan.PredCmp{Col: col, Op: o, Lit: "(" + t.FloatString(1) + ")"}
	}
	lt := func(m *big.Int) dpplan.Pred {
		p := ge(m).(dpplan.PredCmp)
		p.Op = map[string]string{">=": "<", ">": "<="}[p.Op]
		return p
	}
	next := new(big.Int).Add(n, big.NewInt(1))
	switch op {
	case ">=":
		return ge(n), nil
	case ">":
		return ge(next), nil
	case "<":
		return lt(n), nil
	case "<=":
		return lt(next), nil
	case "=":
		return dpplan.PredBool{Op: "AND", L: ge(n), R: lt(next)}, nil
	case "<>":
		return dpplan.PredBool{Op: "OR", L: lt(n), R: ge(next)}, nil
	}
	return nil, b.errAt(fc, pgerr.FeatureNotSupported, "IS [NOT] DISTINCT FROM an integer cast is not supported").WithHint("%s", intCastHint)
}

// textCast refuses a comparison of a non-text column cast to text
// (cast.go dropped the cast): PostgreSQL would compare the texts, in
// another order and with other equalities than the values' ('9' > '10',
// '1.0' <> '1.00').
func (b *builder) textCast(colE ast.ExprNode, ci colInfo) error {
	c, ok := unparen(colE).(*ast.ColumnNameExpr)
	if !ok || ci.typ() == policy.TypeText || ci.typ() == "" {
		return nil
	}
	if b.intCasts[b.norm.srcPos(c.OriginTextPosition())] != "text" {
		return nil
	}
	return b.errAt(c, pgerr.FeatureNotSupported, "comparing %s column %s as text is not supported", typeName(ci), ci.name).
		WithHint("compare %s with a literal of its own type, without the cast to text", ci.name)
}
