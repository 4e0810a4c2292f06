package dpplan

import (
	"math/big"
	"testing"
)

// TestEval_StepsBounded: an expression over released values whose step
// leaves maxExprBits is NULL (attack round 73: a chain of constants had
// printed kilobytes a cell); values within it are exact.
func TestEval_StepsBounded(t *testing.T) {
	ref := &Expr{Op: "ref", Ref: 0}
	lit := func(s string) *Expr { return &Expr{Op: "lit", Lit: s} }
	mul := func(a, b *Expr) *Expr { return &Expr{Op: "*", Args: []*Expr{a, b}} }
	vals := []*big.Rat{big.NewRat(123456, 1)}

	e := ref
	for i := 0; i < 4; i++ { // 123456 · 10^120
		e = mul(e, lit("1e30"))
	}
	want, _ := new(big.Rat).SetString("123456e120")
	if got := e.Eval(vals); got == nil || got.Cmp(want) != 0 {
		t.Errorf("123456 · (1e30)^4 = %v, want it exact", got)
	}
	e = mul(e, lit("1e30")) // 1.23456·10^155 > 2^512
	if got := e.Eval(vals); got != nil {
		t.Errorf("123456 · (1e30)^5 = a %d-bit number, want NULL past %d bits", got.Num().BitLen(), maxExprBits)
	}
	div := ref
	for i := 0; i < 400; i++ { // denominator 3^400: about 634 bits
		div = &Expr{Op: "/", Args: []*Expr{div, lit("3")}}
	}
	if got := div.Eval(vals); got != nil {
		t.Errorf("123456 / 3^400 kept a %d-bit denominator, want NULL", got.Denom().BitLen())
	}
	avg := &Expr{Op: "/", Args: []*Expr{ref, lit("7")}}
	if got := avg.Eval(vals); got == nil || got.Cmp(big.NewRat(123456, 7)) != 0 {
		t.Errorf("123456 / 7 = %v", got)
	}
}
