package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAttack82_CatalogClassificationFloodSlowsOthersDP (medium; rule 1:
// another analyst waits far beyond their share): a DP statement is planned
// under a planning slot per analyst, "so one analyst's sessions keep at
// most one core planning and another analyst's statements still find one"
// (SECURITY.md G5). Lexing, classifying and allow-list checking a
// statement of up to max_message_bytes (1 MiB) has no such slot and no
// rate limit: 0.1–0.2 s of proxy CPU per statement (linear; `t.a.b, `
// repeated: 0.18 s), spent before the refusal and costing the analyst
// nothing. Here 24 sessions of iso_a send such statements, refused at
// their last token (pg_sleep): nothing charged, no DP slot, no shadow
// connection; iso_b's DP answer, whose partition selection runs on the
// proxy's CPU, slows down. Measured (2-core
// machine, statement_timeout 2s, response_time as the demo's test
// config): iso_b's GROUP BY cost (a private key, 200,000 visits) answered
// in 0.46 s alone, 5.5 s under the flood (12 times), 0.38 s after. It was
// still answered past the 2 s statement_timeout, and no incident was
// recorded (tried: the time-out does not cover the proxy's candidate CPU
// here), so the cost is latency; with response_time on, the answer moves
// to a later doubling of its slot. The admission slot does not see this
// load (it counts DP statements only). (A catalog SELECT 1 of iso_b was
// not reliably slowed: 42 ms median in one run of 8 flooding sessions,
// 0.08 ms in another of 16.) The fix: a per-analyst slot for lexing and
// classifying statements (as planning has), or a per-analyst rate of
// statement bytes.
func TestAttack82_CatalogClassificationFloodSlowsOthersDP(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		as := cfg["analysts"].(map[string]any)
		for _, n := range []string{"iso_a", "iso_b"} {
			as[n] = map[string]any{"password": "plain:" + n}
		}
		cfg["statement_timeout"] = "2s"
	})
	p := startProxy(t, cfgPath, addr)
	b := pgConnect(t, ctx, p.dsn("iso_b"))
	const dpq = "SELECT cost, COUNT(*) FROM visits GROUP BY cost"
	run := func(what string) (time.Duration, error) {
		start := time.Now()
		_, err := b.Exec(ctx, dpq).ReadAll()
		d := time.Since(start)
		t.Logf("%s: iso_b's %q: %v after %v", what, dpq, err, d)
		return d, err
	}
	if _, err := b.Exec(ctx, "SET dp.delta = 1e-7").ReadAll(); err != nil {
		t.Fatal(err)
	}
	alone, err := run("alone")
	if err != nil {
		t.Fatal(err)
	}
	flood := "SELECT " + strings.Repeat("t.a.b, ", (1<<20-100)/7) + "pg_sleep(1) FROM pg_class t"
	const sessions = 24
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		a := pgConnect(t, ctx, p.dsn("iso_a"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = a.Exec(ctx, flood).ReadAll()
			}
		}()
	}
	time.Sleep(time.Second)
	if _, err := b.Exec(ctx, "SET dp.epsilon = 0.11").ReadAll(); err != nil { // not the cached answer
		t.Fatal(err)
	}
	under, _ := run("under iso_a's catalog flood")
	close(stop)
	wg.Wait()
	_, _ = b.Exec(ctx, "SET dp.epsilon = 0.12").ReadAll()
	run("after")
	if under > 4*alone {
		t.Errorf("iso_b's DP answer took %v under iso_a's refused catalog statements, %v alone: one analyst's uncharged statements take the proxy's CPU from another's answer; want a per-analyst bound on classification CPU", under, alone)
	}
}
