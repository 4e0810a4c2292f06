package rewrite

import (
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
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

// maxTargetList is PostgreSQL's limit on a select list (MaxTupleAttributeNumber):
// no statement PostgreSQL answers has more.
const maxTargetList = 1664

// MaxStatementBytes bounds the text of one DP statement. Planning runs on
// the proxy's CPU before admission, the rate limit and the charge, so its
// cost must be bounded by public quantities before it starts: the text's
// length and nesting (CheckText) bound every pass over it. 64 KiB is far
// above what BI tools send for one chart (the client corpus's longest is
// under 2 KiB) and keeps the worst accepted statement's planning near a
// tenth of a second (BENCHMARKS.md, "Planning cost"); the emitted SQL is
// itself capped (checkSQLSize).
const MaxStatementBytes = 64 << 10

// CheckText refuses, before any other pass reads it, a DP statement longer
// than MaxStatementBytes (54000) or whose parentheses nest more than
// maxExprDepth levels (54001, as checkDepth refuses deeper parse trees):
// the passes before the parser (the relative-date folder, the post-
// processing split, EXPLAIN and DISTINCT recognition) recurse on
// parentheses, and an unbounded depth overflowed the goroutine's stack,
// which no recover catches (issue 33's attack: 250,000 levels ended the
// proxy). The lexer it runs is linear in the text.
func CheckText(stmt string) error {
	if len(stmt) > MaxStatementBytes {
		return pgerr.New(pgerr.ProgramLimitExceeded, "DP statement too long: %d bytes, at most %d", len(stmt), MaxStatementBytes).
			WithHint("shorten the query: write long lists of alternatives as col IN (a, b, …), or split it into several queries")
	}
	toks, err := pgsql.Lex(stmt)
	if err != nil {
		return nil // the planner reports the lexer's error with its position
	}
	depth := 0
	for _, t := range toks {
		switch {
		case t.IsPunct("("), t.IsPunct("["):
			if depth++; depth > maxExprDepth {
				return pgerr.New("54001", "statement too complex: parentheses nested more than %d levels deep", maxExprDepth).
					WithPosition(pgsql.CharPos(stmt, t.Pos)).
					WithHint("simplify the query; write a long list of alternatives as col IN (a, b, …) instead of nested conditions")
			}
		case t.IsPunct(")"), t.IsPunct("]"):
			depth--
		}
	}
	return nil
}
