// It builds SQL fragments of the plan that the emitter sends upstream
// (pgemit/doc.go).

package rewrite

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// maxLikePattern bounds a LIKE pattern: matching costs time per row in the
// pattern's length (ILIKE lowercases it on every call), and a long pattern
// inside a CASE that selects one person's rows was a timing oracle
// (issue 14).
const maxLikePattern = 256

const whereHint = "WHERE supports column op literal (= <> != < <= > >=), AND/OR/NOT, IN (literals), BETWEEN, IS [NOT] NULL, [NOT] LIKE/ILIKE 'pattern', IS [NOT] DISTINCT FROM literal"

var cmpOps = map[opcode.Op]string{
	opcode.EQ: "=", opcode.NE: "<>", opcode.LT: "<", opcode.LE: "<=", opcode.GT: ">", opcode.GE: ">=",
}

// flip mirrors a comparison when the literal is on the left.
var flip = map[string]string{"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}

// pred converts a WHERE expression.
func (b *builder) pred(e ast.ExprNode) (dpplan.Pred, error) {
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return b.pred(x.Expr)
	case *ast.BinaryOperationExpr:
		switch x.Op {
		case opcode.LogicAnd, opcode.LogicOr:
			l, err := b.pred(x.L)
			if err != nil {
				return nil, err
			}
			r, err := b.pred(x.R)
			if err != nil {
				return nil, err
			}
			op := "AND"
			if x.Op == opcode.LogicOr {
				op = "OR"
			}
			return dpplan.PredBool{Op: op, L: l, R: r}, nil
		case opcode.NullEQ:
			return b.compare(x, x.L, x.R, "IS NOT DISTINCT FROM")
		}
		if op, ok := cmpOps[x.Op]; ok {
			return b.compare(x, x.L, x.R, op)
		}
		return nil, b.errAt(x, pgerr.FeatureNotSupported, "operator %s is not supported in WHERE", x.Op).WithHint("%s", whereHint)
	case *ast.UnaryOperationExpr:
		if x.Op == opcode.Not {
			// NOT (a <=> b) comes from IS DISTINCT FROM.
			in := x.V
			if pe, ok := in.(*ast.ParenthesesExpr); ok {
				in = pe.Expr
			}
			if be, ok := in.(*ast.BinaryOperationExpr); ok && be.Op == opcode.NullEQ {
				return b.compare(be, be.L, be.R, "IS DISTINCT FROM")
			}
			p, err := b.pred(x.V)
			if err != nil {
				return nil, err
			}
			return dpplan.PredNot{X: p}, nil
		}
		return nil, b.errAt(x, pgerr.FeatureNotSupported, "expressions are not supported in WHERE").WithHint("%s", whereHint)
	case *ast.ColumnNameExpr:
		ci, err := b.column(x)
		if err != nil {
			return nil, err
		}
		if ci.typ() != policy.TypeBool {
			return nil, b.errAt(x, "42804", "argument of WHERE must be type boolean, not %s", typeName(ci)).
				WithHint("compare the column with a literal, e.g. %s = …", ci.name)
		}
		return dpplan.PredCol{Col: pgemit.QuoteIdent(ci.name)}, nil
	case *ast.IsNullExpr:
		if fc, ok := intCastCall(x.Expr); ok {
			// The cast of NULL is NULL, and of nothing else.
			ci, err := b.intCastColumn(fc)
			if err != nil {
				return nil, err
			}
			return dpplan.PredNull{Col: pgemit.QuoteIdent(ci.name), Not: x.Not}, nil
		}
		ci, err := b.whereColumn(x.Expr)
		if err != nil {
			return nil, err
		}
		return dpplan.PredNull{Col: pgemit.QuoteIdent(ci.name), Not: x.Not}, nil
	case *ast.PatternInExpr:
		if x.Sel != nil {
			return nil, b.errAt(x, pgerr.FeatureNotSupported, "subqueries are not supported").WithHint("use IN (list of literals)")
		}
		if fc, ok := intCastCall(x.Expr); ok {
			// cast(col) IN (a, b) is cast(col) = a OR cast(col) = b
			// (castcmp.go); NOT IN the negation.
			var out dpplan.Pred
			for _, item := range x.List {
				p, err := b.intCastCmp(fc, item, "=")
				if err != nil {
					return nil, err
				}
				if out == nil {
					out = p
				} else {
					out = dpplan.PredBool{Op: "OR", L: out, R: p}
				}
			}
			if x.Not {
				out = dpplan.PredNot{X: out}
			}
			return out, nil
		}
		ci, err := b.whereColumn(x.Expr)
		if err != nil {
			return nil, err
		}
		out := dpplan.PredIn{Col: pgemit.QuoteIdent(ci.name), Not: x.Not}
		for _, item := range x.List {
			if ci.typ() == policy.TypeDate {
				if f, ok, err := b.dateFoldOf(item, ci); ok || err != nil {
					if err == nil && !f.exact() {
						err = b.errAt(item, pgerr.FeatureNotSupported, "IN lists of timestamps with a time of day are not supported for date column %s", ci.name).
							WithHint("write the dates, or %s = TIMESTAMP '…' OR …", ci.name)
					}
					if err != nil {
						return nil, err
					}
					out.Lits = append(out.Lits, dateConst(f.floor))
					continue
				}
			}
			s, err := b.typedLit(item, ci)
			if err != nil {
				return nil, err
			}
			if !x.Not {
				b.noteUndeclared(ci, item)
			}
			out.Lits = append(out.Lits, s)
		}
		if len(out.Lits) >= pgemit.HashedInLength {
			if err := b.paddedText(x, ci, "an IN list of 9 values or more"); err != nil {
				return nil, err
			}
		}
		return out, nil
	case *ast.BetweenExpr:
		if fc, ok := intCastCall(x.Expr); ok {
			lo, err := b.intCastCmp(fc, x.Left, ">=")
			if err != nil {
				return nil, err
			}
			hi, err := b.intCastCmp(fc, x.Right, "<=")
			if err != nil {
				return nil, err
			}
			var p dpplan.Pred = dpplan.PredBool{Op: "AND", L: lo, R: hi}
			if x.Not {
				p = dpplan.PredNot{X: p}
			}
			return p, nil
		}
		ci, err := b.whereColumn(x.Expr)
		if err != nil {
			return nil, err
		}
		bound := func(e ast.ExprNode, upper bool) (string, error) {
			if ci.typ() == policy.TypeDate {
				if f, ok, err := b.dateFoldOf(e, ci); ok || err != nil { // datefold.go
					if err != nil {
						return "", err
					}
					if upper {
						return dateConst(f.floor), nil
					}
					return dateConst(f.ceil), nil
				}
			}
			return b.typedLit(e, ci)
		}
		if err := b.paddedText(x, ci, "BETWEEN"); err != nil {
			return nil, err
		}
		lo, err := bound(x.Left, false)
		if err != nil {
			return nil, err
		}
		hi, err := bound(x.Right, true)
		if err != nil {
			return nil, err
		}
		return dpplan.PredBetween{Col: pgemit.QuoteIdent(ci.name), Lo: lo, Hi: hi, Not: x.Not}, nil
	case *ast.PatternLikeOrIlikeExpr:
		if x.EscapeExplicit {
			// The normalizer folds ESCAPE into the pattern (likepattern.go).
			return nil, b.errAt(x, pgerr.FeatureNotSupported, "LIKE … ESCAPE is not supported here").WithHint("use the default escape character \\")
		}
		ci, err := b.whereColumn(x.Expr)
		if err != nil {
			return nil, err
		}
		if ci.typ() != policy.TypeText {
			return nil, b.errAt(x, "42883", "LIKE needs a text column; %s is %s", ci.name, typeName(ci)).
				WithHint("use comparisons for %s columns", typeName(ci))
		}
		if err := b.paddedText(x, ci, "LIKE"); err != nil {
			return nil, err
		}
		l, ok := b.lit(x.Pattern)
		if !ok || l.kind != litString || l.typ != "" && l.typ != policy.TypeText {
			return nil, b.errAt(x.Pattern, pgerr.FeatureNotSupported, "the LIKE pattern must be a string literal").
				WithHint("write %s LIKE 'prefix%%'", ci.name)
		}
		// The pattern is read as PostgreSQL reads it and emitted in
		// canonical form (likepattern.go): a dangling escape, which
		// PostgreSQL reports only for a row that matches up to it, is
		// refused here, before any charge.
		if n := utf8.RuneCountInString(l.val); n > maxLikePattern {
			return nil, b.errAt(x.Pattern, "54000", "LIKE pattern of %d characters is too long", n).
				WithHint("use a pattern of at most %d characters", maxLikePattern)
		}
		pat, err := parseLikePattern(l.val, '\\')
		if err != nil {
			pe, _ := pgerr.As(err)
			return nil, pe.WithPosition(pgsql.CharPos(b.src, b.norm.srcPos(x.Pattern.OriginTextPosition())))
		}
		return dpplan.PredLike{Col: pgemit.QuoteIdent(ci.name), Pattern: pgemit.QuoteString(pat.String()), Not: x.Not, ILike: !x.IsLike}, nil
	case *ast.IsTruthExpr:
		return nil, b.errAt(x, pgerr.FeatureNotSupported, "IS [NOT] TRUE/FALSE is not supported").
			WithHint("write the condition itself, e.g. WHERE age > 3 or WHERE NOT (age > 3); for a boolean column, bool_col = true")
	case *ast.SubqueryExpr, *ast.ExistsSubqueryExpr, *ast.CompareSubqueryExpr:
		return nil, b.errAt(e, pgerr.FeatureNotSupported, "subqueries are not supported").WithHint("%s", whereHint)
	case *ast.AggregateFuncExpr:
		return nil, b.errAt(e, "42803", "aggregate functions are not allowed in WHERE").WithHint("filter the released rows in your client")
	case *ast.FuncCallExpr:
		return nil, b.errAt(e, pgerr.FeatureNotSupported, "function %s is not supported in WHERE", x.FnName.O).WithHint("%s", whereHint)
	}
	if l, ok := b.lit(e); ok {
		switch {
		case l.kind == litBool && (l.typ == "" || l.typ == policy.TypeBool):
			return dpplan.PredConst{V: strings.ToUpper(l.val)}, nil
		case l.kind == litNull:
			return dpplan.PredConst{V: "NULL"}, nil
		}
		return nil, b.errAt(e, "42804", "argument of WHERE must be type boolean").WithHint("%s", whereHint)
	}
	return nil, b.errAt(e, pgerr.FeatureNotSupported, "this WHERE expression is not supported").WithHint("%s", whereHint)
}

