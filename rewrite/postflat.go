package rewrite

import (
	"sort"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
)

// Flattening of projection subqueries and CTEs (post.go, POSTPROCESSING.md).
//
// BI tools fold their steps into nested SELECTs: Power BI wraps the table
// in `(select … from "public"."visits" "$Table") "_"`, Looker and Tableau
// put a filtered projection in a CTE or a derived table and aggregate over
// it. Such an inner query reads one protected table, computes no
// aggregate, and only renames columns (to expressions of the row) and
// filters rows. Flattening moves it into the enclosing query: the derived
// table becomes the table itself (under the derived table's alias), every
// reference to one of its output columns becomes the expression it names,
// and its WHERE is ANDed to the enclosing WHERE. The result is the same
// query over the same rows; the ordinary planner then validates it as if
// the analyst had written it (every column, expression and literal is
// checked against the policy there). Nothing here decides privacy: the
// flattened text goes to the planner only, never to a database.

// textEdit replaces src[start:end] by text (an insertion when start == end).
type textEdit struct {
	start, end int
	text       string
}

// editList collects one flattening pass's edits of s.src, adding up the
// length of the text they make as they come: past MaxStatementBytes it
// takes no more and marks s.tooLong, so a pass holds at most about twice
// that much (attack round 77: a 550-byte statement of nested a+a
// projections had doubled its text at every pass, 1.6 GiB before the
// planner refused it, and a CTE copied into every JOIN had taken minutes).
type editList struct {
	s    *splitter
	size int
	list []textEdit
}

func (s *splitter) newEdits() *editList { return &editList{s: s, size: len(s.src)} }

// add takes e unless the text would grow past MaxStatementBytes.
func (es *editList) add(e textEdit) bool {
	if es.s.tooLong {
		return false
	}
	if es.size += len(e.text) - (e.end - e.start); es.size > MaxStatementBytes {
		es.s.tooLong = true
		return false
	}
	es.list = append(es.list, e)
	return true
}

// errFlatTooLong refuses a statement whose flattening would pass
// MaxStatementBytes.
func errFlatTooLong() error {
	return pgerr.New(pgerr.ProgramLimitExceeded, "DP statement too long once its subqueries and CTEs are expanded: over %d bytes", MaxStatementBytes).
		WithHint("refer to each column of a subquery or CTE fewer times, or name each CTE once in FROM")
}

func applyEdits(src string, edits []textEdit) string {
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].start < edits[j].start })
	var b strings.Builder
	at := 0
	for _, e := range edits {
		if e.start < at {
			continue // overlapping edit: keep the first
		}
		b.WriteString(src[at:e.start])
		b.WriteString(e.text)
		at = e.end
	}
	b.WriteString(src[at:])
	return b.String()
}

// projection is a query that reads one protected table, computes no
// aggregate and only renames and filters.
type projection struct {
	table    *policy.Table
	tableRef [2]int            // the table reference's tokens
	quals    map[string]bool   // names that qualify its columns inside (alias, table)
	columns  map[string][2]int // output name → expression tokens
	where    [2]int            // condition tokens, empty when none
}

// clauseWords end a FROM item or a WHERE condition.
var clauseWords = map[string]bool{
	"where": true, "group": true, "having": true, "window": true, "order": true, "limit": true,
	"offset": true, "fetch": true, "union": true, "intersect": true, "except": true,
	"join": true, "inner": true, "left": true, "right": true, "full": true, "cross": true,
	"natural": true, "on": true, "using": true, "for": true,
}

