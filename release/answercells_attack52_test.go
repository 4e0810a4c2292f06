package release

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestAttack52_AnswerCellsCountMeasuresNotColumns (attack round 52,
// severity medium; the release side of proxy's
// TestAttack52_WideDPAnswerKeptPastBound).
//
// checkAnswerCells (release/bounded.go:119) bounds groups × measures, the
// noisy measurements, to maxAnswerCells = 60,000 before the charge. The
// proxy relies on it as a bound on the answer's size: dpAnswerRoom
// (proxy/extended.go:712, "release refuses answers of more than 60,000
// cells … about 3 MiB") is all it reserves before a DP answer is released
// and kept in a portal, and SECURITY.md says "an answer has at most 60,000
// cells". But the answer has groups × (keys + outputs) cells, and the
// planner shares one measure among every identical aggregate of the select
// list: `COUNT(*)` written 1,662 times (PostgreSQL's select-list limit is
// 1,664 with the two keys) is one count measure (plus the bias measure)
// and 1,662 columns. Grouped by width_bucket(age, 0, 110, 4283) and
// department, 29,995 groups, the statement passes Check — nothing is
// charged or run yet — and its answer has 49.9 million cells, about
// 1.3 GB as the proxy keeps it (bufferedResult.size: 24 bytes + text per
// value) and 2.1 GB as rowsBytes counts a cursor's rows, built in the
// proxy's memory whatever max_memory_per_analyst_mb (default 256 MiB)
// and MaxBufferedResult (64 MiB) say; the CPU to format them is also far
// above the "near a second" checkAnswerCells promises. Once answered, it
// is cached: asking again in each of an analyst's sessions is free.
//
// Suggested fix: count the answer's cells, groups × (keys + outputs, and
// the error columns when dp.error_columns is on), against a bound — the
// noisy measurements can keep their own 60,000 — so that dpAnswerRoom's
// premise holds; or make the proxy reserve groups × columns × a per-cell
// width from the plan before the charge.
func TestAttack52_AnswerCellsCountMeasuresNotColumns(t *testing.T) {
	ds := loadPolicy(t)
	const aggs = 1662 // with the two keys, PostgreSQL's 1,664 select-list entries
	sql := "SELECT width_bucket(age, 0, 110, 4283) AS b, department" + strings.Repeat(", COUNT(*)", aggs) + " FROM visits GROUP BY 1, 2"
	plan, err := rewrite.Rewrite(ds, sql)
	if err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	g := 1
	for _, k := range plan.Keys {
		g *= len(k.Domain)
	}
	cols := len(plan.Outputs) // the keys are outputs too
	err = Check(Request{Analyst: "mallory", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: neverRun52{}})
	t.Logf("%d groups × %d columns = %d answer cells from %d measures; Check: %v", g, cols, g*cols, len(plan.Measures), err)
	if err == nil && g*cols > maxAnswerCells {
		t.Errorf("Check accepts (before the charge) an answer of %d groups × %d columns = %d cells, %d times maxAnswerCells: checkAnswerCells counts the %d measures, not the answer's columns",
			g, cols, g*cols, g*cols/maxAnswerCells, len(plan.Measures))
	}
}

// neverRun52 is the upstream of a request that is only checked: Check
// runs nothing, and this says so if it ever did.
type neverRun52 struct{}

func (neverRun52) Query(context.Context, string, ...any) ([][]*string, error) {
	return nil, errors.New("Check ran SQL")
}
