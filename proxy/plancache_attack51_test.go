package proxy

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestHeld51_PlanBytesEstimate (held): planBytes (proxy/plancache.go),
// round 50's per-analyst byte bound of the plan cache, estimates within
// 2× (measured 0.3–1.8×) what cached plans keep on the heap, for plan
// shapes whose size is not among planBytes' terms — many measures with
// FILTER, quantiles, joins, long IN lists, derived domains under
// dp.contribution = auto — so a full cache (16 MiB estimated) keeps at
// most about 32 MiB per analyst.
func TestHeld51_PlanBytesEstimate(t *testing.T) {
	ds, err := policy.Load("../internal/testdata/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	opts := rewrite.Options{AutoBounds: true}
	list := func(n int, f string) string {
		var b strings.Builder
		for j := 0; j < n; j++ {
			fmt.Fprintf(&b, f, j)
		}
		return b.String()
	}
	shapes := map[string]func(i int) string{
		"derived key": func(i int) string {
			return fmt.Sprintf("SELECT width_bucket(age,0,%d,9998), COUNT(*), SUM(cost) FROM visits GROUP BY 1", i+1)
		},
		"filters": func(i int) string {
			return fmt.Sprintf("SELECT department, %s COUNT(*) FROM visits WHERE age > %d GROUP BY 1", list(100, "AVG(cost) FILTER (WHERE age>%d),"), i)
		},
		"quantiles": func(i int) string {
			return fmt.Sprintf("SELECT department, %s COUNT(*) FROM visits WHERE age > %d GROUP BY 1", list(60, "percentile_cont(0.%02d) WITHIN GROUP (ORDER BY cost),"), i)
		},
		"join": func(i int) string {
			return fmt.Sprintf("SELECT p.region, v.department, %s COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id WHERE v.age > %d GROUP BY 1,2",
				list(60, "STDDEV(v.cost) FILTER (WHERE p.birth_year > %d),"), i)
		},
		"in list": func(i int) string {
			return fmt.Sprintf("SELECT department, AVG(cost), COUNT(*) FROM visits WHERE age IN (%s %d) GROUP BY 1", list(600, "%d,"), 1000+i)
		},
	}
	build := func(ds *policy.Dataset, text string, o rewrite.Options) (*rewrite.Plan, error) {
		return rewrite.RewriteWith(ds, text, o)
	}
	for name, q := range shapes {
		pc := newPlanCache()
		const n = 24
		before := heapAlloc()
		est := 0
		for i := 0; i < n; i++ {
			text := q(i)
			if len(text) > maxCachedPlanText {
				t.Fatalf("%s: %d bytes of text are not cached", name, len(text))
			}
			p, err := pc.plan("mallory", ds, text, opts, build)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			est += planBytes(p)
		}
		kept := heapAlloc() - before
		runtime.KeepAlive(pc)
		t.Logf("%-12s %d bytes of text: planBytes %d KiB, kept %d KiB (%.1f×)", name, len(q(0)), est>>10, kept>>10, float64(kept)/float64(max(est, 1)))
		if kept > 2*int64(est) {
			t.Errorf("%s: %d cached plans keep %d KiB, over twice planBytes' %d KiB", name, n, kept>>10, est>>10)
		}
	}
}
