package rewrite

import "github.com/dpproxy/dpproxy/pgsql"

// Casts of columns as BI tools write them (issue 17, item 3):
// `CAST(visit_date AS TIMESTAMP)`, `visit_date::timestamp`,
// `SUM(CAST(age AS DOUBLE PRECISION))`, `CAST(department AS TEXT)`,
// `CAST(EXTRACT(YEAR FROM visit_date) AS INTEGER)`,
// `date_trunc('month', visit_date)::date` (timestamp literals compared with
// date columns are folded by datefold.go).
//
// A cast is dropped when it preserves the value and its order for every
// policy type it can apply to, so that the query without it is the same
// aggregate: to text (keys keep their values; they are released as their
// text), to float8/real/numeric (int and numeric values are kept; sums are
// computed exactly anyway), to date/timestamp/timestamptz (a date column,
// or date_trunc of one, is midnight of the same day), and to an integer
// type only around EXTRACT (whose fields are integral). Casts to other
// types, and casts of other expressions, stay and are refused by the
// normalizer as before. Dropping a cast of a column to timestamp[tz] is
// reported, so that an untyped literal compared with it, which PostgreSQL
// would read as a timestamp, is refused when it has a time of day.
//
// The rewrite keeps every byte offset: removed text becomes spaces and
// replacements are padded, so error positions still point into the
// analyst's statement. It only changes what the planner reads; privacy is
// decided by the planner on the result, as for any query.

// castTargets are the target types whose casts are dropped.
var castTargets = map[string]bool{
	"text": true, "varchar": true, "char": true, "character": true,
	"float8": true, "double": true, "real": true, "float4": true, "float": true, "numeric": true, "decimal": true,
	"date": true, "timestamp": true, "timestamptz": true,
}

// intTargets are integer types, dropped only around EXTRACT.
var intTargets = map[string]bool{"int": true, "integer": true, "int4": true, "int8": true, "bigint": true, "smallint": true, "int2": true}

// intTypeNames are PostgreSQL's names of the integer types.
var intTypeNames = map[string]string{"int": "int4", "integer": "int4", "int4": "int4", "int8": "int8", "bigint": "int8", "smallint": "int2", "int2": "int2"}

