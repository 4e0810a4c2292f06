package rewrite

import (
	"slices"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// Integer arithmetic over a date field as a GROUP BY key (issue 31):
// Metabase's day of week,
//
//	((CAST(extract(isodow from visit_date) AS integer) % 7) + 1)
//
// is a key whose domain is the field's fixed domain (1…7 for isodow)
// mapped through the arithmetic, computed here as PostgreSQL computes it
// (integer or numeric + - and %, the remainder with the dividend's sign).
// Only + - % of integer constants over EXTRACT or date_part of a date
// column (keys with a finite integer domain, datekey.go) are planned; the
// key is emitted as the same expression over the field. Its type is
// PostgreSQL's: that of the integer cast around the field when the query
// has one (cast.go), else numeric (EXTRACT) or float8 (date_part, which
// has no % operator).

// arithOps are the operators planned.
var arithOps = map[opcode.Op]string{opcode.Plus: "+", opcode.Minus: "-", opcode.Mod: "%"}

// maxArithConst bounds the constants, so no value can overflow.
const maxArithConst = 1_000_000_000

// arithKey plans e as integer arithmetic over a date field; ok is false
// when e does not have that shape.
func (b *builder) arithKey(e ast.ExprNode) (k Key, col *policy.Column, ok bool, err error) {
	type step struct {
		op string
		c  int64
	}
	var steps []step // innermost first
	cur := unparen(e)
	for {
		be, isBin := cur.(*ast.BinaryOperationExpr)
		if !isBin {
			break
		}
		op, known := arithOps[be.Op]
		if !known {
			return Key{}, nil, false, nil
		}
		c, isConst := b.intConst(be.R)
		next := be.L
		if !isConst && be.Op == opcode.Plus {
			c, isConst = b.intConst(be.L)
			next = be.R
		}
		if !isConst {
			return Key{}, nil, false, nil
		}
		steps = append([]step{{op, c}}, steps...)
		cur = unparen(next)
	}
	fc, isCall := cur.(*ast.FuncCallExpr)
	if !isCall || len(steps) == 0 {
		return Key{}, nil, false, nil
	}
	fn := strings.ToLower(fc.FnName.O)
	if fn != "extract" && fn != "date_part" {
		return Key{}, nil, false, nil
	}
	inner, col, err := b.exprKey(fc)
	if err != nil {
		return Key{}, nil, true, err
	}
	if inner.Func != "extract" || inner.Type != policy.TypeInt {
		return Key{}, nil, true, b.errAt(e, pgerr.FeatureNotSupported, "arithmetic over this key is not supported").
			WithHint("write + - or %% of integer constants over EXTRACT(field FROM date_col), e.g. (CAST(extract(isodow FROM d) AS integer) %% 7) + 1")
	}
	typ := dateKeyPGType(inner) // numeric (EXTRACT) or float8 (date_part)
	switch t := b.intCasts[b.norm.srcPos(fc.OriginTextPosition())]; t {
	case "int2", "int4", "int8", "numeric", "float8":
		typ = t
	}
	vals := make([]int64, 0, len(inner.Domain))
	for _, v := range inner.Domain {
		x, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil {
			return Key{}, nil, true, b.errAt(e, pgerr.FeatureNotSupported, "arithmetic over this key is not supported").WithHint("%s", keyExprHint)
		}
		vals = append(vals, x)
	}
	args := []string{typ, inner.Func, strconv.Itoa(len(inner.Args))}
	args = append(args, inner.Args...)
	for _, s := range steps {
		switch {
		case s.op == "%" && typ == "float8":
			return Key{}, nil, true, b.errAt(e, "42883", "operator does not exist: double precision %% integer").
				WithHint("cast the field to integer first: CAST(date_part('dow', d) AS integer) %% 7, or use EXTRACT")
		case s.op == "%" && s.c == 0:
			return Key{}, nil, true, b.errAt(e, "22012", "division by zero").WithHint("use a non-zero modulus")
		}
		for i, x := range vals {
			switch s.op {
			case "+":
				vals[i] = x + s.c
			case "-":
				vals[i] = x - s.c
			case "%":
				vals[i] = x % s.c // Go's and PostgreSQL's remainder: the dividend's sign
			}
		}
		if typ == "int2" && slices.ContainsFunc(vals, func(x int64) bool { return x > 1<<15-1 || x < -1<<15 }) ||
			typ == "int4" && slices.ContainsFunc(vals, func(x int64) bool { return x > 1<<31-1 || x < -1<<31 }) {
			return Key{}, nil, true, b.errAt(e, "22003", "%s out of range", map[string]string{"int2": "smallint", "int4": "integer"}[typ]).
				WithHint("use smaller constants")
		}
		args = append(args, s.op, strconv.FormatInt(s.c, 10))
	}
	slices.Sort(vals)
	vals = slices.Compact(vals)
	dom := make([]string, len(vals))
	for i, x := range vals {
		dom[i] = strconv.FormatInt(x, 10)
	}
	return Key{Column: inner.Column, Type: policy.TypeInt, Domain: dom, Func: "arith", Args: args}, col, true, nil
}

// castKeyType is the PostgreSQL type of the key k written as the call fc
// in the select list: that of an integer cast around an EXTRACT or
// date_part key (CAST(EXTRACT(YEAR FROM d) AS INTEGER), as Tableau writes
// it, is int4, not numeric), when every value of the key's domain fits
// it; else the key's own type. The values are the same integers either
// way.
func (b *builder) castKeyType(fc *ast.FuncCallExpr, k Key) string {
	t := b.intCasts[b.norm.srcPos(fc.OriginTextPosition())]
	if k.Func != "extract" || k.Type != policy.TypeInt || (t != "int2" && t != "int4" && t != "int8") {
		return keyPGType(k)
	}
	limit := map[string]int64{"int2": 1<<15 - 1, "int4": 1<<31 - 1, "int8": 1<<63 - 1}[t]
	for _, v := range k.Domain {
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil || x > limit || x < -limit-1 {
			return keyPGType(k)
		}
	}
	return t
}

// intConst reads an integer constant of at most maxArithConst.
func (b *builder) intConst(e ast.ExprNode) (int64, bool) {
	neg := false
	if u, ok := unparen(e).(*ast.UnaryOperationExpr); ok && u.Op == opcode.Minus {
		neg, e = true, u.V
	}
	l, ok := b.lit(e)
	if !ok || l.kind != litNumber || l.typ != "" && l.typ != policy.TypeInt || !intRE.MatchString(l.val) {
		return 0, false
	}
	c, err := strconv.ParseInt(strings.TrimPrefix(l.val, "+"), 10, 64)
	if err != nil || c > maxArithConst || c < -maxArithConst {
		return 0, false
	}
	if neg {
		c = -c
	}
	return c, true
}
