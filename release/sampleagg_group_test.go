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
	all := explainPlan(t, ds, plan, 10, 0, policy.MechanismLaplace)
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

// TestRunSampleAgg_PrivateKey: GROUP BY diagnosis (no public values) is
// answered by partition selection: a group of 40 000 units is released, a
// group of one unit is not (kept with probability ≤ δ_p ≈ 2.5e-7); the
// charge holds the count, the statistic and the threshold's δ; δ = 0 is
// refused before any charge; rows come out sorted by key.
func TestRunSampleAgg_PrivateKey(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.Rewrite(ds, "SELECT diagnosis, corr(cost, age) FROM visits GROUP BY diagnosis")
	if err != nil {
		t.Fatal(err)
	}
	if !plan.PrivateGroups() {
		t.Fatal("diagnosis is not a private key")
	}
	led := &memLedger{limit: 20}
	r := newTestReleaser(t, led, 13)
	rows := append(saGroupRows(plan, []string{"flu"}, 0.4, 40000), saGroupRows(plan, []string{"rare"}, -0.9, 1)...)
	rows = append(saGroupRows(plan, []string{"asthma"}, 0.1, 20000), rows...)
	up := &fakeUpstream{rows: rows}
	req := Request{Analyst: "alice", Dataset: ds, Plan: plan, Epsilon: 1, Delta: 1e-6, Mechanism: policy.MechanismLaplace, Upstream: up}
	res, err := r.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 || *res.Rows[0][0] != "asthma" || *res.Rows[1][0] != "flu" {
		t.Fatalf("rows = %v, want asthma and flu (sorted) and not the one-unit group", res.Rows)
	}
	// Noise on flu: 4·2/(1024·0.9) < 0.009; P(|Z| > 0.2) < e^{-22}.
	if v, _ := strconv.ParseFloat(*res.Rows[1][1], 64); math.Abs(v-0.4) > 0.2 {
		t.Errorf("flu: corr = %v, want 0.4 within 0.2", v)
	}
	ev := led.reserved[0].Events
	if len(ev) != 3 || ev[2].Mechanism != thresholdMechanism || ev[2].Delta != 1e-6 || ev[0].Epsilon+ev[1].Epsilon > 1 {
		t.Fatalf("events = %+v, want count, corr and the threshold's δ = 1e-6", ev)
	}
	if !strings.Contains(res.Notice, "DP partition selection") {
		t.Errorf("NOTICE %q does not name the partition selection", res.Notice)
	}

	// δ = 0: refused with a hint, nothing charged.
	led0 := &memLedger{limit: 20}
	_, err = newTestReleaser(t, led0, 1).Run(context.Background(), Request{Analyst: "b", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up})
	if err == nil || !strings.Contains(err.Error(), "dp.delta") || len(led0.reserved) != 0 {
		t.Fatalf("δ = 0: %v (charges %d), want a refusal naming dp.delta and no charge", err, len(led0.reserved))
	}

	// Gaussian: the threshold takes half of δ, the noises the rest.
	ledG := &memLedger{limit: 20}
	if _, err := newTestReleaser(t, ledG, 2).Run(context.Background(), Request{Analyst: "c", Dataset: ds, Plan: plan, Epsilon: 1, Delta: 1e-6, Mechanism: policy.MechanismGaussian, Upstream: up}); err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, e := range ledG.reserved[0].Events {
		total += e.Delta
	}
	if ev := ledG.reserved[0].Events; len(ev) != 3 || ev[2].Delta != 5e-7 || total > 1e-6 {
		t.Fatalf("Gaussian events = %+v, want the threshold's δ = 5e-7 and a total ≤ 1e-6", ev)
	}

	// EXPLAIN names the threshold.
	_, lines, err := Explain(ds, plan, Params{Epsilon: 1, Delta: 1e-6, Mechanism: policy.MechanismLaplace})
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, l := range lines {
		text = append(text, *l[0])
	}
	if all := strings.Join(text, "\n"); !strings.Contains(all, "by DP partition selection: a group is released iff its noisy count of distinct units is ≥ ") ||
		!strings.Contains(all, "delta=1e-06") {
		t.Errorf("EXPLAIN:\n%s", all)
	}
}
