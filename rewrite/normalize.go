package rewrite

import (
	"regexp"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
)

// The normalizer turns a lexed PostgreSQL statement into text the TiDB
// (MySQL-dialect) parser reads with the same structure, or refuses it with a
// precise error. Its rules:
//
//   - Every literal (number, string, TRUE/FALSE, typed literal such as
//     DATE '…', '…'::date, CAST('…' AS date)) becomes a ? marker, and the
//     literal itself, decoded by our PostgreSQL lexer, is kept aside with its
//     declared type. The TiDB parser never interprets a literal, so MySQL's
//     backslash escapes, _charset prefixes and number typing play no part.
//   - Unquoted words that are PostgreSQL reserved keywords of the supported
//     grammar are passed as keywords; the aggregates count/sum/avg/min/max and
//     the variance family pass bare when followed by "(" (variance and
//     stddev spelled as their PostgreSQL meaning, the sample forms). Every other word is written as a
//     double-quoted identifier (ANSI_QUOTES), folded to lower case as
//     PostgreSQL folds it, so MySQL-only keywords (div, mod, xor, key,
//     regexp, …) can never take effect.
//   - IS [NOT] DISTINCT FROM becomes the null-safe <=> (negated for
//     DISTINCT), when both operands are simple.
//   - agg(…) FILTER (WHERE cond) becomes a marker call (filter.go).
//   - percentile_cont|percentile_disc(q) WITHIN GROUP (ORDER BY col [ASC])
//     becomes the call "percentile_…"(?, col) (quantile.go), which the
//     builder accepts only where the source has that exact form.
//   - Everything else that has no exact mapping is refused with its
//     position: casts of non-literals, $n placeholders, window functions,
//     CTEs, set operations, joins, subqueries, other WITHIN GROUP
//     aggregates, arrays,
//     operators other than comparison and arithmetic, LIMIT a,b, ….

// literal is one constant of the analyst's query.
type literal struct {
	kind litKind
	val  string      // number text (with sign), decoded string, "true"/"false"
	typ  policy.Type // explicit type (cast or typed literal); "" when untyped
	pos  int         // byte offset in the statement
}

type litKind int

const (
	litNumber litKind = iota
	litString
	litBool
	litNull
)

// piece is one unit of normalized output.
type piece struct {
	text string
	pos  int  // byte offset of the source token
	lit  int  // index into literals for "?" pieces, else -1
	word bool // identifier or keyword (part of a primary)
	nsEq int  // for "<=>": 1 = IS NOT DISTINCT FROM, 2 = IS DISTINCT FROM
}

type normalized struct {
	src    string
	text   string
	pieces []piece
	starts []int // normalized byte offset of each piece
	lits   []literal
	// limit and offset are the LIMIT/OFFSET clauses, taken off the text
	// given to the TiDB parser (PostgreSQL accepts them in either order
	// and OFFSET alone); nil when absent, kind litNull for LIMIT ALL/NULL.
	limit, offset *literal
	litAt         map[int]int // normalized offset of a "?" → literal index
	// skipTok are token indexes the main loop drops (the ASC closing an
	// ordered-set aggregate's expression, quantile_expr.go).
	skipTok map[int]bool
}

// passKeywords are PostgreSQL reserved words of the supported grammar that
// mean the same to the TiDB parser; they are passed unquoted.
var passKeywords = map[string]bool{
	"select": true, "from": true, "where": true, "group": true, "by": true,
	"order": true, "having": true, "limit": true, "offset": true, "as": true,
	"and": true, "or": true, "not": true, "in": true, "is": true, "null": true,
	"between": true, "like": true, "ilike": true, "asc": true, "desc": true,
	"distinct": true, "all": true, "case": true, "when": true, "then": true,
	"else": true, "end": true, "on": true,
	"join": true, "inner": true, "outer": true, "using": true,
}

