package integration

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// mannWhitneyP returns the exact two-sided p-value of the Mann–Whitney U
// test of samples x and y (no ties: durations in nanoseconds): U = #{(i, j):
// x_i < y_j}, whose null distribution (x and y exchangeable) is that of the
// number of inversions between two interleaved runs, counted by
// N(m, n, u) = N(m−1, n, u−n) + N(m, n−1, u) over the C(m+n, m) orders.
func mannWhitneyP(x, y []time.Duration) float64 {
	m, n := len(x), len(y)
	u := 0
	for _, a := range x {
		for _, b := range y {
			if a < b {
				u++
			}
		}
	}
	// cnt[i][j][k]: orders of i x's and j y's with k pairs (x before y).
	cnt := make([][][]float64, m+1)
	for i := range cnt {
		cnt[i] = make([][]float64, n+1)
		for j := range cnt[i] {
			cnt[i][j] = make([]float64, i*j+1)
			switch {
			case i == 0 || j == 0:
				cnt[i][j][0] = 1
			default:
				for k := range cnt[i][j] {
					// The largest value is an x (it precedes no y: adds
					// 0 pairs) or a y (all i x's precede it: adds i).
					if k < len(cnt[i-1][j]) {
						cnt[i][j][k] += cnt[i-1][j][k]
					}
					if k-i >= 0 && k-i < len(cnt[i][j-1]) {
						cnt[i][j][k] += cnt[i][j-1][k-i]
					}
				}
			}
		}
	}
	var total, below, above float64
	for k, c := range cnt[m][n] {
		total += c
		if k <= u {
			below += c
		}
		if k >= u {
			above += c
		}
	}
	return math.Min(1, 2*math.Min(below, above)/total)
}

// The error rates of TestResponseTime_Measured: padded answers are
// declared distinguishable when the Mann–Whitney p-value is below
// timingAlpha, so if padding works (light and heavy durations
// exchangeable) the test falsely fails with probability timingAlpha; the
// unpadded baseline must be detected at the same level.
const (
	timingAlpha = 1e-4
	timingN     = 16 // answers of each kind per proxy
	// timingBaselineN answers of each kind measure the unpadded baseline:
	// its detection is the test's power, which 16 of each lost under CI's
	// load (p = 1.9·10⁻⁴ once, the two kinds' times overlapping under
	// -race); 32 of each cost about 10 s more.
	timingBaselineN = 2 * timingN
)

