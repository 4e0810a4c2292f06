package rewrite

import (
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// maxExprDepth bounds how deeply the analyst's statement nests (operators,
// function calls, parentheses, CASE …, counted in parse-tree levels). The
// emitted SQL nests at least as deeply, and PostgreSQL's parser gives up
// between 4,000 and 5,000 levels (42601 "memory exhausted", or 54001
// "stack depth limit exceeded", earlier under a smaller max_stack_depth):
// the query would fail upstream after the charge (issue 14; the totality
// fuzzer generates such queries). A chain of n ORs is n levels deep; long
// lists of alternatives fit in IN (…), which is flat.
const maxExprDepth = 1000

// depthVisitor measures the depth of a parse tree, giving up below
// maxExprDepth + 1.
type depthVisitor struct{ depth, max int }

func (v *depthVisitor) Enter(n ast.Node) (ast.Node, bool) {
	v.depth++
	v.max = max(v.max, v.depth)
	return n, v.depth > maxExprDepth
}

func (v *depthVisitor) Leave(n ast.Node) (ast.Node, bool) {
	v.depth--
	return n, true
}

// checkDepth refuses a statement nested more deeply than maxExprDepth.
func (b *builder) checkDepth(sel *ast.SelectStmt) error {
	v := &depthVisitor{}
	sel.Accept(v)
	if v.max > maxExprDepth {
		return pgerr.New("54001", "statement too complex: expressions nested more than %d levels deep", maxExprDepth).
			WithHint("simplify the query; write a long list of alternatives as col IN (a, b, …) instead of ORs")
	}
	return nil
}
