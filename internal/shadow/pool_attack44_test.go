package shadow

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
)

// TestAttack44_PoolShareRace (attack round 44; regression, passing): the
// owner-share hand-off (giveShare hands a released share to the owner's
// oldest waiter) under contention, with waiters that give up at every
// moment — their context cancelled just before, while and just after a
// share is handed to them, their AcquireTimeout firing, connections
// released reusable or not. No owner ever holds more than its share, no
// share leaks or is counted twice (afterwards held and waiting are empty
// and every owner gets its whole share at once), and no waiter is left
// behind. Run it under -race.
func TestAttack44_PoolShareRace(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	const perOwner = 2
	p := newPool(t, PoolConfig{DSN: dsn, MaxConns: 5, MaxConnsPerOwner: perOwner, AcquireTimeout: 30 * time.Millisecond})
	owners := []string{"alice", "bob", "carol"}
	var holding [3]atomic.Int32
	var over atomic.Int32
	var wg sync.WaitGroup
	for o := range owners {
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(o), uint64(g)))
				for i := 0; i < 40; i++ {
					ctx, cancel := context.WithCancel(context.Background())
					if rng.IntN(3) == 0 {
						d := time.Duration(rng.IntN(2000)) * time.Microsecond
						ctx, cancel = context.WithTimeout(context.Background(), d)
					}
					c, err := p.Acquire(ctx, owners[o])
					if err != nil {
						cancel()
						if !errors.Is(err, ErrOwnerLimit) && !errors.Is(err, ErrPoolExhausted) && ctx.Err() == nil {
							t.Errorf("%s: Acquire: %v", owners[o], err)
						}
						continue
					}
					if n := holding[o].Add(1); n > perOwner {
						over.Add(1)
					}
					time.Sleep(time.Duration(rng.IntN(1500)) * time.Microsecond)
					holding[o].Add(-1)
					p.Release(c, rng.IntN(4) != 0)
					cancel()
				}
			}()
		}
	}
	wg.Wait()
	if n := over.Load(); n > 0 {
		t.Errorf("an owner held more than its share of %d connections %d times", perOwner, n)
	}
	p.mu.Lock()
	held, waiting := len(p.held), len(p.waiting)
	p.mu.Unlock()
	if held != 0 || waiting != 0 {
		t.Fatalf("after every connection was released: %d owners still counted, %d with waiters", held, waiting)
	}
	ctx := ctxT(t)
	for _, o := range owners[:2] {
		var cs []*Conn
		for range perOwner {
			c, err := p.Acquire(ctx, o)
			if err != nil {
				t.Fatalf("%s cannot take its share afterwards: %v", o, err)
			}
			cs = append(cs, c)
		}
		for _, c := range cs {
			p.Release(c, true)
		}
	}
}
