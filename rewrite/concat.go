package rewrite

import (
	"math/big"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
)

// String concatenation of constants (issue 31): Cube's contains,
// startsWith and endsWith filters write
//
//	"visits".department ILIKE '%' || $1 || '%'
//
// with $1 bound through the extended protocol (the proxy binds it as a
// checked string literal before the statement is planned). || binds more
// tightly than LIKE, ILIKE and the comparisons, so a chain of string
// literals (and integer literals, whose text PostgreSQL concatenates) is
// one text constant: the normalizer folds it into one literal of type
// text, which then goes where any pattern or literal goes. A chain next
// to an operator that binds more tightly than || (+ - * / %) is not
// folded; concatenation with a column, or with NULL, is refused with a
// hint.

const concatHint = "concatenate string constants and bound parameters only, e.g. department ILIKE '%' || $1 || '%'; compare the column itself with the pattern"

// concat folds the || at toks[i] and its right operand into the literal
// piece before it. It returns the index of the operand's last token.
func (n *normalized) concat(src string, toks []pgsql.Token, i int) (int, error) {
	op := toks[i]
	refuse := func(pos int, msg string) error {
		return pgerr.New(pgerr.FeatureNotSupported, "%s", msg).WithPosition(pgsql.CharPos(src, pos)).WithHint("%s", concatHint)
	}
	k := len(n.pieces) - 1
	if k < 0 || n.pieces[k].lit < 0 {
		return 0, refuse(op.Pos, "operator || is supported between string constants only, not with a column or an expression")
	}
	if k > 0 {
		switch n.pieces[k-1].text {
		case "+", "-", "*", "/", "%":
			return 0, refuse(op.Pos, "operator || next to arithmetic is not supported")
		}
	}
	left := &n.lits[n.pieces[k].lit]
	lv, err := concatText(*left)
	if err != nil {
		return 0, refuse(left.pos, err.Error())
	}
	// The right operand: a string or integer constant, with an optional
	// cast to text.
	j := i + 1
	if j >= len(toks) || toks[j].Kind != pgsql.TokString && toks[j].Kind != pgsql.TokNumber && !toks[j].Is("null") {
		return 0, refuse(posAt(src, toks, j), "operator || is supported between string constants only, not with a column or an expression")
	}
	r := literal{kind: litString, val: toks[j].Val, pos: toks[j].Pos}
	switch {
	case toks[j].Is("null"):
		r.kind = litNull
	case toks[j].Kind == pgsql.TokNumber:
		r.kind = litNumber
	}
	end := j + 1
	if end < len(toks) && toks[end].IsPunct("::") {
		typ, e, err := castType(src, toks, end+1)
		if err != nil {
			return 0, err
		}
		r.typ, end = typ, e
	}
	if end < len(toks) {
		switch t := toks[end]; {
		case t.IsOp("+"), t.IsOp("-"), t.IsOp("*"), t.IsOp("/"), t.IsOp("%"), t.IsOp("^"), t.Is("at"), t.Is("collate"):
			return 0, refuse(t.Pos, "operator || next to arithmetic is not supported")
		}
	}
	rv, err := concatText(r)
	if err != nil {
		return 0, refuse(r.pos, err.Error())
	}
	left.val, left.typ, left.kind = lv+rv, policy.TypeText, litString
	return end - 1, nil
}

type concatError string

func (e concatError) Error() string { return string(e) }

// concatText is the text a constant contributes to a concatenation.
func concatText(l literal) (string, error) {
	switch {
	case l.kind == litNull:
		return "", concatError("operator || with NULL makes the whole value NULL")
	case l.kind == litString && (l.typ == "" || l.typ == policy.TypeText):
		return l.val, nil
	case l.kind == litNumber && (l.typ == "" || l.typ == policy.TypeInt || l.typ == policy.TypeText) && intRE.MatchString(l.val):
		v, ok := new(big.Int).SetString(l.val, 10)
		if !ok {
			break
		}
		return v.String(), nil
	}
	return "", concatError("operator || is supported between string and integer constants only")
}
