package rewrite

import (
	"sort"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
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
			sel = append(sel, "t."+cn+" AS "+quoteIdent(c.Name))
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
	return false
}

// maxPostRounds bounds the flattening rounds (each removes one
// subquery or CTE).
const maxPostRounds = 64

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
	text := stmt
	for round := 0; ; round++ {
		if round == maxPostRounds {
			return nil, pgerr.New(pgerr.FeatureNotSupported, "the statement nests too many subqueries").WithHint("%s", postHint)
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

// postEdit replaces the bytes [start, end) of the statement by pieces:
// text, or a leaf slot.
type postEdit struct {
	start, end int
	pieces     []postPiece
}

type postPiece struct {
	text string
	leaf int // -1 for text
}

type postLeaf struct {
	sql   string
	whole bool // the leaf is the whole statement (nothing to post-process)
}

// splitter finds the leaves of a statement.
type splitter struct {
	ds     *policy.Dataset
	src    string
	toks   []pgsql.Token
	match  []int // index of the matching parenthesis, -1 for other tokens
	leaves []postLeaf
	edits  []postEdit
}

// matchParens returns, for each ( and ), the index of its partner (-1 for
// other tokens), or nil when unbalanced.
func matchParens(toks []pgsql.Token) []int {
	m := make([]int, len(toks))
	var stack []int
	for i, t := range toks {
		m[i] = -1
		switch {
		case t.IsPunct("("), t.IsPunct("["):
			stack = append(stack, i)
		case t.IsPunct(")"), t.IsPunct("]"):
			if len(stack) == 0 {
				return nil
			}
			o := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			m[o], m[i] = i, o
		}
	}
	if len(stack) > 0 {
		return nil
	}
	return m
}

// startsQuery reports whether the parenthesis at k opens a query.
func (s *splitter) startsQuery(k int) bool {
	if !s.toks[k].IsPunct("(") {
		return false
	}
	j := k + 1
	for j < len(s.toks) && s.toks[j].IsPunct("(") {
		j++
	}
	return j < len(s.toks) && (s.toks[j].Is("select") || s.toks[j].Is("with") || s.toks[j].Is("values"))
}

// names reports whether toks[lo:hi] name a protected table.
func (s *splitter) names(lo, hi int) bool { return pgsql.NamesProtected(s.ds, s.toks[lo:hi]) }

func (s *splitter) text(lo, hi int) string {
	if lo >= hi {
		return ""
	}
	return s.src[s.toks[lo].Pos:s.toks[hi-1].End]
}

func (s *splitter) refuse(k int, format string, args ...any) *pgerr.Error {
	e := pgerr.New(pgerr.FeatureNotSupported, format, args...).WithHint("%s", postHint)
	if k >= 0 && k < len(s.toks) {
		e = e.WithPosition(pgsql.CharPos(s.src, s.toks[k].Pos))
	}
	return e
}

// addLeaf records toks[lo:hi] as a leaf replaced in the outer SQL.
func (s *splitter) addLeaf(lo, hi int) {
	s.leaves = append(s.leaves, postLeaf{sql: s.text(lo, hi), whole: lo == 0 && hi == len(s.toks)})
	s.edits = append(s.edits, postEdit{start: s.toks[lo].Pos, end: s.toks[hi-1].End,
		pieces: []postPiece{{leaf: len(s.leaves) - 1}}})
}

// query processes the query toks[lo:hi].
func (s *splitter) query(lo, hi int) error {
	if lo >= hi || !s.names(lo, hi) {
		return nil // no protected table: plain SQL for the shadow
	}
	// ( query ) as a whole.
	if s.toks[lo].IsPunct("(") && s.match[lo] == hi-1 {
		return s.query(lo+1, hi-1)
	}
	if s.toks[lo].Is("with") {
		return s.with(lo, hi)
	}
	if branches := s.setBranches(lo, hi); len(branches) > 1 {
		for _, b := range branches {
			if err := s.query(b[0], b[1]); err != nil {
				return err
			}
		}
		return nil
	}
	// A plain SELECT: its subqueries first.
	sub := false
	for k := lo; k < hi; k++ {
		if s.startsQuery(k) {
			if s.names(k, s.match[k]+1) {
				sub = true
				if err := s.query(k+1, s.match[k]); err != nil {
					return err
				}
			}
			k = s.match[k]
		}
	}
	// What the SELECT reads itself, outside its subqueries.
	direct := false
	window := false
	for k := lo; k < hi; k++ {
		if s.startsQuery(k) {
			k = s.match[k]
			continue
		}
		if s.toks[k].Kind == pgsql.TokIdent {
			if tb, ok := s.ds.Tables[strings.ToLower(s.toks[k].Val)]; ok && !tb.Public {
				direct = true
			}
			if s.toks[k].Is("over") || s.toks[k].Is("window") {
				window = true
			}
		}
	}
	switch {
	case !direct:
		return nil
	case sub:
		return s.refuse(lo, "a query that reads a protected table cannot also read a subquery over protected tables")
	case window:
		return s.splitAggregates(lo, hi)
	}
	s.addLeaf(lo, hi)
	return nil
}

// with processes WITH cte AS (query), … main.
func (s *splitter) with(lo, hi int) error {
	k := lo + 1
	if k < hi && s.toks[k].Is("recursive") {
		return s.refuse(k, "WITH RECURSIVE is not supported over protected tables")
	}
	for {
		// name [ ( cols ) ] AS [ [NOT] MATERIALIZED ] ( query )
		if k >= hi || s.toks[k].Kind != pgsql.TokIdent {
			return s.refuse(k, "syntax error in WITH")
		}
		k++
		if k < hi && s.toks[k].IsPunct("(") {
			k = s.match[k] + 1
		}
		if k >= hi || !s.toks[k].Is("as") {
			return s.refuse(k, "syntax error in WITH")
		}
		k++
		if k < hi && s.toks[k].Is("not") {
			k++
		}
		if k < hi && s.toks[k].Is("materialized") {
			k++
		}
		if k >= hi || !s.toks[k].IsPunct("(") {
			return s.refuse(k, "syntax error in WITH")
		}
		end := s.match[k]
		if err := s.query(k+1, end); err != nil {
			return err
		}
		k = end + 1
		if k < hi && s.toks[k].IsPunct(",") {
			k++
			continue
		}
		break
	}
	return s.query(k, hi)
}

// setBranches splits toks[lo:hi] at top-level UNION, INTERSECT and
// EXCEPT. The last branch ends before a top-level ORDER BY, LIMIT, OFFSET
// or FETCH, which apply to the whole set operation.
func (s *splitter) setBranches(lo, hi int) [][2]int {
	var out [][2]int
	start := lo
	for k := lo; k < hi; k++ {
		t := s.toks[k]
		if t.IsPunct("(") {
			k = s.match[k]
			continue
		}
		if t.Is("union") || t.Is("intersect") || t.Is("except") {
			out = append(out, [2]int{start, k})
			k++
			if k < hi && (s.toks[k].Is("all") || s.toks[k].Is("distinct")) {
				k++
			}
			start = k
			k--
		}
	}
	if len(out) == 0 {
		return nil
	}
	end := hi
	for k := start; k < hi; k++ {
		t := s.toks[k]
		if t.IsPunct("(") {
			k = s.match[k]
			continue
		}
		if t.Is("order") || t.Is("limit") || t.Is("offset") || t.Is("fetch") {
			end = k
			break
		}
	}
	return append(out, [2]int{start, end})
}

// aggregateWords are the aggregate functions a DP leaf may compute; in the
// split of window functions over aggregates, a call of one of them not
// followed by OVER is an aggregate of the leaf.
var aggregateWords = map[string]bool{
	"count": true, "sum": true, "avg": true, "min": true, "max": true,
	"var_pop": true, "var_samp": true, "variance": true, "stddev": true, "stddev_pop": true, "stddev_samp": true,
	"percentile_cont": true, "percentile_disc": true, "corr": true, "covar_pop": true, "covar_samp": true,
	"regr_slope": true, "regr_intercept": true, "regr_r2": true,
}

// clauses are the top-level clauses of a SELECT, as token ranges.
type clauses struct {
	selectList     [2]int // after SELECT [DISTINCT]
	distinct       bool
	from           [2]int // FROM … up to GROUP BY, HAVING, WINDOW, ORDER BY, LIMIT…
	groupBy        [2]int
	having         [2]int
	window         [2]int
	tail           [2]int // ORDER BY … LIMIT … OFFSET … FETCH …
	hasGroup, hasH bool
}

// selectClauses reads the clauses of the SELECT toks[lo:hi].
func (s *splitter) selectClauses(lo, hi int) (clauses, error) {
	var c clauses
	if !s.toks[lo].Is("select") {
		return c, s.refuse(lo, "only SELECT queries can compute window functions over DP aggregates")
	}
	k := lo + 1
	if k < hi && s.toks[k].Is("distinct") {
		c.distinct = true
		k++
	} else if k < hi && s.toks[k].Is("all") {
		k++
	}
	type mark struct {
		kw string
		at int
	}
	var marks []mark
	tail := false
	for j := k; j < hi; j++ {
		t := s.toks[j]
		if t.IsPunct("(") {
			j = s.match[j]
			continue
		}
		switch {
		case t.Is("from"), t.Is("having"), t.Is("window"):
			marks = append(marks, mark{t.Val, j})
		case t.Is("group") && j+1 < hi && s.toks[j+1].Is("by"):
			marks = append(marks, mark{"group", j})
		case !tail && (t.Is("order") && j+1 < hi && s.toks[j+1].Is("by") || t.Is("limit") || t.Is("offset") || t.Is("fetch")):
			marks = append(marks, mark{"tail", j})
			tail = true
		}
	}
	c.selectList = [2]int{k, hi}
	c.tail = [2]int{hi, hi}
	seen := map[string]bool{}
	for i, m := range marks {
		end := hi
		if i+1 < len(marks) {
			end = marks[i+1].at
		}
		if seen[m.kw] {
			return c, s.refuse(m.at, "syntax error at or near %q", s.toks[m.at].Val)
		}
		seen[m.kw] = true
		if i == 0 {
			c.selectList[1] = m.at
		}
		switch m.kw {
		case "from":
			c.from = [2]int{m.at, end}
		case "group":
			c.groupBy, c.hasGroup = [2]int{m.at + 2, end}, true
		case "having":
			c.having, c.hasH = [2]int{m.at + 1, end}, true
		case "window":
			c.window = [2]int{m.at, end}
		case "tail":
			c.tail = [2]int{m.at, hi}
		}
	}
	if c.from[1] == 0 {
		return c, s.refuse(lo, "a DP aggregate needs FROM")
	}
	return c, nil
}

// items splits toks[lo:hi] at top-level commas.
func (s *splitter) items(lo, hi int) [][2]int {
	var out [][2]int
	start := lo
	for k := lo; k < hi; k++ {
		if s.toks[k].IsPunct("(") || s.toks[k].IsPunct("[") {
			k = s.match[k]
			continue
		}
		if s.toks[k].IsPunct(",") {
			out = append(out, [2]int{start, k})
			start = k + 1
		}
	}
	if start < hi {
		out = append(out, [2]int{start, hi})
	}
	return out
}

// itemExpr returns the expression of a select item, without its label.
func (s *splitter) itemExpr(it [2]int) [2]int {
	lo, hi := it[0], it[1]
	if hi-lo >= 3 && s.toks[hi-2].Is("as") {
		return [2]int{lo, hi - 2}
	}
	if hi-lo >= 2 && s.toks[hi-1].Kind == pgsql.TokIdent && !isExprWord(s.toks[hi-1]) {
		prev := s.toks[hi-2]
		if prev.IsPunct(")") || prev.Kind == pgsql.TokIdent && !prev.IsPunct(".") || prev.Kind == pgsql.TokNumber || prev.Kind == pgsql.TokString {
			if !s.toks[hi-2].IsPunct(".") {
				return [2]int{lo, hi - 1}
			}
		}
	}
	return it
}

// isExprWord reports whether an unquoted word ends an expression rather
// than labelling it.
func isExprWord(t pgsql.Token) bool {
	if t.Quoted {
		return false
	}
	switch t.Val {
	case "end", "null", "true", "false", "desc", "asc":
		return true
	}
	return false
}

// aggregateCalls returns the aggregate calls (not followed by OVER) in
// toks[lo:hi], as token ranges.
func (s *splitter) aggregateCalls(lo, hi int) [][2]int {
	var out [][2]int
	for k := lo; k < hi; k++ {
		t := s.toks[k]
		if t.Kind != pgsql.TokIdent || t.Quoted || !aggregateWords[t.Val] || k+1 >= hi || !s.toks[k+1].IsPunct("(") {
			continue
		}
		end := s.match[k+1] + 1
		for end < hi {
			switch {
			case s.toks[end].Is("filter") && end+1 < hi && s.toks[end+1].IsPunct("("):
				end = s.match[end+1] + 1
				continue
			case s.toks[end].Is("within") && end+2 < hi && s.toks[end+1].Is("group") && s.toks[end+2].IsPunct("("):
				end = s.match[end+2] + 1
				continue
			}
			break
		}
		if end < hi && s.toks[end].Is("over") {
			continue // a window function: its arguments may hold aggregates
		}
		out = append(out, [2]int{k, end})
		k = end - 1
	}
	return out
}

// sameTokens compares two token ranges as SQL (keywords and unquoted names
// are already folded by the lexer).
func (s *splitter) sameTokens(a, b [2]int) bool {
	if a[1]-a[0] != b[1]-b[0] {
		return false
	}
	for i := 0; i < a[1]-a[0]; i++ {
		x, y := s.toks[a[0]+i], s.toks[b[0]+i]
		if x.Kind != y.Kind || x.Val != y.Val {
			return false
		}
	}
	return true
}

// lastName returns the column name of a range that is a (qualified)
// column reference, or "".
func (s *splitter) lastName(r [2]int) string {
	n := r[1] - r[0]
	switch {
	case n == 1 && s.toks[r[0]].Kind == pgsql.TokIdent:
		return s.toks[r[0]].Val
	case n == 3 && s.toks[r[0]].Kind == pgsql.TokIdent && s.toks[r[0]+1].IsPunct(".") && s.toks[r[0]+2].Kind == pgsql.TokIdent:
		return s.toks[r[0]+2].Val
	}
	return ""
}

// splitAggregates splits a SELECT that reads a protected table and uses
// window functions over its aggregates into a leaf (the GROUP BY keys and
// the aggregates) and an outer SELECT over the leaf's columns.
func (s *splitter) splitAggregates(lo, hi int) error {
	c, err := s.selectClauses(lo, hi)
	if err != nil {
		return err
	}
	items := s.items(c.selectList[0], c.selectList[1])
	var keys [][2]int
	if c.hasGroup {
		for _, g := range s.items(c.groupBy[0], c.groupBy[1]) {
			if g[1]-g[0] == 1 && s.toks[g[0]].Kind == pgsql.TokNumber {
				n, err := strconv.Atoi(s.toks[g[0]].Val)
				if err != nil || n < 1 || n > len(items) {
					return s.refuse(g[0], "GROUP BY position %s is not in the select list", s.toks[g[0]].Val)
				}
				g = s.itemExpr(items[n-1])
			}
			keys = append(keys, g)
		}
	}
	// The aggregates of the select list, HAVING and ORDER BY (equal calls
	// share one column).
	var aggs [][2]int
	regions := [][2]int{c.selectList, c.having, c.tail}
	for _, r := range regions {
		for _, a := range s.aggregateCalls(r[0], r[1]) {
			dup := false
			for _, b := range aggs {
				if s.sameTokens(a, b) {
					dup = true
				}
			}
			if !dup {
				aggs = append(aggs, a)
			}
		}
	}
	if len(aggs) == 0 {
		return s.refuse(lo, "window functions over a protected table need aggregates: only aggregate results can be post-processed")
	}
	// The leaf.
	var sel []string
	for i, k := range keys {
		sel = append(sel, s.text(k[0], k[1])+" AS "+quoteIdent("_k"+strconv.Itoa(i+1)))
	}
	for i, a := range aggs {
		sel = append(sel, s.text(a[0], a[1])+" AS "+quoteIdent("_a"+strconv.Itoa(i+1)))
	}
	leaf := "SELECT " + strings.Join(sel, ", ") + " " + s.text(c.from[0], c.from[1])
	if len(keys) > 0 {
		var pos []string
		for i := range keys {
			pos = append(pos, strconv.Itoa(i+1))
		}
		leaf += " GROUP BY " + strings.Join(pos, ", ")
	}
	for k := c.from[0]; k < c.from[1]; k++ {
		if s.toks[k].Is("over") || s.toks[k].Is("window") {
			return s.refuse(k, "window functions are computed over the aggregates' results, not in FROM or WHERE")
		}
	}
	// The outer SELECT: the same select list, HAVING (as WHERE), WINDOW,
	// ORDER BY and LIMIT, with aggregates and keys replaced by the leaf's
	// columns.
	replace := func(r [2]int) string {
		var b strings.Builder
		at := r[0]
		emit := func(upto int) {
			if upto > at {
				b.WriteString(s.src[s.toks[at].Pos:s.toks[upto-1].End])
				b.WriteByte(' ')
			}
		}
		for k := r[0]; k < r[1]; k++ {
			matched := false
			for i, a := range aggs {
				n := a[1] - a[0]
				if k+n <= r[1] && s.sameTokens([2]int{k, k + n}, a) {
					emit(k)
					b.WriteString(quoteIdent("_a"+strconv.Itoa(i+1)) + " ")
					k += n - 1
					at = k + 1
					matched = true
					break
				}
			}
			if matched {
				continue
			}
			for i, key := range keys {
				n := key[1] - key[0]
				hit := k+n <= r[1] && s.sameTokens([2]int{k, k + n}, key)
				if !hit {
					// A column key also matches its qualified or bare form.
					if name := s.lastName(key); name != "" {
						if m := 3; k+m <= r[1] && s.lastName([2]int{k, k + m}) == name && (k == r[0] || !s.toks[k-1].IsPunct(".")) {
							hit, n = true, m
						} else if k < r[1] && s.toks[k].Kind == pgsql.TokIdent && s.toks[k].Val == name &&
							(k == r[0] || !s.toks[k-1].IsPunct(".") && !s.toks[k-1].Is("as")) &&
							(k+1 >= r[1] || !s.toks[k+1].IsPunct(".") && !s.toks[k+1].IsPunct("(")) {
							hit, n = true, 1
						}
					}
				}
				if hit {
					emit(k)
					b.WriteString(quoteIdent("_k"+strconv.Itoa(i+1)) + " ")
					k += n - 1
					at = k + 1
					matched = true
					break
				}
			}
		}
		emit(r[1])
		return b.String()
	}
	// Items without a label get the name PostgreSQL would give them: a
	// bare column keeps its name, a call its function's name.
	var outItems []string
	for _, it := range items {
		e := s.itemExpr(it)
		text := replace(e)
		if e == it {
			if name := s.lastName(e); name != "" {
				text += "AS " + quoteIdent(name)
			} else if s.toks[e[0]].Kind == pgsql.TokIdent && e[1]-e[0] > 1 && s.toks[e[0]+1].IsPunct("(") {
				text += "AS " + quoteIdent(s.toks[e[0]].Val)
			}
		} else {
			text += s.text(e[1], it[1])
		}
		outItems = append(outItems, text)
	}
	var head strings.Builder
	head.WriteString("SELECT ")
	if c.distinct {
		head.WriteString("DISTINCT ")
	}
	head.WriteString(strings.Join(outItems, ", "))
	head.WriteString(" FROM (")
	tail := ") AS " + quoteIdent("dp_aggregate") + " "
	if c.hasH {
		tail += "WHERE " + replace(c.having)
	}
	if c.window[1] > c.window[0] {
		tail += replace(c.window)
	}
	if c.tail[1] > c.tail[0] {
		tail += replace(c.tail)
	}
	s.leaves = append(s.leaves, postLeaf{sql: leaf})
	s.edits = append(s.edits, postEdit{start: s.toks[lo].Pos, end: s.toks[hi-1].End, pieces: []postPiece{
		{text: head.String(), leaf: -1}, {leaf: len(s.leaves) - 1}, {text: tail, leaf: -1},
	}})
	return nil
}
