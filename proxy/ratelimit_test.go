package proxy

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/release"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/time/rate"
)

func TestTokenBucket(t *testing.T) {
	b := rate.NewLimiter(2, 3)
	now := time.Unix(1000, 0)
	for i := 0; i < 3; i++ {
		if ok, _ := take(b, now); !ok {
			t.Fatalf("take %d of a full bucket of 3 refused", i+1)
		}
	}
	ok, wait := take(b, now)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("4th take = %v, wait %v; want refused, wait 500ms at 2/s", ok, wait)
	}
	if ok, _ := take(b, now.Add(499*time.Millisecond)); ok {
		t.Fatal("a token after 499ms at 2/s")
	}
	if ok, _ := take(b, now.Add(1000*time.Millisecond)); !ok {
		t.Fatal("no token after 1s at 2/s")
	}
	// Long idle: at most burst tokens.
	later := now.Add(time.Hour)
	n := 0
	for {
		if ok, _ := take(b, later); !ok {
			break
		}
		n++
	}
	if n != 3 {
		t.Fatalf("%d tokens after an hour idle, want the burst of 3", n)
	}
}

// TestRateLimit_DPQueries: alice may run 1 DP query per second in bursts
// of 2; the third at once is refused with 53000 and a hint, is not run
// (not charged), and leaves the session usable; session statements and
// other analysts are not limited; a second later alice may query again.
func TestRateLimit_DPQueries(t *testing.T) {
	ts := startServer(t, serverOpts{mutate: func(c *Config) {
		a := c.Analysts["alice"]
		a.RateLimit = &config.RateLimit{PerSecond: 1, Burst: 2}
		c.Analysts["alice"] = a
	}})
	alice := ts.connect(t)
	const q = "SELECT COUNT(*) FROM visits"
	for i := 0; i < 2; i++ {
		if _, err := execAll(t, alice, q); err != nil {
			t.Fatalf("query %d within the burst: %v", i+1, err)
		}
	}
	_, err := execAll(t, alice, q)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53000" || !strings.Contains(pe.Message, "rate limit") ||
		!strings.HasPrefix(pe.Hint, "retry in ") || !strings.Contains(pe.Detail, "nothing was charged") {
		t.Fatalf("third query at once: %v, want 53000 rate limit with a retry hint", err)
	}
	if n := len(ts.releaser.requests()); n != 2 {
		t.Fatalf("the releaser ran %d queries, want 2 (the refused one not run)", n)
	}
	if got := show(t, alice, "dp.epsilon"); got != "0.1" {
		t.Fatalf("session after the refusal: SHOW dp.epsilon = %q", got)
	}
	bob := ts.connectAs(t, "bob", "bob-secret", "hospital")
	if _, err := execAll(t, bob, q); err != nil {
		t.Fatalf("bob is limited by alice's rate: %v", err)
	}
	time.Sleep(1100 * time.Millisecond)
	if _, err := execAll(t, alice, q); err != nil {
		t.Fatalf("alice after a second: %v", err)
	}
}

// delayReleaser answers like fakeReleaser after a delay that stands for
// data-dependent work upstream.
type delayReleaser struct {
	fakeReleaser
	delay time.Duration
}

func (d *delayReleaser) Run(ctx context.Context, req release.Request) (*release.Result, error) {
	time.Sleep(d.delay)
	return d.fakeReleaser.Run(ctx, req)
}

