package rewrite

import (
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
)

// The splitter of Post: statements, WITH and set operations split into
// DP leaves and the outer SQL over them. See post.go for the rules.

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
	// tooLong: a flattening pass's edits would make the text longer than
	// MaxStatementBytes (flattenOnce refuses it).
	tooLong bool
	// tooManyRefs names a CTE read more than maxCTERefs times in FROM.
	tooManyRefs string
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
	var read *policy.Table // the first protected table read directly
	window := false
	for k := lo; k < hi; k++ {
		if s.startsQuery(k) {
			k = s.match[k]
			continue
		}
		if s.toks[k].Kind == pgsql.TokIdent {
			if tb, ok := s.ds.Tables[strings.ToLower(s.toks[k].Val)]; ok && !tb.Public {
				direct = true
				if read == nil {
					read = tb
				}
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
		// The usual intent is a filter by another protected table's
		// columns (WHERE patient_id IN (SELECT … FROM patients WHERE …)),
		// which a join on the unit says (new-user run).
		return s.refuse(lo, "a query that reads a protected table cannot also read a subquery over protected tables").
			WithHint("to filter by another protected table's columns, join it on the unit column instead (SELECT COUNT(*) FROM %s JOIN other_table USING (%s) WHERE other_table.column = …); otherwise: %s",
				read.Name, read.UnitColumn, postHint)
	case window, funcOverAggregate(s.toks, s.match, lo, hi):
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