// paddedText refuses a condition (what) that reads text column ci through
// the length test of the emitted SQL (pgemit.PredSQL: LIKE, an ordering
// comparison, BETWEEN, an IN list PostgreSQL hashes) when ci is char(n)
// with n over dpplan.MaxConditionTextBytes: its values are stored padded
// to n characters, which octet_length counts, so every value would be
// NULL to the condition and the statement would answer noise around
// zero for its full price (review 103). The column's type is public.
func (b *builder) paddedText(at ast.Node, ci colInfo, what string) error {
	if ci.col == nil || ci.col.PadChars <= dpplan.MaxConditionTextBytes {
		return nil
	}
	n := ci.col.PadChars
	return b.errAt(at, pgerr.FeatureNotSupported, "%s of column %s is not supported: it is char(%d), whose values are padded to %d characters, and such a condition reads at most %d bytes of a value", what, ci.name, n, n, dpplan.MaxConditionTextBytes).
		WithHint("compare %s with = or <>, or an IN list of at most %d values; or ask the data steward to make it varchar(%d) or text", ci.name, pgemit.HashedInLength-1, n)
}

// whereColumn requires a plain column reference.
func (b *builder) whereColumn(e ast.ExprNode) (colInfo, error) {
	if pe, ok := e.(*ast.ParenthesesExpr); ok {
		return b.whereColumn(pe.Expr)
	}
	if fc, ok := atZoneCall(e); ok {
		return b.atZoneColumn(fc) // attz.go
	}
	if fc, ok := intCastCall(e); ok {
		return colInfo{}, b.errAt(fc, pgerr.FeatureNotSupported, "an integer cast of a column is supported in comparisons, BETWEEN, IN and IS NULL only").WithHint("%s", intCastHint)
	}
	c, ok := e.(*ast.ColumnNameExpr)
	if !ok {
		if err := b.dateFilterErr(e); err != nil {
			return colInfo{}, err
		}
		return colInfo{}, b.errAt(e, pgerr.FeatureNotSupported, "expressions are not supported in WHERE yet").
			WithHint("%s", whereHint)
	}
	return b.column(c)
}

