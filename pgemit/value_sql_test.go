package pgemit

import (
	"math/big"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
)

// TestValueSQL pins the SQL of each row-value node: columns clamped with
// NULL kept (a non-integer column NULL above 64 bytes and rounded to at most
// 30 decimals: attack round 102), quotients NULL on a zero divisor and clamped to the interval
// dpplan computed, CASE conditions written by PredSQL.
func TestValueSQL(t *testing.T) {
	t.Parallel()
	cost := &dpplan.Value{Op: dpplan.ValCol, Col: "cost", Lo: "0", Hi: "20000", Int: true}
	score := &dpplan.Value{Op: dpplan.ValCol, Col: "Score", Lo: "-1.5", Hi: "2.5"}
	c := func(s string) *dpplan.Value { return &dpplan.Value{Op: dpplan.ValConst, Num: s} }
	op := func(o string, args ...*dpplan.Value) *dpplan.Value { return &dpplan.Value{Op: o, Args: args} }
	clampCost := `(CASE WHEN "cost" IS NULL THEN NULL ELSE LEAST(GREATEST("cost"::numeric, (0)::numeric), (20000)::numeric) END)`
	clampScore := `(CASE WHEN pg_column_size("Score") <= 64 THEN LEAST(GREATEST(round("Score"::numeric, LEAST(scale("Score"::numeric), 30)), (-1.5)::numeric), (2.5)::numeric) END)`
	for _, tc := range []struct {
		v    *dpplan.Value
		want string
	}{
		{cost, clampCost},
		{c("1.1"), "(1.1)"},
		{&dpplan.Value{Op: dpplan.ValNull}, "NULL"},
		{op(dpplan.ValNeg, cost), "(- " + clampCost + ")"},
		{op(dpplan.ValMul, cost, c("1.1")), "(" + clampCost + " * (1.1))"},
		{op(dpplan.ValDiv, cost, c("8")), "(CASE WHEN (" + clampCost + " / NULLIF((8), 0)) IS NULL THEN NULL ELSE LEAST(GREATEST((" +
			clampCost + " / NULLIF((8), 0)), (0)::numeric), (2500)::numeric) END)"},
		{op(dpplan.ValDiv, score, &dpplan.Value{Op: dpplan.ValConst, Num: "0", Int: true}), "(NULL::numeric)"},
		{&dpplan.Value{Op: dpplan.ValCase, When: []dpplan.Pred{dpplan.PredCmp{Col: `"age"`, Op: ">=", Lit: "(65)"}}, Args: []*dpplan.Value{cost, c("0")}},
			`(CASE WHEN ("age" >= (65)) THEN ` + clampCost + ` ELSE (0) END)`},
		{&dpplan.Value{Op: dpplan.ValCase, When: []dpplan.Pred{dpplan.PredNull{Col: `"age"`}}, Args: []*dpplan.Value{c("1")}},
			`(CASE WHEN ("age" IS NULL) THEN (1) END)`},
		{op(dpplan.ValCoalesce, score, c("0")), "COALESCE(" + clampScore + ", (0))"},
		{op(dpplan.ValNullIf, cost, c("0")), "NULLIF(" + clampCost + ", (0))"},
		{op(dpplan.ValAbs, score), "ABS(" + clampScore + ")"},
		// A declared numeric(p, 2) is read with 2 decimals (ReadDecimals).
		{&dpplan.Value{Op: dpplan.ValCol, Col: "Score", Lo: "-1.5", Hi: "2.5", Scale: 2},
			`(CASE WHEN pg_column_size("Score") <= 64 THEN LEAST(GREATEST(round("Score"::numeric, LEAST(scale("Score"::numeric), 2)), (-1.5)::numeric), (2.5)::numeric) END)`},
	} {
		if got := ValueSQL(tc.v); got != tc.want {
			t.Errorf("ValueSQL(%s)\n got %s\nwant %s", tc.v, got, tc.want)
		}
	}
}

// TestDecimalText_Fast: a denominator of 2^a·5^b with large a and b is
// written with one digit per factor (one factor at a time was quadratic:
// minutes for the denominators of 900 chained constants), and exactly.
func TestDecimalText_Fast(t *testing.T) {
	t.Parallel()
	r := new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Exp(big.NewInt(10), big.NewInt(20000), nil))
	s := DecimalText(r)
	if len(s) != 20002 || !strings.HasSuffix(s, "1") || !strings.HasPrefix(s, "0.000") {
		t.Errorf("DecimalText(1e-20000) = %.20s… (%d characters)", s, len(s))
	}
	for _, c := range []struct{ num, den int64 }{{3, 8}, {7, 125}, {1, 1}, {-13, 40}, {1, 1 << 40}} {
		r := new(big.Rat).SetFrac64(c.num, c.den)
		got, _ := new(big.Rat).SetString(DecimalText(r))
		if got.Cmp(r) != 0 {
			t.Errorf("DecimalText(%s) = %s", r, DecimalText(r))
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("DecimalText(1/3) did not panic")
		}
	}()
	DecimalText(big.NewRat(1, 3))
}
