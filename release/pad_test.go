package release

import (
	"testing"
	"time"
)

// TestPadUntil: an answer is released at the first step of the ladder
// start + d·2^k that is not before it is ready, so its time shows only the
// step, and never before start + d.
func TestPadUntil(t *testing.T) {
	start := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	d := 500 * time.Millisecond
	for _, c := range []struct{ ready, want time.Duration }{
		{0, d},
		{499 * time.Millisecond, d},
		{d, d},
		{501 * time.Millisecond, time.Second},
		{time.Second, time.Second},
		{1001 * time.Millisecond, 2 * time.Second},
		{3 * time.Second, 4 * time.Second},
		{9 * time.Second, 16 * time.Second},
	} {
		if got := PadUntil(start, d, start.Add(c.ready)).Sub(start); got != c.want {
			t.Errorf("ready after %v: released at %v, want %v", c.ready, got, c.want)
		}
	}
	// Two answers that reach the same step are released at the same time
	// whatever their own times.
	if a, b := PadUntil(start, d, start.Add(1100*time.Millisecond)), PadUntil(start, d, start.Add(1900*time.Millisecond)); !a.Equal(b) {
		t.Errorf("1.1 s and 1.9 s released at %v and %v", a, b)
	}
	if now := start.Add(time.Second); !PadUntil(start, 0, now).Equal(now) {
		t.Error("no response time: the answer is padded")
	}
}
