// Privacy-critical: needs DP review.
// Part of the emitter: what reaches the private database is built here
// (doc.go).

package pgemit

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
)

// CheckInputs checks every piece of plan data this package pastes into
// the SQL as it stands (rather than quoting or re-encoding it): the
// literals, columns and operators of conditions (dpplan.Pred), the
// constants and operators of row values (dpplan.Value), the arguments of
// key expressions, the statistics of sample-and-aggregate. Each must be a
// constant, a quoted column of t or a word of a closed set; nothing else
// can reach the SQL, so no plan can make a row's filter, group or value
// depend on another row (a subquery, a function reading a table): with
// release/verify.go's check that the plan's SQL is exactly this package's
// output, the planner cannot put into the SQL anything but the query's
// own shape. t is the table the SQL is emitted from, where the plan's WHERE
// condition.
func CheckInputs(t *policy.Table, p *dpplan.Plan, where dpplan.Pred) error {
	c := checker{t: t}
	c.pred(where)
	for _, k := range p.Keys {
		c.key(k)
	}
	for _, m := range p.Measures {
		c.pred(m.Filter)
		if m.Expr != nil {
			c.value(m.Expr)
		}
	}
	if sa := p.SampleAgg; sa != nil {
		for _, s := range sa.Calls {
			c.sampleCall(s)
		}
	}
	return c.err
}

type checker struct {
	t   *policy.Table
	err error
}

func (c *checker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("pgemit: "+format, args...)
	}
}

