package rewrite

import (
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/pgsql"
)

// The splitter of Post, within one SELECT: its clauses, its items, and
// the aggregate calls that become DP leaves. See post.go for the rules.

// aggregateWords are the aggregate functions a DP leaf may compute; in the
// split of window functions over aggregates, a call of one of them not
// followed by OVER is an aggregate of the leaf.
var aggregateWords = map[string]bool{
	"count": true, "sum": true, "avg": true, "min": true, "max": true,
	"var_pop": true, "var_samp": true, "variance": true, "stddev": true, "stddev_pop": true, "stddev_samp": true,
	"percentile_cont": true, "percentile_disc": true, "corr": true, "covar_pop": true, "covar_samp": true,
	"regr_slope": true, "regr_intercept": true, "regr_r2": true, "regr_count": true, "regr_avgx": true,
	"regr_avgy": true, "regr_sxx": true, "regr_syy": true, "regr_sxy": true,
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
		sel = append(sel, s.text(k[0], k[1])+" AS "+pgemit.QuoteIdent("_k"+strconv.Itoa(i+1)))
	}
	// Each aggregate's column is named by its text, which the leaf's
	// NOTICE then shows beside its error ("COUNT(*)", not "_a1"), unless
	// that text is long or not a plain name.
	alias := make([]string, len(aggs))
	seen := map[string]bool{}
	for i, a := range aggs {
		t := s.text(a[0], a[1])
		if len(t) > 48 || strings.ContainsAny(t, "\"\x00\n\r\t") || seen[t] {
			t = "_a" + strconv.Itoa(i+1)
		}
		seen[t] = true
		alias[i] = pgemit.QuoteIdent(t)
		sel = append(sel, s.text(a[0], a[1])+" AS "+alias[i])
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
					b.WriteString(alias[i] + " ")
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
					b.WriteString(pgemit.QuoteIdent("_k"+strconv.Itoa(i+1)) + " ")
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
				text += "AS " + pgemit.QuoteIdent(name)
			} else if s.toks[e[0]].Kind == pgsql.TokIdent && e[1]-e[0] > 1 && s.toks[e[0]+1].IsPunct("(") {
				text += "AS " + pgemit.QuoteIdent(s.toks[e[0]].Val)
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
	tail := ") AS " + pgemit.QuoteIdent("dp_aggregate") + " "
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
