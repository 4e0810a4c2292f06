package rewrite

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// TestReview114_FilterWorkPerMeasure: the planner counted an aggregate's
// FILTER once per aggregate call (filter.go), but the emitter writes it as
// a CASE in each measure that carries it, so a VARIANCE's FILTER ran three
// times a row (and an AVG's twice) against a work bound, and so a time
// slot, that counted it once: `LIKE '%xxxxxxxxxxxxxxxx%'` in a VARIANCE's
// FILTER was 155 units of a row's work where the SQL does 465. The work is
// now counted per measure (dpplan.CondWork), and release refuses a plan
// that counts less (verifyWork).
func TestReview114_FilterWorkPerMeasure(t *testing.T) {
	ds, err := policy.Load(hospitalPolicy)
	if err != nil {
		t.Fatal(err)
	}
	pattern := "%" + strings.Repeat("x", 16) + "%"
	filter := dpplan.PredWork(dpplan.PredLike{Col: "diagnosis", Pattern: pattern})
	for q, times := range map[string]int{
		"SELECT VARIANCE(cost) FILTER (WHERE diagnosis LIKE '" + pattern + "') FROM visits": 3,
		"SELECT AVG(cost) FILTER (WHERE diagnosis LIKE '" + pattern + "') FROM visits":      2,
		"SELECT COUNT(*) FILTER (WHERE diagnosis LIKE '" + pattern + "') FROM visits":       1,
	} {
		p, err := Rewrite(ds, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		carrying := 0
		for _, m := range p.Measures {
			if m.Filter != nil {
				carrying++
			}
		}
		if carrying != times {
			t.Errorf("%s: %d measures carry the FILTER, want %d", q[:28], carrying, times)
		}
		if p.RowOps < times*filter {
			t.Errorf("%s: RowOps %d, less than the FILTER's %d units evaluated %d times a row", q[:28], p.RowOps, filter, times)
		}
		_, where := dpplan.SourceOf(p)
		if p.RowOps < dpplan.RowOpsOf(p, where) || !reflect.DeepEqual(p.Work, dpplan.WorkOf(ds, p)) {
			t.Errorf("%s: RowOps %d and work %+v do not verify (RowOpsOf %d, WorkOf %+v)", q[:28], p.RowOps, p.Work, dpplan.RowOpsOf(p, where), dpplan.WorkOf(ds, p))
		}
	}
}
