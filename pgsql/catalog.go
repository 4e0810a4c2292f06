package pgsql

import (
	"sort"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// What a catalog statement may do.
//
// Catalog statements run on shadow catalog connections that every analyst
// of a dataset shares (a bounded pool, internal/shadow), as one shadow
// role. Anything such a statement does to its connection or to the shadow
// server, the next analyst's statement meets: a SET through set_config, an
// advisory lock, a large object, a signal to another backend, a view of
// other sessions' queries. A deny-list of such functions misses whatever it
// does not name: query_to_xml and its relatives run any SQL text given to
// them (and so every function the list names), and PostgreSQL has
// thousands of functions, more in each release and in every extension. So
// a catalog statement is checked against allow-lists instead, and anything
// not on them is refused with 42501 before it reaches the shadow:
//
//   - statement forms: SELECT, WITH, VALUES, TABLE (optionally in
//     parentheses) and EXPLAIN without ANALYZE. Every other statement
//     keyword is answered by the proxy or refused earlier (Classify), so
//     anything else here is not a statement, and fails as PostgreSQL would,
//     with a syntax error;
//   - functions: every function the statement calls must be one of
//     catalogFunctions (catalog_funcs.go): read-only catalog look-ups,
//     privilege checks, sizes (the shadow's tables hold no protected rows)
//     and scalar, aggregate and window functions of the standard library.
//     A call is found lexically, and conservatively: an identifier
//     (quoted or not, optionally schema-qualified) followed by "(" is a
//     call unless it is a keyword of SQL's own syntax (IN (, EXISTS (,
//     CAST (, OVER (…: syntaxBeforeParen), a type modifier (::numeric(10,2),
//     CAST(x AS varchar(20))), a column list of an alias after AS
//     (AS t(a, b)) or of a WITH query (WITH r(n) AS (…)). Attribute notation
//     is a call too: PostgreSQL reads (expr).f, arr[1].f and $1.f as f(expr)
//     when expr has no field f, for any one-argument function
//     (SELECT (1).pg_cancel_backend signals backend 1), so the name after
//     ")." , "]." or "$n." must be an allowed function or one of the field
//     names of selectableFields. alias.f, when alias has no column f, is
//     f(alias) too, for any function that takes alias's value: a row for a
//     table, a view, a subquery or a WITH query, but the scalar itself for
//     a function in FROM (unnest(…) t is t's text), so any one-argument
//     function (attack rounds 78 and 79: t.ts_stat FROM unnest(ARRAY['SQL'])
//     t ran SQL text on the shared connection, also with t named ts_stat,
//     as a keyword, or past 63 bytes). Which alias names what cannot be
//     told from the tokens, so the name after "alias." must not be one of
//     attributeFunctions, whatever the alias: the functions PostgreSQL 15
//     could call with one argument that are not immutable (whose results
//     can depend on or change the session or the server: ts_stat,
//     setseed, nextval, lo_*, txid_status…) and not allowed; every other
//     name is a column, an immutable function of its argument (width,
//     area, host…) or an allowed one. Names starting with pg_ are refused
//     there as relations (below);
//   - relations: the system views that show other sessions and the
//     server's activity all have names starting with pg_ (pg_stat_activity,
//     pg_locks, every pg_stat_* and pg_statio_* view, pg_prepared_xacts,
//     pg_backend_memory_contexts, extensions' pg_stat_statements…), as do
//     all system catalogs. A name starting with pg_ that is not a call, a
//     qualifier (followed by "."), a type (after ::) or an alias (after AS)
//     must be one of catalogRelations.
//
// A name can be refused that PostgreSQL would not read as a call or a
// system relation (a subquery's alias with a column list but without AS,
// FROM (SELECT …) x(a); an alias named pg_… without AS; a table named
// like a keyword): such statements fail with 42501 rather than ever
// reaching the shadow with something unchecked. What real
// clients send (psql's backslash commands, pgjdbc's DatabaseMetaData,
// SQLAlchemy's inspector, node-postgres, pgx, asyncpg, psycopg, BI tools'
// probes and the proxy's own outer SQL of post-processed DP answers) is
// checked by TestCheckCatalog_Clients against statements recorded from
// them.
//
// What the allow-lists leave out cannot happen on a shadow connection:
// settings (set_config; SET is the proxy's), advisory locks, large
// objects, LISTEN/NOTIFY, prepared statements and cursors (PREPARE and
// DECLARE never reach the shadow), temporary objects (no DDL), sequences
// (nextval, setval), signals to other backends, sleeping, files, other
// connections (dblink), SQL text run by a function (query_to_xml,
// cursor_to_xml, table_to_xml, schema_to_xml, database_to_xml, ts_stat,
// ts_rewrite), XPath, and reads of other sessions' activity. What the
// allowed functions can still do is spend time and memory, which the
// catalog route's statement_timeout and per-analyst share of the pool
// bound (internal/shadow, "Connection pooling").

// CheckCatalog refuses, with 42501 (or 42601 for what is not a statement),
// a statement bound for the shadow catalog that has a form, calls a
// function or reads a system relation the allow-lists above do not name.
// toks are src's tokens. Classify applies it to every statement it routes
// to the shadow catalog; the proxy applies it again to other SQL it runs
// there (the outer SQL of a post-processed DP answer).
func CheckCatalog(src string, toks []Token) error {
	if err := catalogForm(src, toks); err != nil {
		return err
	}
	match := parenMatches(toks)
	cte := cteColumnLists(toks, match)
	opens := openMatches(match)
	// attr[k]: toks[k] is a name in an indirection chain on a value
	// ((expr).a.b, arr[1].a, $1.a), where PostgreSQL may read it as a call.
	attr := make([]bool, len(toks))
	// start: where the dotted name that toks[k] ends begins (a.b.c: a's
	// index), carried from the name before it (lastK), so a long chain
	// costs linear time.
	start, lastK := 0, -1
	for k, t := range toks {
		if t.Kind != TokIdent {
			continue
		}
		if k < 2 || lastK != k-2 || !toks[k-1].IsPunct(".") {
			start = k
		}
		lastK = k
		if k >= 2 && toks[k-1].IsPunct(".") {
			b := toks[k-2]
			if b.IsPunct(")") || b.IsPunct("]") || b.Kind == TokParam || b.Kind == TokIdent && attr[k-2] {
				attr[k] = true
				if !selectableFields[t.Val] && !catalogFunctions[t.Val] {
					return pgerr.New(pgerr.InsufficientPrivilege, "column notation .%s is not allowed in catalog statements", t.Val).
						WithPosition(CharPos(src, t.Pos)).
						WithHint("PostgreSQL reads (expression).%s as a call of the function %s; catalog statements may select only the fields %s this way, and may call only read-only catalog and scalar functions",
							t.Val, t.Val, selectableFieldList)
				}
				continue
			}
		}
		if k+1 < len(toks) && toks[k+1].IsPunct("(") {
			if err := checkCall(src, toks, k, cte, opens); err != nil {
				return err
			}
			continue
		}
		if err := checkAttribute(src, toks, k, start); err != nil {
			return err
		}
		if err := checkRelation(src, toks, k); err != nil {
			return err
		}
	}
	return nil
}

// catalogForm refuses what is not a SELECT, WITH, VALUES, TABLE or EXPLAIN
// without ANALYZE.
func catalogForm(src string, toks []Token) error {
	i := 0
	for i < len(toks) && toks[i].IsPunct("(") {
		i++
	}
	if i == len(toks) {
		if len(toks) == 0 {
			return nil
		}
		return SyntaxErr(src, len(src), "syntax error at end of input")
	}
	t := toks[i]
	switch {
	case t.Is("select"), t.Is("with"), t.Is("values"), t.Is("table"):
		return nil
	case t.Is("explain") && i == 0:
		// EXPLAIN [VERBOSE] [( option [, …] )] statement; ANALYZE would
		// run the statement.
		j := 1
		for j < len(toks) {
			u := toks[j]
			if u.Is("analyze") || u.Is("analyse") {
				return pgerr.New(pgerr.InsufficientPrivilege, "EXPLAIN ANALYZE is not allowed in catalog statements").
					WithPosition(CharPos(src, u.Pos)).
					WithHint("EXPLAIN without ANALYZE shows the plan of a catalog statement without running it")
			}
			if u.IsPunct("(") {
				for j < len(toks) && !toks[j].IsPunct(")") {
					// A quoted option name is the same option: PostgreSQL
					// compares ("analyze") as a string (attack round 80).
					if t := toks[j]; t.Kind == TokIdent && (t.Val == "analyze" || t.Val == "analyse") {
						return pgerr.New(pgerr.InsufficientPrivilege, "EXPLAIN ANALYZE is not allowed in catalog statements").
							WithPosition(CharPos(src, toks[j].Pos)).
							WithHint("EXPLAIN without ANALYZE shows the plan of a catalog statement without running it")
					}
					j++
				}
				j++
				continue
			}
			if u.Is("verbose") {
				j++
				continue
			}
			break
		}
		if j == len(toks) {
			return SyntaxErr(src, len(src), "syntax error at end of input")
		}
		return catalogForm(src, toks[j:])
	}
	return SyntaxErr(src, t.Pos, "syntax error at or near %q", src[t.Pos:t.End])
}

// checkCall checks the identifier toks[k], which a "(" follows.
// opens is openMatches of the statement's parenMatches.
func checkCall(src string, toks []Token, k int, cte map[int]bool, opens []int) error {
	t := toks[k]
	qualified := k >= 2 && toks[k-1].IsPunct(".") && toks[k-2].Kind == TokIdent
	if !qualified && !t.Quoted && syntaxBeforeParen[t.Val] {
		return nil
	}
	if cte[k] || typeOrAlias(toks, k, qualified) || !qualified && aliasColumns(toks, k, opens) {
		return nil
	}
	name, schema := t.Val, ""
	if qualified {
		schema = toks[k-2].Val
	}
	ok := false
	switch schema {
	case "", "pg_catalog":
		ok = catalogFunctions[name]
	case "information_schema":
		ok = informationSchemaFunctions[name]
	}
	if ok {
		return nil
	}
	shown := name
	if qualified {
		shown = schema + "." + name
	}
	at := t.Pos
	if qualified {
		at = toks[k-2].Pos
	}
	return pgerr.New(pgerr.InsufficientPrivilege, "function %s is not allowed through dpproxy", shown).
		WithPosition(CharPos(src, at)).
		WithHint("catalog statements may call only read-only catalog and scalar functions, and %s is not one of them", shown)
}

// checkAttribute checks the last name toks[k] of a dotted name (no "("
// after it): PostgreSQL reads alias.f, schema.table.f and
// db.schema.table.f as the call f(alias's value) when there is no column
// f (review 81), so f must not name a function that could do harm so
// called (attributeFunctions). start is the index of the name's first
// part. A type's name (after :: or AS) calls nothing. A name PostgreSQL
// truncates (past 63 bytes) is checked as it truncates it.
func checkAttribute(src string, toks []Token, k, start int) error {
	if start == k {
		return nil // not after a dot
	}
	if start >= 1 && (toks[start-1].IsPunct("::") || toks[start-1].Is("as")) {
		return nil // ::pg_catalog.xml, AS pg_catalog.xml: a type
	}
	f := TruncateIdent(toks[k].Val)
	if catalogFunctions[f] || !attributeFunctions[f] && !(*shadowAttributeFunctions.Load())[f] {
		return nil
	}
	alias := src[toks[start].Pos:toks[k-2].End]
	return pgerr.New(pgerr.InsufficientPrivilege, "column notation %s.%s is not allowed in catalog statements", alias, f).
		WithPosition(CharPos(src, toks[start].Pos)).
		WithHint("PostgreSQL reads %s.%s as the call %s(%s) when %s has no column %s, and catalog statements may call only read-only catalog and scalar functions; if %s is a column, write it without %s.",
			alias, f, f, alias, alias, f, f, alias)
}

// shadowAttributeFunctions are the names ShadowFunctionsSQL found on a
// shadow server beyond attributeFunctions (its extensions, a later
// PostgreSQL): only ever added to.
var shadowAttributeFunctions atomic.Pointer[map[string]bool]

func init() { shadowAttributeFunctions.Store(&map[string]bool{}) }

// ShadowFunctionsSQL reads, on a shadow server, the functions alias.f
// must not name there (attributeFunctions' query, for its PostgreSQL and
// extensions); args are its parameters. The proxy runs it after building
// each shadow catalog and gives the names to AddShadowFunctions.
func ShadowFunctionsSQL() (string, []any) {
	allowed := CatalogFunctionNames()
	return `SELECT DISTINCT proname::text FROM pg_catalog.pg_proc
		WHERE pronargs >= 1 AND (pronargs - pronargdefaults <= 1 OR provariadic <> 0)
		  AND provolatile <> 'i' AND proname <> ALL($1::text[]) AND proname NOT LIKE 'pg\_%'`, []any{allowed}
}

// CatalogFunctionNames returns the names of catalogFunctions, sorted: the
// functions catalog statements may call, which the shadow's second guard
// (shadow.RestrictFunctions) keeps executable.
func CatalogFunctionNames() []string {
	names := make([]string, 0, len(catalogFunctions))
	for f := range catalogFunctions {
		names = append(names, f)
	}
	sort.Strings(names)
	return names
}

// AddShadowFunctions adds names (ShadowFunctionsSQL's) to those alias.f
// must not name. Safe for concurrent use.
func AddShadowFunctions(names []string) {
	for {
		old := shadowAttributeFunctions.Load()
		next := make(map[string]bool, len(*old)+len(names))
		for f := range *old {
			next[f] = true
		}
		for _, f := range names {
			if !attributeFunctions[f] {
				next[f] = true
			}
		}
		if shadowAttributeFunctions.CompareAndSwap(old, &next) {
			return
		}
	}
}

// TruncateIdent is an identifier (or a start-up name) as PostgreSQL
// keeps it: at most 63 bytes (NAMEDATALEN − 1), cut at a character
// boundary.
func TruncateIdent(s string) string {
	const max = 63
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// typeOrAlias reports whether the identifier toks[k] (qualified: preceded
// by "schema.") before "(" is a type with a modifier (::numeric(10,2),
// AS varchar(20), ::character varying(8)) or an alias with a column list
// (AS t(a, b)): after "::" or AS, PostgreSQL's grammar has a type name or
// an alias there, never an expression.
func typeOrAlias(toks []Token, k int, qualified bool) bool {
	j := k
	if qualified {
		j = k - 2
	}
	after := func(i int) bool { return i >= 0 && (toks[i].IsPunct("::") || toks[i].Is("as")) }
	if after(j - 1) {
		return true
	}
	// The SQL types of two words: character varying, char varying, bit
	// varying, national character varying.
	if !qualified && toks[k].Is("varying") && k >= 1 {
		p := toks[k-1]
		if p.Is("character") || p.Is("char") || p.Is("nchar") || p.Is("bit") {
			return after(k-2) || k >= 3 && toks[k-2].Is("national") && after(k-3)
		}
	}
	return false
}

// aliasColumns reports whether the unqualified identifier toks[k] before
// "(" is an alias with a column list written without AS, after a FROM
// item: a relation's name (FROM pg_catalog.pg_class c(x)), a function call
// (FROM generate_series(1, 32) pos(n), as pgjdbc writes), a
// parenthesized FROM item ((VALUES …) s(n)) or WITH ORDINALITY. The word before it must be a name, not a keyword
// (postgresKeywords), and the call before it a call of a name: a name or
// a call is never followed by a call, but keywords are (ROWS f(x)
// PRECEDING, DISTINCT ON (a) f(x), OPERATOR(pg_catalog.||) f(x)).
// opens is openMatches of the statement's parenMatches.
func aliasColumns(toks []Token, k int, opens []int) bool {
	if k == 0 {
		return false
	}
	isName := func(t Token) bool { return t.Kind == TokIdent && (t.Quoted || !postgresKeywords[t.Val]) }
	switch p := toks[k-1]; {
	case p.Is("ordinality"):
		return true
	case p.Kind == TokIdent:
		return isName(p)
	case p.IsPunct(")"):
		m := opens[k-1]
		if m < 1 {
			return false
		}
		// A call's alias (f(x) s(a)), or a parenthesized FROM item's: a
		// subquery, VALUES or join after FROM, JOIN, LATERAL or a comma
		// ((VALUES (1)) s(a), as psql's \gdesc writes). Elsewhere, ") name("
		// is a syntax error for PostgreSQL, so nothing runs.
		b := toks[m-1]
		if b.IsPunct(",") {
			// After a comma only a subquery or VALUES: "f(1, (2) g(x))"
			// is a syntax error anyway, but is not let through.
			c := toks[m+1]
			return c.Is("select") || c.Is("values") || c.Is("with") || c.Is("table") || c.IsPunct("(")
		}
		return isName(b) || b.Is("from") || b.Is("join") || b.Is("lateral")
	}
	return false
}

// openMatches inverts parenMatches: for each ")" token, the index of the
// "(" it closes (-1 when none, and for every other token). Looking back for
// it from each ") name(" had made classification quadratic (attack round
// 64: 48,000 nested ") abs(1)" took 17.7 s to refuse).
func openMatches(match []int) []int {
	opens := make([]int, len(match))
	for j := range opens {
		opens[j] = -1
	}
	for j, m := range match {
		if m >= 0 {
			opens[m] = j
		}
	}
	return opens
}

// checkRelation checks an identifier that no "(" follows: a name starting
// with pg_ is a system relation (or a column or alias so named) and must
// be allowed, unless it qualifies another name, names a type or is an
// alias after AS.
func checkRelation(src string, toks []Token, k int) error {
	t := toks[k]
	name := strings.ToLower(t.Val)
	if !strings.HasPrefix(name, "pg_") || catalogRelations[name] {
		return nil
	}
	if k+1 < len(toks) && toks[k+1].IsPunct(".") {
		return nil // pg_catalog.…, pg_toast.…, or alias.column
	}
	j := k
	if k >= 2 && toks[k-1].IsPunct(".") && toks[k-2].Kind == TokIdent {
		j = k - 2
	}
	if j >= 1 && (toks[j-1].IsPunct("::") || toks[j-1].Is("as")) {
		return nil
	}
	return pgerr.New(pgerr.InsufficientPrivilege, "relation %s is not allowed through dpproxy", t.Val).
		WithPosition(CharPos(src, t.Pos)).
		WithHint("catalog statements may read the system catalogs and information_schema, but not the views of the catalog server's sessions, statistics and files (pg_stat_*, pg_statio_*, pg_stats, pg_locks…), which other analysts share")
}

// cteColumnLists returns the indexes of the names of WITH queries that
// have a column list (WITH r(n) AS (…)): those names are followed by "(",
// and are not calls. Only names in a WITH list are returned: WITH
// [RECURSIVE] name [(…)] AS [[NOT] MATERIALIZED] (…) [SEARCH …|CYCLE …]
// [, …]. A list it cannot follow ends early, and its later names are then
// checked as calls (and refused).
// match is parenMatches(toks).
func cteColumnLists(toks []Token, match []int) map[int]bool {
	var out map[int]bool
	for k, t := range toks {
		if !t.Is("with") {
			continue
		}
		i := k + 1
		if i < len(toks) && toks[i].Is("recursive") {
			i++
		}
		for i+1 < len(toks) && toks[i].Kind == TokIdent {
			j := i + 1
			if toks[j].IsPunct("(") {
				m := match[j]
				if m < 0 || m+1 >= len(toks) || !toks[m+1].Is("as") {
					break
				}
				if out == nil {
					out = map[int]bool{}
				}
				out[i] = true
				j = m + 1
			}
			if !toks[j].Is("as") {
				break
			}
			j++
			if j < len(toks) && toks[j].Is("not") {
				j++
			}
			if j < len(toks) && toks[j].Is("materialized") {
				j++
			}
			if j >= len(toks) || !toks[j].IsPunct("(") {
				break
			}
			e := match[j]
			if e < 0 {
				break
			}
			j = e + 1
			// SEARCH … SET column, then CYCLE … USING column.
			if j < len(toks) && toks[j].Is("search") {
				j = skipPast(toks, j, "set") + 1
			}
			if j < len(toks) && toks[j].Is("cycle") {
				j = skipPast(toks, j, "using") + 1
			}
			if j >= len(toks) || !toks[j].IsPunct(",") {
				break
			}
			i = j + 1
		}
	}
	return out
}

// skipPast returns the index just after the first keyword kw at or after
// toks[i] (len(toks) when there is none, or a parenthesis comes first).
func skipPast(toks []Token, i int, kw string) int {
	for ; i < len(toks); i++ {
		if toks[i].IsPunct("(") {
			return len(toks)
		}
		if toks[i].Is(kw) {
			return i + 1
		}
	}
	return i
}

// parenMatches returns, for each "(" token, the index of the ")" that
// closes it (-1 when none, and for every other token): one pass, so that
// following many WITH lists costs linear time (issue 34's attack: one
// scan to the end per WITH name made classification quadratic, 7.7 s for a
// 256 KiB statement before any limit).
func parenMatches(toks []Token) []int {
	m := make([]int, len(toks))
	var open []int
	for j, t := range toks {
		m[j] = -1
		switch {
		case t.IsPunct("("):
			open = append(open, j)
		case t.IsPunct(")") && len(open) > 0:
			m[open[len(open)-1]] = j
			open = open[:len(open)-1]
		}
	}
	return m
}
