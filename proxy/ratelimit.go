package proxy

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/release"
	"go.uber.org/zap"
)

// insufficientResources is SQLSTATE 53000, class 53 like the budget's
// 53400 but distinct from it: a client can tell "wait and retry" from "the
// budget is spent".
const insufficientResources = "53000"

// rateLimiters holds one token bucket per analyst (shared by all their
// sessions and datasets on this proxy). Safe for concurrent use.
type rateLimiters struct {
	mu      sync.Mutex
	buckets map[string]*tokenBucket
}

// tokenBucket allows rate events per second on average and burst at once.
type tokenBucket struct {
	rate, burst float64
	tokens      float64
	last        time.Time
}

// take takes a token at now if there is one; otherwise it reports how
// long until there is.
func (b *tokenBucket) take(now time.Time) (bool, time.Duration) {
	if !b.last.IsZero() {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}

// allowDP takes a token of the analyst's bucket for one DP query, or
// returns the 53000 refusal. The decision depends on the analyst's
// earlier queries only, never on data; a refused query is not charged.
func (s *Server) allowDP(analyst string) error {
	rl := s.cfg.DefaultRateLimit
	if a, ok := s.cfg.Analysts[analyst]; ok && a.RateLimit != nil {
		rl = a.RateLimit
	}
	if rl == nil || rl.PerSecond <= 0 {
		return nil
	}
	s.limits.mu.Lock()
	if s.limits.buckets == nil {
		s.limits.buckets = map[string]*tokenBucket{}
	}
	b, ok := s.limits.buckets[analyst]
	if !ok {
		burst := float64(max(rl.Burst, 1))
		b = &tokenBucket{rate: rl.PerSecond, burst: burst, tokens: burst}
		s.limits.buckets[analyst] = b
	}
	ok, wait := b.take(time.Now())
	s.limits.mu.Unlock()
	if ok {
		return nil
	}
	return pgerr.New(insufficientResources, "rate limit exceeded: at most %s DP queries per second (bursts of %d) for analyst %q",
		formatRate(rl), max(rl.Burst, 1), analyst).
		WithDetail("The query was not run and nothing was charged.").
		WithHint("retry in %s; the data steward sets the limit (rate_limit in the proxy's configuration)", wait.Round(time.Millisecond))
}

func formatRate(rl *config.RateLimit) string {
	return fmt.Sprintf("%g", rl.PerSecond)
}

// padResponse waits until the answer's step of the dataset's ladder of
// release times (release.PadUntil: start + d, else 2d, 4d, …), so that
// every DP answer (or error after its charge) of a dataset with a response
// time shows no more of the work the data made upstream than which step
// it reached. It returns at once when the statement is cancelled. An
// answer that took longer than d is logged (without values), so the
// steward can raise the setting.
func (c *conn) padResponse(ctx context.Context, start time.Time, d time.Duration) {
	if d <= 0 {
		return
	}
	now := time.Now()
	until := release.PadUntil(start, d, now)
	if until.Sub(start) > d {
		c.log.Warn("dp answer took longer than the dataset's response_time; padded to the next step",
			zap.Duration(logKeyDuration, now.Sub(start)), zap.Duration("padded_to", until.Sub(start)))
	}
	t := time.NewTimer(until.Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