// aggregateNames pass before "(" so the TiDB parser builds aggregate nodes
// for them, spelled as the value. PostgreSQL's variance and stddev are the
// sample forms (TiDB maps bare VARIANCE and STDDEV to the population
// forms), so they are written as VAR_SAMP and STDDEV_SAMP.
var aggregateNames = map[string]string{
	"count": "COUNT", "sum": "SUM", "avg": "AVG", "min": "MIN", "max": "MAX",
	"var_pop": "VAR_POP", "var_samp": "VAR_SAMP", "variance": "VAR_SAMP",
	"stddev_pop": "STDDEV_POP", "stddev_samp": "STDDEV_SAMP", "stddev": "STDDEV_SAMP",
}

// typeNames maps PostgreSQL type names usable in casts of literals to policy
// types.
var typeNames = map[string]policy.Type{
	"int": policy.TypeInt, "integer": policy.TypeInt, "int2": policy.TypeInt, "int4": policy.TypeInt,
	"int8": policy.TypeInt, "smallint": policy.TypeInt, "bigint": policy.TypeInt,
	"numeric": policy.TypeNumeric, "decimal": policy.TypeNumeric,
	"real": policy.TypeFloat, "float": policy.TypeFloat, "float4": policy.TypeFloat, "float8": policy.TypeFloat,
	"double": policy.TypeFloat,
	"text":   policy.TypeText, "varchar": policy.TypeText, "char": policy.TypeText, "character": policy.TypeText,
	"date":    policy.TypeDate,
	"boolean": policy.TypeBool, "bool": policy.TypeBool,
	// Timestamps are compared only with date columns (datefold.go).
	"timestamp": typTimestamp, "timestamptz": typTimestampTZ,
}

// timestampZone reads [WITH|WITHOUT] TIME ZONE after "timestamp" at
// toks[k]: the type and the index after it.
func timestampZone(toks []pgsql.Token, k int, typ policy.Type) (policy.Type, int) {
	if typ == typTimestamp && k+2 < len(toks) && (toks[k].Is("with") || toks[k].Is("without")) && toks[k+1].Is("time") && toks[k+2].Is("zone") {
		if toks[k].Is("with") {
			typ = typTimestampTZ
		}
		k += 3
	}
	return typ, k
}

// extractMarkerFields are the EXTRACT fields passed as "extract"('field',
// col) (the TiDB parser reads YEAR, QUARTER and MONTH itself).
var extractMarkerFields = map[string]bool{"epoch": true, "dow": true, "isodow": true, "doy": true, "week": true, "day": true}

// inListHint is the hint of = ANY(array) and arrays: the drivers'
// list parameters (psycopg2 adapts a Python list to ARRAY[…]; node-postgres
// and pgx bind an array to = ANY($1)) are written as IN lists (round 111).
const inListHint = "use IN (list of literals): department IN ('oncology', 'surgery'); psycopg2 expands a tuple (department IN %s with a tuple, not a list); node-postgres and pgx take one placeholder per value (department IN ($1, $2))"