// dateFilterFuncs are the date functions analysts filter by, whose
// comparison is a range of the column itself.
var dateFilterFuncs = map[string]bool{"extract": true, "date_part": true, "date_trunc": true}

// dateFilterErr returns the refusal of a date function compared in WHERE
// (WHERE EXTRACT(YEAR FROM visit_date) = 2024), whose hint writes the
// range of the column itself (round 111: a new analyst's year filter got
// only the generic WHERE hint), or nil for other expressions.
func (b *builder) dateFilterErr(e ast.ExprNode) error {
	fc, ok := unparen(e).(*ast.FuncCallExpr)
	if !ok || !dateFilterFuncs[strings.ToLower(fc.FnName.O)] {
		return nil
	}
	col := "date_col"
	for _, a := range fc.Args {
		if cn, ok := a.(*ast.ColumnNameExpr); ok {
			col = cn.Name.Name.O
		}
	}
	fn := strings.ToLower(fc.FnName.O)
	return b.errAt(e, pgerr.FeatureNotSupported, "%s(…) of a column is not supported in WHERE", fn).
		WithHint("compare the column itself with a range: %s >= '2024-01-01' AND %s < '2025-01-01' is the year 2024, and %s >= '2024-03-01' AND %s < '2024-04-01' March 2024 (a month of every year: GROUP BY %s(…) is answered, one row a month)", col, col, col, col, fn)
}

