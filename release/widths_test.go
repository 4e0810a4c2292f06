package release

import (
	"context"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// TestRun_Widths: each released cell carries its 95% half-width
// (Result.Widths, the error columns of SET dp.error_columns): none for
// keys, one per column for counts (the NOTICE's), one per group for
// averages; and ORDER BY moves a row's widths with it. Two releases with
// the same noise (the same seed), one ordered by the noisy count, must
// give every department the same widths.
func TestRun_Widths(t *testing.T) {
	ds := loadPolicy(t)
	up := &fakeUpstream{rows: [][]*string{
		{s("cardiology"), s("30000"), s("45000000"), s("29990")},
		{s("oncology"), s("120"), s("960000"), s("120")},
		{s("pediatrics"), s("2500"), s("1250000"), s("2500")},
	}}
	run := func(order bool) *Result {
		t.Helper()
		plan := groupedPlan(ds)
		if order {
			plan.OrderBy = []dpplan.OrderItem{{Output: 1, Desc: true}}
			plan = emitFor(ds, plan)
		}
		r := newTestReleaser(t, &memLedger{limit: 10}, 7)
		res, err := r.Run(context.Background(), Request{Analyst: "alice", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Widths) != len(res.Rows) {
			t.Fatalf("%d rows of widths for %d rows", len(res.Widths), len(res.Rows))
		}
		return res
	}
	plain, ordered := run(false), run(true)
	byDept := map[string][]*string{}
	countWidth := ""
	for i, row := range plain.Rows {
		w := plain.Widths[i]
		if w[0] != nil || w[1] == nil || w[2] == nil {
			t.Fatalf("row %s widths %v: want none for the key, one for count and avg", *row[0], w)
		}
		if countWidth == "" {
			countWidth = *w[1]
		} else if *w[1] != countWidth {
			t.Errorf("count widths differ between groups: %s and %s", countWidth, *w[1])
		}
		byDept[*row[0]] = w
	}
	if !strings.Contains(plain.Notice, "±"+countWidth+" (count") {
		t.Errorf("the count's width %s is not the NOTICE's:\n%s", countWidth, plain.Notice)
	}
	if *byDept["cardiology"][2] == *byDept["oncology"][2] {
		t.Errorf("AVG widths of 30000 and 120 rows are equal (%s): want one per group", *byDept["cardiology"][2])
	}
	for i, row := range ordered.Rows {
		want := byDept[*row[0]]
		if got := ordered.Widths[i]; *got[1] != *want[1] || *got[2] != *want[2] {
			t.Errorf("ordered row %d (%s): widths %s, %s; unordered %s, %s", i, *row[0], *got[1], *got[2], *want[1], *want[2])
		}
	}
	if *ordered.Rows[0][0] != "cardiology" {
		t.Errorf("ORDER BY count DESC put %s first", *ordered.Rows[0][0])
	}
}
