package release

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// TestQuantileGroupsText: a grouped quantile keeps each unit in
// max_groups_per_unit of its groups, and the counts, sums and averages of
// the same statement are computed over those rows; EXPLAIN and the NOTICE
// (errorsText shares unitsBoundText) say so, and say nothing of it for the
// same aggregates without the quantile, or for the quantile alone (new
// user's run 94: COUNT(*) beside percentile_cont came out at a third of
// the truth, unannounced).
func TestQuantileGroupsText(t *testing.T) {
	t.Parallel()
	ds := loadPolicy(t)
	const want = "a grouped quantile keeps each unit in at most"
	for _, c := range []struct {
		q    string
		says bool
	}{
		{"SELECT date_trunc('month', visit_date) AS m, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost), COUNT(*) FROM visits GROUP BY 1", true},
		{"SELECT date_trunc('month', visit_date) AS m, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost), AVG(cost) FROM visits GROUP BY 1", true},
		{"SELECT date_trunc('month', visit_date) AS m, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits GROUP BY 1", false},
		{"SELECT date_trunc('month', visit_date) AS m, COUNT(*) FROM visits GROUP BY 1", false},
		{"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost), COUNT(*) FROM visits", false},
	} {
		plan := mustRewrite(t, ds, c.q)
		if c.says && dpplan.GroupBounding(plan) != dpplan.GroupsSelect {
			t.Fatalf("%s: groups bounded by %v, want GroupsSelect (the test's premise)", c.q, dpplan.GroupBounding(plan))
		}
		text := explainText(t, ds, plan)
		if got := strings.Contains(text, want); got != c.says {
			t.Errorf("%s: EXPLAIN says %q: %v, want %v\n%s", c.q, want, got, c.says, text)
		}
	}
}

// explainText is EXPLAIN's text of plan at ε 1 (Laplace), a line a row.
func explainText(t *testing.T, ds *policy.Dataset, plan *dpplan.Plan) string {
	t.Helper()
	_, rows, err := Explain(ds, plan, Params{Epsilon: 1, Mechanism: policy.MechanismLaplace})
	if err != nil {
		t.Fatalf("EXPLAIN: %v", err)
	}
	var text strings.Builder
	for _, r := range rows {
		text.WriteString(*r[0] + "\n")
	}
	return text.String()
}
