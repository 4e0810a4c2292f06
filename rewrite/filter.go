// It builds SQL fragments of the plan that the emitter sends upstream
// (pgemit/doc.go).

package rewrite

import (
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Aggregate FILTER (WHERE cond): the TiDB parser has no FILTER clause, so
// the normalizer rewrites
//
//	agg(args) FILTER (WHERE cond)   →   "dpproxy_filter"(agg(args), cond)
//
// (filterMarker; the analyst cannot write that function: the normalizer
// refuses the name), and before planning, liftFilters replaces each marker
// call by the aggregate node and records its condition. The condition is
// planned like WHERE (pred.go) and becomes Measure.Filter; the emitter
// turns the aggregate's per-row value into CASE WHEN cond THEN value END
// (pgemit/bounds_sql.go, rowValue), which is what PostgreSQL's FILTER computes.

// filterMarker is the function name the normalizer writes for FILTER.
const filterMarker = "dpproxy_filter"

// filterLifter is an ast.Visitor that replaces marker calls by their
// aggregate and records the condition.
type filterLifter struct {
	conds map[*ast.AggregateFuncExpr]ast.ExprNode
	err   error
	b     *builder
}

func (f *filterLifter) Enter(n ast.Node) (ast.Node, bool) { return n, false }

func (f *filterLifter) Leave(n ast.Node) (ast.Node, bool) {
	fc, ok := n.(*ast.FuncCallExpr)
	if !ok || fc.FnName.L != filterMarker {
		return n, true
	}
	if len(fc.Args) != 2 {
		f.err = f.b.errAt(fc, pgerr.SyntaxError, "syntax error in FILTER").WithHint("write agg(…) FILTER (WHERE condition)")
		return n, false
	}
	agg, ok := fc.Args[0].(*ast.AggregateFuncExpr)
	if !ok {
		f.err = f.b.errAt(fc, "42809", "FILTER specified, but this is not an aggregate function").
			WithHint("write FILTER (WHERE …) after COUNT, SUM, AVG or the variance aggregates")
		return n, false
	}
	if _, twice := f.conds[agg]; twice {
		f.err = f.b.errAt(fc, pgerr.SyntaxError, "syntax error: two FILTER clauses").WithHint("combine the conditions with AND")
		return n, false
	}
	f.conds[agg] = fc.Args[1]
	return agg, true
}

// liftFilters applies filterLifter to the statement.
func (b *builder) liftFilters(sel *ast.SelectStmt) error {
	f := &filterLifter{conds: map[*ast.AggregateFuncExpr]ast.ExprNode{}, b: b}
	sel.Accept(f)
	if f.err != nil {
		return f.err
	}
	b.filters = f.conds
	return nil
}

// aggFilter plans the FILTER condition of an aggregate call ("" when it
// has none) with the rules of WHERE.
func (b *builder) aggFilter(x *ast.AggregateFuncExpr) (dpplan.Pred, error) {
	cond, ok := b.filters[x]
	if !ok {
		return nil, nil
	}
	// The emitter evaluates the condition on every row, a CASE per measure
	// that carries it: its work is counted per measure
	// (dpplan.CondWork, RowOpsOf).
	return b.pred(cond)
}

// normalizeFilter rewrites "FILTER ( WHERE" at toks[i] (the word FILTER
// after an aggregate call's ")") into the marker call; see the file
// comment. It returns the index of the last token consumed.
func (n *normalized) normalizeFilter(toks []pgsql.Token, i int) (int, error) {
	src := n.src
	if i+2 >= len(toks) || !toks[i+2].Is("where") {
		return i, pgsql.SyntaxErr(src, posAt(src, toks, i+2), "syntax error: expected WHERE after FILTER (").
			WithHint("write agg(…) FILTER (WHERE condition)")
	}
	notAgg := pgerr.New("42809", "FILTER specified, but the expression before it is not an aggregate function").
		WithPosition(pgsql.CharPos(src, toks[i].Pos)).
		WithHint("write FILTER (WHERE …) directly after COUNT(…), SUM(…), AVG(…) or a variance aggregate")
	last := len(n.pieces) - 1
	if last < 0 || n.pieces[last].text != ")" || n.pieces[last].lit >= 0 {
		return i, notAgg
	}
	depth, k := 0, last
	for ; k >= 0; k-- {
		switch p := n.pieces[k]; {
		case p.lit >= 0:
		case p.text == ")":
			depth++
		case p.text == "(":
			depth--
		}
		if depth == 0 {
			break
		}
	}
	if k < 1 {
		return i, notAgg
	}
	name := n.pieces[k-1]
	if name.lit >= 0 || !name.word {
		return i, notAgg
	}
	if !isAggregateName(name.text) {
		return i, pgerr.New(pgerr.FeatureNotSupported, "FILTER is only supported after COUNT, SUM, AVG and the variance aggregates").
			WithPosition(pgsql.CharPos(src, toks[i].Pos)).
			WithHint("move the condition into WHERE, or write the aggregate over CASE WHEN condition THEN … END")
	}
	// Insert the marker call before the aggregate's name.
	marker := []piece{
		{text: pgemit.QuoteIdent(filterMarker), pos: name.pos, lit: -1, word: true},
		{text: "(", pos: name.pos, lit: -1},
	}
	n.pieces = append(n.pieces[:k-1], append(marker, n.pieces[k-1:]...)...)
	n.pieces = append(n.pieces, piece{text: ",", pos: toks[i].Pos, lit: -1})
	return i + 2, nil
}

func isAggregateName(s string) bool {
	for _, v := range aggregateNames {
		if v == strings.ToUpper(s) {
			return true
		}
	}
	return false
}
