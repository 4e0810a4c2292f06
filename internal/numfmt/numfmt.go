// Package numfmt formats figures for people: budgets and costs in SHOW,
// NOTICEs and the CLI.
//
// Spent budgets are float64 sums (0.1 + 0.2 + …), whose shortest
// round-tripping decimal can be 1.5999999999999999; a person wrote 1.6.
// Figure keeps 12 significant digits — far below the resolution of any
// privacy parameter, far above float64's rounding noise in a sum of a few
// thousand charges — and drops trailing zeros.
package numfmt

import (
	"math"
	"strconv"
)

// Figure formats x with at most 12 significant digits; +Inf is
// "unlimited".
func Figure(x float64) string {
	if math.IsInf(x, 1) {
		return "unlimited"
	}
	return strconv.FormatFloat(x, 'g', 12, 64)
}