// refusedWords are refused wherever they appear as unquoted words, with
// their SQLSTATE, message and hint.
var refusedWords = map[string][3]string{
	"over":      {pgerr.FeatureNotSupported, "window functions are not supported", "use plain aggregates with GROUP BY"},
	"window":    {pgerr.FeatureNotSupported, "window functions are not supported", "use plain aggregates with GROUP BY"},
	"with":      {pgerr.FeatureNotSupported, "WITH queries (CTEs) are not supported", "write one SELECT (over one protected table, or a join)"},
	"union":     {pgerr.FeatureNotSupported, "UNION is not supported", "send the SELECTs as separate queries"},
	"intersect": {pgerr.FeatureNotSupported, "INTERSECT is not supported", "send the SELECTs as separate queries"},
	"except":    {pgerr.FeatureNotSupported, "EXCEPT is not supported", "send the SELECTs as separate queries"},
	"lateral":   {pgerr.FeatureNotSupported, "LATERAL is not supported", joinHint},
	"exists":    {pgerr.FeatureNotSupported, "subqueries are not supported", "filter with WHERE comparisons against literals"},
	"filter":    {pgerr.FeatureNotSupported, "aggregate FILTER is not supported yet", "move the condition to WHERE"},
	"within":    {pgerr.FeatureNotSupported, "WITHIN GROUP is supported for percentile_cont and percentile_disc only", "write percentile_cont(0.5) WITHIN GROUP (ORDER BY col) or percentile_disc(q) WITHIN GROUP (ORDER BY col)"},
	"fetch":     {pgerr.FeatureNotSupported, "FETCH FIRST is not supported", "write LIMIT n"},
	"nulls":     {pgerr.FeatureNotSupported, "NULLS FIRST/LAST is not supported", "order by the output column with ASC or DESC only"},
	"escape":    {pgerr.SyntaxError, "ESCAPE must follow a LIKE or ILIKE pattern", "write col LIKE 'pattern' ESCAPE '!'"},
	"symmetric": {pgerr.FeatureNotSupported, "BETWEEN SYMMETRIC is not supported", "write BETWEEN low AND high with low ≤ high"},
	"similar":   {pgerr.FeatureNotSupported, "SIMILAR TO is not supported", "use LIKE"},
	"any":       {pgerr.FeatureNotSupported, "ANY/SOME/ALL comparisons are not supported", inListHint},
	"some":      {pgerr.FeatureNotSupported, "ANY/SOME/ALL comparisons are not supported", inListHint},
	"array":     {pgerr.FeatureNotSupported, "arrays are not supported", inListHint},
	"values":    {pgerr.FeatureNotSupported, "VALUES lists are not supported", "query protected tables (joined as the join hint says) with FROM"},
	"interval":  {pgerr.FeatureNotSupported, "intervals are supported only added to or subtracted from a date or timestamp constant", "write the column on one side and the relative date on the other, e.g. visit_date >= current_date - interval '30 days' (folded at the statement's start)"},
	"collate":   {pgerr.FeatureNotSupported, "COLLATE is not supported", "remove the COLLATE clause"},
	"into":      {pgerr.InsufficientPrivilege, "SELECT … INTO is not allowed", "remove INTO; dpproxy answers only aggregate SELECT queries"},
	"for":       {pgerr.FeatureNotSupported, "locking clauses are not supported", "remove FOR UPDATE/SHARE; dpproxy is read-only"},
	"natural":   {pgerr.FeatureNotSupported, "NATURAL joins are not supported", joinHint},
	"cross":     {pgerr.FeatureNotSupported, "CROSS JOIN is not supported", joinHint},
	"table":     {pgerr.InsufficientPrivilege, "only aggregate queries are answered", "use COUNT(*), SUM(col), AVG(col) … GROUP BY a column with public values"},
	"explain":   {pgerr.FeatureNotSupported, "EXPLAIN is supported only once, at the start of a statement", "write EXPLAIN followed by one SELECT, e.g. EXPLAIN SELECT department, COUNT(*) FROM visits GROUP BY department"},
}

func refusal(src string, pos int, r [3]string) *pgerr.Error {
	return pgerr.New(r[0], "%s", r[1]).WithHint("%s", r[2]).WithPosition(pgsql.CharPos(src, pos))
}

