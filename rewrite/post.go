package rewrite

import (
	"sort"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
)

// Post-processing SQL over DP results (issue 17; the design is in
// POSTPROCESSING.md next to this file).
//
// A DP answer is a table, and anything computed from it alone is
// post-processing: it costs nothing more and reveals nothing more. Post
// splits a statement into
//
//   - leaves: DP aggregate queries over protected tables, each planned by
//     the ordinary planner (plan) and released by the ordinary path, and
//   - the outer SQL: the rest of the statement, with each leaf replaced by
//     a SELECT over bind parameters that carry the leaf's released rows
//     (unnest of one text array per column). The outer SQL runs on the
//     shadow catalog (no private rows), never on the data connection.
//
// Before that, projection and filter subqueries and CTEs over one
// protected table that feed an aggregate (Power BI's and Looker's query
// folding) are flattened into the aggregate: `SELECT d, COUNT(*) FROM
// (SELECT dept AS d FROM visits WHERE cost > 0) s GROUP BY d` is planned as
// `SELECT dept, COUNT(*) FROM visits s WHERE (cost > 0) GROUP BY dept`. The
// inner query only renames and filters, so the flattened query is the same
// aggregate.
//
// Leaves are found syntactically, on our own lexer's tokens:
//
//   - a parenthesized query (subquery in FROM, CTE body, branch of a set
//     operation) or an unparenthesized branch of a top-level UNION /
//     INTERSECT / EXCEPT, or the main query of a WITH, that names a
//     protected table and holds no further query, window function or WITH;
//   - a SELECT that reads a protected table directly and uses window
//     functions over its aggregates (`SUM(COUNT(*)) OVER ()`, `rank() OVER
//     (ORDER BY COUNT(*) DESC)`): it is split into a leaf (the keys and
//     the aggregates, GROUP BY as written) and an outer SELECT that
//     computes the window functions, HAVING (as WHERE), ORDER BY and LIMIT
//     over the leaf's columns.
//
// Anything else that reads a protected table outside a leaf (a subquery in
// the WHERE of a protected table, a protected table joined to a DP
// result) is refused with 0A000 before anything is planned or charged.

// PostQuery is a statement split into DP leaves and outer SQL. Immutable.
type PostQuery struct {
	// Flat, when Leaves is empty, is the statement after flattening
	// projection subqueries and CTEs: one DP aggregate for the ordinary
	// path.
	Flat string
	// Leaves are the DP aggregate queries, in the order of the statement.
	Leaves []string
	// outer is the outer SQL: text pieces between leaf slots; slots[i] is
	// the leaf after outer[i].
	outer []string
	slots []int
}

// PostColumn is one released column of a leaf, for OuterSQL.
type PostColumn struct {
	Name   string
	PGType string // "int8", "numeric", "float8", "text", "date", "bool", "int4"
}

// Outer returns the outer SQL with each leaf shown as <leaf n> (for
// EXPLAIN).
func (q *PostQuery) Outer() string {
	var b strings.Builder
	for i, s := range q.outer {
		b.WriteString(s)
		if i < len(q.slots) {
			b.WriteString("(leaf " + strconv.Itoa(q.slots[i]+1) + ")")
		}
	}
	return b.String()
}

// postTypes are the types a released column may have, as PostgreSQL names
// them in a cast.
var postTypes = map[string]bool{
	"int8": true, "int4": true, "int2": true, "numeric": true, "float8": true, "float4": true,
	"text": true, "varchar": true, "date": true, "bool": true, "timestamp": true, "timestamptz": true,
}

// OuterSQL renders the outer SQL: each leaf i becomes
//
//	SELECT t.c1 AS "name1", … FROM unnest($k::type1[], …) AS t(c1, …)
//
// whose parameters, numbered in leaf order then column order, the caller
// binds to one text-format array per column holding the leaf's released
// values. It returns the SQL and, per leaf, the number of its first
// parameter.
func (q *PostQuery) OuterSQL(cols [][]PostColumn) (string, error) {
	if len(cols) != len(q.Leaves) {
		return "", pgerr.New(pgerr.InternalError, "internal error: %d leaf column lists for %d leaves", len(cols), len(q.Leaves))
	}
	first := make([]int, len(cols))
	n := 1
	for i, cs := range cols {
		first[i] = n
		n += len(cs)
	}
	var b strings.Builder
	for i, s := range q.outer {
		b.WriteString(s)
		if i >= len(q.slots) {
			continue
		}
		leaf := q.slots[i]
		cs := cols[leaf]
		if len(cs) == 0 {
			return "", pgerr.New(pgerr.InternalError, "internal error: a leaf without columns")
		}
		var sel, args, names []string
		for j, c := range cs {
			if !postTypes[c.PGType] {
				return "", pgerr.New(pgerr.FeatureNotSupported, "a released column of type %s cannot be post-processed", c.PGType).
					WithHint("send the aggregate query on its own")
			}
			cn := "c" + strconv.Itoa(j+1)
			sel = append(sel, "t."+cn+" AS "+pgemit.QuoteIdent(c.Name))
			args = append(args, "$"+strconv.Itoa(first[leaf]+j)+"::"+c.PGType+"[]")
			names = append(names, cn)
		}
		b.WriteString(" SELECT " + strings.Join(sel, ", ") + " FROM unnest(" + strings.Join(args, ", ") +
			") AS t(" + strings.Join(names, ", ") + ") ")
	}
	return b.String(), nil
}

