package proxy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/release"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// insufficientResources is SQLSTATE 53000, class 53 like the budget's
// 53400 but distinct from it: a client can tell "wait and retry" from "the
// budget is spent".
const insufficientResources = "53000"

// rateLimiters holds one token bucket (golang.org/x/time/rate) per owner:
// an analyst, shared by all their sessions and datasets on this proxy, or
// a client network (tlsrate.go). Safe for concurrent use.
type rateLimiters struct {
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	// max, when > 0, bounds the owners kept, for owners that are not the
	// config's analysts: past it every bucket is forgotten.
	max int
}

// bucket returns owner's bucket, made with limit and burst the first time.
func (r *rateLimiters) bucket(owner string, limit rate.Limit, burst int) *rate.Limiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buckets == nil {
		r.buckets = map[string]*rate.Limiter{}
	}
	b, ok := r.buckets[owner]
	if !ok {
		if r.max > 0 && len(r.buckets) >= r.max {
			clear(r.buckets)
		}
		b = rate.NewLimiter(limit, burst)
		r.buckets[owner] = b
	}
	return b
}

// take takes a token of b at now if there is one; otherwise it takes
// nothing and reports how long until there is.
func take(b *rate.Limiter, now time.Time) (bool, time.Duration) {
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
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
	b := s.limits.bucket(analyst, rate.Limit(rl.PerSecond), max(rl.Burst, 1))
	ok, wait := take(b, time.Now())
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
// release times (release.PadUntil: start + d, else 2d, 4d, …), the step
// that ready (when the answer was computed) reached, so that every DP
// answer (or error after its charge) of a dataset with a response time
// shows no more of the work the data made upstream than which step it
// reached. It returns at once when the statement is cancelled. An answer
// that took longer than d is logged (without values), so the steward can
// raise the setting.
func (c *conn) padResponse(ctx context.Context, start, ready time.Time, d time.Duration) {
	if d <= 0 {
		return
	}
	until := release.PadUntil(start, d, ready)
	if until.Sub(start) > d {
		c.log.Warn("dp answer took longer than its time slot; padded to the next step",
			zap.Duration(logKeyDuration, ready.Sub(start)), zap.Duration("padded_to", until.Sub(start)))
	}
	left := time.Until(until)
	if left <= 0 {
		return
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
