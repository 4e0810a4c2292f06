package kdflimit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAttack99_FewNetworksStarveEveryOther (low–medium; anyone who can
// reach the pgwire port with tls.allow_cleartext_password on, or the
// admin endpoint; no password): the derivations ran one at a time, first
// come first served, at most PerNetwork a second for one network and
// MaxWaiting waiting, each waiting at most MaxWait. Those bounds count
// derivations, not their time: a verifier may have up to MaxIterations
// (2^20) iterations, 188 ms of PBKDF2 here (OWASP's 600,000: 97 ms), so
// the slot serves about 5 a second, and two networks' 5 a second each
// keep it busy with a queue 2 s long. Every other client's password
// check then waited its whole MaxWait behind them and was refused (53300
// "too many password checks in progress", or 429): two unauthenticated
// addresses shut every analyst's cleartext log-in out (and the steward
// out of the admin endpoint). Rule 1: no client's load may change another
// client's access, beyond a bound of public quantities.
//
// The fix serves the waiting derivations in turns by network (as DP
// admission serves analysts, proxy/admission.go) and lets a network have
// at most perNetworkWaiting waiting: a network's request waits behind at
// most one derivation of each other network with waiters, so k
// networks' floods delay it by k derivations, not by the queue they fill.
//
// The test simulates derivations of 188 ms (2^20 iterations here) (sleeps, so the machine's
// load does not matter): two networks each send PerNetwork a second (within
// their buckets) and a third sends one request every 400 ms; it wants
// every request of the third to run. With turns, each waits at most about
// 3 × 188 ms of MaxWait's 2 s.
func TestAttack99_FewNetworksStarveEveryOther(t *testing.T) {
	const derivation = 188 * time.Millisecond
	l := New()
	derive := func() { time.Sleep(derivation) }
	stop := make(chan struct{})
	var flood sync.WaitGroup
	var floodRan, floodRefused atomic.Int64
	for n := 0; n < 2; n++ {
		addr := fmt.Sprintf("198.51.100.%d:4000", n+1)
		flood.Add(1)
		go func() {
			defer flood.Done()
			tick := time.NewTicker(time.Second / PerNetwork)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				flood.Add(1)
				go func() {
					defer flood.Done()
					if l.Run(addr, derive) {
						floodRan.Add(1)
					} else {
						floodRefused.Add(1)
					}
				}()
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond) // the floods' queue builds up
	const asks = 8
	refused := 0
	var longest time.Duration
	for i := 0; i < asks; i++ {
		start := time.Now()
		if !l.Run("203.0.113.9:5000", func() {}) {
			refused++
		}
		longest = max(longest, time.Since(start))
		time.Sleep(400 * time.Millisecond)
	}
	close(stop)
	flood.Wait()
	t.Logf("another network: %d of %d password checks refused (longest wait %s); the two floods: %d ran, %d refused",
		refused, asks, longest.Round(time.Millisecond), floodRan.Load(), floodRefused.Load())
	if refused > 0 {
		t.Errorf("%d of %d password checks of a third network were refused while two networks sent %d a second each of %s derivations",
			refused, asks, PerNetwork, derivation)
	}
}
