package release

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// field returns the number after "name=" in line.
func field(t *testing.T, line, name string) float64 {
	t.Helper()
	i := strings.Index(line, name+"=")
	if i < 0 {
		t.Fatalf("no %s= in %q", name, line)
	}
	rest := line[i+len(name)+1:]
	if j := strings.IndexAny(rest, " )"); j >= 0 {
		rest = rest[:j]
	}
	v, err := strconv.ParseFloat(rest, 64)
	if err != nil {
		t.Fatalf("%s=%q in %q: %v", name, rest, line, err)
	}
	return v
}

func TestExplain_Laplace(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.Rewrite(ds, "SELECT department, COUNT(*), AVG(cost), stddev(cost) FROM visits GROUP BY department ORDER BY 2 DESC LIMIT 3")
	if err != nil {
		t.Fatal(err)
	}
	cols, rows, err := Explain(ds, plan, Params{Epsilon: 0.4, Delta: 0, Mechanism: policy.MechanismLaplace})
	if err != nil {
		t.Fatal(err)
	}
	if len(cols) != 1 || cols[0].Name != "QUERY PLAN" || cols[0].PGType != "text" {
		t.Fatalf("columns = %+v", cols)
	}
	var lines []string
	for _, r := range rows {
		if len(r) != 1 || r[0] == nil {
			t.Fatalf("row %v: want one text value", r)
		}
		lines = append(lines, *r[0])
	}
	text := strings.Join(lines, "\n")
	// 5 measurements: the bias estimate (rows removed by bounding) gets
	// ε/10 = 0.04, the other 4 (count(*), sum, count(cost), sumsq) 0.09
	// each (release/bias.go).
	if !strings.Contains(lines[0], "groups=7") || !strings.Contains(lines[0], "measurements=5") || !strings.Contains(lines[0], "max_groups_per_unit=4") {
		t.Fatalf("header = %q", lines[0])
	}
	if got := field(t, lines[1], "epsilon"); math.Abs(got-0.4) > 1e-9 {
		t.Fatalf("cost line %q: want epsilon=0.4", lines[1])
	}
	// count(*): L∞ 5, L1 = 4·5 = 20, b = 20/0.09 ≈ 222.2; discrete
	// Laplace 95% half-width ≈ b·ln 20 ≈ 666. The bias estimate: each
	// unit's removed rows clipped to L0·R = 20, b = 20/0.04 = 500.
	var found, bias bool
	for _, l := range lines {
		if strings.Contains(l, "Measurement m0: count(*)") {
			found = true
			if field(t, l, "sensitivity") != 20 || math.Abs(field(t, l, "noise_scale")-20/0.09) > 0.1 {
				t.Fatalf("count(*) line %q: want sensitivity=20 noise_scale=222.2", l)
			}
			if h := field(t, l, "half_width_95"); math.Abs(h-20/0.09*math.Log(20)) > 3 {
				t.Fatalf("count(*) half-width %v, want about %v", h, 20/0.09*math.Log(20))
			}
		}
		if strings.Contains(l, "Measurement m4: rows removed by contribution bounding") {
			bias = true
			if field(t, l, "linf") != 20 || field(t, l, "sensitivity") != 20 || math.Abs(field(t, l, "noise_scale")-500) > 0.01 {
				t.Fatalf("bias line %q: want linf=20 sensitivity=20 noise_scale=500", l)
			}
		}
		if strings.Contains(l, "sumsq(cost)") && strings.Contains(l, "Measurement") {
			// Centred at 10000: L∞ 5·10000² = 5e8, L1 2e9.
			if field(t, l, "linf") != 5e8 || field(t, l, "sensitivity") != 2e9 {
				t.Fatalf("sumsq line %q", l)
			}
		}
	}
	if !bias {
		t.Errorf("no bias-estimate measurement in\n%s", text)
	}
	if !found {
		t.Fatalf("no count(*) measurement in\n%s", text)
	}
	for _, want := range []string{"Output department (text)", "Output count (int8)", "Output avg (numeric)", "Output stddev (numeric): sqrt of variance_samp",
		"ORDER BY count DESC LIMIT 3", "  SQL: " + plan.SQL} {
		if !strings.Contains(text, want) {
			t.Fatalf("EXPLAIN lacks %q:\n%s", want, text)
		}
	}
}

func TestExplain_GaussianAndErrors(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.Rewrite(ds, "SELECT COUNT(DISTINCT patient_id), SUM(age) FROM visits")
	if err != nil {
		t.Fatal(err)
	}
	_, rows, err := Explain(ds, plan, Params{Epsilon: 1, Delta: 1e-6, Mechanism: policy.MechanismGaussian})
	if err != nil {
		t.Fatal(err)
	}
	if got := field(t, *rows[1][0], "delta"); math.Abs(got-1e-6) > 1e-12 {
		t.Fatalf("cost line %q: want delta=1e-06", *rows[1][0])
	}
	if !strings.Contains(*rows[2][0], "count(distinct patient_id)") || field(t, *rows[2][0], "sensitivity") != 1 {
		t.Fatalf("distinct-units line %q: want L2 sensitivity 1 (L0 1, L∞ 1)", *rows[2][0])
	}
	for _, tc := range []struct {
		eps, delta float64
		mech       string
	}{{0, 0, policy.MechanismLaplace}, {math.NaN(), 0, policy.MechanismLaplace}, {1, 0, policy.MechanismGaussian}, {1, 0, "exponential"}} {
		_, _, err := Explain(ds, plan, Params{Epsilon: tc.eps, Delta: tc.delta, Mechanism: tc.mech})
		if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.InvalidParameterValue {
			t.Fatalf("Explain(ε=%v, δ=%v, %s) = %v, want 22023", tc.eps, tc.delta, tc.mech, err)
		}
	}
}

// TestExplain_OutputHalfWidthIsTheNotice: EXPLAIN states a released
// count's and sum's 95% half-width as the NOTICE does, with the 1/2 of
// rounding a weighted value to a whole number (a new user's run of 7
// December: EXPLAIN said ±73.97 where the answer's NOTICE said ±74.47).
func TestExplain_OutputHalfWidthIsTheNotice(t *testing.T) {
	ds := loadPolicy(t)
	// 7 departments, at most 4 per patient: groups are weighted, counts
	// and integer sums noised on a grid finer than the integers.
	plan, err := rewrite.Rewrite(ds, "SELECT department, COUNT(*), SUM(cost) FROM visits GROUP BY department")
	if err != nil {
		t.Fatal(err)
	}
	_, rows, err := Explain(ds, plan, Params{Epsilon: 1, Mechanism: policy.MechanismLaplace})
	if err != nil {
		t.Fatal(err)
	}
	widths := map[string]float64{}
	for _, r := range rows {
		l := *r[0]
		for _, p := range []string{"Measurement m0", "Measurement m1", "Output count", "Output sum"} {
			if strings.Contains(l, p) {
				widths[p] = field(t, l, "half_width_95")
			}
		}
	}
	if len(widths) != 4 {
		t.Fatalf("half-widths found: %v", widths)
	}
	for out, m := range map[string]string{"Output count": "Measurement m0", "Output sum": "Measurement m1"} {
		if got, want := widths[out], widths[m]+0.5; math.Abs(got-want) > 1e-6*want {
			t.Errorf("%s: half_width_95=%v, want %v (its measurement's %v + 1/2 for rounding the weighted value)", out, got, want, widths[m])
		}
	}
}
