// Privacy-critical: needs DP review.

package sensitivity

import (
	"errors"
	"math"
	"math/big"
)

// # Range analysis of per-row expressions
//
// An aggregate over an expression, e.g. SUM(cost * 1.1 + 5) or
// SUM(CASE WHEN age >= 65 THEN 1 ELSE 0 END), is bounded by interval
// arithmetic (Moore, "Interval Analysis", 1966; used for DP SQL by Wilson
// et al. 2020 and by Johnson, Near and Song, "Towards Practical
// Differential Privacy for SQL Queries" (Elastic Sensitivity), VLDB 2018).
// The emitted SQL clamps every column to its policy bounds before the
// expression is evaluated, so each leaf lies in a known interval; every
// operation below maps intervals of its operands to an interval that
// contains every value the operation can produce on values of those
// intervals (the inclusion property). By induction over the expression
// the interval of the whole expression contains its value on every row,
// whatever the data. A unit with at most r rows in a group then changes
// the group's sum by at most r·max(|lo|, |hi|) for any [lo, hi] that
// contains the interval ([SumLInf]; release checks the plan's bounds
// contain it).
//
// Endpoints are exact rationals (math/big), not floats: + − × of the
// clamped numeric values are exact in PostgreSQL's numeric, so the
// interval is exact too and no rounding can make it too small. Only
// division rounds in PostgreSQL; [Div] returns an interval rounded
// outwards to decimals that the emitted SQL clamps the quotient to, so
// the bound holds even for PostgreSQL's rounded quotient.
//
// NULL: an expression may be NULL on a row (a NULL column, CASE without
// ELSE, a division by zero turned into NULL by NULLIF); aggregates skip
// NULLs, so the interval bounds the non-NULL values only, and MayBeNull
// records whether NULL is possible (LEAST/GREATEST/COALESCE need it).

// Interval is the set of values a per-row expression can take: every
// non-NULL value lies in [Lo, Hi]. Lo and Hi are nil when the expression is
// always NULL (Empty). Values are immutable: operations return new
// intervals and never modify their operands.
type Interval struct {
	Lo, Hi *big.Rat
	// Int is true when every non-NULL value is an integer (and PostgreSQL
	// types the expression as an integer type).
	Int bool
	// MayBeNull is true when the expression can be NULL on some row.
	MayBeNull bool
}

// ErrDivisorZero is returned by [Div] when the divisor's interval contains
// values arbitrarily close to zero: the quotient is unbounded.
var ErrDivisorZero = errors.New("sensitivity: the divisor's range contains 0, so the quotient is unbounded")

// Point is the interval of a constant.
func Point(v *big.Rat, isInt bool) Interval {
	return Interval{Lo: new(big.Rat).Set(v), Hi: new(big.Rat).Set(v), Int: isInt}
}

// Range is the interval [lo, hi] of a clamped column; mayBeNull when the
// column can be NULL. It panics if lo > hi (policy validation guarantees
// lower ≤ upper).
func Range(lo, hi *big.Rat, isInt, mayBeNull bool) Interval {
	if lo.Cmp(hi) > 0 {
		panic("sensitivity: Range with lo > hi")
	}
	return Interval{Lo: new(big.Rat).Set(lo), Hi: new(big.Rat).Set(hi), Int: isInt, MayBeNull: mayBeNull}
}

// Null is the interval of the NULL constant: no value, always NULL.
func Null() Interval { return Interval{MayBeNull: true, Int: true} }

// Empty reports whether the expression is always NULL.
func (a Interval) Empty() bool { return a.Lo == nil }

func minRat(xs ...*big.Rat) *big.Rat {
	m := xs[0]
	for _, x := range xs[1:] {
		if x.Cmp(m) < 0 {
			m = x
		}
	}
	return new(big.Rat).Set(m)
}

func maxRat(xs ...*big.Rat) *big.Rat {
	m := xs[0]
	for _, x := range xs[1:] {
		if x.Cmp(m) > 0 {
			m = x
		}
	}
	return new(big.Rat).Set(m)
}

