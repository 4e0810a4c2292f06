// Package share bounds how much of a resource every analyst needs one
// analyst may hold at once: a semaphore per owner.
//
// The ledger's connection pool is one for the whole proxy and small
// (pgxpool's default, max(4, NumCPU)); every analyst's charges need it.
// Reads an analyst causes for free — an answer read back from the ledger's
// cache (release), SHOW dp.budget (proxy) — take a share of one connection
// per analyst each, so one analyst's sessions, on however many datasets,
// cannot hold the pool while another's charge waits (attack round 66);
// the ledger's charges take another (attack round 69: an analyst's
// charges composing their own history held every connection).
package share

import (
	"context"
	"sync"
)

// PerOwner lets each owner hold at most n slots at once. The owners are
// the config's analysts (authenticated names), so the map stays bounded.
// Safe for concurrent use.
type PerOwner struct {
	n       int
	mu      sync.Mutex
	sem     map[string]chan struct{}
	waiting map[string]int // callers of Acquire waiting for a slot
}

// New returns a PerOwner of n slots per owner (at least 1).
func New(n int) *PerOwner {
	return &PerOwner{n: max(n, 1), sem: map[string]chan struct{}{}, waiting: map[string]int{}}
}

// Acquire takes one of owner's slots, waiting while they are all held
// until one is given back or ctx ends (its error); the returned func gives
// the slot back. A free slot is taken even when ctx has already ended, so
// an uncontended caller behaves as without the share.
func (p *PerOwner) Acquire(ctx context.Context, owner string) (func(), error) {
	p.mu.Lock()
	s, ok := p.sem[owner]
	if !ok {
		s = make(chan struct{}, p.n)
		p.sem[owner] = s
	}
	p.mu.Unlock()
	release := func() { <-s }
	select { // a free slot is taken even when ctx has ended
	case s <- struct{}{}:
		return release, nil
	default:
	}
	p.setWaiting(owner, 1)
	defer p.setWaiting(owner, -1)
	select {
	case s <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *PerOwner) setWaiting(owner string, d int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting[owner] += d; p.waiting[owner] == 0 {
		delete(p.waiting, owner)
	}
}

// Waiting is how many callers of Acquire wait for one of owner's slots.
func (p *PerOwner) Waiting(owner string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting[owner]
}
