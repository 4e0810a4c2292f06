package release

import (
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// withQuantilesTest is CalibratedPlan with positional parameters.
func withQuantilesTest(ds *policy.Dataset, p *dpplan.Plan, method string, eps, delta float64, mech string) (*dpplan.Plan, error) {
	return CalibratedPlan(ds, p, Params{Epsilon: eps, Delta: delta, Mechanism: mech, QuantileMethod: method})
}