// strict is the result of a strict operation (NULL if any operand is
// NULL): empty if either operand is always NULL.
func strict(a, b Interval) (Interval, bool) {
	if a.Empty() || b.Empty() {
		return Interval{MayBeNull: true, Int: a.Int && b.Int}, false
	}
	return Interval{Int: a.Int && b.Int, MayBeNull: a.MayBeNull || b.MayBeNull}, true
}

// Add: x + y for x ∈ [a, b], y ∈ [c, d] lies in [a + c, b + d].
func Add(x, y Interval) Interval {
	r, ok := strict(x, y)
	if ok {
		r.Lo = new(big.Rat).Add(x.Lo, y.Lo)
		r.Hi = new(big.Rat).Add(x.Hi, y.Hi)
	}
	return r
}

// Sub: x − y lies in [a − d, b − c].
func Sub(x, y Interval) Interval { return Add(x, Neg(y)) }

// Neg: −x lies in [−b, −a].
func Neg(x Interval) Interval {
	if x.Empty() {
		return x
	}
	return Interval{Lo: new(big.Rat).Neg(x.Hi), Hi: new(big.Rat).Neg(x.Lo), Int: x.Int, MayBeNull: x.MayBeNull}
}

// Mul: x·y is bilinear, so over the box [a, b]×[c, d] its extremes are at
// corners: it lies in [min, max] of {ac, ad, bc, bd}.
func Mul(x, y Interval) Interval {
	r, ok := strict(x, y)
	if ok {
		p := []*big.Rat{
			new(big.Rat).Mul(x.Lo, y.Lo), new(big.Rat).Mul(x.Lo, y.Hi),
			new(big.Rat).Mul(x.Hi, y.Lo), new(big.Rat).Mul(x.Hi, y.Hi),
		}
		r.Lo, r.Hi = minRat(p...), maxRat(p...)
	}
	return r
}

// Abs: |x| lies in [0, max(|a|, |b|)] when a ≤ 0 ≤ b, else between the
// absolute values of the endpoints.
func Abs(x Interval) Interval {
	if x.Empty() {
		return x
	}
	lo, hi := new(big.Rat).Abs(x.Lo), new(big.Rat).Abs(x.Hi)
	r := Interval{Int: x.Int, MayBeNull: x.MayBeNull}
	switch {
	case x.Lo.Sign() <= 0 && x.Hi.Sign() >= 0:
		r.Lo, r.Hi = new(big.Rat), maxRat(lo, hi)
	default:
		r.Lo, r.Hi = minRat(lo, hi), maxRat(lo, hi)
	}
	return r
}

// DivDigits is the number of significant decimal digits to which [Div]
// rounds its interval outwards. PostgreSQL's numeric division keeps at
// least 16 significant digits, so a bound with 12 is exact on the grid the
// quotient is rounded to; the emitted SQL clamps the quotient to it anyway.
const DivDigits = 12

// Div bounds x / NULLIF(y, 0) (division by zero gives NULL, never an
// error). If y's interval excludes 0, x/y is monotone in each argument on
// the box, so its extremes are at the corners {a/c, a/d, b/c, b/d}. If y is
// integer-valued and its interval contains 0, every non-zero y satisfies
// |y| ≥ 1, so y ranges over [c, −1] ∪ [1, d] and the result is the union of
// the two quotient intervals (the zero case gives NULL). Otherwise the
// quotient is unbounded and ErrDivisorZero is returned. The result is
// rounded outwards to DivDigits significant digits (see [RoundOut]) and is
// never Int (PostgreSQL's integer division truncates; callers refuse it).
func Div(x, y Interval) (Interval, error) {
	r, ok := strict(x, y)
	r.Int = false
	if !ok {
		return r, nil
	}
	quot := func(c, d *big.Rat) Interval {
		p := []*big.Rat{
			new(big.Rat).Quo(x.Lo, c), new(big.Rat).Quo(x.Lo, d),
			new(big.Rat).Quo(x.Hi, c), new(big.Rat).Quo(x.Hi, d),
		}
		return Interval{Lo: minRat(p...), Hi: maxRat(p...)}
	}
	var parts []Interval
	switch {
	case y.Lo.Sign() > 0 || y.Hi.Sign() < 0:
		parts = append(parts, quot(y.Lo, y.Hi))
	case y.Int:
		r.MayBeNull = true
		one, minus := big.NewRat(1, 1), big.NewRat(-1, 1)
		if y.Lo.Cmp(minus) <= 0 {
			parts = append(parts, quot(y.Lo, minus))
		}
		if y.Hi.Cmp(one) >= 0 {
			parts = append(parts, quot(one, y.Hi))
		}
		if len(parts) == 0 {
			return r, nil // y is always 0: always NULL
		}
	default:
		return Interval{}, ErrDivisorZero
	}
	u := parts[0]
	for _, p := range parts[1:] {
		u.Lo, u.Hi = minRat(u.Lo, p.Lo), maxRat(u.Hi, p.Hi)
	}
	r.Lo, r.Hi = RoundOut(u.Lo, DivDigits, false), RoundOut(u.Hi, DivDigits, true)
	return r, nil
}