// compare converts col op literal (either order); literal op literal is
// accepted for constants such as 1 = 1 that BI tools generate.
func (b *builder) compare(at ast.Node, l, r ast.ExprNode, op string) (dpplan.Pred, error) {
	lcol, rcol := isColumnSide(l), isColumnSide(r) // a column, or a date column AT TIME ZONE
	switch {
	case lcol && rcol:
		return nil, b.twoColumns(at, l, r)
	case lcol || rcol:
		colE, litE := l, r
		if rcol {
			colE, litE = r, l
			if f, ok := flip[op]; ok {
				op = f
			}
		}
		if fc, ok := intCastCall(colE); ok {
			return b.intCastCmp(fc, litE, op) // castcmp.go
		}
		ci, err := b.whereColumn(colE)
		if err != nil {
			return nil, err
		}
		if err := b.textCast(colE, ci); err != nil { // castcmp.go
			return nil, err
		}
		if ci.typ() == policy.TypeDate {
			if f, ok, err := b.dateFoldOf(litE, ci); ok || err != nil { // datefold.go
				if err != nil {
					return nil, err
				}
				return foldCmp(pgemit.QuoteIdent(ci.name), op, f), nil
			}
		}
		s, err := b.typedLit(litE, ci)
		if err != nil {
			return nil, err
		}
		if op == "=" {
			b.noteUndeclared(ci, litE)
		}
		if pgemit.BoundedCmp(op) {
			if err := b.paddedText(at, ci, "an ordering comparison"); err != nil {
				return nil, err
			}
		}
		return dpplan.PredCmp{Col: pgemit.QuoteIdent(ci.name), Op: op, Lit: s}, nil
	}
	ll, ok1 := b.lit(l)
	rl, ok2 := b.lit(r)
	if !ok1 || !ok2 {
		for _, e := range []ast.ExprNode{l, r} {
			if err := b.dateFilterErr(e); err != nil {
				return nil, err
			}
		}
		return nil, b.errAt(at, pgerr.FeatureNotSupported, "expressions are not supported in WHERE yet").WithHint("%s", whereHint)
	}
	if ll.kind == litNumber && rl.kind == litNumber && ll.typ == "" && rl.typ == "" {
		a, err := b.numberLit(l, ll)
		if err != nil {
			return nil, err
		}
		c, err := b.numberLit(r, rl)
		if err != nil {
			return nil, err
		}
		return dpplan.PredCmp{Col: a, Op: op, Lit: c}, nil
	}
	if ll.kind == litString && rl.kind == litString && ll.typ == "" && rl.typ == "" {
		return dpplan.PredCmp{Col: pgemit.QuoteString(ll.val) + "::text", Op: op, Lit: pgemit.QuoteString(rl.val) + "::text"}, nil
	}
	return nil, b.errAt(at, pgerr.FeatureNotSupported, "this comparison of constants is not supported").
		WithHint("compare a column with a literal")
}

