package rewrite

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
)

// Passes over the normalizer's pieces: IS [NOT] DISTINCT FROM, rendering
// with offsets, positions of parse errors, and the LIMIT/OFFSET tail. See
// normalize.go for the normalizer's rules.

// distinctFrom rewrites each "<=>" marker into a null-safe comparison of
// its two operands: (L <=> R) for IS NOT DISTINCT FROM and (NOT (L <=> R))
// for IS DISTINCT FROM. Operands must be simple primaries (a possibly
// qualified name, a literal, or a parenthesized expression) so that the
// grouping cannot differ from PostgreSQL's precedence.
func (n *normalized) distinctFrom() error {
	for idx := 0; idx < len(n.pieces); idx++ {
		p := n.pieces[idx]
		if p.nsEq == 0 {
			continue
		}
		bad := pgerr.New(pgerr.FeatureNotSupported, "IS DISTINCT FROM is only supported between a column and a literal").
			WithPosition(pgsql.CharPos(n.src, p.pos)).
			WithHint("parenthesize the operands, e.g. (cost) IS DISTINCT FROM 0")
		ls := n.primaryStart(idx - 1)
		re := n.primaryEnd(idx + 1)
		if ls < 0 || re < 0 {
			return bad
		}
		if ls > 0 {
			prev := n.pieces[ls-1].text
			switch prev {
			case "(", ",", "AND", "OR", "NOT", "WHERE", "WHEN", "THEN", "ELSE", "SELECT", "HAVING", "ON":
			default:
				return bad
			}
		}
		if re+1 < len(n.pieces) {
			nx := n.pieces[re+1]
			if !nx.word && nx.text != ")" && nx.text != "," || nx.text == "?" || nx.text == "NULL" {
				return bad
			}
		}
		open := []piece{{text: "(", pos: p.pos, lit: -1}}
		closeP := []piece{{text: ")", pos: p.pos, lit: -1}}
		if p.nsEq == 2 {
			open = append(open, piece{text: "NOT", pos: p.pos, lit: -1, word: true}, piece{text: "(", pos: p.pos, lit: -1})
			closeP = append(closeP, piece{text: ")", pos: p.pos, lit: -1})
		}
		n.pieces[idx].nsEq = 0
		out := append([]piece{}, n.pieces[:ls]...)
		out = append(out, open...)
		out = append(out, n.pieces[ls:re+1]...)
		out = append(out, closeP...)
		out = append(out, n.pieces[re+1:]...)
		n.pieces = out
		idx += len(open)
	}
	return nil
}

// primaryStart returns the index of the first piece of the primary ending
// at piece i, or -1.
func (n *normalized) primaryStart(i int) int {
	if i < 0 {
		return -1
	}
	ps := n.pieces
	if ps[i].text == ")" {
		depth := 0
		for j := i; j >= 0; j-- {
			switch ps[j].text {
			case ")":
				depth++
			case "(":
				depth--
				if depth == 0 {
					if j > 0 && ps[j-1].word && ps[j-1].lit < 0 {
						return -1 // function call
					}
					return j
				}
			}
		}
		return -1
	}
	if !ps[i].word || ps[i].lit < 0 && !strings.HasPrefix(ps[i].text, `"`) {
		return -1
	}
	j := i
	for j >= 2 && ps[j-1].text == "." && strings.HasPrefix(ps[j-2].text, `"`) {
		j -= 2
	}
	if j > 0 && ps[j-1].text == "-" && ps[j].lit >= 0 {
		j--
		if j > 0 && (ps[j-1].word || ps[j-1].text == ")") {
			return -1 // binary minus
		}
	}
	return j
}

// primaryEnd returns the index of the last piece of the primary starting
// at piece i, or -1.
func (n *normalized) primaryEnd(i int) int {
	ps := n.pieces
	if i >= len(ps) {
		return -1
	}
	if ps[i].text == "(" {
		depth := 0
		for j := i; j < len(ps); j++ {
			switch ps[j].text {
			case "(":
				depth++
			case ")":
				depth--
				if depth == 0 {
					return j
				}
			}
		}
		return -1
	}
	if ps[i].text == "-" && i+1 < len(ps) && ps[i+1].lit >= 0 {
		return i + 1
	}
	if ps[i].lit >= 0 {
		return i
	}
	if !strings.HasPrefix(ps[i].text, `"`) {
		return -1
	}
	j := i
	for j+2 < len(ps) && ps[j+1].text == "." && strings.HasPrefix(ps[j+2].text, `"`) {
		j += 2
	}
	if j+1 < len(ps) && ps[j+1].text == "(" {
		return -1 // function call
	}
	return j
}

// render joins the pieces with single spaces and records offsets.
func (n *normalized) render() {
	var b strings.Builder
	b.Grow(len(n.src) + 4*len(n.pieces)) // spaces and quotes around names
	n.starts = make([]int, len(n.pieces))
	for i, p := range n.pieces {
		// MySQL reads a function name followed by a space as an identifier
		// (IGNORE_SPACE is off), so "(" after a name is written directly.
		if i > 0 && !(p.text == "(" && (n.pieces[i-1].lit < 0 && n.pieces[i-1].word &&
			(aggregateNames[strings.ToLower(n.pieces[i-1].text)] != "" || n.pieces[i-1].text == "EXTRACT" || strings.HasPrefix(n.pieces[i-1].text, `"`)))) {
			b.WriteByte(' ')
		}
		n.starts[i] = b.Len()
		if p.lit >= 0 {
			n.litAt[b.Len()] = p.lit
		}
		b.WriteString(p.text)
	}
	n.text = b.String()
}

