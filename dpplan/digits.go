// Privacy-critical: needs DP review.

package dpplan

import (
	"math/big"
	"strings"

	"github.com/dpproxy/dpproxy/sensitivity"
)

// # Per-row work of a row value (ValueOps)
//
// The work bound (work.go) weighs every row by 1 + RowOps/16, a unit
// being about 125 ns of the 2 µs a row is counted at. ValueOps counts a
// row value's work in those units as PostgreSQL does it on the SQL that
// pgemit writes, not per operator of the analyst's text
// (TestAttack104_LongDigitsCounted, TestAttack104_ValueReadsCounted):
//
//   - A column leaf is one unit: its read is a size test, a rounding and
//     a clamp (pgemit readNumeric, columnNumeric), five function calls;
//     SUM of 40 leaves added ran 205 ns a leaf and addition on the demo
//     (2 cores, parallel scan), where 39 units had been counted.
//   - numeric arithmetic works in base-10000 digits, and a result's
//     digits are not bounded by its interval: PostgreSQL keeps every
//     decimal of a product (scales add, up to 16,383), a quotient gets
//     max(16 − 4·its weight, the operands' scales) decimals (up to 1,000),
//     and a literal keeps its trailing zeros (1.000…0 of 200 characters
//     has 197 decimals). So each node carries a bound on its display scale
//     (valueNode: PostgreSQL's rules, divScale) and its digits are
//     nbaseDigits(interval, scale). An addition, negation, comparison
//     (LEAST, GREATEST, NULLIF, COALESCE, the clamps) costs one unit per
//     LinearDigits digits of its longest operand (opLinear), a product one
//     per MulDigitPairs pairs of digits (opMul), a quotient one per
//     DivDigitPairs pairs of its own and the divisor's digits, plus the
//     dividend's (opDiv). Measured on 100,000 rows (PostgreSQL 15):
//     products of 20×20, 40×40 and 80×80 digits 170 ns, 690 ns and 1.7 µs
//     (counted 250 ns, 875 ns, 3.1 µs); a quotient of 62 digits by 40
//     digits 7.2 µs (counted 10.9 µs); a sum of two 80-digit values about
//     175 ns (counted 375 ns).
//   - A division is written twice (its IS NULL test and its clamp): its
//     operands and quotient are counted twice, a nested one's four times.
//
// A plan's RowOps counts each measure's evaluations of its value
// (MeasureValueOps): a sum or count once, a sum of squares twice and their
// product, a quantile's clamped value three times (pgemit bounds_sql.go
// rowValue, quantile_sql.go quantileExprValueSQL and quantileRankSQL).

// Units of digit work (see above).
const (
	LinearDigits  = 32
	MulDigitPairs = 256
	DivDigitPairs = 24
)

// maxNumericScale is PostgreSQL's largest display scale of a numeric
// (NUMERIC_DSCALE_MAX: a product's exact scale is rounded there), and
// maxDivScale a quotient's (NUMERIC_MAX_DISPLAY_SCALE).
const (
	maxNumericScale = 16383
	maxDivScale     = 1000
)

// textScale is the display scale PostgreSQL gives a decimal literal: the
// digits after its point, less its exponent, at least 0 (trailing zeros
// count: 1.500 has 3).
func textScale(num string) int {
	s := strings.TrimLeft(num, "+-")
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, ok := new(big.Int).SetString(strings.TrimPrefix(s[i+1:], "+"), 10)
		if !ok || !e.IsInt64() || e.Int64() > 1<<20 || e.Int64() < -(1<<20) {
			return maxNumericScale // refused elsewhere (constRat); never cheap
		}
		exp, s = int(e.Int64()), s[:i]
	}
	frac := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		frac = len(s) - i - 1
	}
	return min(max(frac-exp, 0), maxNumericScale)
}

// ratScale is the number of decimals DecimalText writes r with (pgemit:
// max(a, b) for a reduced denominator 2^a·5^b); r is a finite decimal.
func ratScale(r *big.Rat) int {
	d := new(big.Int).Set(r.Denom())
	twos := int(d.TrailingZeroBits())
	d.Rsh(d, uint(twos))
	fives := 0
	five, m := big.NewInt(5), new(big.Int)
	for d.Cmp(big.NewInt(1)) > 0 && fives <= maxNumericScale {
		q, rem := new(big.Int).QuoRem(d, five, m)
		if rem.Sign() != 0 {
			return maxNumericScale // not a finite decimal: never cheap
		}
		d, fives = q, fives+1
	}
	return min(max(twos, fives), maxNumericScale)
}

