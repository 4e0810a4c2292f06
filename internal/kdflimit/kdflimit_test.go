package kdflimit

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestLimiter_OneAtATimeAndPerNetwork: derivations never overlap, one
// network gets at most PerNetwork at once (its bucket's burst), another
// network still gets its own.
func TestLimiter_OneAtATimeAndPerNetwork(t *testing.T) {
	l := New()
	var running, most atomic.Int32
	derive := func() {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		running.Add(-1)
	}
	var wg sync.WaitGroup
	var ran atomic.Int32
	for range 4 * PerNetwork {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.Run("192.0.2.7:5432", derive) {
				ran.Add(1)
			}
		}()
	}
	wg.Wait()
	if most.Load() > 1 {
		t.Errorf("%d derivations ran at once", most.Load())
	}
	// The bucket refills at PerNetwork a second while the goroutines run:
	// allow one second's worth more than the burst.
	if n := ran.Load(); n < 1 || n > 2*PerNetwork {
		t.Errorf("%d of %d derivations from one address ran, want 1 to %d", n, 4*PerNetwork, 2*PerNetwork)
	}
	if !l.Run("198.51.100.1:1", derive) {
		t.Error("another network's first derivation was refused")
	}
	// IPv6 addresses of one /56 share a bucket.
	if ClientNet("[2001:db8:0:1::1]:1") != ClientNet("[2001:db8:0:2::9]:2") || ClientNet("192.0.2.7:1") != "192.0.2.7" {
		t.Errorf("ClientNet: %s %s %s", ClientNet("[2001:db8:0:1::1]:1"), ClientNet("[2001:db8:0:2::9]:2"), ClientNet("192.0.2.7:1"))
	}
}
