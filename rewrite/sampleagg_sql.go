// Privacy-critical: needs DP review.

package rewrite

// The SQL of sample-and-aggregate: keyed-hash blocks, per-block answers
// clipped to the output range, averaged. See sampleagg.go for the
// mechanism and its guarantee.