// intDigits is the number of decimal digits before the point of the
// largest magnitude in iv (1 for |x| < 1; 0 for an empty interval).
func intDigits(iv sensitivity.Interval) int {
	if iv.Empty() {
		return 0
	}
	m := new(big.Rat).Abs(iv.Lo)
	if h := new(big.Rat).Abs(iv.Hi); h.Cmp(m) > 0 {
		m = h
	}
	q := new(big.Int).Quo(m.Num(), m.Denom())
	if q.Sign() == 0 {
		return 1
	}
	return len(q.String())
}

// nbaseDigits bounds the base-10000 digits of a value in iv with at most
// scale decimals: its decimal digits in groups of four, one more at each
// end for the groups' alignment.
func nbaseDigits(iv sensitivity.Interval, scale int) int {
	return (intDigits(iv)+scale+3)/4 + 2
}

// units is work/per rounded up, at least 1.
func units(work, per int) int {
	return max(1, (work+per-1)/per)
}

// opLinear is the work of an operation linear in its operand's digits.
func opLinear(iv sensitivity.Interval, scale int) int {
	return units(nbaseDigits(iv, scale), LinearDigits)
}

// opMul is the work of a product: PostgreSQL's mul_var multiplies every
// digit of one operand by every digit of the other.
func opMul(a, b node) int {
	return units(nbaseDigits(a.iv, a.scale)*nbaseDigits(b.iv, b.scale), MulDigitPairs)
}

// opDiv is the work of a quotient with quot decimals (divScale): div_var
// subtracts a multiple of the divisor for every digit of the quotient,
// after reading the dividend.
func opDiv(a, b node, q sensitivity.Interval, quot int) int {
	return units(nbaseDigits(q, quot)*nbaseDigits(b.iv, b.scale)+nbaseDigits(a.iv, a.scale), DivDigitPairs)
}

// divScale bounds the decimals of x / y (PostgreSQL's select_div_scale):
// max(16 − 4·qweight, x's and y's scales), at most 1,000, where qweight,
// the quotient's weight in base-10000 digits, is at least x's smallest
// nonzero weight (−⌈scale_x/4⌉) less y's largest (⌈digits before y's
// point/4⌉) less 1.
func divScale(x, y node) int {
	minWeight := -(x.scale+3)/4 - (intDigits(y.iv)+3)/4 - 1
	return min(max(16-4*minWeight, x.scale, y.scale), maxDivScale)
}

// MeasureValueOps is the per-row work of a measure's row value, as often
// as the SQL pgemit writes holds it a row: once for a sum or a count,
// twice for a sum of squares ((x − c)·(x − c): the value written twice,
// its centring and the product), six times for a quantile (its clamp
// writes it twice, in its value, its rank's ORDER BY and its COUNT:
// quantile_sql.go quantileRankSQL; PostgreSQL may share the copies, the
// count does not rely on it). 0 without a value.
func MeasureValueOps(m Measure) int {
	if m.Expr == nil {
		return 0
	}
	n, err := valueNode(m.Expr)
	if err != nil {
		return 1 << 30
	}
	switch m.Kind {
	case MeasureSumSq:
		sq := n
		if m.Centre != "" {
			if c, ok := new(big.Rat).SetString(m.Centre); ok {
				sq.iv = sensitivity.Sub(n.iv, sensitivity.Point(c, false))
				sq.scale = max(n.scale, textScale(m.Centre))
			}
		}
		prod := node{iv: sensitivity.Mul(sq.iv, sq.iv), scale: min(2*sq.scale, maxNumericScale)}
		return 2*(n.ops+opLinear(sq.iv, sq.scale)) + opMul(sq, sq) + sumStages*opLinear(prod.iv, prod.scale)
	case MeasureQuantile:
		return 3 * (2*n.ops + 2*opLinear(n.iv, n.scale))
	case MeasureSum:
		ops := n.ops + sumStages*opLinear(n.iv, n.scale)
		if m.Centre != "" {
			ops += opLinear(n.iv, n.scale)
		}
		return ops
	}
	return n.ops
}

// sumStages is how many times a summed value's digits are read after the
// row: added into its unit's sum, that sum's partial state passed between
// parallel workers, weighted (a product and a quotient: pgemit
// bounds_sql.go) and added into the group's total. Counted per row, as a
// unit has at most its rows. Measured on the demo (200,000 visits): the
// emitted SUM of cost times 38 constants of 30 digits (1,322 decimals)
// took 5.8–6.3 s, of which 1.7 s computing the value and 3.5 s in the
// per-unit and final stages, which the value's own work did not count.
const sumStages = 5
