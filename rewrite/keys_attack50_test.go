package rewrite

import (
	"runtime"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

// TestAttack50_RepeatedGroupKeyRebuildsDomain (attack round 50, severity
// medium-high: seconds of proxy CPU and gigabytes of allocation per
// accepted statement, before admission, the rate limit and the charge;
// free through EXPLAIN, Parse/Describe or any refusal after planning).
//
// Planning runs before everything that costs the analyst anything, and
// CheckText bounds the text so that "the costliest shape plans in under
// 0.1 s" (SECURITY.md, "Planning"; BenchmarkPlan_AtLimits). But every
// GROUP BY item that names a derived key — by position (GROUP BY 1), by
// output alias (GROUP BY k) or written out — calls exprKey
// (rewrite/keyexpr.go:47; from groupBy, rewrite/build_keys.go:47, :69,
// :95, through addExprKey, :215), which materialises the key's whole
// public domain (up to maxDerivedGroups = 10,000 formatted values for
// width_bucket, 1,827 formatted dates for date_trunc('day', visit_date))
// and only then is dropped as a duplicate (appendKey → keyOutput,
// :197-211). The same holds for the select list (build_select.go:103)
// and ORDER BY (build_order.go:68). So
//
//	SELECT width_bucket(age,0,1,9998) k, COUNT(*) FROM visits GROUP BY 1,1,1,…
//
// costs about 0.2 ms and 200 KB of allocation per two bytes of text: at
// 64 KiB (32,000 items) it plans in 8.0 s and allocates 6.4 GB, and the
// statement is accepted (one key of 10,000 groups, within the 60,000
// cells of checkAnswerCells). Under dp.contribution = auto (the default
// of internal/testdata/hospital.yaml and of the demo) addAutoBounds plans
// it again once per candidate bound, about three times that: ~24 s and
// ~19 GB. Plans of statements over 4 KiB are not
// cached (maxCachedPlanText), so EXPLAIN, Parse/Describe (never charged),
// or the same statement refused afterwards (rate limit, exhausted budget)
// repeats it for nothing; the planning slot leaves one core per analyst,
// colluding analysts one each, and the allocation rate loads the garbage
// collector of every session.
//
// The test measures bytes allocated while planning (deterministic, not
// time): a GROUP BY item that repeats a derived key may cost at most 8×
// what one that repeats a plain public column costs (the control,
// GROUP BY department with the same number of items), plus the one
// domain the plan keeps.
//
// Suggested fix: recognise a repeated key before building its domain
// (compare the key's column, function and arguments — what sameKey
// compares — and build Domain only for a new key), or build derived
// domains lazily once per plan; and add a repeated-derived-key shape to
// BenchmarkPlan_AtLimits.
func TestAttack50_RepeatedGroupKeyRebuildsDomain(t *testing.T) {
	ds, err := policy.Load(hospitalPolicy)
	if err != nil {
		t.Fatal(err)
	}
	allocOf := func(q string) uint64 {
		t.Helper()
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		if _, err := Rewrite(ds, q); err != nil {
			t.Fatalf("%.80s…: %v", q, err)
		}
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	const items = 1500 // 3 KB of GROUP BY: planned in about 0.3 s today
	for _, tc := range []struct {
		name, sel, item string
	}{
		{"width_bucket by position", "width_bucket(age,0,1,9998) k", "1"},
		{"width_bucket by alias", "width_bucket(age,0,1,9998) k", "k"},
		{"date_trunc day by position", "date_trunc('day', visit_date) k", "1"},
	} {
		stmt := func(sel, item string, n int) string {
			return "SELECT " + sel + ", COUNT(*) FROM visits GROUP BY " + strings.TrimSuffix(strings.Repeat(item+",", n), ",")
		}
		ctlOne, ctlMany := allocOf(stmt("department", "1", 1)), allocOf(stmt("department", "1", items))
		one, many := allocOf(stmt(tc.sel, tc.item, 1)), allocOf(stmt(tc.sel, tc.item, items))
		perItem := float64(many-min(one, many)) / (items - 1)
		ctlPerItem := float64(ctlMany-min(ctlOne, ctlMany)) / (items - 1)
		t.Logf("%s: one item %d KB, %d items %d KB (%.0f B per repeated item; the control: %.0f B)",
			tc.name, one>>10, items, many>>10, perItem, ctlPerItem)
		if perItem > 8*max(ctlPerItem, 256) {
			t.Errorf("%s: each repeated GROUP BY item allocates %.0f bytes while planning (%d items: %d MB), %.0f× a repeated public column's %.0f: the key's domain is rebuilt for every mention before the duplicate is dropped (at 64 KiB: ~8 s and ~6 GB per statement, before the charge)",
				tc.name, perItem, items, many>>20, perItem/max(ctlPerItem, 1), ctlPerItem)
		}
	}
}

// TestDerivedKeys_ValueBudget: written-out repeats are distinct nodes, so
// each builds its domain; maxDerivedValues bounds what they build
// together (54000 before any charge), while the usual shape — a derived
// key written out in the select list, GROUP BY and ORDER BY — plans.
func TestDerivedKeys_ValueBudget(t *testing.T) {
	ds, err := policy.Load(hospitalPolicy)
	if err != nil {
		t.Fatal(err)
	}
	const wb = "width_bucket(age,0,1,9998)"
	if _, err := Rewrite(ds, "SELECT "+wb+", COUNT(*) FROM visits GROUP BY "+wb+" ORDER BY "+wb); err != nil {
		t.Errorf("a derived key written out three times: %v", err)
	}
	q := "SELECT COUNT(*) FROM visits GROUP BY " + strings.TrimSuffix(strings.Repeat(wb+",", maxDerivedValues/maxDerivedGroups+1), ",")
	if _, err := Rewrite(ds, q); !isCode(err, pgerr.ProgramLimitExceeded) {
		t.Errorf("%d written-out 10,000-value keys: %v, want 54000", maxDerivedValues/maxDerivedGroups+1, err)
	}
}

func isCode(err error, code string) bool {
	pe, ok := pgerr.As(err)
	return ok && pe.Code == code
}