// projectionOf reads toks[lo:hi] as a projection, or returns nil.
func (s *splitter) projectionOf(lo, hi int) *projection {
	if lo >= hi || !s.toks[lo].Is("select") {
		return nil
	}
	from, where, end := -1, -1, hi
	for k := lo + 1; k < hi; k++ {
		t := s.toks[k]
		if t.IsPunct("(") {
			if s.startsQuery(k) {
				return nil
			}
			k = s.match[k]
			continue
		}
		if t.Kind != pgsql.TokIdent || t.Quoted {
			continue
		}
		if aggregateWords[t.Val] && k+1 < hi && s.toks[k+1].IsPunct("(") {
			return nil
		}
		switch t.Val {
		case "distinct", "over", "group", "having", "window", "limit", "offset", "fetch",
			"union", "intersect", "except", "join", "into", "for", "with", "values", "lateral":
			return nil
		case "from":
			if from >= 0 {
				return nil
			}
			from = k
		case "where":
			if where >= 0 || from < 0 {
				return nil
			}
			where = k
		case "order":
			if end == hi {
				end = k
			}
		}
	}
	if from < 0 {
		return nil
	}
	// FROM [schema.]table [[AS] alias]
	k := from + 1
	if k >= end || s.toks[k].Kind != pgsql.TokIdent {
		return nil
	}
	ref := [2]int{k, k + 1}
	if k+2 < end && s.toks[k+1].IsPunct(".") && s.toks[k+2].Kind == pgsql.TokIdent {
		ref = [2]int{k, k + 3}
	}
	tb, ok := s.ds.Tables[strings.ToLower(s.toks[ref[1]-1].Val)]
	if !ok || tb.Public {
		return nil
	}
	p := &projection{table: tb, tableRef: ref, quals: map[string]bool{tb.Name: true}, columns: map[string][2]int{}}
	k = ref[1]
	fromEnd := end
	if where >= 0 {
		fromEnd = where
	}
	if k < fromEnd && s.toks[k].Is("as") {
		k++
	}
	if k < fromEnd && s.toks[k].Kind == pgsql.TokIdent && !(clauseWords[s.toks[k].Val] && !s.toks[k].Quoted) {
		p.quals = map[string]bool{s.toks[k].Val: true}
		k++
	}
	if k != fromEnd {
		return nil
	}
	if where >= 0 {
		p.where = [2]int{where + 1, end}
		if where+1 >= end {
			return nil
		}
	}
	for _, it := range s.items(lo+1, from) {
		if it[1]-it[0] == 1 && s.toks[it[0]].IsOp("*") {
			continue
		}
		if it[1]-it[0] == 3 && s.toks[it[0]+2].IsOp("*") {
			continue
		}
		e := s.itemExpr(it)
		name := ""
		if e != it {
			name = s.toks[it[1]-1].Val
		} else {
			name = s.lastName(e)
		}
		if name != "" {
			p.columns[name] = e
		}
	}
	return p
}

