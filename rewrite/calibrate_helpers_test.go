package rewrite

import (
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
)

// withQuantilesTest returns p as a release with these parameters runs it
// (its quantile method applied, its SQL emitted for the calibrated
// mechanisms: release.CalibratedPlan).
func withQuantilesTest(ds *policy.Dataset, p *Plan, method string, eps, delta float64, mech string) (*Plan, error) {
	return release.CalibratedPlan(ds, p, release.Params{Epsilon: eps, Delta: delta, Mechanism: mech, QuantileMethod: method})
}
