package kdflimit

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestLimiter_FullRoomKeepsASeatForANewNetwork (low–medium; anyone who can
// reach the pgwire port with cleartext passwords on, or the admin
// endpoint): the waiting room holds MaxWaiting requests, PerNetwork of one
// network, so ⌈MaxWaiting/PerNetwork⌉ = 13 networks (13 IPv4 addresses,
// or 13 of the 256 /56s of one IPv6 /48) each sending their PerNetwork a
// second filled it whenever the derivations were slower than their
// arrivals, and every other network's request was refused at once,
// without a wait. Now a request from a network with fewer waiters than the
// network with the most takes the place of that network's newest waiter,
// and is served in its turn.
//
// The test holds the slot with one derivation, fills the room from 13
// networks, then asks from a 14th: it must wait and run, and one of the
// 13 networks' waiters must have been refused in its place.
func TestLimiter_FullRoomKeepsASeatForANewNetwork(t *testing.T) {
	l := New()
	const derivation = 20 * time.Millisecond
	hold := make(chan struct{})
	started := make(chan struct{})
	go l.Run("203.0.113.200:1", func() { close(started); <-hold })
	<-started

	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for n := 0; n*PerNetwork < MaxWaiting; n++ {
		for range PerNetwork {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if !l.Run(fmt.Sprintf("198.51.100.%d:4000", n+1), func() { time.Sleep(derivation) }) {
					mu.Lock()
					refused++
					mu.Unlock()
				}
			}()
		}
	}
	// Wait until the room is full (the 65th of 13 networks is refused).
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		full := l.nWaiting == MaxWaiting
		l.mu.Unlock()
		mu.Lock()
		r := refused
		mu.Unlock()
		if full && r == 13*PerNetwork-MaxWaiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the room did not fill: %d waiting, %d refused", l.nWaiting, r)
		}
		time.Sleep(time.Millisecond)
	}

	ran := make(chan bool, 1)
	go func() { ran <- l.Run("192.0.2.1:5000", func() {}) }()
	// The newcomer must have a seat before the slot is freed.
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	evicted := refused - (13*PerNetwork - MaxWaiting)
	mu.Unlock()
	if evicted != 1 {
		t.Errorf("%d waiters of the 13 networks lost their place for the newcomer, want 1", evicted)
	}
	close(hold)
	if !<-ran {
		t.Errorf("a request from a 14th network was refused while 13 networks filled the waiting room")
	}
	wg.Wait()
}
