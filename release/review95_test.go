package release

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

func TestReview95_QuantileGroupsTextPlans(t *testing.T) {
	ds := loadPolicy(t)
	const want = "a grouped quantile keeps each unit in at most"
	for _, c := range []struct {
		q    string
		opt  rewrite.Options
		says bool
	}{
		{"SELECT date_trunc('month', visit_date) AS m, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits GROUP BY 1", rewrite.Options{}, false},
		{"SELECT date_trunc('month', visit_date) AS m, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost), percentile_cont(0.9) WITHIN GROUP (ORDER BY cost) FROM visits GROUP BY 1", rewrite.Options{}, false},
		{"SELECT date_trunc('month', visit_date) AS m, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits GROUP BY 1 HAVING COUNT(*) > 10", rewrite.Options{}, true},
		{"SELECT date_trunc('month', visit_date) AS m, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost), COUNT(*) FROM visits GROUP BY 1", rewrite.Options{}, true},
		{"SELECT date_trunc('month', visit_date) AS m, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits GROUP BY 1", rewrite.Options{AutoBounds: true, AutoClip: true}, false},
		{"SELECT date_trunc('month', visit_date) AS m, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost), SUM(cost) FROM visits GROUP BY 1", rewrite.Options{AutoBounds: true, AutoClip: true}, true},
		{"SELECT p.region, percentile_cont(0.5) WITHIN GROUP (ORDER BY v.cost), COUNT(*) FROM visits v JOIN patients p ON p.patient_id = v.patient_id GROUP BY p.region", rewrite.Options{}, true},
		{"SELECT date_trunc('month', visit_date) AS m, MIN(cost), MAX(cost) FROM visits GROUP BY 1", rewrite.Options{}, false},
		{"SELECT date_trunc('month', visit_date) AS m, MIN(cost), COUNT(*) FROM visits GROUP BY 1", rewrite.Options{}, true},
	} {
		plan, err := rewrite.RewriteWith(ds, c.q, c.opt)
		if err != nil {
			t.Errorf("%s: %v", c.q, err)
			continue
		}
		var kinds []string
		for _, m := range plan.Measures {
			kinds = append(kinds, m.Kind.String())
		}
		text := explainText(t, ds, plan)
		got := strings.Contains(text, want)
		t.Logf("%s (%+v): bounding %v, measures %v, says %v", c.q, c.opt, dpplan.GroupBounding(plan), kinds, got)
		if got != c.says {
			t.Errorf("%s: says %v, want %v\n%s", c.q, got, c.says, text)
		}
	}
}

// TestReview95_PrivateKeysExplain: EXPLAIN of a plan with private keys
// (partition selection) says, as the answer's NOTICE does
// (selectionBoundText), that each unit counts in at most
// max_groups_per_unit of its groups and that what this removed is not
// estimated. quantileGroupsText leaves private keys to selectionBoundText,
// which only the NOTICE had: EXPLAIN of the same COUNT(*) beside a
// quantile said it over public keys and nothing over private ones.
func TestReview95_PrivateKeysExplain(t *testing.T) {
	ds := loadPolicy(t)
	for _, q := range []string{
		"SELECT diagnosis, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost), COUNT(*) FROM visits GROUP BY diagnosis",
		"SELECT diagnosis, COUNT(*) FROM visits GROUP BY diagnosis",
	} {
		plan, err := rewrite.RewriteWith(ds, q, rewrite.Options{})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		_, rows, err := Explain(ds, plan, Params{Epsilon: 1, Delta: 1e-7, Mechanism: policy.MechanismLaplace})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var text strings.Builder
		for _, r := range rows {
			text.WriteString(*r[0] + "\n")
		}
		if !strings.Contains(text.String(), "what that removed is not estimated") {
			t.Errorf("EXPLAIN %s does not say that the bounding of groups per unit is not estimated:\n%s", q, text.String())
		}
	}
}