// HasPostSyntax reports whether a statement uses a construct only the
// post-processing path answers: WITH, a subquery, a window function or a
// set operation. Statements without them go to the ordinary planner.
func HasPostSyntax(stmt string) bool {
	toks, err := pgsql.Lex(stmt)
	if err != nil {
		return false
	}
	if len(toks) > 0 && toks[0].Is("explain") {
		inner, ok, err := ExplainTarget(stmt)
		if err != nil || !ok {
			return false
		}
		if toks, err = pgsql.Lex(inner); err != nil {
			return false
		}
	}
	for k, t := range toks {
		switch {
		case t.Is("with"), t.Is("over"), t.Is("union"), t.Is("intersect"), t.Is("except"):
			return true
		case t.IsPunct("(") && k+1 < len(toks) && (toks[k+1].Is("select") || toks[k+1].Is("with")):
			return true
		}
	}
	if match := matchParens(toks); match != nil {
		return funcOverAggregate(toks, match, 0, len(toks))
	}
	return false
}

// postScalarFuncs are scalar functions analysts apply to an aggregate's
// value (rounding, a square root of a variance, a formatted number) that
// the DP planner does not compute over aggregates (it computes COALESCE
// and NULLIF, expr.go's isArithFunc).
var postScalarFuncs = map[string]bool{
	"round": true, "trunc": true, "floor": true, "ceil": true, "ceiling": true, "abs": true, "sign": true,
	"sqrt": true, "cbrt": true, "exp": true, "ln": true, "log": true, "log10": true, "power": true, "pow": true,
	"greatest": true, "least": true, "mod": true, "div": true, "to_char": true,
}

// funcOverAggregate reports whether toks[lo:hi] calls one of
// postScalarFuncs, outside any aggregate's arguments, with an aggregate
// call among its arguments, e.g. round(AVG(cost), 2), floor(SUM(x)),
// sqrt(VAR_POP(age)), or casts an aggregate to an integer type
// (AVG(cost)::int, CAST(AVG(cost) AS integer)). Such a select item is post-processing of the
// aggregate's released value, split as window functions over aggregates
// are (round 111: a new pandas user's round(AVG(cost), 2) was refused
// with 0A000 while the same round over a window function was answered).
func funcOverAggregate(toks []pgsql.Token, match []int, lo, hi int) bool {
	// aggs[i-lo] counts the aggregate calls that start in toks[lo:i],
	// built when a function is first met.
	var aggs []int32
	for k := lo; k+1 < hi; k++ {
		t := toks[k]
		if t.Kind != pgsql.TokIdent || t.Quoted || !toks[k+1].IsPunct("(") {
			continue
		}
		if aggregateWords[t.Val] {
			k = match[k+1] // an aggregate's arguments are the planner's
		clauses: // and so are its FILTER (…) and WITHIN GROUP (…)
			for {
				switch {
				case k+2 < hi && toks[k+1].Is("filter") && toks[k+2].IsPunct("("):
					k = match[k+2]
				case k+3 < hi && toks[k+1].Is("within") && toks[k+2].Is("group") && toks[k+3].IsPunct("("):
					k = match[k+3]
				default:
					break clauses
				}
			}
			// AVG(cost)::int: an integer cast of the released value (the
			// planner keeps the casts to numeric and float types).
			if k+2 < hi && toks[k+1].IsPunct("::") && toks[k+2].Kind == pgsql.TokIdent && intTypeNames[toks[k+2].Val] != "" {
				return true
			}
			continue
		}
		if !postScalarFuncs[t.Val] && !t.Is("cast") {
			continue
		}
		// An aggregate call among the arguments: counted from prefix
		// sums, not by scanning them, since calls nest (review round 112:
		// 990 nested round( around 64 KiB of tokens scanned them 990
		// times, 95 ms a pass against 27 for as many parentheses).
		if aggs == nil {
			aggs = make([]int32, hi-lo+1)
			for i := lo; i < hi; i++ {
				aggs[i-lo+1] = aggs[i-lo]
				if i+1 < hi && toks[i].Kind == pgsql.TokIdent && !toks[i].Quoted && aggregateWords[toks[i].Val] && toks[i+1].IsPunct("(") {
					aggs[i-lo+1]++
				}
			}
		}
		if end := match[k+1] - 1; end <= k+2 || aggs[end-lo] == aggs[k+2-lo] {
			continue
		}
		if !t.Is("cast") {
			return true
		}
		// CAST(AVG(cost) AS integer), as AVG(cost)::int above.
		if end := match[k+1]; end >= 2 && toks[end-2].Is("as") && intTypeNames[toks[end-1].Val] != "" && !toks[end-1].Quoted {
			return true
		}
	}
	return false
}

