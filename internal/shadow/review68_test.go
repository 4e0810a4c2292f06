package shadow

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// TestReview68_UnitCommentUngroupedAllowance: an ungrouped DP answer
// counts a unit's whole allowance, max_rows_per_unit × max_groups_per_unit
// rows (rewrite build_bounds, proxy policyBoundMost), not max_rows_per_unit:
// with 3 groups of 5 rows, COUNT(*) without GROUP BY counts up to 15 rows of
// one patient. The comment says "at most 5 rows of one patient in a group".
func TestReview68_UnitCommentUngroupedAllowance(t *testing.T) {
	ds, err := policy.Parse(strings.NewReader(`dataset: d
privacy_unit: patient
budget: {epsilon: 1}
tables:
  visits:
    unit_column: patient_id
    max_groups_per_unit: 3
    max_rows_per_unit: 5
    columns:
      cost: {type: numeric, lower: 0, upper: 10}
`), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := ds.Table("visits")
	got := columnComment(ds, tb, "patient_id")
	if !strings.Contains(got, "15") {
		t.Errorf("unit comment = %q: says nothing of the 15 rows an ungrouped answer counts", got)
	}
}
