package rewrite

import (
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
)

// ExplainTarget recognises EXPLAIN of a DP query. For "EXPLAIN [VERBOSE]
// query" or "EXPLAIN ( option [, …] ) query" it returns the text of the
// query (a slice of stmt, to pass to Rewrite) and true; for a statement
// that is not an EXPLAIN it returns "", false, nil. EXPLAIN ANALYZE (which
// would run the query) is refused with 0A000: on a protected table its
// timings and row counts would be a side channel on the data. Options in
// parentheses other than VERBOSE, COSTS, SETTINGS, SUMMARY and FORMAT TEXT
// (with an optional boolean) are refused the same way.
//
// The proxy answers an EXPLAIN of a protected table with release.Explain
// (no data, no budget); see release/explain.go.
func ExplainTarget(stmt string) (string, bool, error) {
	toks, err := pgsql.Lex(stmt)
	if err != nil {
		return "", false, err
	}
	if len(toks) == 0 || !toks[0].Is("explain") {
		return "", false, nil
	}
	refuse := func(t pgsql.Token, what string) error {
		return pgerr.New(pgerr.FeatureNotSupported, "EXPLAIN %s is not supported on protected tables", what).
			WithPosition(pgsql.CharPos(stmt, t.Pos)).
			WithHint("write EXPLAIN query: dpproxy describes the DP plan without running it")
	}
	j := 1
	switch {
	case j < len(toks) && (toks[j].Is("analyze") || toks[j].Is("analyse")):
		return "", false, refuse(toks[j], "ANALYZE")
	case j < len(toks) && toks[j].Is("verbose"):
		j++
	case j < len(toks) && toks[j].IsPunct("("):
		j++
		for {
			if j >= len(toks) {
				return "", false, pgsql.SyntaxErr(stmt, len(stmt), "syntax error at end of input").WithHint("close the EXPLAIN options with )")
			}
			t := toks[j]
			if t.Kind != pgsql.TokIdent || t.Quoted {
				return "", false, refuse(t, "with these options")
			}
			switch t.Val {
			case "verbose", "costs", "settings", "summary":
				j++
				if j < len(toks) && (toks[j].Is("true") || toks[j].Is("false") || toks[j].Is("on") || toks[j].Is("off")) {
					j++
				}
			case "format":
				if j+1 >= len(toks) || !toks[j+1].Is("text") {
					return "", false, refuse(t, "FORMAT other than TEXT")
				}
				j += 2
			default:
				return "", false, refuse(t, "("+t.Val+")")
			}
			if j < len(toks) && toks[j].IsPunct(",") {
				j++
				continue
			}
			if j < len(toks) && toks[j].IsPunct(")") {
				j++
				break
			}
			return "", false, pgsql.SyntaxErr(stmt, toks[min(j, len(toks)-1)].Pos, "syntax error in EXPLAIN options").WithHint("write EXPLAIN (COSTS off, VERBOSE) query")
		}
	}
	if j >= len(toks) {
		return "", false, pgsql.SyntaxErr(stmt, len(stmt), "syntax error at end of input").WithHint("write EXPLAIN followed by a query")
	}
	return stmt[toks[j].Pos:], true, nil
}