// maxPostRounds bounds the flattening rounds (each removes one
// subquery or CTE), maxFlattenWork the bytes they lex and rewrite in all
// (each round's text is at most MaxStatementBytes), and maxCTERefs the
// references in FROM to one CTE that flattening copies its body into
// (attack round 77: a CTE joined 50 times had made 50 rounds of 20 KB).
const (
	maxPostRounds  = 64
	maxFlattenWork = 1 << 20
	maxCTERefs     = maxLeaves
)

// maxLeaves bounds the DP leaves of one statement.
const maxLeaves = 16

// postHint lists the supported post-processing shapes.
const postHint = "dpproxy answers SQL over DP results: SELECT … FROM (DP aggregate query) s …, WITH a AS (DP aggregate query) SELECT … FROM a, window functions over aggregates, joins and UNION ALL of DP results; a protected table can be read only inside a DP aggregate"

// Post splits a statement that HasPostSyntax into DP leaves and outer SQL
// (see above). Every refusal is a *pgerr.Error with a SQLSTATE and a hint.
func Post(ds *policy.Dataset, stmt string) (*PostQuery, error) {
	if ds == nil {
		return nil, pgerr.New(pgerr.InternalError, "rewrite: no policy")
	}
	if err := CheckText(stmt); err != nil { // depth.go
		return nil, err
	}
	text := stmt
	for round, work := 0, 0; ; round++ {
		if round == maxPostRounds {
			return nil, pgerr.New(pgerr.FeatureNotSupported, "the statement nests too many subqueries").WithHint("%s", postHint)
		}
		if work += len(text); work > maxFlattenWork {
			return nil, pgerr.New(pgerr.ProgramLimitExceeded, "DP statement too long to expand: its subqueries and CTEs make over %d bytes in all", maxFlattenWork).
				WithHint("nest fewer subqueries, or refer to each CTE fewer times")
		}
		next, changed, err := flattenOnce(ds, text)
		if err != nil {
			return nil, err
		}
		if !changed {
			break
		}
		text = next
	}
	toks, err := pgsql.Lex(text)
	if err != nil {
		return nil, err
	}
	s := &splitter{ds: ds, src: text, toks: toks, match: matchParens(toks)}
	if s.match == nil {
		return nil, pgsql.SyntaxErr(text, len(text), "syntax error: unbalanced parentheses").WithHint("%s", postHint)
	}
	if err := s.query(0, len(toks)); err != nil {
		return nil, err
	}
	if len(s.leaves) == 0 {
		if !HasPostSyntax(text) && pgsql.NamesProtected(ds, toks) {
			return &PostQuery{Flat: text}, nil
		}
		return nil, pgerr.New(pgerr.FeatureNotSupported, "this statement has no DP aggregate over a protected table").WithHint("%s", postHint)
	}
	if len(s.leaves) == 1 && s.leaves[0].whole {
		return &PostQuery{Flat: s.leaves[0].sql}, nil
	}
	if len(s.leaves) > maxLeaves {
		return nil, pgerr.New(pgerr.FeatureNotSupported, "too many DP aggregates in one statement (at most %d)", maxLeaves).WithHint("send them as separate statements")
	}
	q := &PostQuery{}
	// Assemble the outer SQL: the source with each leaf's byte range (or
	// split replacement) cut out.
	edits := append([]postEdit(nil), s.edits...)
	sort.Slice(edits, func(i, j int) bool { return edits[i].start < edits[j].start })
	at := 0
	var cur strings.Builder
	for _, e := range edits {
		cur.WriteString(text[at:e.start])
		for _, p := range e.pieces {
			if p.leaf >= 0 {
				q.outer = append(q.outer, cur.String())
				q.slots = append(q.slots, p.leaf)
				cur.Reset()
				continue
			}
			cur.WriteString(p.text)
		}
		at = e.end
	}
	cur.WriteString(text[at:])
	q.outer = append(q.outer, cur.String())
	for _, l := range s.leaves {
		q.Leaves = append(q.Leaves, l.sql)
	}
	// The outer SQL must read no protected table: it runs on the shadow
	// (which has none of their rows), and a protected table there would be
	// silently empty.
	otoks, err := pgsql.Lex(q.Outer())
	if err != nil {
		return nil, err
	}
	for _, t := range otoks {
		if t.Kind == pgsql.TokParam {
			return nil, pgerr.New(pgerr.FeatureNotSupported, "parameters outside the DP aggregates are not supported").
				WithHint("bind parameters only inside the aggregate queries, or write the value into the statement")
		}
	}
	if pgsql.NamesProtected(ds, otoks) {
		return nil, pgerr.New(pgerr.FeatureNotSupported, "a protected table is read outside a DP aggregate").
			WithHint("%s", postHint)
	}
	if err := pgsql.RefuseWrites(q.Outer(), otoks); err != nil {
		return nil, err
	}
	return q, nil
}