// TestResponseTime_Measured measures the time channel of DP answers on the
// demo data (SECURITY.md, BENCHMARKS.md): a DP query whose WHERE keeps few
// patients ("light") and one that keeps all 50,000 ("heavy"), timingN of
// each in a random interleaved order, first without padding and then with
// datasets.hospital.response_time set above the heavy query's time.
//
//   - Unpadded, the leak must be detected: the exact two-sided Mann–Whitney
//     test separates light from heavy at p < timingAlpha. Power: with
//     timingBaselineN = 32 of each the test reaches p = 1.1·10⁻¹⁸ when every
//     heavy answer is slower than every light one (the measured gap is
//     about 30 ms against a spread of a few ms on a quiet machine), and
//     still p = 2.7·10⁻⁵ when a fifth of the pairs are out of order, so a
//     leak of that kind is missed only if the two kinds overlap
//     substantially.
//   - Padded, every answer takes at least the response time and the two
//     kinds must be indistinguishable: p ≥ timingAlpha; if padding makes
//     them exchangeable this fails with probability timingAlpha = 10⁻⁴.
//     Padding that does not hide the work (off, or shorter than the heavy
//     query) fails the same way the unpadded baseline is detected.
func TestResponseTime_Measured(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	light := func(i int) string {
		return fmt.Sprintf("SELECT COUNT(*) FROM patients WHERE birth_year >= 2024 AND birth_year <> %d", 3000+i)
	}
	heavy := func(i int) string {
		return fmt.Sprintf("SELECT COUNT(*) FROM patients WHERE birth_year <> %d", 3000+i)
	}
	rng := rand.New(rand.NewPCG(19, 5))
	measure := func(analyst, pad string, offset, n int) (lightD, heavyD []time.Duration) {
		cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
			cfg["analysts"].(map[string]any)[analyst] = map[string]any{"password": "plain:" + analyst}
			if pad != "" {
				cfg["datasets"].(map[string]any)["hospital"].(map[string]any)["response_time"] = pad
			}
		})
		p := startProxy(t, cfgPath, addr)
		c := connect(t, ctx, p.dsn(analyst))
		if _, err := c.Exec(ctx, "SET dp.epsilon = 0.01; SET dp.cache = off"); err != nil {
			t.Fatal(err)
		}
		run := func(sql string) time.Duration {
			start := time.Now()
			var v int64
			if err := c.QueryRow(ctx, sql).Scan(&v); err != nil {
				t.Fatal(err)
			}
			return time.Since(start)
		}
		// Warm the upstream pool and caches with one of each.
		run(light(offset))
		run(heavy(offset))
		kinds := make([]bool, 2*n)
		for i := n; i < len(kinds); i++ {
			kinds[i] = true
		}
		rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		for i, isHeavy := range kinds {
			if isHeavy {
				heavyD = append(heavyD, run(heavy(offset+1+i)))
			} else {
				lightD = append(lightD, run(light(offset+1+i)))
			}
		}
		return lightD, heavyD
	}
	median := func(d []time.Duration) time.Duration {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

	rawLight, rawHeavy := measure("tara", "0s", 0, timingBaselineN)
	pRaw := mannWhitneyP(rawLight, rawHeavy)
	t.Logf("unpadded: light median %s, heavy median %s; Mann–Whitney p = %.3g", ms(median(rawLight)), ms(median(rawHeavy)), pRaw)
	if pRaw >= timingAlpha {
		t.Errorf("the unpadded baseline was not detected (p = %.3g ≥ %g): this test cannot see the leak padding must hide", pRaw, timingAlpha)
	}

	slowest := slices.Max(rawHeavy)
	pad := max(200*time.Millisecond, 2*slowest).Round(50 * time.Millisecond)
	padLight, padHeavy := measure("uma", pad.String(), 100, timingN)
	for _, d := range append(append([]time.Duration{}, padLight...), padHeavy...) {
		if d < pad {
			t.Fatalf("a padded answer took %v < response_time %v", d, pad)
		}
	}
	pPad := mannWhitneyP(padLight, padHeavy)
	t.Logf("response_time %v: light median %s, heavy median %s; Mann–Whitney p = %.3g", pad, ms(median(padLight)), ms(median(padHeavy)), pPad)
	if pPad < timingAlpha {
		t.Errorf("padded light and heavy answers are distinguishable: Mann–Whitney p = %.3g < %g (light median %s, heavy %s)", pPad, timingAlpha, ms(median(padLight)), ms(median(padHeavy)))
	}
}

// TestMannWhitneyP checks the exact null distribution on small cases:
// with 3 and 3 samples every one of the C(6, 3) = 20 orders is equally
// likely, complete separation is 1 of them on each side (p = 2/20), and
// U = 4 or 5 (the middle) gives p = 1.
func TestMannWhitneyP(t *testing.T) {
	d := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x)
		}
		return out
	}
	for _, tc := range []struct {
		x, y []time.Duration
		want float64
	}{
		{d(1, 2, 3), d(4, 5, 6), 0.1},
		{d(4, 5, 6), d(1, 2, 3), 0.1},
		{d(1, 2, 4), d(3, 5, 6), 0.2}, // U = 8: orders with U ≥ 8 are 2 of 20
		{d(1, 4, 5), d(2, 3, 6), 1},
	} {
		if got := mannWhitneyP(tc.x, tc.y); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("mannWhitneyP(%v, %v) = %g, want %g", tc.x, tc.y, got, tc.want)
		}
	}
	// 16 and 16 completely separated: 2/C(32, 16).
	var x, y []time.Duration
	for i := 0; i < 16; i++ {
		x, y = append(x, time.Duration(i)), append(y, time.Duration(100+i))
	}
	if got, want := mannWhitneyP(x, y), 2/601080390.0; math.Abs(got-want) > 1e-12*want {
		t.Errorf("complete separation of 16 and 16: p = %g, want %g", got, want)
	}
}

