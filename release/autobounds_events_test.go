package release

import (
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestAutoEventsCoverEveryCandidate: the events reserved for an
// auto plan dominate, field by field, the events of every candidate plan
// released on its own with the rest of ε (ε and δ at least, noise
// multiplier at most, same mechanism), so no accountant charges less.
func TestAutoEventsCoverEveryCandidate(t *testing.T) {
	ds := loadPolicy(t)
	for _, q := range []string{
		"SELECT COUNT(*), SUM(cost) FROM visits",
		"SELECT department, COUNT(*), AVG(cost), COUNT(DISTINCT patient_id) FROM visits GROUP BY department",
	} {
		for _, mech := range []string{policy.MechanismLaplace, policy.MechanismGaussian} {
			for _, eps := range []float64{0.1, 0.25, 1, 3} {
				plan, err := rewrite.RewriteWith(ds, q, rewrite.Options{AutoBounds: true})
				if err != nil || plan.Auto == nil {
					t.Fatalf("%s: %v", q, err)
				}
				req := Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: eps, Delta: 1e-6, Mechanism: mech, Upstream: noUpstream{}}
				r := &Releaser{}
				ac, err := r.newAutoChoice(req)
				if err != nil {
					t.Fatal(err)
				}
				ev := ac.events()
				var total float64
				for _, e := range ev {
					total += e.Epsilon
				}
				if total > eps {
					t.Errorf("%s %s ε=%v: events sum to %v", q, mech, eps, total)
				}
				for i, ms := range ac.mechs {
					for j, m := range ms {
						e := ev[j+1]
						if e.Mechanism != m.mech.Name() || e.Epsilon < m.mech.Epsilon() || e.Delta < m.mech.Delta() ||
							m.mech.NoiseMultiplier() > 0 && e.NoiseMultiplier > m.mech.NoiseMultiplier() {
							t.Errorf("%s %s ε=%v candidate %d measure %d: reserved %+v, candidate needs %s ε=%v δ=%v nm=%v",
								q, mech, eps, ac.cands[i], j, e, m.mech.Name(), m.mech.Epsilon(), m.mech.Delta(), m.mech.NoiseMultiplier())
						}
					}
				}
			}
		}
	}
}
