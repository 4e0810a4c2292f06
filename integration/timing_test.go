package integration

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"
)

// TestResponseTime_Measured measures the time channel of DP answers on
// the demo data (SECURITY.md, BENCHMARKS.md): a DP query whose WHERE keeps
// few patients ("light") and one that keeps all 50,000 ("heavy") are timed
// without padding and with datasets.hospital.response_time set above the
// heavy query's time. Padded, every answer takes at least the response
// time and the two kinds cannot be told apart by their medians beyond the
// machine's scheduling noise. The figures are logged.
func TestResponseTime_Measured(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 5
	light := func(i int) string {
		return fmt.Sprintf("SELECT COUNT(*) FROM patients WHERE birth_year >= 2024 AND birth_year <> %d", 3000+i)
	}
	heavy := func(i int) string {
		return fmt.Sprintf("SELECT COUNT(*) FROM patients WHERE birth_year <> %d", 3000+i)
	}
	measure := func(analyst, pad string, q func(int) string, offset int) []time.Duration {
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
		var out []time.Duration
		for i := 0; i < n+1; i++ {
			start := time.Now()
			var v int64
			if err := c.QueryRow(ctx, q(offset+i)).Scan(&v); err != nil {
				t.Fatal(err)
			}
			if i > 0 { // the first warms the upstream pool and caches
				out = append(out, time.Since(start))
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out
	}
	median := func(d []time.Duration) time.Duration { return d[len(d)/2] }
	spread := func(a, b []time.Duration) time.Duration {
		return max(a[len(a)-1], b[len(b)-1]) - min(a[0], b[0])
	}
	rawLight, rawHeavy := measure("tara", "0s", light, 0), measure("tara", "0s", heavy, 0)
	pad := max(200*time.Millisecond, 3*rawHeavy[len(rawHeavy)-1]/2).Round(100 * time.Millisecond)
	padLight, padHeavy := measure("uma", pad.String(), light, 100), measure("uma", pad.String(), heavy, 100)
	for _, d := range append(append([]time.Duration{}, padLight...), padHeavy...) {
		if d < pad {
			t.Fatalf("a padded answer took %v < response_time %v", d, pad)
		}
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	t.Logf("unpadded: light median %s, heavy median %s, gap %s, spread %s (min..max over both)",
		ms(median(rawLight)), ms(median(rawHeavy)), ms(median(rawHeavy)-median(rawLight)), ms(spread(rawLight, rawHeavy)))
	t.Logf("response_time %v: light median %s, heavy median %s, gap %s, spread %s",
		pad, ms(median(padLight)), ms(median(padHeavy)), ms((median(padHeavy) - median(padLight)).Abs()), ms(spread(padLight, padHeavy)))
}