func unparen(e ast.ExprNode) ast.ExprNode {
	for {
		p, ok := e.(*ast.ParenthesesExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

func typeName(ci colInfo) string {
	if ci.col == nil {
		return "the unit column's type"
	}
	return string(ci.col.Type)
}

// maxNumberLen bounds numeric literals so none can overflow PostgreSQL's
// numeric input.
const maxNumberLen = 200

func (b *builder) numberLit(at ast.Node, l literal) (string, error) {
	v := strings.TrimPrefix(strings.TrimSpace(l.val), "+")
	if !numberRE.MatchString(v) || len(v) > maxNumberLen {
		return "", b.errAt(at, "22P02", "invalid number %q", l.val).
			WithHint("write a decimal number of at most %d characters, e.g. 42 or 1.5", maxNumberLen)
	}
	if i := strings.IndexAny(v, "eE"); i >= 0 {
		// Keep exponents small: 1e100000 would overflow numeric.
		exp := strings.TrimLeft(v[i+1:], "+-")
		if len(exp) > 3 {
			return "", b.errAt(at, "22003", "number %q is out of range", l.val).WithHint("write the number without a huge exponent")
		}
	}
	return "(" + v + ")", nil
}

// typedLit checks a literal against the column it is compared with and
// returns the PostgreSQL text of the literal, typed to the column.
func (b *builder) typedLit(e ast.ExprNode, ci colInfo) (string, error) {
	l, ok := b.lit(e)
	if !ok {
		if _, isCol := unparen(e).(*ast.ColumnNameExpr); isCol {
			return "", b.twoColumns(e, e)
		}
		return "", b.errAt(e, pgerr.FeatureNotSupported, "only literals can be compared with %s", ci.name).WithHint("%s", whereHint)
	}
	if l.kind == litNull {
		return "NULL", nil
	}
	mismatch := func() (string, error) {
		what := map[litKind]string{litNumber: "number", litString: "string", litBool: "boolean"}[l.kind]
		if l.typ != "" {
			what = string(l.typ)
		}
		return "", b.errAt(e, "42804", "cannot compare %s column %s with a %s", typeName(ci), ci.name, what).
			WithHint("%s", literalHint(ci))
	}
	t := ci.typ()
	if t == "" && ci.utypeName != "" {
		// The catalog gave the unit column a type whose literals the
		// planner cannot check (uuid, …): a malformed one would fail
		// upstream after the charge.
		return "", b.errAt(e, pgerr.FeatureNotSupported, "comparisons of the unit column %s (%s) with literals are not supported", ci.name, ci.utypeName).
			WithHint("filter on other columns; the unit column can be counted with COUNT(DISTINCT %s)", ci.name)
	}
	if t == "" {
		return b.unitLit(e, l, ci) // literal.go
	}
	if l.typ != "" && l.typ != t && !(l.typ.Numeric() && t.Numeric()) {
		return mismatch()
	}
	switch t {
	case policy.TypeInt, policy.TypeNumeric, policy.TypeFloat:
		switch l.kind {
		case litNumber:
		case litString:
			v := strings.TrimSpace(l.val)
			if t == policy.TypeInt && !intRE.MatchString(v) || !numberRE.MatchString(strings.TrimPrefix(v, "+")) {
				return "", b.errAt(e, "22P02", "invalid input syntax for type %s: %q", t, l.val).WithHint("%s", literalHint(ci))
			}
			l = literal{kind: litNumber, val: v}
		default:
			return mismatch()
		}
		s, err := b.numberLit(e, l)
		if err == nil && t == policy.TypeFloat && !float8Literal(strings.Trim(s, "()")) {
			// literal.go: PostgreSQL casts it to float8 when planning.
			return "", b.errAt(e, "22003", "%s is out of range for type double precision", strings.Trim(s, "()")).
				WithHint("compare %s with a number between about ±1.8e308, and not so close to 0 that it rounds to 0", ci.name)
		}
		return s, err
	case policy.TypeText:
		if l.kind == litString {
			return pgemit.QuoteString(l.val) + "::text", nil
		}
	case policy.TypeDate:
		if l.kind == litString {
			v := strings.TrimSpace(l.val)
			d, err := time.Parse("2006-01-02", v)
			if err != nil {
				d, err = time.Parse("2006-1-2", v)
			}
			if err != nil {
				// A timestamp at midnight is that date (drivers send
				// dates as timestamps: pgx's time.Time in simple
				// protocol, JDBC setTimestamp, BI tools' literals).
				var midnight bool
				if d, midnight, err = TimestampDate(v); err == nil && !midnight {
					return "", b.errAt(e, pgerr.FeatureNotSupported, "%s is a date column; the timestamp %q has a time of day", ci.name, l.val).
						WithHint("compare %s with a date, e.g. %s >= '%s'", ci.name, ci.name, d.Format("2006-01-02"))
				}
			}
			if err != nil || d.Year() < 1 {
				return "", b.errAt(e, "22007", "invalid date %q", l.val).WithHint("write dates as 'YYYY-MM-DD'")
			}
			return "'" + d.Format("2006-01-02") + "'::date", nil
		}
	case policy.TypeBool:
		switch l.kind {
		case litBool:
			return strings.ToUpper(l.val), nil
		case litString:
			switch strings.ToLower(strings.TrimSpace(l.val)) {
			case "t", "true", "y", "yes", "on", "1":
				return "TRUE", nil
			case "f", "false", "n", "no", "off", "0":
				return "FALSE", nil
			}
			return "", b.errAt(e, "22P02", "invalid input syntax for type boolean: %q", l.val).WithHint("write true or false")
		}
	}
	return mismatch()
}

// timestampLayouts are the timestamp texts drivers send: ISO with a space
// or T, optional fractions, optional zone (Z, ±hh, ±hh:mm).
var timestampLayouts = []string{
	"2006-01-02 15:04:05.999999999Z07:00:00", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999Z07", "2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999Z07", "2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04", "2006-01-02T15:04",
}

// TimestampDate reads a timestamp as its wall-clock date and time as
// written (the zone, when given, is the client's own: its date is the one
// it means), and reports whether it is midnight.
func TimestampDate(v string) (time.Time, bool, error) {
	for _, layout := range timestampLayouts {
		t, err := time.Parse(layout, v)
		if err == nil {
			day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
			return day, t.Hour() == 0 && t.Minute() == 0 && t.Second() == 0 && t.Nanosecond() == 0, nil
		}
	}
	return time.Time{}, false, errors.New("not a timestamp")
}

var intRE = regexp.MustCompile(`^[+-]?[0-9]+$`)

func literalHint(ci colInfo) string {
	switch ci.typ() {
	case policy.TypeInt:
		return "compare " + ci.name + " with an integer, e.g. " + ci.name + " >= 18"
	case policy.TypeNumeric, policy.TypeFloat:
		return "compare " + ci.name + " with a number, e.g. " + ci.name + " > 100.5"
	case policy.TypeText:
		return "compare " + ci.name + " with a quoted string, e.g. " + ci.name + " = 'value'"
	case policy.TypeDate:
		return "compare " + ci.name + " with a date, e.g. " + ci.name + " >= '2021-01-01'"
	case policy.TypeBool:
		return "compare " + ci.name + " with true or false"
	}
	return "compare " + ci.name + " with a number or a quoted string"
}

// twoColumns is the error of a comparison whose sides are both column
// names. A name that is no column is most likely a text value written
// without quotes (WHERE department = oncology): PostgreSQL's 42703 for it,
// with a hint to quote it, rather than "two columns".
func (b *builder) twoColumns(at ast.Node, sides ...ast.ExprNode) error {
	for _, e := range sides {
		c, ok := unparen(e).(*ast.ColumnNameExpr)
		if !ok {
			continue
		}
		if _, err := b.column(c); err != nil {
			if pe, ok := pgerr.As(err); ok && pe.Code == pgerr.UndefinedColumn {
				return pe.WithHint("a text value is written in single quotes ('%s'); %s", c.Name.Name.O, pe.Hint)
			}
			return err
		}
	}
	return b.errAt(at, pgerr.FeatureNotSupported, "comparisons between two columns are not supported yet").
		WithHint("compare a column with a literal")
}

// noteUndeclared warns (Plan.Warnings, a NOTICE before the answer) when a
// text column with declared public values is compared equal to a value
// that is not one of them: usually a typo or another case ('Oncology' for
// oncology), whose answer is noise around zero for its full price (the
// new-user run of 6 Dec 2026). The declared values are public, so saying
// so costs no privacy; the query still runs, since rows may hold values
// the policy does not list.
func (b *builder) noteUndeclared(ci colInfo, e ast.ExprNode) {
	if ci.col == nil || len(ci.col.PublicValues) == 0 || ci.typ() != policy.TypeText || len(b.warnings) >= 3 {
		return
	}
	l, ok := b.lit(e)
	if !ok || l.kind != litString {
		return
	}
	v := l.val
	if ci.col.PGType == "citext" {
		v = strings.ToLower(v)
	}
	if slices.Contains(ci.col.PublicValues, v) {
		return
	}
	shown := strings.Join(ci.col.PublicValues, ", ")
	if len(shown) > 200 {
		shown = shown[:200] + "…"
	}
	b.warnings = append(b.warnings, fmt.Sprintf("dp warning: %s is not one of the values the policy declares for %s (%s); text is compared exactly, case and spaces included, so this condition may match no row", pgemit.QuoteString(pgerr.Truncate(l.val, 64)), ci.name, shown))
}