// TestResponseTime_Padding: with response_time 400ms, answers whose
// release takes 0ms or 200ms both take at least 400ms, and the difference
// of their medians shrinks from about 200ms to under 100ms (scheduling
// noise on a loaded machine; unloaded it is about 2ms); without padding it
// is visible.
func TestResponseTime_Padding(t *testing.T) {
	const pad = 400 * time.Millisecond
	measure := func(padding, work time.Duration) []time.Duration {
		rel := &delayReleaser{delay: work}
		ts := startServer(t, serverOpts{mutate: func(c *Config) {
			c.Releaser = rel
			c.Datasets["hospital"].ResponseTime = padding
		}})
		pc := ts.connect(t)
		var out []time.Duration
		for i := 0; i < 7; i++ {
			start := time.Now()
			if _, err := execAll(t, pc, "SELECT COUNT(*) FROM visits"); err != nil {
				t.Fatal(err)
			}
			out = append(out, time.Since(start))
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out
	}
	median := func(d []time.Duration) time.Duration { return d[len(d)/2] }
	fastRaw, slowRaw := measure(0, 0), measure(0, 200*time.Millisecond)
	fast, slow := measure(pad, 0), measure(pad, 200*time.Millisecond)
	for _, d := range append(append([]time.Duration{}, fast...), slow...) {
		if d < pad {
			t.Fatalf("a padded answer took %v < %v", d, pad)
		}
	}
	rawGap, padGap := median(slowRaw)-median(fastRaw), (median(slow) - median(fast)).Abs()
	t.Logf("median answer time: unpadded %v vs %v (gap %v); padded to %v: %v vs %v (gap %v)",
		median(fastRaw), median(slowRaw), rawGap, pad, median(fast), median(slow), padGap)
	if rawGap < 150*time.Millisecond {
		t.Fatalf("unpadded gap %v: the simulated work did not show", rawGap)
	}
	if padGap > 100*time.Millisecond {
		t.Fatalf("padded gap %v, want ≤ 100ms (unpadded %v)", padGap, rawGap)
	}
}

// publishingReleaser behaves as release.Releaser does with a publish
// time: the answer is computed after delay (ReadyAt), then waits for
// Request.PublishAt before it is recorded (here a 20ms ledger write).
type publishingReleaser struct {
	fakeReleaser
	delay time.Duration
}

func (p *publishingReleaser) Run(ctx context.Context, req release.Request) (*release.Result, error) {
	time.Sleep(p.delay)
	res, err := p.fakeReleaser.Run(ctx, req)
	if err != nil {
		return nil, err
	}
	res.ReadyAt = time.Now()
	time.Sleep(time.Until(release.PadUntil(req.PublishAt.Add(-req.PadStep), req.PadStep, res.ReadyAt)))
	time.Sleep(20 * time.Millisecond)
	return res, nil
}

// TestResponseTime_OneSlot: an answer computed within its time slot, which
// the release holds back until the slot's end before recording it, reaches
// the client at the slot's end, not at the next doubling (an attack review
// of issue 27 saw every fresh answer padded twice: 500 ms slots answered
// at 1 s); one computed after its slot goes to the next doubling.
func TestResponseTime_OneSlot(t *testing.T) {
	const pad = 400 * time.Millisecond
	for _, c := range []struct {
		work     time.Duration
		min, max time.Duration
	}{
		{100 * time.Millisecond, pad, pad + 250*time.Millisecond},
		{500 * time.Millisecond, 2 * pad, 2*pad + 250*time.Millisecond},
	} {
		rel := &publishingReleaser{delay: c.work}
		ts := startServer(t, serverOpts{mutate: func(cfg *Config) {
			cfg.Releaser = rel
			cfg.Datasets["hospital"].ResponseTime = pad
		}})
		pc := ts.connect(t)
		start := time.Now()
		if _, err := execAll(t, pc, "SELECT COUNT(*) FROM visits"); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < c.min || d > c.max {
			t.Errorf("work %v: answered after %v, want within [%v, %v]", c.work, d, c.min, c.max)
		}
	}
}

func (r *delayReleaser) RunBatch(ctx context.Context, reqs []release.Request) ([]*release.Result, error) {
	return runEach(ctx, r.Run, reqs)
}

func (r *publishingReleaser) RunBatch(ctx context.Context, reqs []release.Request) ([]*release.Result, error) {
	return runEach(ctx, r.Run, reqs)
}
