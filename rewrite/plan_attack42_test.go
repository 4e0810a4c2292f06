package rewrite

import (
	"runtime"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// TestAttack42_VarianceNamesLexRestOfStatement (attack round 42, severity
// medium-high: seconds of proxy CPU and gigabytes of allocation per
// statement, before admission, the rate limit and the charge).
//
// Planning runs before everything that costs the analyst anything, and
// CheckText bounds the text so that "the costliest shape plans in under
// 0.1 s" (SECURITY.md, "Planning"; BenchmarkPlan_AtLimits). But for each
// aggregate of the variance family (VARIANCE, STDDEV, VAR_POP, …) the
// builder names the output column with callName (build_select.go), which
// lexes the whole rest of the statement from the call's position
// (pgsql.Lex(b.src[pos:])) to read one token. With n such aggregates in a
// statement of L bytes that is O(n·L): SELECT STDDEV(cost) × 1,664 FROM
// visits (23 KB) plans in 1.3 s and allocates 920 MB; followed by a WHERE
// age IN (…) that fills the statement to 64 KiB, 9.9 s and 9.2 GB — per
// statement, with automatic bounds planning it again (oneWeight). Plans
// of statements over 4 KiB are not cached (maxCachedPlanText), so EXPLAIN,
// Parse/Describe (never charged) or a statement refused afterwards (rate
// limit, exhausted budget, its time slot) repeats it for nothing; the
// planning slot leaves one core per analyst, colluding analysts one each,
// and the allocation rate loads the garbage collector of every session.
//
// The test measures bytes allocated while planning (deterministic, not
// time): the variance family must plan in allocation linear in the
// statement, as SUM does (the control): 4× the aggregates may allocate at
// most 6× (quadratic: 16×), and STDDEV × 832 at most 8× SUM × 832.
//
// Suggested fix: in callName and isOrderedSetCall lex only the call's
// own tokens (bound the slice, or lex incrementally and stop after the tokens
// needed), never the rest of the
// statement; and add a variance-family shape to BenchmarkPlan_AtLimits.
func TestAttack42_VarianceNamesLexRestOfStatement(t *testing.T) {
	ds, err := policy.Load(hospitalPolicy)
	if err != nil {
		t.Fatal(err)
	}
	stmt := func(agg string, n int) string {
		return "SELECT " + strings.TrimSuffix(strings.Repeat(agg+"(cost), ", n), ", ") + " FROM visits"
	}
	allocOf := func(q string) uint64 {
		t.Helper()
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		if _, err := Rewrite(ds, q); err != nil {
			t.Fatalf("%.60s…: %v", q, err)
		}
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	const small, large = 208, 832
	sumS, sumL := allocOf(stmt("SUM", small)), allocOf(stmt("SUM", large))
	sdS, sdL := allocOf(stmt("STDDEV", small)), allocOf(stmt("STDDEV", large))
	t.Logf("SUM: %d aggregates %d KB, %d aggregates %d KB; STDDEV: %d KB, %d KB", small, sumS>>10, large, sumL>>10, sdS>>10, sdL>>10)
	if float64(sumL) > 6*float64(sumS) {
		t.Fatalf("control: SUM × %d allocates %.1f× SUM × %d (want linear, ≤ 6×)", large, float64(sumL)/float64(sumS), small)
	}
	if r := float64(sdL) / float64(sdS); r > 6 {
		t.Errorf("STDDEV × %d allocates %.1f× STDDEV × %d while planning: quadratic in the statement (callName lexes the rest of the statement per aggregate)", large, r, small)
	}
	if r := float64(sdL) / float64(sumL); r > 8 {
		t.Errorf("STDDEV × %d allocates %d MB while planning, %.0f× SUM × %d (%d MB)", large, sdL>>20, r, large, sumL>>20)
	}
	// The same pattern in isOrderedSetCall (quantile.go), once per
	// percentile_cont/percentile_disc call: 300 of them and an IN list to
	// 64 KiB planned in 0.7 s and allocated 1.9 GB.
	pct := func(n int) string {
		return "SELECT " + strings.TrimSuffix(strings.Repeat("PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY cost), ", n), ", ") + " FROM visits"
	}
	pS, pL := allocOf(pct(small/4)), allocOf(pct(large/4))
	t.Logf("PERCENTILE_CONT: %d calls %d KB, %d calls %d KB", small/4, pS>>10, large/4, pL>>10)
	if r := float64(pL) / float64(pS); r > 6 {
		t.Errorf("PERCENTILE_CONT × %d allocates %.1f× PERCENTILE_CONT × %d while planning: quadratic (isOrderedSetCall lexes the rest of the statement per call)", large/4, r, small/4)
	}
}
