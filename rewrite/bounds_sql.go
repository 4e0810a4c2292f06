// Privacy-critical: needs DP review.

package rewrite

// The SQL that enforces the bounds: emitSQL and the clamped per-row
// values. See bounds.go for the bounding argument and the shape of this
// SQL.
