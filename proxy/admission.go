package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Admission of DP statements (issue 27, "fair shares of the data server").
//
// Every DP statement that may read data (a release, or all the leaves of a
// post-processing statement together) holds one slot of its dataset while
// it runs. A dataset has Config.DPConcurrency slots (default: the size of
// its upstream pool, so the pool never queues) and an analyst holds at most
// Config.DPConcurrencyPerAnalyst of them at once, however many sessions
// they open. Waiting statements are served fairly: when a slot frees, the
// analysts with waiters take turns (round robin), each analyst's own
// statements in order. So one analyst's load can take at most their share
// of the data server, and cannot push another analyst's query past its
// limit by queueing ahead of it.
//
// Admission happens before the charge: a statement that waits longer than
// Config.DPQueueTimeout gets 53000 and is neither run nor charged. The
// decision depends on other statements' timing only, never on data.
//
// A slot also tells the release whether another analyst's DP statement ran
// in this proxy while it did, on any dataset (ticket.contended): datasets
// of one deployment share data servers, so a time-out under others' load
// is an availability failure, not an incident of the analyst
// (release/incident.go). Load that takes no slot here (another proxy's
// statements, catalog statements on a shadow cluster on the same host)
// is not seen: SECURITY.md, gap 8.

// Defaults of the admission limits: an analyst's share is
// config.DefaultDPConcurrencyPerAnalyst of the dataset's slots, at most
// defaultDPConcurrencyPerAnalyst.
const (
	defaultDPConcurrencyPerAnalyst = 2
	defaultDPQueueTimeout          = 30 * time.Second
)

// activity is the set of DP statements holding a slot on any dataset of
// the proxy, for ticket.contended. Safe for concurrent use; taken inside
// an admission's mu, never the other way round.
type activity struct {
	mu   sync.Mutex
	live map[*ticket]struct{}
}

func newActivity() *activity { return &activity{live: map[*ticket]struct{}{}} }

// admission holds one dataset's slots. Safe for concurrent use.
type admission struct {
	limit, perAnalyst int
	timeout           time.Duration
	act               *activity // shared by the proxy's datasets

	mu      sync.Mutex
	running map[string]int       // slots held, by analyst
	total   int                  // slots held
	live    map[*ticket]struct{} // the tickets holding slots
	waiting map[string][]*ticket // per analyst, in arrival order
	turns   []string             // analysts with waiters, in turn order
}

// ticket is one statement's slot, or its place in the queue.
type ticket struct {
	a         *admission
	analyst   string
	admitted  chan struct{} // closed when a waiting ticket gets its slot
	contended atomic.Bool   // another analyst's statement ran meanwhile
}

func newAdmission(limit, perAnalyst int, timeout time.Duration) *admission {
	if limit < 1 {
		limit = 1
	}
	if perAnalyst < 1 || perAnalyst > limit {
		perAnalyst = config.DefaultDPConcurrencyPerAnalyst(limit)
	}
	if timeout <= 0 {
		timeout = defaultDPQueueTimeout
	}
	return &admission{
		limit: limit, perAnalyst: perAnalyst, timeout: timeout, act: newActivity(),
		running: map[string]int{}, live: map[*ticket]struct{}{},
		waiting: map[string][]*ticket{},
	}
}

// admit waits for a slot for analyst, up to the queue timeout or until
// ctx ends. The caller must call done on the ticket.
func (a *admission) admit(ctx context.Context, analyst string) (*ticket, error) {
	t := &ticket{a: a, analyst: analyst}
	a.mu.Lock()
	if len(a.waiting[analyst]) == 0 && a.fits(analyst) {
		a.start(t)
		a.mu.Unlock()
		return t, nil
	}
	t.admitted = make(chan struct{})
	if len(a.waiting[analyst]) == 0 {
		a.turns = append(a.turns, analyst)
	}
	a.waiting[analyst] = append(a.waiting[analyst], t)
	a.mu.Unlock()

	timer := time.NewTimer(a.timeout)
	defer timer.Stop()
	var err error
	select {
	case <-t.admitted:
		return t, nil
	case <-timer.C:
		err = pgerr.New(insufficientResources, "too many DP queries are running on this dataset; this one waited %s for its turn", a.timeout).
			WithDetail("The query was not run and nothing was charged.").
			WithHint("retry it; each analyst may run %d DP queries at once, and the dataset %d", a.perAnalyst, a.limit)
	case <-ctx.Done():
		err = statementError(ctx, ctx.Err())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, admitted := a.live[t]; admitted {
		// Admitted as we gave up: the slot is ours; give it back.
		a.finish(t)
		return nil, err
	}
	q := a.waiting[analyst]
	for i, w := range q {
		if w == t {
			a.waiting[analyst] = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(a.waiting[analyst]) == 0 {
		delete(a.waiting, analyst)
		a.dropTurn(analyst)
	}
	return nil, err
}

// fits reports whether analyst may take a slot now. Called with mu held.
func (a *admission) fits(analyst string) bool {
	return a.total < a.limit && a.running[analyst] < a.perAnalyst
}

// start gives t a slot and records who ran alongside whom. Called with mu
// held.
func (a *admission) start(t *ticket) {
	a.act.mu.Lock()
	for o := range a.act.live {
		if o.analyst != t.analyst {
			o.contended.Store(true)
			t.contended.Store(true)
		}
	}
	a.act.live[t] = struct{}{}
	a.act.mu.Unlock()
	a.live[t] = struct{}{}
	a.running[t.analyst]++
	a.total++
}

// done gives the slot back and admits the next waiters in turn.
func (t *ticket) done() {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	a.finish(t)
}

// finish frees t's slot and hands free slots to waiters, one analyst's
// turn at a time. Called with mu held.
func (a *admission) finish(t *ticket) {
	if _, ok := a.live[t]; !ok {
		return
	}
	delete(a.live, t)
	a.act.mu.Lock()
	delete(a.act.live, t)
	a.act.mu.Unlock()
	a.total--
	if a.running[t.analyst]--; a.running[t.analyst] == 0 {
		delete(a.running, t.analyst)
	}
	for a.total < a.limit {
		next := -1
		for i, an := range a.turns {
			if a.running[an] < a.perAnalyst {
				next = i
				break
			}
		}
		if next < 0 {
			return
		}
		an := a.turns[next]
		w := a.waiting[an][0]
		a.waiting[an] = a.waiting[an][1:]
		// The analyst goes to the back of the turn order (or leaves it).
		a.turns = append(a.turns[:next:next], a.turns[next+1:]...)
		if len(a.waiting[an]) > 0 {
			a.turns = append(a.turns, an)
		} else {
			delete(a.waiting, an)
		}
		a.start(w)
		close(w.admitted)
	}
}

// dropTurn removes analyst from the turn order. Called with mu held.
func (a *admission) dropTurn(analyst string) {
	for i, an := range a.turns {
		if an == analyst {
			a.turns = append(a.turns[:i:i], a.turns[i+1:]...)
			return
		}
	}
}
