// Privacy-critical: needs DP review.

package dpplan

import (
	"github.com/dpproxy/dpproxy/policy"
)

// Quantile describes one quantile measure, answered by the exponential
// mechanism over a fixed grid of buckets (release/quantile.go). Everything
// in it is public: the query's constants and the policy's bounds.
type Quantile struct {
	Func string  // "percentile_cont", "percentile_disc", "min" or "max"
	Q    float64 // the fraction, in [0, 1] (0 for min, 1 for max)
	// Cont selects PostgreSQL's percentile_cont (linear interpolation
	// between the order statistics ⌊h⌋ and ⌈h⌉, h = 1 + q(n−1)); otherwise
	// the answer is the order statistic max(1, ⌈q·n⌉) (percentile_disc,
	// MIN, MAX).
	Cont bool
	// Type is the column's type; values are numbers (dates: days since
	// 1970-01-01).
	Type policy.Type
	// Buckets and Width define the grid of the exponential method: bucket
	// j covers [Lower + j·Width, Lower + (j+1)·Width), the last one closed
	// at Upper. For int and date columns Width is a whole number and the
	// bucket holds the integers Lower + j·Width … Lower + (j+1)·Width − 1.
	Buckets int
	Width   float64
	// Rows is max_rows_per_unit: how many values one unit can add to or
	// remove from a group.
	Rows int
}
