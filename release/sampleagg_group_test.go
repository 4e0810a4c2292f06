package release

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// saGroupRows builds upstream rows "key, k, S, n" for the given groups
// (every level), with true average a and n units in each.
func saGroupRows(plan *rewrite.Plan, groups []string, a float64, n int) [][]*string {
	var rows [][]*string
	for _, g := range groups {
		for _, r := range saRows(plan, a, n) {
			rows = append(rows, append([]*string{s(g)}, r...))
		}
	}
	return rows
}

// TestRunSampleAgg_Grouped: every department of the public domain is
// released, in domain order, also those without rows (the midpoint plus
// noise, k the smallest level); groups with data get k from their own
// noisy count; the noise is calibrated over L0 = max_groups_per_unit = 4
// groups (EXPLAIN's noise scale is L0·(u − l)/(kε)); one charge.
func TestRunSampleAgg_Grouped(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.Rewrite(ds, "SELECT department, corr(cost, age) FROM visits GROUP BY department")
	if err != nil {
		t.Fatal(err)
	}
	if plan.MaxGroupsPerUnit != 4 {
		t.Fatalf("MaxGroupsPerUnit = %d, want 4", plan.MaxGroupsPerUnit)
	}
	led := &memLedger{limit: 20}
	r := newTestReleaser(t, led, 11)
	// ε = 10: the count gets 1, so its Laplace scale is L0/1 = 4 and an
	// empty group's ñ reaches 128 (k = 4) with probability e^{-32}/2; a
	// group of 40 000 units falls below 32 768 (k < 1024) with probability
	// e^{-1808}/2.
	up := &fakeUpstream{rows: saGroupRows(plan, []string{"cardiology", "oncology"}, 0.4, 40000)}
	res, err := r.Run(context.Background(), Request{Analyst: "alice", Dataset: ds, Plan: plan, Epsilon: 10, Mechanism: policy.MechanismLaplace, Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	domain := []string{"cardiology", "emergency", "neurology", "oncology", "orthopedics", "pediatrics", "surgery"}
	if len(res.Rows) != len(domain) {
		t.Fatalf("%d rows, want all %d departments", len(res.Rows), len(domain))
	}
	for i, row := range res.Rows {
		if *row[0] != domain[i] {
			t.Fatalf("row %d is %q, want %q (domain order)", i, *row[0], domain[i])
		}
		v, err := strconv.ParseFloat(*row[1], 64)
		if err != nil || v < -1 || v > 1 {
			t.Fatalf("%s: corr = %q, want a value in [-1, 1]", domain[i], *row[1])
		}
		// With data: noise scale L1/(kε) = 4·2/(1024·9) < 0.001;
		// P(|Z| > 0.02) < e^{-20}.
		if (domain[i] == "cardiology" || domain[i] == "oncology") && math.Abs(v-0.4) > 0.02 {
			t.Errorf("%s: corr = %v, want 0.4 within 0.02", domain[i], v)
		}
	}
	if !strings.Contains(res.Notice, "k=1024 for 2 groups, k=2 for 5 groups") || !strings.Contains(res.Notice, "±") || !strings.Contains(res.Notice, "/k (corr, epsilon 9)") {
		t.Fatalf("NOTICE %q does not give k per group and the error per k", res.Notice)
	}
	if len(led.reserved) != 1 || len(led.reserved[0].Events) != 2 {
		t.Fatalf("charges = %+v, want one charge of the count and corr", led.reserved)
	}

	// EXPLAIN: Laplace scale L0·(u−l)/ε_corr = 4·2/9 per k.
	_, rows, err := Explain(ds, plan, 10, 0, policy.MechanismLaplace)
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, r := range rows {
		text = append(text, *r[0])
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{"noise_scale=0.8889/k", "L0=4", "per group"} {
		if !strings.Contains(all, want) {
			t.Errorf("EXPLAIN lacks %q:\n%s", want, all)
		}
	}

	// A group outside the domain or a malformed row is an internal error,
	// not an answer; a row of an undeclared group is ignored.
	bad := &fakeUpstream{rows: [][]*string{{s("cardiology"), s("3"), s("0"), s("1")}}}
	if _, err := newTestReleaser(t, &memLedger{limit: 20}, 1).Run(context.Background(), Request{Analyst: "b", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: bad}); err == nil {
		t.Errorf("a level the plan does not compute was accepted")
	}
	other := &fakeUpstream{rows: [][]*string{{s("dermatology"), s("2"), s("0"), s("1")}}}
	if _, err := newTestReleaser(t, &memLedger{limit: 20}, 1).Run(context.Background(), Request{Analyst: "c", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: other}); err != nil {
		t.Errorf("a row outside the domain: %v", err)
	}
}