// The constants the planner writes (rewrite/pred.go numberLit, typedLit,
// unitLit; datefold.go dateConst; likepattern.go; casekey.go).
var (
	numberConst = regexp.MustCompile(`^\(-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\)$`)
	plainNumber = regexp.MustCompile(`^-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$`)
	integer     = regexp.MustCompile(`^-?[0-9]+$`)
	isoDate     = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
	utcOffset   = regexp.MustCompile(`^[+-][0-9]{2}(:[0-9]{2}){0,2}$`)
	truncValue  = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}( 00:00:00([+-][0-9]{2}(:[0-9]{2}){0,2})?)?$`)
	arithTypes  = map[string]bool{"int2": true, "int4": true, "int8": true, "numeric": true, "float8": true}
	// '…' with quotes doubled, or E'…' with quotes and backslashes doubled
	// (QuoteString), optionally cast to text or date.
	stringConst = regexp.MustCompile(`^(?:'(?:[^']|'')*'|E'(?:[^'\\]|''|\\\\)*')(?:::(?:text|date))?$`)
)

// literal checks a constant of a condition.
func (c *checker) literal(s string) {
	switch {
	case s == "TRUE", s == "FALSE", s == "NULL":
	case numberConst.MatchString(s), stringConst.MatchString(s):
	default:
		c.fail("%q is not a constant", s)
	}
}

// column checks a quoted column of the table (or, in a comparison of two
// constants, a constant).
func (c *checker) column(s string, orLiteral bool) {
	if c.quotedColumn(s) {
		return
	}
	if orLiteral {
		c.literal(s)
		return
	}
	c.fail("%q is not a column of %s", s, c.t.Name)
}

func (c *checker) quotedColumn(s string) bool {
	if !strings.HasPrefix(s, `"`) || !strings.HasSuffix(s, `"`) || len(s) < 2 {
		return false
	}
	name := strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
	if QuoteIdent(name) != s {
		return false
	}
	_, ok := c.t.Columns[name]
	return ok || name == c.t.UnitColumn
}

var cmpOps = map[string]bool{"=": true, "<>": true, "<": true, "<=": true, ">": true, ">=": true,
	"IS NOT DISTINCT FROM": true, "IS DISTINCT FROM": true}

func (c *checker) pred(p dpplan.Pred) {
	switch x := p.(type) {
	case nil:
	case dpplan.PredBool:
		if x.Op != "AND" && x.Op != "OR" {
			c.fail("%q is not AND or OR", x.Op)
		}
		c.pred(x.L)
		c.pred(x.R)
	case dpplan.PredNot:
		c.pred(x.X)
	case dpplan.PredConst:
		if x.V != "TRUE" && x.V != "FALSE" && x.V != "NULL" {
			c.fail("%q is not a constant condition", x.V)
		}
	case dpplan.PredCol:
		c.column(x.Col, false)
	case dpplan.PredCmp:
		c.column(x.Col, true)
		c.literal(x.Lit)
		if !cmpOps[x.Op] {
			c.fail("%q is not a comparison", x.Op)
		}
	case dpplan.PredIn:
		c.column(x.Col, false)
		for _, l := range x.Lits {
			c.literal(l)
		}
	case dpplan.PredBetween:
		c.column(x.Col, false)
		c.literal(x.Lo)
		c.literal(x.Hi)
	case dpplan.PredNull:
		c.column(x.Col, false)
	case dpplan.PredLike:
		c.column(x.Col, false)
		if !stringConst.MatchString(x.Pattern) || strings.Contains(x.Pattern, "::") {
			c.fail("%q is not a pattern", x.Pattern)
		}
	default:
		c.fail("unknown condition %T", p)
	}
}

var valueOps = map[string]bool{dpplan.ValCol: true, dpplan.ValConst: true, dpplan.ValNull: true, dpplan.ValNeg: true,
	dpplan.ValAdd: true, dpplan.ValSub: true, dpplan.ValMul: true, dpplan.ValDiv: true, dpplan.ValCase: true,
	dpplan.ValCoalesce: true, dpplan.ValLeast: true, dpplan.ValGreatest: true, dpplan.ValAbs: true, dpplan.ValNullIf: true}

func (c *checker) value(v *dpplan.Value) {
	if !valueOps[v.Op] {
		c.fail("%q is not a row-value operator", v.Op)
		return
	}
	switch v.Op {
	case dpplan.ValConst:
		if !plainNumber.MatchString(v.Num) {
			c.fail("%q is not a number", v.Num)
		}
	case dpplan.ValCol:
		if _, ok := c.t.Columns[v.Col]; !ok {
			c.fail("%q is not a column of %s", v.Col, c.t.Name)
		}
		if !plainNumber.MatchString(v.Lo) || !plainNumber.MatchString(v.Hi) {
			c.fail("bounds %q, %q are not numbers", v.Lo, v.Hi)
		}
	}
	for _, w := range v.When {
		c.pred(w)
	}
	for _, a := range v.Args {
		c.value(a)
	}
}

// Words of key expressions (rewrite/keyexpr.go, datekey.go).
var (
	truncUnits    = map[string]bool{"day": true, "week": true, "month": true, "quarter": true, "year": true}
	extractFields = map[string]bool{"year": true, "quarter": true, "month": true, "day": true, "dow": true,
		"isodow": true, "doy": true, "week": true, "isoyear": true}
	// caseWords are the unquoted words a CASE key (rewrite/casekey.go)
	// may hold: its syntax, the condition words PredSQL writes (with
	// octet_length, the length test of boundedText: an immutable function
	// of the row's own value) and the casts of constants. No word that
	// reads other rows (SELECT, FROM, a table) or calls another function
	// is among them.
	caseWords = map[string]bool{"case": true, "when": true, "then": true, "else": true, "end": true,
		"and": true, "or": true, "not": true, "is": true, "null": true, "in": true, "between": true,
		"like": true, "ilike": true, "true": true, "false": true, "distinct": true, "from": true,
		"text": true, "date": true, "numeric": true, "octet_length": true}
)

func (c *checker) key(k dpplan.Key) {
	arg := func(i int) string {
		if i < len(k.Args) {
			return k.Args[i]
		}
		c.fail("key %s: %s needs %d arguments", k.Column, k.Func, i+1)
		return ""
	}
	switch k.Func {
	case "":
	case "width_bucket":
		if !plainNumber.MatchString(arg(0)) || !plainNumber.MatchString(arg(1)) || !integer.MatchString(arg(2)) {
			c.fail("key %s: width_bucket arguments %q", k.Column, k.Args)
		}
	case "date_trunc":
		// Args: unit [type [offset {date offset}]] (rewrite/trunckey.go).
		ok := truncUnits[arg(0)] && len(k.Domain) > 0
		if len(k.Args) > 1 {
			ok = ok && (k.Args[1] == "timestamp" && len(k.Args) == 2 || k.Args[1] == "text" || k.Args[1] == "timestamptz" && len(k.Args) > 2)
			for i := 2; i < len(k.Args); i++ {
				if (i-2)%2 == 0 && !utcOffset.MatchString(k.Args[i]) || (i-2)%2 == 1 && !isoDate.MatchString(k.Args[i]) {
					ok = false
				}
			}
			ok = ok && (len(k.Args) == 2 || len(k.Args)%2 == 1)
		}
		if !ok {
			c.fail("key %s: date_trunc %q", k.Column, k.Args)
		}
		for _, v := range k.Domain {
			if !truncValue.MatchString(v) || len(k.Args) == 1 && len(v) != 10 || len(k.Args) > 1 && len(v) == 10 {
				c.fail("key %s: date_trunc value %q", k.Column, v)
			}
		}
	case "extract":
		if !extractFields[arg(0)] {
			c.fail("key %s: field %q", k.Column, k.Args)
		}
	case "epoch":
		if w := arg(0); w != "" && !plainNumber.MatchString(w) || arg(1) != "numeric" && arg(1) != "float8" {
			c.fail("key %s: epoch %q", k.Column, k.Args)
		}
		arg(3)
	case "int_bucket":
		if !integer.MatchString(arg(0)) || !integer.MatchString(arg(1)) || !integer.MatchString(arg(2)) {
			c.fail("key %s: int_bucket %q", k.Column, k.Args)
		}
	case "arith":
		n, err := strconv.Atoi(arg(2))
		if !arithTypes[arg(0)] || err != nil || n < 0 || 3+n > len(k.Args) || (len(k.Args)-3-n)%2 != 0 || len(k.Args) == 3+n ||
			arg(1) != "extract" && arg(1) != "date_part" {
			c.fail("key %s: arith %q", k.Column, k.Args)
			return
		}
		c.key(dpplan.Key{Column: k.Column, Func: arg(1), Args: k.Args[3 : 3+n]})
		for i := 3 + n; i+1 < len(k.Args); i += 2 {
			if op := k.Args[i]; op != "+" && op != "-" && op != "%" || !integer.MatchString(k.Args[i+1]) || op == "%" && k.Args[i+1] == "0" {
				c.fail("key %s: arith %q", k.Column, k.Args)
			}
		}
	case "case":
		c.caseKey(arg(0))
	default:
		c.fail("key %s: unknown key function %q", k.Column, k.Func)
	}
}

// caseKey checks the SQL of a CASE key token by token: words of caseWords,
// quoted columns of the table, constants, comparison operators and
// punctuation only.
func (c *checker) caseKey(sql string) {
	toks, err := pgsql.Lex(sql)
	if err != nil || len(toks) == 0 || !toks[0].Is("case") {
		c.fail("%q is not a CASE key", sql)
		return
	}
	for _, tok := range toks {
		switch tok.Kind {
		case pgsql.TokIdent:
			if tok.Quoted && c.quotedColumn(sql[tok.Pos:tok.End]) || !tok.Quoted && caseWords[tok.Val] {
				continue
			}
		case pgsql.TokNumber, pgsql.TokString:
			continue
		case pgsql.TokOp:
			if cmpOps[tok.Val] || tok.Val == "-" {
				continue
			}
		case pgsql.TokPunct:
			if tok.Val == "(" || tok.Val == ")" || tok.Val == "," || tok.Val == "::" {
				continue
			}
		}
		c.fail("%q in a CASE key", sql[tok.Pos:tok.End])
		return
	}
}

// sampleFuncs are the statistics of sample-and-aggregate
// (rewrite/sampleagg.go).
var sampleFuncs = map[string]bool{"corr": true, "regr_r2": true}

func (c *checker) sampleCall(s dpplan.SampleCall) {
	if !sampleFuncs[s.Fn] {
		c.fail("%q is not a sample-and-aggregate statistic", s.Fn)
	}
	for _, col := range []string{s.Y, s.X} {
		if _, ok := c.t.Columns[col]; !ok {
			c.fail("%q is not a column of %s", col, c.t.Name)
		}
	}
}