// exprText renders expression tokens of a projection with their column
// references qualified by qual (the derived table's alias, which now names
// the table), and their inner qualifiers dropped.
func (s *splitter) exprText(p *projection, r [2]int, qual string) string {
	var b strings.Builder
	for k := r[0]; k < r[1]; k++ {
		t := s.toks[k]
		if t.Kind == pgsql.TokIdent && p.quals[t.Val] && k+1 < r[1] && s.toks[k+1].IsPunct(".") {
			k++ // drop "inner." : the column is qualified below
			continue
		}
		text := s.src[t.Pos:t.End]
		if t.Kind == pgsql.TokIdent && (k == r[0] || !s.toks[k-1].IsPunct(".")) && (k+1 >= r[1] || !s.toks[k+1].IsPunct("(") && !s.toks[k+1].IsPunct(".")) {
			if _, ok := p.table.Column(t.Val); ok && qual != "" {
				text = pgemit.QuoteIdent(qual) + "." + pgemit.QuoteIdent(t.Val)
			}
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(text)
	}
	return b.String()
}

// enclosing returns the SELECT (token range) that contains token k: the
// innermost parenthesized query around it (or the statement), past its
// CTEs, and the branch of a set operation that holds k.
func (s *splitter) enclosing(k int) (int, int) {
	lo, hi := 0, len(s.toks)
	for j := k - 1; j >= 0; j-- {
		if s.toks[j].IsPunct("(") && s.match[j] > k {
			lo, hi = j+1, s.match[j]
			break
		}
	}
	if s.toks[lo].Is("with") {
		if m := s.withMain(lo, hi); m > lo && m <= k {
			lo = m
		}
	}
	if bs := s.setBranches(lo, hi); len(bs) > 1 {
		for _, b := range bs {
			if k >= b[0] && k < b[1] {
				return b[0], b[1]
			}
		}
	}
	return lo, hi
}

// flattenOnce inlines one projection CTE, or flattens one projection
// subquery in FROM into its enclosing query; changed is false when there
// is none.
func flattenOnce(ds *policy.Dataset, text string) (string, bool, error) {
	toks, err := pgsql.Lex(text)
	if err != nil {
		return "", false, err
	}
	s := &splitter{ds: ds, src: text, toks: toks, match: matchParens(toks)}
	if s.match == nil {
		return text, false, nil
	}
	if out, ok := s.inlineCTE(); ok || s.tooLong || s.tooManyRefs != "" {
		if s.tooManyRefs != "" {
			return "", false, pgerr.New(pgerr.ProgramLimitExceeded, "CTE %s is read more than %d times in FROM", pgemit.QuoteIdent(s.tooManyRefs), maxCTERefs).
				WithHint("a CTE over a protected table is expanded where it is read: read it at most %d times", maxCTERefs)
		}
		if s.tooLong {
			return "", false, errFlatTooLong()
		}
		return out, true, nil
	}
	for k := 1; k < len(toks); k++ {
		if !s.startsQuery(k) || !(toks[k-1].Is("from") || toks[k-1].Is("join")) {
			continue
		}
		p := s.projectionOf(k+1, s.match[k])
		if p == nil {
			continue
		}
		if out, ok := s.flatten(k, p); ok || s.tooLong {
			if s.tooLong {
				return "", false, errFlatTooLong()
			}
			return out, true, nil
		}
	}
	return text, false, nil
}

// flatten replaces the derived table opened at k by its table.
func (s *splitter) flatten(k int, p *projection) (string, bool) {
	closeAt := s.match[k]
	// The derived table's alias.
	alias, aliasEnd := "", closeAt+1
	j := closeAt + 1
	if j < len(s.toks) && s.toks[j].Is("as") {
		j++
	}
	if j < len(s.toks) && s.toks[j].Kind == pgsql.TokIdent && !(clauseWords[s.toks[j].Val] && !s.toks[j].Quoted) {
		alias, aliasEnd = s.toks[j].Val, j+1
		if aliasEnd < len(s.toks) && s.toks[aliasEnd].IsPunct("(") {
			return "", false // a column alias list: not flattened
		}
	}
	qual := alias
	if qual == "" {
		qual = p.table.Name
	}
	lo, hi := s.enclosing(k)
	// The enclosing select list: a bare reference there keeps its name
	// as the output column's label.
	listEnd := lo
	for i := lo; i < hi; i++ {
		if s.toks[i].IsPunct("(") {
			i = s.match[i]
			continue
		}
		if s.toks[i].Is("from") {
			listEnd = i
			break
		}
	}
	wrap := func(e [2]int, name string, from, to int) string {
		text := s.exprText(p, e, qual)
		if e[1]-e[0] > 1 && s.lastName(e) == "" {
			text = "(" + text + ")"
		}
		if from > lo && to < listEnd && (s.toks[from-1].Is("select") || s.toks[from-1].Is("distinct") || s.toks[from-1].IsPunct(",")) &&
			(s.toks[to+1].IsPunct(",") || s.toks[to+1].Is("from")) {
			text += " AS " + pgemit.QuoteIdent(name)
		}
		return text
	}
	edits := s.newEdits()
	ref := s.text(p.tableRef[0], p.tableRef[1])
	repl := ref
	if alias != "" {
		repl += " AS " + pgemit.QuoteIdent(alias)
	}
	edits.add(textEdit{s.toks[k].Pos, s.toks[aliasEnd-1].End, repl})
	// References to the derived table's columns.
	for i := lo; i < hi; i++ {
		if i >= k && i < aliasEnd {
			i = aliasEnd - 1
			continue
		}
		t := s.toks[i]
		if t.Kind != pgsql.TokIdent {
			continue
		}
		if s.tooLong {
			return "", false
		}
		if alias != "" && t.Val == alias && i+2 < hi && s.toks[i+1].IsPunct(".") && s.toks[i+2].Kind == pgsql.TokIdent {
			if e, ok := p.columns[s.toks[i+2].Val]; ok {
				edits.add(textEdit{t.Pos, s.toks[i+2].End, wrap(e, s.toks[i+2].Val, i, i+2)})
			}
			i += 2
			continue
		}
		if i > lo && (s.toks[i-1].IsPunct(".") || s.toks[i-1].Is("as")) {
			continue
		}
		if i+1 < hi && (s.toks[i+1].IsPunct(".") || s.toks[i+1].IsPunct("(")) {
			continue
		}
		if e, ok := p.columns[t.Val]; ok {
			edits.add(textEdit{t.Pos, t.End, wrap(e, t.Val, i, i)})
		}
	}
	// The inner WHERE, ANDed to the enclosing one.
	if p.where[1] > p.where[0] {
		cond := "(" + s.exprText(p, p.where, qual) + ")"
		where, condEnd, insertAt := -1, -1, -1
		for i := aliasEnd; i < hi; i++ {
			t := s.toks[i]
			if t.IsPunct("(") {
				i = s.match[i]
				continue
			}
			if t.Kind != pgsql.TokIdent || t.Quoted {
				continue
			}
			switch t.Val {
			case "where":
				if where < 0 && insertAt < 0 {
					where = i
				}
			case "group", "having", "window", "order", "limit", "offset", "fetch":
				if where >= 0 && condEnd < 0 {
					condEnd = i
				}
				if where < 0 && insertAt < 0 {
					insertAt = i
				}
			}
		}
		switch {
		case where >= 0:
			if condEnd < 0 {
				condEnd = hi
			}
			edits.add(textEdit{s.toks[where].End, s.toks[where].End, " " + cond + " AND ("})
			edits.add(textEdit{s.toks[condEnd-1].End, s.toks[condEnd-1].End, ")"})
		case insertAt >= 0:
			edits.add(textEdit{s.toks[insertAt].Pos, s.toks[insertAt].Pos, "WHERE " + cond + " "})
		default:
			edits.add(textEdit{s.toks[hi-1].End, s.toks[hi-1].End, " WHERE " + cond})
		}
	}
	if s.tooLong {
		return "", false
	}
	return applyEdits(s.src, edits.list), true
}

// inlineCTE inlines the first CTE whose body is a projection: each
// reference to it in FROM becomes the derived table (body) AS name, which
// flatten then removes, and its definition is dropped.
func (s *splitter) inlineCTE() (string, bool) {
	for w := 0; w < len(s.toks); w++ {
		if !s.toks[w].Is("with") || (w > 0 && !s.toks[w-1].IsPunct("(")) {
			continue
		}
		end := len(s.toks)
		if w > 0 {
			end = s.match[w-1]
		}
		k := w + 1
		if k < end && s.toks[k].Is("recursive") {
			continue
		}
		type cte struct {
			name       string
			start      int // the name token
			bodyOpen   int
			stop       int // index after the definition (past its comma)
			hasColList bool
		}
		var ctes []cte
		for k < end && s.toks[k].Kind == pgsql.TokIdent {
			c := cte{name: s.toks[k].Val, start: k}
			k++
			if k < end && s.toks[k].IsPunct("(") {
				c.hasColList = true
				k = s.match[k] + 1
			}
			if k >= end || !s.toks[k].Is("as") {
				break
			}
			k++
			if k < end && s.toks[k].Is("not") {
				k++
			}
			if k < end && s.toks[k].Is("materialized") {
				k++
			}
			if k >= end || !s.toks[k].IsPunct("(") {
				break
			}
			c.bodyOpen = k
			k = s.match[k] + 1
			c.stop = k
			ctes = append(ctes, c)
			if k < end && s.toks[k].IsPunct(",") {
				k++
				c.stop = k
				ctes[len(ctes)-1] = c
				continue
			}
			break
		}
		for i, c := range ctes {
			if c.hasColList || s.projectionOf(c.bodyOpen+1, s.match[c.bodyOpen]) == nil {
				continue
			}
			body := s.text(c.bodyOpen, s.match[c.bodyOpen]+1)
			edits := s.newEdits()
			// Drop the definition (and WITH when it is the only one).
			switch {
			case len(ctes) == 1:
				edits.add(textEdit{s.toks[w].Pos, s.toks[c.stop-1].End, ""})
			case i == len(ctes)-1:
				prev := ctes[i-1]
				edits.add(textEdit{s.toks[prev.stop-1].Pos, s.toks[c.stop-1].End, ""})
			default:
				edits.add(textEdit{s.toks[c.start].Pos, s.toks[c.stop-1].End, ""})
			}
			// References in FROM after the definition.
			refs := 0
			for j := c.stop; j < end; j++ {
				t := s.toks[j]
				if t.Kind != pgsql.TokIdent || t.Val != c.name || !(s.toks[j-1].Is("from") || s.toks[j-1].Is("join")) {
					continue
				}
				if j+1 < end && (s.toks[j+1].IsPunct(".") || s.toks[j+1].IsPunct("(")) {
					continue
				}
				repl := body
				next := j + 1
				hasAlias := next < end && (s.toks[next].Is("as") ||
					s.toks[next].Kind == pgsql.TokIdent && !(clauseWords[s.toks[next].Val] && !s.toks[next].Quoted))
				if !hasAlias {
					repl += " AS " + pgemit.QuoteIdent(c.name)
				}
				if refs++; refs > maxCTERefs {
					s.tooManyRefs = c.name
					return "", false
				}
				if !edits.add(textEdit{t.Pos, t.End, repl}) {
					return "", false
				}
			}
			return applyEdits(s.src, edits.list), true
		}
	}
	return "", false
}

// withMain returns the index of the main query of WITH … toks[lo:hi]
// (lo is the WITH), or lo when the CTE list does not parse.
func (s *splitter) withMain(lo, hi int) int {
	k := lo + 1
	if k < hi && s.toks[k].Is("recursive") {
		k++
	}
	for k < hi && s.toks[k].Kind == pgsql.TokIdent {
		k++
		if k < hi && s.toks[k].IsPunct("(") {
			k = s.match[k] + 1
		}
		if k >= hi || !s.toks[k].Is("as") {
			return lo
		}
		k++
		if k < hi && s.toks[k].Is("not") {
			k++
		}
		if k < hi && s.toks[k].Is("materialized") {
			k++
		}
		if k >= hi || !s.toks[k].IsPunct("(") {
			return lo
		}
		k = s.match[k] + 1
		if k < hi && s.toks[k].IsPunct(",") {
			k++
			continue
		}
		return k
	}
	return lo
}
