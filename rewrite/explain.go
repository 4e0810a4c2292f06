package rewrite

import (
	"github.com/dpproxy/dpproxy/internal/pgerr"
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
	toks, err := lex(stmt)
	if err != nil {
		return "", false, err
	}
	if len(toks) == 0 || !toks[0].is("explain") {
		return "", false, nil
	}
	refuse := func(t token, what string) error {
		return pgerr.New(pgerr.FeatureNotSupported, "EXPLAIN %s is not supported on protected tables", what).
			WithPosition(charPos(stmt, t.pos)).
			WithHint("write EXPLAIN query: dpproxy describes the DP plan without running it")
	}
	j := 1
	switch {
	case j < len(toks) && (toks[j].is("analyze") || toks[j].is("analyse")):
		return "", false, refuse(toks[j], "ANALYZE")
	case j < len(toks) && toks[j].is("verbose"):
		j++
	case j < len(toks) && toks[j].isPunct("("):
		j++
		for {
			if j >= len(toks) {
				return "", false, syntaxErr(stmt, len(stmt), "syntax error at end of input").WithHint("close the EXPLAIN options with )")
			}
			t := toks[j]
			if t.kind != tokIdent || t.quoted {
				return "", false, refuse(t, "with these options")
			}
			switch t.val {
			case "verbose", "costs", "settings", "summary":
				j++
				if j < len(toks) && (toks[j].is("true") || toks[j].is("false") || toks[j].is("on") || toks[j].is("off")) {
					j++
				}
			case "format":
				if j+1 >= len(toks) || !toks[j+1].is("text") {
					return "", false, refuse(t, "FORMAT other than TEXT")
				}
				j += 2
			default:
				return "", false, refuse(t, "("+t.val+")")
			}
			if j < len(toks) && toks[j].isPunct(",") {
				j++
				continue
			}
			if j < len(toks) && toks[j].isPunct(")") {
				j++
				break
			}
			return "", false, syntaxErr(stmt, toks[min(j, len(toks)-1)].pos, "syntax error in EXPLAIN options").WithHint("write EXPLAIN (COSTS off, VERBOSE) query")
		}
	}
	if j >= len(toks) {
		return "", false, syntaxErr(stmt, len(stmt), "syntax error at end of input").WithHint("write EXPLAIN followed by a query")
	}
	return stmt[toks[j].pos:], true, nil
}