var numberRE = regexp.MustCompile(`^-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// normalize runs the normalizer over a statement without a clock
// (relative dates are refused).
func normalize(src string) (*normalized, error) { return normalizeAt(src, clockEnv{}) }

// normalizeAt runs the normalizer over a statement, with relative dates
// folded in env (reldate.go).
func normalizeAt(src string, env clockEnv) (*normalized, error) {
	toks, err := pgsql.Lex(src)
	if err != nil {
		return nil, err
	}
	if toks, err = foldClock(src, toks, env); err != nil {
		return nil, err
	}
	n := &normalized{src: src, litAt: map[int]int{}, pieces: make([]piece, 0, len(toks)+4)}
	add := func(text string, pos int, word bool) {
		n.pieces = append(n.pieces, piece{text: text, pos: pos, lit: -1, word: word})
	}
	addLit := func(l literal) {
		n.lits = append(n.lits, l)
		n.pieces = append(n.pieces, piece{text: "?", pos: l.pos, lit: len(n.lits) - 1, word: true})
	}
	if len(toks) > 0 {
		first := toks[0]
		if first.Kind == pgsql.TokIdent && !first.Quoted && pgsql.RefusedKeyword(first.Val) {
			return nil, pgsql.RefuseWrite(src, first)
		}
		if first.Is("table") {
			return nil, pgerr.New(pgerr.InsufficientPrivilege, "only aggregate queries are answered; TABLE returns private rows").
				WithPosition(pgsql.CharPos(src, first.Pos)).WithHint("%s", aggregateHint)
		}
		if first.Kind == pgsql.TokIdent && !first.Quoted && !pgsql.StatementKeyword(strings.ToLower(first.Val)) {
			// No statement starts so (SELEC …): PostgreSQL's error.
			word := first.Val
			if end := first.Pos + len(word); end <= len(src) && strings.EqualFold(src[first.Pos:end], word) {
				word = src[first.Pos:end] // as written
			}
			return nil, pgerr.New(pgerr.SyntaxError, "syntax error at or near %q", word).
				WithPosition(pgsql.CharPos(src, first.Pos))
		}
		if !first.Is("select") && !first.IsPunct("(") && !first.Is("with") && !first.Is("explain") {
			return nil, pgerr.New(pgerr.FeatureNotSupported, "only SELECT queries are answered on protected tables").
				WithPosition(pgsql.CharPos(src, first.Pos)).WithHint("%s", shapeHint)
		}
	}
	depth := 0
	var atCast policy.Type // the cast before AT TIME ZONE (attz.go)
	prevIs := func(i int, kw string) bool { return i > 0 && toks[i-1].Is(kw) }
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if n.skipTok[i] {
			continue
		}
		next := func(k int) pgsql.Token {
			if i+k < len(toks) {
				return toks[i+k]
			}
			return pgsql.Token{Kind: pgsql.TokPunct, Val: "", Pos: len(src), End: len(src)}
		}
		switch t.Kind {
		case pgsql.TokParam:
			// The extended protocol binds values before planning
			// (proxy boundText): a $n here has none, as PostgreSQL says.
			return nil, pgerr.New(pgerr.UndefinedParameter, "there is no parameter $%s", t.Val).
				WithPosition(pgsql.CharPos(src, t.Pos)).
				WithHint("$n takes a value only through the extended protocol (a driver's prepared statement with its values); in a simple query write the value itself")
		case pgsql.TokBitString:
			return nil, pgerr.New(pgerr.FeatureNotSupported, "bit-string constants are not supported").
				WithPosition(pgsql.CharPos(src, t.Pos)).WithHint("compare columns with numbers, strings, dates or booleans")
		case pgsql.TokNumber, pgsql.TokString:
			l := literal{kind: litNumber, val: t.Val, pos: t.Pos}
			if t.Kind == pgsql.TokString {
				l.kind = litString
			}
			if next(1).IsPunct("::") {
				typ, k, err := castType(src, toks, i+2)
				if err != nil {
					return nil, err
				}
				l.typ = typ
				i = k - 1
			}
			addLit(l)
		case pgsql.TokPunct:
			switch t.Val {
			case "(":
				depth++
				if i == 0 && next(1).Is("select") {
					return nil, pgerr.New(pgerr.FeatureNotSupported, "a query in parentheses is not supported").
						WithPosition(pgsql.CharPos(src, t.Pos)).
						WithHint("remove the parentheses around the query; write LIMIT and OFFSET at its end")
				}
				if next(1).Is("select") || next(1).Is("with") || next(1).Is("values") || next(1).Is("table") {
					return nil, pgerr.New(pgerr.FeatureNotSupported, "subqueries are not supported").
						WithPosition(pgsql.CharPos(src, next(1).Pos)).
						WithHint("write one SELECT (over one protected table, or a join); filter with WHERE comparisons against literals")
				}
				add("(", t.Pos, false)
			case ")", ",", ".":
				if t.Val == ")" {
					depth--
				}
				add(t.Val, t.Pos, false)
			case "::":
				if typ, k, ok := relType(toks, i+1); ok && i > 0 && toks[i-1].Kind == pgsql.TokIdent && k+1 < len(toks) && toks[k].Is("at") && toks[k+1].Is("time") {
					// col::timestamptz AT TIME ZONE 'zone' (attz.go)
					atCast = typ
					i = k - 1
					continue
				}
				if k := i + 1; i > 0 && toks[i-1].Kind == pgsql.TokIdent && k < len(toks) && toks[k].Kind == pgsql.TokIdent && !toks[k].Quoted && intTypeNames[toks[k].Val] != "" &&
					!(k+1 < len(toks) && (toks[k+1].IsPunct("::") || toks[k+1].IsPunct("("))) {
					// col::int compared in WHERE (castcmp.go)
					if err := n.intCast(src, t.Pos, intTypeNames[toks[k].Val]); err != nil {
						return nil, err
					}
					i = k
					continue
				}
				return nil, pgerr.New(pgerr.FeatureNotSupported, "casts of columns and expressions are not supported").
					WithPosition(pgsql.CharPos(src, t.Pos)).
					WithHint("compare the column with a literal of its own type, e.g. visit_date >= '2021-01-01'::date")
			case ";":
				return nil, pgsql.SyntaxErr(src, t.Pos, "several statements in one DP statement").
					WithHint("send one statement at a time")
			case "[", "]":
				return nil, pgerr.New(pgerr.FeatureNotSupported, "arrays are not supported").
					WithPosition(pgsql.CharPos(src, t.Pos)).WithHint("use IN (list of literals)")
			default:
				return nil, pgsql.SyntaxErr(src, t.Pos, "syntax error at or near %q", t.Val)
			}
		case pgsql.TokOp:
			switch t.Val {
			case "=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%":
				add(t.Val, t.Pos, false)
			case "!=":
				add("<>", t.Pos, false)
			case "||":
				// '%' || $1 || '%': one text constant (concat.go).
				k, err := n.concat(src, toks, i)
				if err != nil {
					return nil, err
				}
				i = k
			case "~", "~*", "!~", "!~*":
				return nil, pgerr.New(pgerr.FeatureNotSupported, "regular expression operator %s is not supported", t.Val).
					WithPosition(pgsql.CharPos(src, t.Pos)).WithHint("use LIKE or ILIKE with a string pattern")
			default:
				return nil, pgerr.New(pgerr.FeatureNotSupported, "operator %s is not supported", t.Val).
					WithPosition(pgsql.CharPos(src, t.Pos)).
					WithHint("supported operators: = <> != < <= > >= AND OR NOT IN BETWEEN LIKE ILIKE IS [NOT] NULL")
			}
		case pgsql.TokIdent:
			if t.Val == filterMarker || t.Val == atZoneMarker || t.Val == intCastMarker {
				return nil, pgerr.New("42883", "function %s does not exist", t.Val).
					WithPosition(pgsql.CharPos(src, t.Pos)).WithHint("write agg(…) FILTER (WHERE condition)")
			}
			if t.Quoted {
				add(pgemit.QuoteIdent(t.Val), t.Pos, true)
				continue
			}
			w := t.Val
			if prevIs(i, "as") && depth == 0 {
				// A label after AS may be any keyword in PostgreSQL
				// (ColLabel: SELECT AVG(x) AS by, COUNT(*) AS order): it
				// is always a name, quoted for the TiDB parser.
				add(pgemit.QuoteIdent(w), t.Pos, true)
				continue
			}
			if isOrderedSetName(w) && next(1).IsPunct("(") {
				k, open, err := n.orderedSetAgg(toks, i)
				if err != nil {
					return nil, err
				}
				i = k
				if open {
					depth++ // an expression follows; its ")" closes the call
				}
				continue
			}
			if w == "at" && next(1).Is("time") {
				k, err := n.atTimeZone(src, toks, i, atCast) // attz.go
				if err != nil {
					return nil, err
				}
				i, atCast = k, ""
				continue
			}
			if r, ok := refusedWords[w]; ok {
				// Non-reserved words are refused only where they start the
				// clause they name, so columns may still be called so.
				refuse := true
				switch w {
				case "filter":
					refuse = false
					if next(1).IsPunct("(") {
						// agg(…) FILTER (WHERE …): filter.go.
						k, err := n.normalizeFilter(toks, i)
						if err != nil {
							return nil, err
						}
						i = k
						depth++ // the FILTER's ")" closes the marker call
						continue
					}
				case "within":
					refuse = next(1).Is("group")
				case "nulls":
					refuse = next(1).Is("first") || next(1).Is("last")
				case "fetch":
					// FETCH FIRST n ROWS ONLY ends the query: read as
					// LIMIT by limitTail; anywhere else refused.
					refuse = depth > 0 && (next(1).Is("first") || next(1).Is("next"))
				case "over":
					refuse = i > 0 && toks[i-1].IsPunct(")")
				case "window":
					refuse = next(2).Is("as")
				case "interval":
					refuse = next(1).Kind == pgsql.TokString
				case "escape":
					if next(1).Kind == pgsql.TokString {
						// LIKE 'pattern' ESCAPE 'c': the pattern is rewritten
						// for the default escape (likepattern.go).
						if err := n.likeEscape(src, t, next(1)); err != nil {
							return nil, err
						}
						i++
						continue
					}
					refuse = false
				}
				if refuse {
					return nil, refusal(src, t.Pos, r)
				}
			}
			switch {
			case w == "true" || w == "false":
				if prevIs(i, "is") || prevIs(i, "not") && i > 1 && toks[i-2].Is("is") {
					return nil, pgerr.New(pgerr.FeatureNotSupported, "IS [NOT] %s is not supported", strings.ToUpper(w)).
						WithPosition(pgsql.CharPos(src, t.Pos)).
						WithHint("write the condition itself, e.g. WHERE age > 3 or WHERE NOT (age > 3); for a boolean column, bool_col = %s", w)
				}
				addLit(literal{kind: litBool, val: w, pos: t.Pos})
			case w == "null" && !(prevIs(i, "is") || prevIs(i, "not") && i > 1 && toks[i-2].Is("is")):
				addLit(literal{kind: litNull, val: "null", pos: t.Pos})
			case w == "unknown" && prevIs(i, "is") || w == "unknown" && prevIs(i, "not"):
				return nil, pgerr.New(pgerr.FeatureNotSupported, "IS [NOT] UNKNOWN is not supported").
					WithPosition(pgsql.CharPos(src, t.Pos)).WithHint("write IS [NOT] NULL")
			case w == "extract" && next(1).IsPunct("(") && (next(2).Is("year") || next(2).Is("quarter") || next(2).Is("month")) && next(3).Is("from"):
				// EXTRACT(YEAR|QUARTER|MONTH FROM col): the fields
				// supported (as GROUP BY keys, keyexpr.go); the TiDB
				// parser reads the same syntax.
				add("EXTRACT", t.Pos, true)
				add("(", next(1).Pos, false)
				depth++ // the ")" is read by the case above
				add(strings.ToUpper(next(2).Val), next(2).Pos, true)
				add("FROM", next(3).Pos, true)
				i += 3
			case w == "extract" && next(1).IsPunct("(") && extractMarkerFields[strings.ToLower(next(2).Val)] && (next(2).Kind == pgsql.TokIdent || next(2).Kind == pgsql.TokString) && next(3).Is("from"):
				// EXTRACT(EPOCH|DOW|ISODOW|DOY|WEEK|DAY FROM col): units
				// the TiDB parser lacks, written as PostgreSQL 14+'s own
				// function "extract"('field', col) (datekey.go).
				add(pgemit.QuoteIdent("extract"), t.Pos, true)
				add("(", next(1).Pos, false)
				depth++ // the ")" is read by the case above
				addLit(literal{kind: litString, val: strings.ToLower(next(2).Val), pos: next(2).Pos})
				add(",", next(3).Pos, false)
				i += 3
			case w == "extract" && next(1).IsPunct("("):
				return nil, pgerr.New(pgerr.FeatureNotSupported, "EXTRACT is supported as EXTRACT(YEAR|QUARTER|MONTH|DAY|DOW|ISODOW|DOY|WEEK|EPOCH FROM date_col) only").
					WithPosition(pgsql.CharPos(src, t.Pos)).
					WithHint("%s", keyExprHint)
			case w == "isnull" || w == "notnull":
				add("IS", t.Pos, true)
				if w == "notnull" {
					add("NOT", t.Pos, true)
				}
				add("NULL", t.Pos, true)
			case w == "cast" && next(1).IsPunct("(") && next(2).Kind == pgsql.TokIdent:
				// CAST ( col AS integer ) compared in WHERE (castcmp.go)
				cols, typ, end, ok := castColumnEnd(toks, i)
				if !ok {
					return nil, pgerr.New(pgerr.FeatureNotSupported, "CAST of columns and expressions is not supported").
						WithPosition(pgsql.CharPos(src, t.Pos)).
						WithHint("compare the column with a literal of its own type, e.g. visit_date >= '2021-01-01'::date, or compare CAST(col AS integer) with an integer")
				}
				for _, c := range cols {
					if c.IsPunct(".") {
						add(".", c.Pos, false)
					} else {
						add(pgemit.QuoteIdent(c.Val), c.Pos, true)
					}
				}
				if err := n.intCast(src, t.Pos, typ); err != nil {
					return nil, err
				}
				i = end
			case w == "cast" && next(1).IsPunct("("):
				// CAST ( literal AS type )
				lt := next(2)
				if (lt.Kind != pgsql.TokString && lt.Kind != pgsql.TokNumber) || !next(3).Is("as") {
					return nil, pgerr.New(pgerr.FeatureNotSupported, "CAST of columns and expressions is not supported").
						WithPosition(pgsql.CharPos(src, t.Pos)).
						WithHint("compare the column with a literal of its own type, e.g. visit_date >= '2021-01-01'::date")
				}
				typ, k, err := castType(src, toks, i+4)
				if err != nil {
					return nil, err
				}
				if k >= len(toks) || !toks[k].IsPunct(")") {
					return nil, pgsql.SyntaxErr(src, posAt(src, toks, k), "syntax error in CAST: expected )")
				}
				kind := litNumber
				if lt.Kind == pgsql.TokString {
					kind = litString
				}
				addLit(literal{kind: kind, val: lt.Val, typ: typ, pos: lt.Pos})
				i = k
			case (w == "timestamp" || w == "timestamptz") && !prevIs(i, "as"):
				// TIMESTAMP [WITH[OUT] TIME ZONE] '…', TIMESTAMPTZ '…'
				typ, k := timestampZone(toks, i+1, typeNames[w])
				if k >= len(toks) || toks[k].Kind != pgsql.TokString {
					return nil, pgerr.New(pgerr.FeatureNotSupported, "%s values are supported only as literals compared with date columns", strings.ToUpper(w)).
						WithPosition(pgsql.CharPos(src, t.Pos)).
						WithHint("compare date columns with TIMESTAMP '2024-01-01 12:00:00' or 'YYYY-MM-DD'::date literals")
				}
				addLit(literal{kind: litString, val: toks[k].Val, typ: typ, pos: t.Pos})
				i = k
			case typeNames[w] != "" && next(1).Kind == pgsql.TokString && !prevIs(i, "as"):
				// Typed literal: DATE '2021-01-01', integer '5'.
				addLit(literal{kind: litString, val: next(1).Val, typ: typeNames[w], pos: t.Pos})
				i++
			case w == "timestamp" || w == "time" || w == "timestamptz":
				return nil, pgerr.New(pgerr.FeatureNotSupported, "%s values are not supported", strings.ToUpper(w)).
					WithPosition(pgsql.CharPos(src, t.Pos)).
					WithHint("compare date columns with 'YYYY-MM-DD'::date literals")
			case w == "is" && (next(1).Is("distinct") || next(1).Is("not") && next(2).Is("distinct")):
				neg := 2
				k := i + 2
				if next(1).Is("not") {
					neg, k = 1, i+3
				}
				if k >= len(toks) || !toks[k].Is("from") {
					return nil, pgsql.SyntaxErr(src, posAt(src, toks, k), "syntax error: expected FROM after IS DISTINCT")
				}
				n.pieces = append(n.pieces, piece{text: "<=>", pos: t.Pos, lit: -1, nsEq: neg})
				i = k
			case w == "distinct" && prevIs(i, "select"):
				return nil, pgerr.New(pgerr.FeatureNotSupported, "SELECT DISTINCT is not supported").
					WithPosition(pgsql.CharPos(src, t.Pos)).
					WithHint("%s", distinctHint)
			case (w == "limit" || w == "offset" || w == "fetch" && (next(1).Is("first") || next(1).Is("next"))) && depth == 0:
				if err := n.limitTail(toks[i:]); err != nil {
					return nil, err
				}
				i = len(toks)
			case passKeywords[w]:
				add(strings.ToUpper(w), t.Pos, true)
			case w == "full" && (next(1).Is("join") || next(1).Is("outer")):
				return nil, pgerr.New(pgerr.FeatureNotSupported, "FULL JOIN is not supported").
					WithPosition(pgsql.CharPos(src, t.Pos)).WithHint("%s", joinHint)
			case (w == "left" || w == "right") && (next(1).Is("join") || next(1).Is("outer")):
				add(strings.ToUpper(w), t.Pos, true)
			case aggregateNames[w] != "" && next(1).IsPunct("("):
				add(aggregateNames[w], t.Pos, true)
			default:
				add(pgemit.QuoteIdent(w), t.Pos, true)
			}
		}
	}
	if err := n.distinctFrom(); err != nil {
		return nil, err
	}
	n.render()
	return n, nil
}

func posAt(src string, toks []pgsql.Token, k int) int {
	if k < len(toks) {
		return toks[k].Pos
	}
	return len(src)
}

// castType reads a type name at toks[k] (after :: or CAST(… AS) and returns
// its policy type and the index after it. Type modifiers such as
// numeric(10,2) and varchar(20) are accepted and ignored for comparison
// purposes (they do not change how a literal compares).
func castType(src string, toks []pgsql.Token, k int) (policy.Type, int, error) {
	if k >= len(toks) || toks[k].Kind != pgsql.TokIdent || toks[k].Quoted {
		return "", k, pgsql.SyntaxErr(src, posAt(src, toks, k), "syntax error: expected a type name")
	}
	name := toks[k].Val
	typ, ok := typeNames[name]
	if !ok {
		return "", k, pgerr.New(pgerr.FeatureNotSupported, "casts to %s are not supported", name).
			WithPosition(pgsql.CharPos(src, toks[k].Pos)).
			WithHint("cast literals to int, numeric, float8, text, date, timestamp, timestamptz or boolean")
	}
	k++
	switch {
	case name == "double":
		if k >= len(toks) || !toks[k].Is("precision") {
			return "", k, pgsql.SyntaxErr(src, posAt(src, toks, k), "syntax error: expected PRECISION after DOUBLE")
		}
		k++
	case name == "character" && k < len(toks) && toks[k].Is("varying"):
		k++
	case name == "timestamp":
		typ, k = timestampZone(toks, k, typ)
	}
	if k < len(toks) && toks[k].IsPunct("(") {
		for k < len(toks) && !toks[k].IsPunct(")") {
			if !toks[k].IsPunct("(") && !toks[k].IsPunct(",") && toks[k].Kind != pgsql.TokNumber {
				return "", k, pgsql.SyntaxErr(src, toks[k].Pos, "syntax error in type modifier")
			}
			k++
		}
		if k >= len(toks) {
			return "", k, pgsql.SyntaxErr(src, len(src), "syntax error: unterminated type modifier")
		}
		k++
	}
	if k < len(toks) && toks[k].IsPunct("::") {
		return "", k, pgerr.New(pgerr.FeatureNotSupported, "chained casts are not supported").
			WithPosition(pgsql.CharPos(src, toks[k].Pos)).WithHint("cast a literal once, to the column's type")
	}
	return typ, k, nil
}
