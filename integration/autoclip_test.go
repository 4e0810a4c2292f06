package integration

import (
	"context"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAutoClip_EndToEnd: SUM(length_of_stay) of the demo's visits of
// under 8 days through a real `dpproxy serve`, at ε = 1, with SET
// dp.clipping = auto and then fixed, on PostgreSQL. The stays lie in
// [0, 7] for about 49,000 patients but the policy declares [0, 60], so
// auto clipping brings the upper bound down to 8 (three empty bins
// whose noise, about 100 units at 2σ, is far below 2% of the patients)
// and the NOTICE says so; the sum's stated 95% half-width is at most a
// third of the fixed one (60 → 8 is 7.5×); the answer is within twice its
// stated half-width of the truth (discrete Laplace: probability below
// 0.25% of a false failure; nothing is clamped at 8, and the rows per
// patient are bounded at the policy's fixed 20, which the demo's patients
// never exceed: with the demo policy's automatic choice, a bound chosen
// below some patients' visits would remove rows, a bias the NOTICE states
// apart and this half-width does not cover); the ledger charges
// exactly ε; EXPLAIN describes the choice; a bad value of dp.clipping is
// refused with 22023 and a hint.
func TestAutoClip_EndToEnd(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := driverProxy(t, "autoclip")
	const q = "SELECT SUM(length_of_stay) AS s FROM visits WHERE length_of_stay < 8"
	conn, notices := connectWithNotices(t, ctx, p.dsn("autoclip"))
	if _, err := conn.Exec(ctx, "SET dp.clipping = sometimes"); err == nil || !strings.Contains(err.Error(), "22023") {
		t.Fatalf("SET dp.clipping = sometimes: %v, want 22023", err)
	}
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 1; SET dp.cache = off; SET dp.contribution = fixed; SET dp.clipping = auto"); err != nil {
		t.Fatal(err)
	}
	var explain []string
	for _, r := range textRows(t, ctx, conn, "EXPLAIN "+q) { // power_test.go
		explain = append(explain, r[0])
	}
	if all := strings.Join(explain, "\n"); !strings.Contains(all, "Clamping bounds: chosen per query from noisy histograms of each unit's largest and smallest value of length_of_stay in [0, 60]") {
		t.Fatalf("EXPLAIN does not describe the clamping bounds:\n%s", all)
	}
	var auto, fixed float64
	if err := conn.QueryRow(ctx, q).Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET dp.clipping = fixed"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, q).Scan(&fixed); err != nil {
		t.Fatal(err)
	}
	ns := notices()
	if len(ns) != 2 {
		t.Fatalf("notices %q", ns)
	}
	width := regexp.MustCompile(`95% error ±([0-9.e+]+) \(s,`)
	chosen := regexp.MustCompile(`length_of_stay clamped to \[0, ([0-9]+)\] \(declared \[0, 60\]; about -?[0-9]+ units with values beyond, ±[0-9.]+\) \(bounds chosen by DP, epsilon 0\.1\)`)
	wa, wf := width.FindStringSubmatch(ns[0]), width.FindStringSubmatch(ns[1])
	m := chosen.FindStringSubmatch(ns[0])
	if wa == nil || wf == nil || m == nil || strings.Contains(ns[1], "clamped to") {
		t.Fatalf("notices %q: want the clamping bounds in the first only, and both half-widths", ns)
	}
	upper, _ := strconv.Atoi(m[1])
	ha, _ := strconv.ParseFloat(wa[1], 64)
	hf, _ := strconv.ParseFloat(wf[1], 64)
	t.Logf("auto: upper bound %d, ±%g; fixed ±%g", upper, ha, hf)
	if upper < 8 {
		t.Fatalf("upper bound %d cuts stays up to 7", upper)
	}
	if upper <= 8 && ha > hf/3 {
		t.Errorf("auto clipping to [0, %d] stated ±%g, fixed ±%g: want at most a third", upper, ha, hf)
	}
	var truth float64
	up := connect(t, ctx, env.upstreamDSN)
	if err := up.QueryRow(ctx, "SELECT sum(length_of_stay)::float8 FROM visits WHERE length_of_stay < 8 AND patient_id IS NOT NULL").Scan(&truth); err != nil {
		t.Fatal(err)
	}
	if math.Abs(auto-truth) > 2*ha || math.Abs(fixed-truth) > 2*hf {
		t.Errorf("answers %v (auto ±%g) and %v (fixed ±%g), truth %v: beyond twice the stated half-width", auto, ha, fixed, hf, truth)
	}
	ledger := connect(t, ctx, ledgerDSN())
	var spent float64
	if err := ledger.QueryRow(ctx, "SELECT sum(cost_epsilon)::float8 FROM dpproxy_ledger.charge WHERE analyst = 'autoclip'").Scan(&spent); err != nil {
		t.Fatal(err)
	}
	if math.Abs(spent-2) > 1e-9 {
		t.Errorf("ledger charged ε %v for two queries at ε 1", spent)
	}
}
