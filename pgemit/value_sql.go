// Privacy-critical: needs DP review.
// Part of the emitter: what reaches the private database is built here
// (doc.go).

package pgemit

import (
	"math/big"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
)

// ValueSQL writes a validated row value (dpplan/value.go) as SQL whose
// value on every row lies in dpplan.ValueInterval(v) or is NULL:
//
//   - a column is clamped to its bounds, NULL kept NULL;
//   - a constant is written as the decimal the planner checked;
//   - x / y is x / NULLIF(y, 0) clamped to the quotient's decimal interval
//     (a no-op but for PostgreSQL's rounding), NULL kept NULL, or a NULL
//     constant when that interval is empty (the divisor is always 0);
//   - the rest map to the PostgreSQL operator or function of the same
//     name.
//
// It panics on a value ValueInterval refuses: the planner validated it.
func ValueSQL(v *dpplan.Value) string {
	var b strings.Builder
	writeValue(&b, v)
	return b.String()
}

func writeValue(b *strings.Builder, v *dpplan.Value) {
	switch v.Op {
	case dpplan.ValCol:
		c := QuoteIdent(v.Col)
		b.WriteString("(" + readNumeric(c, v.Int, "LEAST(GREATEST("+columnDecimals(c, v.Int, v.ReadDecimals())+", "+
			NumericConst(v.Lo)+"), "+NumericConst(v.Hi)+")") + ")")
	case dpplan.ValConst:
		b.WriteString("(" + v.Num + ")")
	case dpplan.ValNull:
		b.WriteString("NULL")
	case dpplan.ValNeg:
		b.WriteString("(- ")
		writeValue(b, v.Args[0])
		b.WriteString(")")
	case dpplan.ValAdd, dpplan.ValSub, dpplan.ValMul:
		b.WriteString("(")
		writeValue(b, v.Args[0])
		b.WriteString(" " + v.Op + " ")
		writeValue(b, v.Args[1])
		b.WriteString(")")
	case dpplan.ValDiv:
		q, err := dpplan.ValueInterval(v)
		if err != nil {
			panic("pgemit: an unvalidated row value: " + err.Error())
		}
		if q.Empty() {
			b.WriteString("(NULL::numeric)")
			return
		}
		s := "(" + ValueSQL(v.Args[0]) + " / NULLIF(" + ValueSQL(v.Args[1]) + ", 0))"
		b.WriteString("(CASE WHEN " + s + " IS NULL THEN NULL ELSE LEAST(GREATEST(" + s + ", " +
			RatConst(q.Lo) + "), " + RatConst(q.Hi) + ") END)")
	case dpplan.ValCase:
		b.WriteString("(CASE")
		for i, a := range v.Args {
			if i < len(v.When) {
				b.WriteString(" WHEN " + PredSQL(v.When[i]) + " THEN ")
			} else {
				b.WriteString(" ELSE ")
			}
			writeValue(b, a)
		}
		b.WriteString(" END)")
	case dpplan.ValCoalesce, dpplan.ValLeast, dpplan.ValGreatest, dpplan.ValAbs, dpplan.ValNullIf:
		b.WriteString(strings.ToUpper(v.Op) + "(")
		for i, a := range v.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			writeValue(b, a)
		}
		b.WriteString(")")
	default:
		panic("pgemit: unknown row value " + v.Op)
	}
}

// columnNumeric is column c (quoted) read as numeric for clamping and
// arithmetic: an integer column cast, any other with at most
// dpplan.MaxConstDigits decimals (as constants), rounded there when it
// has more, so that a value with fewer keeps its own scale and every
// result stays PostgreSQL's own (a quotient's scale follows its
// operands'). It is used under readNumeric's test.
//
// A numeric column without a declared scale holds up to 16,383 decimals,
// and clamping keeps a value within the bounds whole (10000.1234…).
// PostgreSQL multiplies and divides numerics digit by digit (mul_var,
// div_var), in time that grows with the product of the operands' lengths
// (TestAttack102_LongNumericArithmetic). Rounded, a value within bounds of
// at most 10³⁰ has at most 60 significant digits, so an operation's work no
// longer grows with what one person stored. readNumeric's size test alone
// does not bound the digits: a compressed value of 64 bytes can hold
// kilobytes. The clamp after the rounding keeps the value within [lower,
// upper], so the sensitivity is unchanged; a value moves by at most
// 10⁻³⁰/2. NaN and ±Infinity have no scale (NULL): LEAST gives 30, and
// round keeps them.
func columnNumeric(c string, integer bool) string {
	return columnDecimals(c, integer, dpplan.MaxConstDigits)
}

// columnDecimals is columnNumeric with at most decimals decimals
// (dpplan.Value.ReadDecimals: a row value's column, whose digits the work
// bound counts).
func columnDecimals(c string, integer bool, decimals int) string {
	if integer {
		return c + "::numeric"
	}
	return "round(" + c + "::numeric, LEAST(scale(" + c + "::numeric), " + strconv.Itoa(decimals) + "))"
}

// readNumeric is x, a value computed from column c (quoted), on rows
// where a measure reads c, and NULL elsewhere (GREATEST and LEAST ignore
// NULL, so a clamp alone would turn NULL into the lower bound): an
// integer column where it is not NULL, any other where its value has at
// most dpplan.MaxNumericBytes bytes as stored. pg_column_size reads the
// size from the value's header, or from its TOAST pointer, without
// reading the value (TestAttack102_LongNumericRead). NULL has no size:
// NULL.
func readNumeric(c string, integer bool, x string) string {
	if integer {
		return "CASE WHEN " + c + " IS NULL THEN NULL ELSE " + x + " END"
	}
	return "CASE WHEN " + numericRead(c) + " THEN " + x + " END"
}

// numericRead is the condition that a measure reads non-integer column c
// (quoted): its value is at most dpplan.MaxNumericBytes as stored.
func numericRead(c string) string {
	return "pg_column_size(" + c + ") <= " + strconv.Itoa(dpplan.MaxNumericBytes)
}

// RatConst writes a decimal rational (finite decimal expansion, as
// sensitivity.RoundOut returns) as an exact numeric constant.
func RatConst(r *big.Rat) string { return NumericConst(DecimalText(r)) }

// DecimalText writes a rational with a finite decimal expansion (its
// reduced denominator is 2^a·5^b) exactly, with max(a, b) digits after
// the point. It panics on other rationals: every interval endpoint is a
// decimal (policy bounds and literals are; + − × keep it so; Div rounds to
// decimals; a midpoint of decimals is one).
func DecimalText(r *big.Rat) string {
	d := new(big.Int).Set(r.Denom())
	// The factors 2 by the trailing zero bits, the factors 5 by dividing
	// by 5^64 while it divides, then by 5: linear in the denominator's
	// size (one factor at a time was quadratic, and a chain of tiny
	// constants made planning take minutes).
	twos := int(d.TrailingZeroBits())
	d.Rsh(d, uint(twos))
	fives := 0
	rem := new(big.Int)
	for _, step := range []struct {
		p *big.Int
		n int
	}{{new(big.Int).Exp(big.NewInt(5), big.NewInt(64), nil), 64}, {big.NewInt(5), 1}} {
		for {
			q, m := new(big.Int).QuoRem(d, step.p, rem)
			if m.Sign() != 0 {
				break
			}
			d, fives = q, fives+step.n
		}
	}
	if d.Cmp(big.NewInt(1)) != 0 {
		panic("pgemit: DecimalText of a non-decimal rational")
	}
	return r.FloatString(max(twos, fives))
}
