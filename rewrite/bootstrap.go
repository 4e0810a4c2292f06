// Privacy-critical: needs DP review.

package rewrite
