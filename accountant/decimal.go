// Privacy-critical: needs DP review.

package accountant

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// Exact decimal arithmetic for budgets.
//
// # The rounding rule
//
// Every ε and δ that enters the ledger (a charge, a limit) is a float64 that
// came from decimal text: "SET dp.epsilon = 0.1", "epsilon: 3.0" in a policy.
// The ledger accounts for the shortest decimal that round-trips to that
// float64 (strconv.FormatFloat(x, 'g', -1, 64)), i.e. for the number the
// person wrote, and adds and compares these decimals exactly (math/big.Rat;
// sums of decimals are decimals, stored as exact decimal text in the
// ledger). There is no tolerance in either direction:
//
//   - 30 charges of 0.1 on a budget of 3 sum to exactly 3 and are accepted,
//     although 0.1 summed 30 times in float64 is 3.0000000000000004;
//   - a charge that takes the exact decimal total above the exact decimal
//     limit, by however little, is refused: float rounding can never let a
//     real overspend through (0.1 + 0.2 is 0.3 here, not 0.30000000000000004
//     and not, for other operands, a float sum rounded down).
//
// The decimal d differs from the float64 x the noise was calibrated with by
// at most half an ulp (|d − x| ≤ 2⁻⁵³·|x|); the ledger's unit is the
// decimal, as written by the analyst and the steward.
//
// The tighter accountants (advanced, rdp, zcdp, pld) compute in float64 and
// round their results upwards (see roundUp); every accountant's figure is
// the minimum of its own bound and this exact basic sum, so none ever
// charges more than pure composition does.

// dec returns the shortest decimal form of x as an exact rational. x must be
// finite.
func dec(x float64) *big.Rat {
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(x, 'g', -1, 64))
	if !ok {
		// Unreachable for finite x: FormatFloat output always parses.
		panic(fmt.Sprintf("accountant: cannot parse %v as a decimal", x))
	}
	return r
}

// parseDec parses exact decimal text written by decString ("" is zero).
func parseDec(s string) (*big.Rat, error) {
	if s == "" {
		return new(big.Rat), nil
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("bad decimal %q in ledger state", s)
	}
	return r, nil
}

// decString writes r, a finite decimal (denominator 2ᵃ5ᵇ), as exact decimal
// text. Any other rational is written with 40 digits after the point,
// rounded up, which never happens for sums of decimals.
func decString(r *big.Rat) string {
	den := new(big.Int).Set(r.Denom())
	two, five := big.NewInt(2), big.NewInt(5)
	var m big.Int
	a, b := 0, 0
	for den.Cmp(big.NewInt(1)) != 0 {
		if m.Mod(den, two).Sign() == 0 {
			den.Quo(den, two)
			a++
		} else if m.Mod(den, five).Sign() == 0 {
			den.Quo(den, five)
			b++
		} else {
			// Not a terminating decimal: round up by one unit in the last place.
			up := new(big.Rat).Add(r, new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Exp(big.NewInt(10), big.NewInt(40), nil)))
			return up.FloatString(40)
		}
	}
	n := max(a, b)
	if n == 0 {
		return r.Num().String()
	}
	return r.FloatString(n)
}

// ratFloat returns the float64 nearest to r.
func ratFloat(r *big.Rat) float64 {
	f, _ := r.Float64()
	return f
}

// ratFloatUp returns a float64 ≥ r (the nearest one, or the next above it;
// +Inf above the largest float64, where SetFloat64 would return nil).
func ratFloatUp(r *big.Rat) float64 {
	f, exact := r.Float64()
	switch {
	case exact || math.IsInf(f, 1):
		return f
	case math.IsInf(f, -1):
		return -math.MaxFloat64
	}
	if new(big.Rat).SetFloat64(f).Cmp(r) < 0 {
		return math.Nextafter(f, math.Inf(1))
	}
	return f
}

// roundUp returns x increased by a relative margin that covers the rounding
// error of the float64 computations of the tighter accountants (a few
// hundred operations, each off by at most 2⁻⁵³ relative): 2⁻³⁰ ≈ 9.3e-10.
// Reported figures and the budget test use the rounded-up value, so float
// error makes the ledger charge more, never less.
func roundUp(x float64) float64 {
	if x <= 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	return x * (1 + 1.0/(1<<30))
}

// DecimalText writes a finite float64 as decimal text: its shortest
// decimal, the number the ledger accounts for (the rounding rule above).
func DecimalText(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// SameDecimal compares two decimal texts exactly, or within the float64
// rounding of a recomputed float figure (relative 1e-12). Texts that are
// not decimals compare as strings.
func SameDecimal(a, b string) bool {
	x, ok1 := new(big.Rat).SetString(a)
	y, ok2 := new(big.Rat).SetString(b)
	if !ok1 || !ok2 {
		return a == b
	}
	if x.Cmp(y) == 0 {
		return true
	}
	fx, _ := x.Float64()
	fy, _ := y.Float64()
	return math.Abs(fx-fy) <= 1e-12*math.Max(math.Abs(fx), math.Abs(fy))
}

// WithGrants returns limit plus granted (ε and δ as exact decimal text, ""
// for zero), added in exact decimal; a coordinate of limit that is +Inf
// (no cap) stays +Inf. A steward's grants raise an analyst's or a team's
// limit this way.
func WithGrants(limit Spent, granted [2]string) (Spent, error) {
	add := func(x float64, g string) (float64, error) {
		r, err := parseDec(g)
		if err != nil {
			return 0, err
		}
		if r.Sign() == 0 || math.IsInf(x, 1) {
			return x, nil
		}
		r.Add(r, dec(x))
		f, _ := r.Float64()
		return f, nil
	}
	e, err := add(limit.Epsilon, granted[0])
	if err != nil {
		return Spent{}, err
	}
	d, err := add(limit.Delta, granted[1])
	if err != nil {
		return Spent{}, err
	}
	return Spent{Epsilon: e, Delta: d}, nil
}
