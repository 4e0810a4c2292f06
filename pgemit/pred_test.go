package pgemit

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
)

// TestPredSQL_BoundedText: a text column is read through its length test
// exactly where a condition would read the value whole (LIKE, ordering
// comparisons, BETWEEN, IN lists PostgreSQL hashes), and nowhere else, so
// that PostgreSQL's estimates keep the column's statistics for `=`, `<>`,
// short IN lists and non-text columns.
func TestPredSQL_BoundedText(t *testing.T) {
	const d = `"diagnosis"`
	const guarded = `CASE WHEN octet_length("diagnosis") <= 256 THEN "diagnosis" END`
	lits := func(n int, typ string) []string {
		var out []string
		for i := range n {
			out = append(out, "'"+strings.Repeat("x", i+1)+"'"+typ)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		pred  dpplan.Pred
		guard bool
	}{
		{"text >", dpplan.PredCmp{Col: d, Op: ">", Lit: "'A'::text"}, true},
		{"text <=", dpplan.PredCmp{Col: d, Op: "<=", Lit: "'A'::text"}, true},
		{"text =", dpplan.PredCmp{Col: d, Op: "=", Lit: "'A'::text"}, false},
		{"text <>", dpplan.PredCmp{Col: d, Op: "<>", Lit: "'A'::text"}, false},
		{"text IS DISTINCT FROM", dpplan.PredCmp{Col: d, Op: "IS DISTINCT FROM", Lit: "'A'::text"}, false},
		{"text BETWEEN", dpplan.PredBetween{Col: d, Lo: "'A'::text", Hi: "'B'::text"}, true},
		{"text NOT BETWEEN", dpplan.PredBetween{Col: d, Lo: "'A'::text", Hi: "'B'::text", Not: true}, true},
		{"text IN of 8", dpplan.PredIn{Col: d, Lits: lits(8, "::text")}, false},
		{"text IN of 9", dpplan.PredIn{Col: d, Lits: lits(9, "::text")}, true},
		{"text NOT IN of 9", dpplan.PredIn{Col: d, Lits: lits(9, "::text"), Not: true}, true},
		{"LIKE", dpplan.PredLike{Col: d, Pattern: "'J%'"}, true},
		{"NOT ILIKE", dpplan.PredLike{Col: d, Pattern: "'%j%'", ILike: true, Not: true}, true},
		{"date >", dpplan.PredCmp{Col: d, Op: ">", Lit: "'2024-01-01'::date"}, false},
		{"number >", dpplan.PredCmp{Col: d, Op: ">", Lit: "(5)"}, false},
		{"unit >", dpplan.PredCmp{Col: d, Op: ">", Lit: "'100'"}, false},
		{"number IN of 9", dpplan.PredIn{Col: d, Lits: []string{"(1)", "(2)", "(3)", "(4)", "(5)", "(6)", "(7)", "(8)", "(9)"}}, false},
		{"constants", dpplan.PredCmp{Col: "'a'::text", Op: "<", Lit: "'b'::text"}, false},
	} {
		got := PredSQL(tc.pred)
		if strings.Contains(got, guarded) != tc.guard {
			t.Errorf("%s: %s; want the length test: %v", tc.name, got, tc.guard)
		}
		if strings.Count(got, "octet_length") > 1 {
			t.Errorf("%s: %s reads the length more than once", tc.name, got)
		}
	}
}