// blankCastsTyped returns stmt with value-preserving casts of columns
// removed (byte offsets kept), whether a cast to timestamp[tz] was
// dropped, and the casts it dropped to integer types (around EXTRACT and
// date_part), text, date, timestamp, timestamptz, numeric and the float
// types: the byte offset of
// the operand (the call's name, the column's first word) → the type. The
// integer type is the type PostgreSQL gives an expression over the field
// (arithkey.go); a text cast makes a comparison textual (castcmp.go); the
// date and time types type date_trunc keys (keyexpr.go), the numeric and
// float types the aggregates (build_select.go, aggPGType).
func blankCastsTyped(stmt string) (string, bool, map[int]string) {
	toks, err := pgsql.Lex(stmt)
	if err != nil {
		return stmt, false, nil
	}
	match := matchParens(toks)
	if match == nil {
		return stmt, false, nil
	}
	tsCast := false
	var intCasts map[int]string
	record := func(name string, start int) {
		typ := intTypeNames[name]
		switch name {
		case "text", "varchar", "char", "character":
			typ = "text"
		case "date", "timestamp", "timestamptz", "numeric":
			typ = name
		case "decimal":
			typ = "numeric"
		case "float8", "double", "float":
			typ = "float8"
		case "real", "float4":
			typ = "float4"
		}
		if typ == "" || start < 0 {
			return
		}
		if intCasts == nil {
			intCasts = map[int]string{}
		}
		intCasts[toks[start].Pos] = typ
	}
	// operand is the index of the first token of the operand ending at
	// toks[k]: a possibly qualified name, or a call or parentheses.
	operand := func(k int) int {
		if toks[k].IsPunct(")") {
			o := match[k]
			if o > 0 && toks[o-1].Kind == pgsql.TokIdent {
				return o - 1
			}
			return o
		}
		for k >= 2 && toks[k-1].IsPunct(".") && toks[k-2].Kind == pgsql.TokIdent {
			k -= 2
		}
		return k
	}
	b := []byte(stmt)
	blank := func(from, to int) { // token range [from, to)
		if from >= to {
			return
		}
		for i := toks[from].Pos; i < toks[to-1].End; i++ {
			b[i] = ' '
		}
	}
	// typeEnd returns the index after a type name at k, and its name
	// ("" when not a droppable type).
	typeEnd := func(k int) (int, string) {
		if k >= len(toks) || toks[k].Kind != pgsql.TokIdent || toks[k].Quoted {
			return k, ""
		}
		name := toks[k].Val
		k++
		switch {
		case name == "double" && k < len(toks) && toks[k].Is("precision"):
			k++
		case name == "character" && k < len(toks) && toks[k].Is("varying"):
			name = "varchar"
			k++
		case (name == "timestamp" || name == "time") && k+2 < len(toks) && (toks[k].Is("with") || toks[k].Is("without")) && toks[k+1].Is("time") && toks[k+2].Is("zone"):
			if name == "timestamp" && toks[k].Is("with") {
				name = "timestamptz"
			}
			k += 3
		}
		if k < len(toks) && toks[k].IsPunct("(") && match[k] > 0 {
			k = match[k] + 1
		}
		return k, name
	}
	isExtract := func(open int) bool { return open > 0 && (toks[open-1].Is("extract") || toks[open-1].Is("date_part")) }
	droppable := func(name string, extract bool) bool {
		return castTargets[name] || extract && intTargets[name]
	}
	// relative reports whether toks[from:to] holds a relative date
	// (reldate.go folds its casts: now()::date is not now()).
	relative := func(from, to int) bool {
		for i := max(from, 0); i < to; i++ {
			if t := toks[i]; t.Kind == pgsql.TokIdent && !t.Quoted && (clockWords[t.Val].typ != "" || t.Val == "interval") {
				return true
			}
		}
		return false
	}
	// atZone reports whether AT TIME ZONE follows toks[k-1]: that cast
	// stays, for the normalizer (attz.go).
	atZone := func(k int) bool {
		return k+1 < len(toks) && toks[k].Is("at") && toks[k+1].Is("time")
	}
	for k := 0; k < len(toks); k++ {
		t := toks[k]
		switch {
		// column::type, (expr)::type
		case t.IsPunct("::") && k > 0 && (toks[k-1].Kind == pgsql.TokIdent || toks[k-1].IsPunct(")")):
			j, name := typeEnd(k + 1)
			extract := toks[k-1].IsPunct(")") && isExtract(match[k-1])
			from := k - 1
			if toks[k-1].IsPunct(")") {
				from = match[k-1] - 1
			}
			if droppable(name, extract) && !(j < len(toks) && toks[j].IsPunct("::")) && !relative(from, k) && !atZone(j) {
				tsCast = tsCast || name == "timestamp" || name == "timestamptz"
				record(name, operand(k-1))
				blank(k, j)
				k = j - 1
			}
		// CAST ( column AS type ) and CAST ( extract/date_trunc(…) AS type )
		case t.Is("cast") && k+1 < len(toks) && toks[k+1].IsPunct("(") && match[k+1] > 0:
			close := match[k+1]
			j := k + 2
			switch {
			case j < close && toks[j].Kind == pgsql.TokIdent && j+1 < close && toks[j+1].IsPunct("("):
				j = match[j+1] + 1
			default:
				for j < close && toks[j].Kind == pgsql.TokIdent && !toks[j].Is("as") {
					j++
					if j < close && toks[j].IsPunct(".") {
						j++
						continue
					}
					break
				}
			}
			if j == k+2 || j >= close || !toks[j].Is("as") {
				continue
			}
			end, name := typeEnd(j + 1)
			extract := toks[j-1].IsPunct(")") && isExtract(match[j-1])
			if end != close || !droppable(name, extract) || relative(k+2, j) || atZone(close+1) {
				continue
			}
			// The operand is a primary (a column or a call): the
			// parentheses go with the cast.
			tsCast = tsCast || name == "timestamp" || name == "timestamptz"
			record(name, k+2)
			blank(k, k+2)
			blank(j, close+1)
		}
	}
	return string(b), tsCast, intCasts
}
