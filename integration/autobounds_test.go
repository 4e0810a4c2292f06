package integration

import (
	"context"
	"math"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestAutoBounds_EndToEnd: the README's oncology query through a real
// `dpproxy serve` with the demo's dp.contribution = auto, at ε = 1, then
// with dp.contribution = fixed. The NOTICE names the rows per patient
// chosen, c, and the count's stated 95% half-width is that of c rows:
// c/20 of the fixed one's, times 0.9/0.81 (the fixed count has 0.9 of ε
// after the bias estimate's tenth, the auto one 0.81 after the choice's
// tenth too), up to the NOTICE's rounding (whole numbers above 10). The answer is
// checked against the truth bounded at c rows per patient: within twice
// its stated half-width (discrete Laplace: P(|Z| > 2·b·ln 20) ≤ 20⁻² =
// 0.25%, the false-rejection probability). Which c is chosen is random
// (release's tests check its distribution); it is logged.
func TestAutoBounds_EndToEnd(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := driverProxy(t, "autob")
	const q = "SELECT COUNT(*) AS n FROM visits WHERE department = 'oncology' AND visit_date BETWEEN '2023-01-01' AND '2023-12-31'"
	conn, notices := connectWithNotices(t, ctx, p.dsn("autob"))
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 1; SET dp.cache = off"); err != nil {
		t.Fatal(err)
	}
	var auto int64
	if err := conn.QueryRow(ctx, q).Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET dp.contribution = fixed"); err != nil {
		t.Fatal(err)
	}
	var fixed int64
	if err := conn.QueryRow(ctx, q).Scan(&fixed); err != nil {
		t.Fatal(err)
	}
	ns := notices()
	if len(ns) != 2 {
		t.Fatalf("notices %q", ns)
	}
	width := regexp.MustCompile(`95% error ±([0-9.e+]+) \(n,`)
	chosen := regexp.MustCompile(`rows per unit: at most (\d+) in all \(chosen by DP among 1, 2, 3, 4, 6, 8, 20, epsilon 0\.1\)`)
	wa, wf := width.FindStringSubmatch(ns[0]), width.FindStringSubmatch(ns[1])
	m := chosen.FindStringSubmatch(ns[0])
	if wa == nil || wf == nil || m == nil || chosen.MatchString(ns[1]) {
		t.Fatalf("notices %q: want the choice in the first only, and both half-widths", ns)
	}
	ha, _ := strconv.ParseFloat(wa[1], 64)
	hf, _ := strconv.ParseFloat(wf[1], 64)
	c, _ := strconv.Atoi(m[1])
	if want := hf * float64(c) / 20 * 0.9 / 0.81; math.Abs(ha-want) > 0.002*want+1 {
		t.Errorf("auto: ±%g at %d rows per patient, want ±%.4g (fixed: ±%g at 20)", ha, c, want, hf)
	}
	var truth, raw int64
	up := connect(t, ctx, env.upstreamDSN)
	if err := up.QueryRow(ctx, `SELECT sum(LEAST(n, $1)), sum(n) FROM (SELECT patient_id, count(*) AS n FROM visits
		WHERE patient_id IS NOT NULL AND department = 'oncology' AND visit_date BETWEEN '2023-01-01' AND '2023-12-31' GROUP BY 1) AS u`, c).Scan(&truth, &raw); err != nil {
		t.Fatal(err)
	}
	if d := float64(auto - truth); d > 2*ha || d < -2*ha {
		t.Errorf("auto answer %d, truth bounded at %d rows per patient %d (raw %d), stated ±%g", auto, c, truth, raw, ha)
	}
	t.Logf("auto: %d rows per patient, %d ±%g (bounded truth %d, raw %d); fixed: %d ±%g", c, auto, ha, truth, raw, fixed, hf)
}