// srcPos maps a byte offset of the normalized text to a byte offset of the
// source statement.
func (n *normalized) srcPos(off int) int {
	best := 0
	for i, s := range n.starts {
		if s <= off {
			best = n.pieces[i].pos
		} else {
			break
		}
	}
	return best
}

// tidbErrRE extracts the column of a TiDB parser error ("line 1 column 16
// near …").
var tidbErrRE = regexp.MustCompile(`line \d+ column (\d+)`)

// parseErrPos returns the source offset of a TiDB parse error.
func (n *normalized) parseErrPos(msg string) int {
	m := tidbErrRE.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	col, err := strconv.Atoi(m[1])
	if err != nil {
		return 0
	}
	// TiDB reports the column just after the last token it accepted;
	// point at the token that starts there or before.
	return n.srcPos(col - 1)
}

// limitTail reads the trailing LIMIT/OFFSET clauses of a query, in either
// order: LIMIT {count | ALL | NULL}, OFFSET start [ROW | ROWS]. Nothing may
// follow them.
func (n *normalized) limitTail(toks []pgsql.Token) error {
	src := n.src
	i := 0
	num := func(what string) (*literal, error) {
		if i >= len(toks) {
			return nil, pgsql.SyntaxErr(src, len(src), "syntax error at end of input: expected a number after %s", what)
		}
		t := toks[i]
		if t.Is("null") || what == "LIMIT" && t.Is("all") {
			i++
			return &literal{kind: litNull, val: "null", pos: t.Pos}, nil
		}
		neg := ""
		if t.IsOp("-") && i+1 < len(toks) {
			neg = "-"
			i++
			t = toks[i]
		}
		if t.Kind != pgsql.TokNumber {
			return nil, pgerr.New(pgerr.FeatureNotSupported, "%s must be an integer literal", what).
				WithPosition(pgsql.CharPos(src, t.Pos)).WithHint("write %s 10", what)
		}
		i++
		// A cast of the count to an integer type, as clients that bind it
		// write it (SQLAlchemy's asyncpg dialect: LIMIT $1::integer),
		// means the count itself.
		if i+1 < len(toks) && toks[i].IsPunct("::") {
			typ, k, err := castType(src, toks, i+1)
			if err != nil {
				return nil, err
			}
			if typ != policy.TypeInt || strings.Contains(t.Val, ".") || strings.ContainsAny(t.Val, "eE") {
				return nil, pgerr.New(pgerr.FeatureNotSupported, "%s must be an integer literal", what).
					WithPosition(pgsql.CharPos(src, toks[i].Pos)).WithHint("write %s 10, or %s 10::integer", what, what)
			}
			i = k
		}
		return &literal{kind: litNumber, val: neg + t.Val, pos: t.Pos}, nil
	}
	for i < len(toks) {
		t := toks[i]
		switch {
		case t.Is("limit") && n.limit == nil:
			i++
			l, err := num("LIMIT")
			if err != nil {
				return err
			}
			if i < len(toks) && toks[i].IsPunct(",") {
				return pgsql.SyntaxErr(src, toks[i].Pos, "LIMIT a, b is MySQL syntax").
					WithHint("write LIMIT count OFFSET skip")
			}
			n.limit = l
		case t.Is("offset") && n.offset == nil:
			i++
			l, err := num("OFFSET")
			if err != nil {
				return err
			}
			if i < len(toks) && (toks[i].Is("row") || toks[i].Is("rows")) {
				i++
			}
			n.offset = l
		case t.Is("limit") || t.Is("offset"):
			return pgsql.SyntaxErr(src, t.Pos, "multiple %s clauses not allowed", strings.ToUpper(t.Val)).
				WithHint("write LIMIT and OFFSET at most once each, e.g. LIMIT 10 OFFSET 20")
		case t.Is("fetch") && i+1 < len(toks) && (toks[i+1].Is("first") || toks[i+1].Is("next")):
			// FETCH {FIRST|NEXT} [count] {ROW|ROWS} ONLY: the SQL
			// standard's LIMIT (count 1 when left out).
			if n.limit != nil {
				return pgsql.SyntaxErr(src, t.Pos, "multiple LIMIT clauses not allowed").
					WithHint("write either LIMIT n or FETCH FIRST n ROWS ONLY")
			}
			i += 2
			l := &literal{kind: litNumber, val: "1", pos: t.Pos}
			if i < len(toks) && !toks[i].Is("row") && !toks[i].Is("rows") {
				var err error
				if l, err = num("FETCH FIRST"); err != nil {
					return err
				}
			}
			if i >= len(toks) || !(toks[i].Is("row") || toks[i].Is("rows")) {
				return pgsql.SyntaxErr(src, posAt(src, toks, i), "syntax error: expected ROW or ROWS").
					WithHint("write FETCH FIRST n ROWS ONLY")
			}
			i++
			if i < len(toks) && toks[i].Is("with") {
				return pgerr.New(pgerr.FeatureNotSupported, "FETCH FIRST … WITH TIES is not supported").
					WithPosition(pgsql.CharPos(src, toks[i].Pos)).WithHint("write FETCH FIRST n ROWS ONLY, or LIMIT n")
			}
			if i >= len(toks) || !toks[i].Is("only") {
				return pgsql.SyntaxErr(src, posAt(src, toks, i), "syntax error: expected ONLY").
					WithHint("write FETCH FIRST n ROWS ONLY")
			}
			i++
			n.limit = l
		default:
			return pgsql.SyntaxErr(src, t.Pos, "syntax error at or near %q", src[t.Pos:t.End]).
				WithHint("LIMIT and OFFSET end the query, each with an integer literal, e.g. LIMIT 10 OFFSET 20")
		}
	}
	return nil
}