// Union is the interval of an expression that takes the value of one of
// its branches (CASE, COALESCE): the smallest interval containing every
// non-empty branch. It may be NULL if any branch may be (callers add the
// NULL of a CASE without ELSE, or of a COALESCE whose last argument may be
// NULL).
func Union(xs ...Interval) Interval {
	r := Interval{Int: true}
	for _, x := range xs {
		r.Int = r.Int && x.Int
		r.MayBeNull = r.MayBeNull || x.MayBeNull
		if x.Empty() {
			continue
		}
		if r.Empty() {
			r.Lo, r.Hi = new(big.Rat).Set(x.Lo), new(big.Rat).Set(x.Hi)
			continue
		}
		r.Lo, r.Hi = minRat(r.Lo, x.Lo), maxRat(r.Hi, x.Hi)
	}
	return r
}

// Coalesce: the first non-NULL argument. Its value is one of the
// arguments' values (Union); it is NULL only if every argument may be.
func Coalesce(xs ...Interval) Interval {
	r := Union(xs...)
	r.MayBeNull = true
	for _, x := range xs {
		if !x.MayBeNull {
			r.MayBeNull = false
		}
	}
	return r
}

// Least bounds PostgreSQL's LEAST, which ignores NULL arguments and is
// NULL only if all are: the result is min over the set S of non-NULL
// arguments. It is at least min Lo over all arguments. It is at most Hi_j
// for every j in S; S always contains the never-NULL arguments, so if
// there are any the result is at most the least of their Hi, and
// otherwise S can be a single argument, so it is at most max Hi.
func Least(xs ...Interval) Interval {
	return extreme(xs, false)
}

// Greatest is the mirror image of [Least].
func Greatest(xs ...Interval) Interval {
	return extreme(xs, true)
}

func extreme(xs []Interval, greatest bool) Interval {
	if greatest {
		neg := make([]Interval, len(xs))
		for i, x := range xs {
			neg[i] = Neg(x)
		}
		return Neg(extreme(neg, false))
	}
	// LEAST: lower bound min of all Lo; upper bound: if some arguments are
	// never NULL, S contains all of them and the result is ≤ min of their
	// Hi; if S also contains nullable ones, the result only gets smaller.
	// If every argument may be NULL, S can be any single one: ≤ max Hi.
	r := Union(xs...)
	r.MayBeNull = true
	var sure []*big.Rat
	for _, x := range xs {
		if !x.MayBeNull {
			r.MayBeNull = false
			sure = append(sure, x.Hi)
		}
	}
	if len(sure) > 0 && !r.Empty() {
		r.Hi = minRat(sure...)
	}
	return r
}

// RoundOut rounds v to digits (or digits + 1) significant decimal digits,
// away from the interval's inside: down (towards −∞) when up is false, up otherwise. The
// result is a decimal with a finite expansion, so it can be written as an
// exact numeric constant.
func RoundOut(v *big.Rat, digits int, up bool) *big.Rat {
	if v.Sign() == 0 || v.IsInt() && len(new(big.Int).Abs(v.Num()).String()) <= digits {
		return new(big.Rat).Set(v)
	}
	// Scale so that |v|·10^k has about `digits` digits before the point:
	// log10|v| is within 1 of len(num) − len(denom) in decimal digits (no
	// float: |v| may be beyond float64's range).
	num := len(new(big.Int).Abs(v.Num()).String())
	den := len(v.Denom().String())
	k := digits - (num - den)
	scale := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(absInt(k))), nil))
	s := new(big.Rat).Set(v)
	if k >= 0 {
		s.Mul(s, scale)
	} else {
		s.Quo(s, scale)
	}
	// floor or ceil of s
	q, m := new(big.Int).DivMod(s.Num(), s.Denom(), new(big.Int)) // Euclidean: q = floor for positive denominators
	if up && m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	out := new(big.Rat).SetInt(q)
	if k >= 0 {
		out.Quo(out, scale)
	} else {
		out.Mul(out, scale)
	}
	return out
}

