// Privacy-critical: needs DP review.

// Package sensitivity turns per-unit contribution bounds into the L1 and L2
// sensitivities that calibrate noise.
//
// # Model
//
// Neighbouring databases differ by all rows of one privacy unit (add or
// remove one unit). A query releases one measurement per group for a set of
// groups fixed in advance (public keys). The emitted SQL guarantees, for
// every unit u:
//
//   - u contributes to at most L0 groups (max_groups_per_unit, enforced by
//     keeping at most L0 of u's groups), or, when u's groups are weighted
//     instead (dpplan.GroupsScale), to any number of groups whose changes
//     sum to at most L0·L∞ in absolute value (dpplan/bounds.go, "Two
//     levels of bounding"), and
//   - within one group, removing u changes the measurement by at most L∞
//     (max_rows_per_unit rows, each clamped to [lower, upper]).
//
// Removing u therefore changes the vector of measurements by at most L∞
// in each coordinate and at most L0·L∞ in all (at most L0 coordinates when
// selected), so
//
//	Δ₁ = L0 · L∞        (sum of |changes|)
//	Δ₂ = √L0 · L∞       (Euclidean norm of the change: Σ change² ≤
//	                     max |change| · Σ |change| ≤ L∞ · L0·L∞)
//
// These are the bounds used by e.g. Wilson et al., "Differentially Private
// SQL with Bounded User Contribution" (PoPETs 2020), §3.
//
// Some plans also know a direct bound Λ on Σ_g |change_g| that is smaller
// than L0·L∞ (Bounds.L1; the bias estimate of contribution bounding clips
// each unit's total over all groups, dpplan.MeasureRemoved). Then
//
//	Δ₁ = min(L0·L∞, Λ)
//	Δ₂ = min(√L0·L∞, √(Λ·L∞))
//
// the second because Σ_g change_g² ≤ max_g |change_g| · Σ_g |change_g| ≤
// L∞·Λ (Hölder).
//
// The package imports only the standard library, does no I/O and holds no
// state.
package sensitivity

import (
	"errors"
	"math"
	"math/big"
	"strconv"
)

// Bounds are the contribution bounds of one measurement.
type Bounds struct {
	L0   int     // groups a unit may contribute to
	LInf float64 // change of one group's value when one unit is removed
	// L1, when > 0, bounds the change summed over all groups directly
	// (see the package comment); 0 means no such bound.
	L1 float64
}

var errBounds = errors.New("sensitivity: contribution bounds must be positive and finite")

func (b Bounds) check() error {
	if b.L0 < 1 || !(b.LInf > 0) || math.IsInf(b.LInf, 0) || !(b.L1 >= 0) || math.IsInf(b.L1, 0) {
		return errBounds
	}
	return nil
}

// L1 returns Δ₁ = L0·L∞ (or the direct bound Bounds.L1 when smaller), the
// L1 sensitivity of the measurement over all groups.
func L1(b Bounds) (float64, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	d := mulUp(float64(b.L0), b.LInf)
	if b.L1 > 0 && b.L1 < d {
		d = b.L1
	}
	return d, nil
}

// mulUp is x·y rounded upwards: the float64 product rounds to nearest,
// which may lie below the exact product; math.FMA gives the exact sign of
// the difference.
func mulUp(x, y float64) float64 {
	r := x * y
	if math.FMA(x, y, -r) > 0 {
		r = math.Nextafter(r, math.Inf(1))
	}
	return r
}

// sqrtUp is √x rounded upwards (math.Sqrt rounds to nearest).
func sqrtUp(x float64) float64 {
	r := math.Sqrt(x)
	if math.FMA(r, r, -x) < 0 {
		r = math.Nextafter(r, math.Inf(1))
	}
	return r
}

// L2 returns Δ₂ = √L0·L∞ (or √(Bounds.L1·L∞) when smaller), the L2
// sensitivity of the measurement over all groups.
func L2(b Bounds) (float64, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	// Each step rounds upwards, so Δ₂ is never below the exact bound.
	d := mulUp(sqrtUp(float64(b.L0)), b.LInf)
	if b.L1 > 0 {
		d = math.Min(d, sqrtUp(mulUp(b.L1, b.LInf)))
	}
	return d, nil
}

// SumLInf returns the per-group L∞ bound of a sum whose unit contributes at
// most maxRows rows, each clamped to [lower, upper]: removing the unit
// removes a per-group sum in [maxRows·min(lower,0), maxRows·max(upper,0)],
// so the change is at most maxRows·max(|lower|, |upper|). The bounds are
// the float64 images of the policy's decimals, which the SQL clamps to
// exactly (Outward), and the product is rounded up.
func SumLInf(maxRows int, lower, upper float64) float64 {
	lower, upper = Outward(lower, upper)
	return mulUp(float64(maxRows), math.Max(math.Abs(lower), math.Abs(upper)))
}

// Outward widens [lower, upper], the float64 images of a policy's decimal
// bounds, to contain the decimals the SQL clamps to: a bound whose float64
// is not exactly its decimal (0.3 reads as 0.29999999999999998; 2.5 and
// integers are exact) moves out by one ulp, which covers the half ulp of
// its rounding. The decimal is the float's shortest text: the policy
// allows at most 15 significant digits (policy/validate.go), and two such
// decimals never round to one float64.
func Outward(lower, upper float64) (float64, float64) {
	if !exactDecimal(lower) {
		lower = math.Nextafter(lower, math.Inf(-1))
	}
	if !exactDecimal(upper) {
		upper = math.Nextafter(upper, math.Inf(1))
	}
	return lower, upper
}

// exactDecimal reports whether x equals its shortest decimal text.
func exactDecimal(x float64) bool {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return true
	}
	d, ok := new(big.Rat).SetString(strconv.FormatFloat(x, 'g', -1, 64))
	return ok && d.Cmp(new(big.Rat).SetFloat64(x)) == 0
}

// CountLInf returns the per-group L∞ bound of a count whose unit contributes
// at most maxRows rows.
func CountLInf(maxRows int) float64 { return float64(maxRows) }

// SumSqLInf returns the per-group L∞ bound of a sum of squares whose unit
// contributes at most maxRows rows, each clamped to [lower, upper]: every
// square lies in [0, max(lower², upper²)], so the unit's per-group sum of
// squares lies in [0, maxRows·max(lower², upper²)] and removing the unit
// changes the measure by at most that much.
func SumSqLInf(maxRows int, lower, upper float64) float64 {
	lower, upper = Outward(lower, upper)
	return mulUp(float64(maxRows), math.Max(mulUp(lower, lower), mulUp(upper, upper)))
}

// UnitCountLInf returns the per-group L∞ bound of COUNT(DISTINCT
// unit_column): a unit is one value of the unit column, so removing it
// changes the number of distinct units of a group by at most 1.
func UnitCountLInf() float64 { return 1 }
