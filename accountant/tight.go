// Privacy-critical: needs DP review.

package accountant

// tightByName returns the float part of the named method, or nil.
func tightByName(name string) tightAccountant {
	return nil
}