func absInt(k int) int {
	if k < 0 {
		return -k
	}
	return k
}

// RatUp is the smallest float64 ≥ v (+Inf if v is too large).
func RatUp(v *big.Rat) float64 {
	if v.IsInt() && v.Num().IsInt64() {
		// Integers of magnitude ≤ 2⁵³ are exact float64s (the common
		// case: policy bounds); no rounding check needed.
		if x := v.Num().Int64(); x >= -(1<<53) && x <= 1<<53 {
			return float64(x)
		}
	}
	f, _ := v.Float64()
	if math.IsInf(f, 0) {
		return f
	}
	if new(big.Rat).SetFloat64(f).Cmp(v) < 0 {
		f = math.Nextafter(f, math.Inf(1))
	}
	return f
}

// RatDown is the largest float64 ≤ v (−Inf if v is too small).
func RatDown(v *big.Rat) float64 {
	f := -RatUp(new(big.Rat).Neg(v))
	if f == 0 {
		return 0 // not −0
	}
	return f
}

// CentredSumLInf is the per-group L∞ bound of a normalized (centred) sum
// Σ (x − c) over at most maxRows rows of a unit, with x ∈ [lo, hi]: each
// term lies in [lo − c, hi − c], so removing the unit changes the sum by
// at most maxRows·max(|lo − c|, |hi − c|). For c the midpoint (lo + hi)/2
// this is maxRows·(hi − lo)/2: half of [SumLInf]'s maxRows·hi when lo = 0.
// This is the normalized-sum technique of Li, Lyu, Su and Yang,
// "Differential Privacy: From Theory to Practice" (2016), Algorithm 2.4 in §2.5.5 (noisy
// average by a noisy sum of x − (lo + hi)/2), which Google's
// differential-privacy library also uses for BoundedMean and
// BoundedVariance. Computed exactly from the arguments and rounded up.
func CentredSumLInf(maxRows int, lo, hi float64, c *big.Rat) float64 {
	if math.IsInf(lo, 0) || math.IsInf(hi, 0) || math.IsNaN(lo) || math.IsNaN(hi) {
		return math.Inf(1)
	}
	return RatUp(centredBound(maxRows, lo, hi, c, 1))
}

// CentredSumSqLInf is the per-group L∞ bound of Σ (x − c)² with the same
// x: each term lies in [0, max((lo − c)², (hi − c)²)], so a unit's
// per-group sum lies in [0, maxRows·max((lo − c)², (hi − c)²)]; for the
// midpoint that is maxRows·((hi − lo)/2)², a quarter of [SumSqLInf]'s
// maxRows·hi² when lo = 0.
func CentredSumSqLInf(maxRows int, lo, hi float64, c *big.Rat) float64 {
	if math.IsInf(lo, 0) || math.IsInf(hi, 0) || math.IsNaN(lo) || math.IsNaN(hi) {
		return math.Inf(1)
	}
	return RatUp(centredBound(maxRows, lo, hi, c, 2))
}

// centredBound is maxRows·max(|lo − c|, |hi − c|)^power in exact
// arithmetic.
func centredBound(maxRows int, lo, hi float64, c *big.Rat, power int) *big.Rat {
	lo, hi = Outward(lo, hi) // the policy's decimals, which the SQL clamps to
	a := new(big.Rat).Sub(new(big.Rat).SetFloat64(lo), c)
	b := new(big.Rat).Sub(new(big.Rat).SetFloat64(hi), c)
	h := maxRat(a.Abs(a), b.Abs(b))
	r := big.NewRat(int64(maxRows), 1)
	for i := 0; i < power; i++ {
		r.Mul(r, h)
	}
	return r
}