// TestTiming_UnitJoinPerson is the attack of issue 27, class 1: whether a
// named patient has a diagnosis, asked through a unit self-join of visits
// at the floor ε. Before the fix the join made n² rows of the patient (n^k
// with k copies) and the answer took seconds when they had it. Now each
// later copy is cut to the patient's allowance before the join and every
// answer is released at its time slot, fixed from the plan before the
// charge: with the diagnosis or without it the answers take the same time
// (medians within 50 ms, and no Mann–Whitney difference at timingAlpha:
// false-failure probability timingAlpha when the padding works).
func TestTiming_UnitJoinPerson(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	up := connect(t, ctx, env.upstreamDSN)
	// The patient with the most visits, one diagnosis they have and one
	// they do not.
	var patient int64
	var has, hasNot string
	if err := up.QueryRow(ctx, `SELECT patient_id FROM visits GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1`).Scan(&patient); err != nil {
		t.Fatal(err)
	}
	if err := up.QueryRow(ctx, `SELECT diagnosis FROM visits WHERE patient_id = $1 GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1`, patient).Scan(&has); err != nil {
		t.Fatal(err)
	}
	if err := up.QueryRow(ctx, `SELECT diagnosis FROM visits WHERE diagnosis NOT IN (SELECT diagnosis FROM visits WHERE patient_id = $1) GROUP BY 1 ORDER BY 1 LIMIT 1`, patient).Scan(&hasNot); err != nil {
		t.Fatal(err)
	}
	const pad = 300 * time.Millisecond
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		cfg["analysts"].(map[string]any)["vera"] = map[string]any{"password": "plain:vera"}
		ds := cfg["datasets"].(map[string]any)["hospital"].(map[string]any)
		ds["response_time"] = pad.String()
		// A work rate that makes the slot the response time itself (the
		// demo's work bound is conservative): the test is of the padding.
		ds["work_rate"] = 1e11
	})
	p := startProxy(t, cfgPath, addr)
	c := connect(t, ctx, p.dsn("vera"))
	if _, err := c.Exec(ctx, "SET dp.epsilon = 0.001; SET dp.cache = off; SET dp.contribution = fixed"); err != nil {
		t.Fatal(err)
	}
	q := func(diagnosis string, i int) string {
		return fmt.Sprintf("SELECT COUNT(*) FROM visits a JOIN visits b ON a.patient_id = b.patient_id WHERE a.patient_id = %d AND b.diagnosis = '%s' AND a.age <> %d",
			patient, strings.ReplaceAll(diagnosis, "'", "''"), 1000+i)
	}
	run := func(sql string) time.Duration {
		start := time.Now()
		var v float64
		if err := c.QueryRow(ctx, sql).Scan(&v); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return time.Since(start)
	}
	run(q(has, 0))
	var withD, withoutD []time.Duration
	for i := 1; i <= timingN; i++ {
		withD = append(withD, run(q(has, 2*i)))
		withoutD = append(withoutD, run(q(hasNot, 2*i+1)))
	}
	median := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for _, d := range append(slices.Clone(withD), withoutD...) {
		if d < pad {
			t.Fatalf("an answer took %v, under its time slot %v", d, pad)
		}
	}
	diff := median(withD) - median(withoutD)
	pv := mannWhitneyP(withD, withoutD)
	t.Logf("patient with %q: median %v; without %q: median %v; Mann–Whitney p = %.3g", has, median(withD), hasNot, median(withoutD), pv)
	if diff < -50*time.Millisecond || diff > 50*time.Millisecond {
		t.Errorf("medians differ by %v: the time shows whether the patient has the diagnosis", diff)
	}
	if pv < timingAlpha {
		t.Errorf("answers with and without the diagnosis are distinguishable by time: p = %.3g < %g", pv, timingAlpha)
	}
}
