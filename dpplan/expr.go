package dpplan

import (
	"math/big"
)

// Expr is arithmetic over released values, evaluated after noise
// (post-processing): the leaves are output values (Plan.Outputs followed by
// Plan.Hidden) and numeric literals of the analyst's query.
type Expr struct {
	// Op is "ref" (a value), "lit" (a literal), "neg", "+", "-", "*", "/",
	// "coalesce" (the first non-NULL argument) or "nullif" (NULL when its
	// two arguments are equal, else the first).
	Op   string
	Ref  int    // for "ref": index into Plan.Outputs ++ Plan.Hidden
	Lit  string // for "lit": a decimal number (re-encoded by this package)
	Args []*Expr
}

// Cond is a HAVING condition over released values: "and", "or", "not"
// over Args, or a comparison ("=", "<>", "<", "<=", ">", ">=") of L and R.
type Cond struct {
	Op   string
	Args []*Cond
	L, R *Expr
}

// Eval computes the expression on the row's values (vals indexed like Ref).
// A NULL value or a division by zero gives NULL (nil); PostgreSQL raises
// 22012 on division by zero, which would reveal that a noisy value is 0.
func (e *Expr) Eval(vals []*big.Rat) *big.Rat {
	switch e.Op {
	case "ref":
		if v := vals[e.Ref]; v != nil {
			return new(big.Rat).Set(v)
		}
		return nil
	case "lit":
		r, ok := new(big.Rat).SetString(e.Lit)
		if !ok {
			return nil
		}
		return r
	case "neg":
		v := e.Args[0].Eval(vals)
		if v == nil {
			return nil
		}
		return v.Neg(v)
	case "coalesce":
		for _, a := range e.Args {
			if v := a.Eval(vals); v != nil {
				return v
			}
		}
		return nil
	case "nullif":
		a, b := e.Args[0].Eval(vals), e.Args[1].Eval(vals)
		if a != nil && b != nil && a.Cmp(b) == 0 {
			return nil
		}
		return a
	}
	a, b := e.Args[0].Eval(vals), e.Args[1].Eval(vals)
	if a == nil || b == nil {
		return nil
	}
	switch e.Op {
	case "+":
		return bounded(a.Add(a, b))
	case "-":
		return bounded(a.Sub(a, b))
	case "*":
		return bounded(a.Mul(a, b))
	case "/":
		if b.Sign() == 0 {
			return nil
		}
		return bounded(a.Quo(a, b))
	}
	return nil
}

// Holds evaluates the condition with SQL's rule that a comparison with NULL
// is not true (a NOT of it is not true either).
func (c *Cond) Holds(vals []*big.Rat) bool {
	v, known := c.eval(vals)
	return known && v
}

func (c *Cond) eval(vals []*big.Rat) (value, known bool) {
	switch c.Op {
	case "and":
		a, ka := c.Args[0].eval(vals)
		b, kb := c.Args[1].eval(vals)
		if ka && !a || kb && !b {
			return false, true
		}
		return true, ka && kb
	case "or":
		a, ka := c.Args[0].eval(vals)
		b, kb := c.Args[1].eval(vals)
		if ka && a || kb && b {
			return true, true
		}
		return false, ka && kb
	case "not":
		a, ka := c.Args[0].eval(vals)
		return !a, ka
	}
	l, r := c.L.Eval(vals), c.R.Eval(vals)
	if l == nil || r == nil {
		return false, false
	}
	x := l.Cmp(r)
	switch c.Op {
	case "=":
		return x == 0, true
	case "<>":
		return x != 0, true
	case "<":
		return x < 0, true
	case "<=":
		return x <= 0, true
	case ">":
		return x > 0, true
	case ">=":
		return x >= 0, true
	}
	return false, false
}

// maxExprBits bounds the numerator and denominator of every step of an
// expression: 512 bits, about 154 digits (a measure's values are at most
// 10¹⁰⁰), so that its magnitude stays below 2^512 and its fraction is
// exact to far more places than the 6 printed.
const maxExprBits = 512

// bounded is r, or NULL (nil) when a step leaves maxExprBits (attack round
// 73: COUNT(*) * 1e30 * … repeated had printed kilobytes a cell, with
// superlinear CPU, after the charge). PostgreSQL would raise an overflow
// only far beyond; NULL here is post-processing, decided by public
// constants and noisy values.
func bounded(r *big.Rat) *big.Rat {
	if r.Num().BitLen() > maxExprBits || r.Denom().BitLen() > maxExprBits {
		return nil
	}
	return r
}
