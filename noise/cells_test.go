// Privacy-critical: needs DP review.

package noise

import (
	"math/big"
	"testing"
)

// TestCells_RoundingPerChangedGroup: real-mode noise charges one grid
// step of rounding per cell for Params.Cells cells. When one unit changes
// G groups, each by a value off the grid (dpplan/bounds.go weights a
// unit with one row in each of G = 1000 groups by T/t = 4/1000), the
// rounded vector can move by Δ/r + G grid steps: with Cells = G the
// privacy loss of the worst output stays within ε; with Cells = L0 = 4 (what
// release passed before rewrite.Plan.CellsChanged) it does not. Found by a
// review of the allowance over groups.
func TestCells_RoundingPerChangedGroup(t *testing.T) {
	const (
		l0, groups = 4, 1000
		eps        = 0.01
	)
	loss := func(cells int) float64 {
		m, err := NewLaplace(Params{Epsilon: eps, Sensitivity: l0, Cells: cells})
		if err != nil {
			t.Fatal(err)
		}
		lap := m.(*laplace)
		r := lap.gran
		d := new(big.Rat).Quo(big.NewRat(l0, 1), big.NewRat(groups, 1)) // 0.004 per group, Δ₁ = 4 in all
		tiny := new(big.Rat).Quo(r, big.NewRat(1<<20, 1))
		steps := new(big.Int)
		for range groups {
			// Other units put the group just below a half grid step.
			x := new(big.Rat).Sub(new(big.Rat).Quo(r, big.NewRat(2, 1)), tiny)
			a, _ := lap.toGrid(x)
			b, _ := lap.toGrid(new(big.Rat).Add(x, d))
			steps.Add(steps, new(big.Int).Sub(b, a))
		}
		l, _ := new(big.Rat).Quo(new(big.Rat).SetInt(steps), new(big.Rat).Quo(new(big.Rat).SetInt(lap.tn), new(big.Rat).SetInt(lap.td))).Float64()
		return l
	}
	if l := loss(groups); l > eps {
		t.Errorf("Cells = %d groups changed: privacy loss %.12g > ε = %g", groups, l, eps)
	}
	if l := loss(l0); l <= eps {
		t.Errorf("Cells = L0 = %d: privacy loss %.12g ≤ ε: the test no longer exercises rounding across groups", l0, l)
	}
}
