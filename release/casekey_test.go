package release

import (
	"context"
	"strconv"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// TestRun_CaseKeys checks that GROUP BY a CASE bucket releases exactly its
// THEN/ELSE labels (absent ones with a noisy zero), in the order written,
// combined with a public key as a product, and nothing outside the domain.
func TestRun_CaseKeys(t *testing.T) {
	ds := loadPolicy(t)
	plan := mustRewrite(t, ds, "SELECT department, CASE WHEN age < 18 THEN 'child' WHEN age < 65 THEN 'adult' ELSE 'senior' END AS age_group, COUNT(*) FROM visits GROUP BY 1, 2")
	if plan.PrivateGroups() || plan.Outputs[1].Name != "age_group" || plan.Outputs[1].PGType != "text" {
		t.Fatalf("plan: private %v, output %+v", plan.PrivateGroups(), plan.Outputs[1])
	}
	up := &fakeUpstream{rows: [][]*string{
		{s("oncology"), s("adult"), s("40")},
		{s("oncology"), s("teen"), s("40")}, // not a label: ignored
	}}
	res, err := newTestReleaser(t, &memLedger{limit: 10}, 9).Run(context.Background(),
		Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	depts := ds.Tables["visits"].Columns["department"].PublicValues
	labels := []string{"child", "adult", "senior"}
	if len(res.Rows) != len(depts)*len(labels) {
		t.Fatalf("%d rows, want %d", len(res.Rows), len(depts)*len(labels))
	}
	for i, row := range res.Rows {
		if *row[0] != depts[i/3] || *row[1] != labels[i%3] {
			t.Fatalf("row %d = %s/%s, want %s/%s", i, *row[0], *row[1], depts[i/3], labels[i%3])
		}
		if _, err := strconv.ParseInt(*row[2], 10, 64); err != nil {
			t.Fatalf("count %q is not an integer", *row[2])
		}
	}
}
