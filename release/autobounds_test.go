package release

import (
	"context"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// profileUpstream answers Auto.CombinedSQL with the plan's row followed by
// the profile, and any other SQL with the plan's row alone.
type profileUpstream struct {
	combinedSQL string
	profile     []*string
	row         []*string
	calls       []string
}

func (u *profileUpstream) Query(_ context.Context, sql string, _ ...any) ([][]*string, error) {
	u.calls = append(u.calls, sql)
	if sql == u.combinedSQL {
		return [][]*string{append(append([]*string{}, u.row...), u.profile...)}, nil
	}
	return [][]*string{u.row}, nil
}

// TestRun_AutoBounds: with dp.contribution = auto, one charge covers the
// choice (ε/10, the exponential mechanism) and the chosen plan (the rest);
// the combined SQL runs first, then the chosen candidate's SQL unless it is the plan's own, and the
// NOTICE names the choice. When every unit has at most one row no
// candidate cuts a unit, so the utilities are −h_c = −c·ln(20)/ε_m and
// candidate c is chosen with probability ∝ exp(−ε_sel·h_c/(2w)), Δu = w. Over 300
// seeded runs each candidate's frequency must lie within 5 binomial
// standard deviations (+1/300) of that probability (false rejection
// < 10⁻⁵ over the 7 candidates).
func TestRun_AutoBounds(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.RewriteWith(ds, "SELECT COUNT(*) FROM visits", rewrite.Options{AutoBounds: true})
	if err != nil || plan.Auto == nil {
		t.Fatalf("%v: no auto bounds", err)
	}
	cands := plan.Auto.Candidates
	if len(cands) != 7 || cands[len(cands)-1] != 20 {
		t.Fatalf("candidates %v, want 1–8 and the allowance 20", cands)
	}
	profile := []*string{s("1000")}
	for range cands {
		profile = append(profile, s("1000"))
	}
	noteRE := regexp.MustCompile(`rows per unit: at most (\d+) in all \(chosen by DP among 1, 2, 3, 4, 6, 8, 20, epsilon 0\.1\)`)
	chosen := map[int]int{}
	const runs = 300
	for seed := range uint64(runs) {
		up := &profileUpstream{combinedSQL: plan.Auto.CombinedSQL, profile: profile, row: []*string{s("1000"), s("0")}}
		l := &memLedger{limit: 10}
		res, err := newTestReleaser(t, l, seed+1).Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan,
			Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true})
		if err != nil {
			t.Fatal(err)
		}
		m := noteRE.FindStringSubmatch(res.Notice)
		if m == nil {
			t.Fatalf("NOTICE lacks the choice: %s", res.Notice)
		}
		c, _ := strconv.Atoi(m[1])
		chosen[c]++
		i := 0
		for i < len(cands) && cands[i] != c {
			i++
		}
		// The combined SQL first; the chosen candidate's only when it is
		// not the plan's own bound (answered by the same scan).
		wantCalls := []string{plan.Auto.CombinedSQL}
		if i < len(cands)-1 {
			wantCalls = append(wantCalls, plan.Auto.Plans[i].SQL)
		}
		if !slices.Equal(up.calls, wantCalls) {
			t.Fatalf("upstream calls %d, want %d for %d rows per unit", len(up.calls), len(wantCalls), c)
		}
		if seed == 0 {
			ev := l.reserved[0].Events
			if len(ev) != 3 || ev[0].Mechanism != "exponential" || math.Abs(ev[0].Epsilon-0.1) > 1e-12 {
				t.Fatalf("events %+v: want the choice (ε 0.1) first", ev)
			}
			var sum float64
			for _, e := range ev {
				sum += e.Epsilon
			}
			if math.Abs(sum-1) > 1e-12 {
				t.Errorf("events sum to ε %v, want 1", sum)
			}
			if !strings.Contains(res.Notice, "epsilon 0.09)") { // the bias estimate: 0.9/10
				t.Errorf("NOTICE %s: want the bias estimate at ε 0.09", res.Notice)
			}
		}
	}
	// ε_sel = 0.1 and, for the count, ε_m = 0.81 (0.9 less the bias
	// estimate's tenth).
	var z float64
	w := make([]float64, len(cands))
	for i, c := range cands {
		w[i] = math.Exp(-0.1 / (2 * autoRowsPerCut) * float64(c) * math.Log(20) / 0.81)
		z += w[i]
	}
	for i, c := range cands {
		p := w[i] / z
		sd := math.Sqrt(p * (1 - p) / runs)
		if got := float64(chosen[c]) / runs; math.Abs(got-p) > 5*sd+1.0/runs {
			t.Errorf("candidate %d chosen %.3f of the time, want %.3f ± %.3f", c, got, p, 5*sd)
		}
	}
	t.Logf("choices over %d runs: %v", runs, chosen)
}

// TestRun_AutoBoundsFollowsTheData: when 96% of the units have more than 8
// rows, the bounds up to 8 cut 9600 units, which outweighs the noise saved
// (h_c = c·ln(20)/ε_m ≈ 0.74·c rows at ε_m = 4.05), so the allowance 20
// is chosen nearly always at ε_sel = 0.5.
func TestRun_AutoBoundsFollowsTheData(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.RewriteWith(ds, "SELECT COUNT(*) FROM visits", rewrite.Options{AutoBounds: true})
	if err != nil || plan.Auto == nil {
		t.Fatalf("%v: no auto bounds", err)
	}
	// N = 10000; units with at most c rows: c ≤ 8: 400, 20: 10000.
	profile := []*string{s("10000")}
	for _, c := range plan.Auto.Candidates {
		n := "400"
		if c == 20 {
			n = "10000"
		}
		profile = append(profile, s(n))
	}
	for seed := range uint64(50) {
		up := &profileUpstream{combinedSQL: plan.Auto.CombinedSQL, profile: profile, row: []*string{s("100000"), s("0")}}
		res, err := newTestReleaser(t, &memLedger{limit: 10}, seed+1).Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan,
			Epsilon: 5, Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true})
		if err != nil {
			t.Fatal(err)
		}
		// Utilities: 8 rows −4·9600 − 6, 20 rows −15: P(8) < e^{−0.5/8·38000}.
		if m := regexp.MustCompile(`at most (\d+) in all`).FindStringSubmatch(res.Notice); m == nil || m[1] != "20" {
			t.Fatalf("seed %d: %s, want 20 rows", seed, res.Notice)
		}
	}
}
