// Not in the privacy-critical set (docs/ARCHITECTURE.md): a bounded
// keyed store. get returns the value put under an equal key, or nothing;
// what a key names (every input its value depends on) and that no value is
// changed once put are pld.go's (pldMemoKey, power, curve), so a bug here
// costs time or memory, never a figure.

package accountant

import (
	"container/list"
	"sync"
)

// PLDMemo remembers intermediate privacy-loss distributions of the pld
// method (pld.go, "The memo"), bounded by the total number of grid points
// held. The memo is shared by a ledger's analysts, each entry counted to
// the one whose charge put it there (For); past the bound the least
// recently used entry of whoever holds the most points goes first, so one
// analyst's charges cannot push another's out
// (TestAttack109_PLDMemoSharedLRU). An entry one analyst uses that another
// put there stays the other's. Safe for concurrent use. Each Ledger has
// its own.
type PLDMemo struct {
	s     *pldStore
	owner string
}

type pldStore struct {
	mu        sync.Mutex
	maxPoints int
	points    int
	entries   map[pldMemoKey]*list.Element
	owners    map[string]*pldOwner
}

// pldOwner is one analyst's entries, most recently used at the front of
// order (values *pldMemoEntry), and the points they hold.
type pldOwner struct {
	name   string
	order  *list.List
	points int
}

type pldMemoEntry struct {
	key    pldMemoKey
	pmf    pmf
	curve  pldCurve
	points int
	owner  *pldOwner
}

// DefaultPLDMemoPoints bounds a ledger's memo: 2²¹ float64 grid points
// (16 MiB), enough for the chains of a few dozen long-running budgets.
const DefaultPLDMemoPoints = 1 << 21

// NewPLDMemo returns an empty memo holding at most maxPoints grid points
// ([DefaultPLDMemoPoints] for a ledger).
func NewPLDMemo(maxPoints int) *PLDMemo {
	return &PLDMemo{s: &pldStore{maxPoints: maxPoints, entries: map[pldMemoKey]*list.Element{}, owners: map[string]*pldOwner{}}}
}

// For is m seen by owner (an analyst): the same entries, with those it
// puts counted to owner. A nil memo stays nil.
func (m *PLDMemo) For(owner string) *PLDMemo {
	if m == nil {
		return nil
	}
	return &PLDMemo{s: m.s, owner: owner}
}

func (m *PLDMemo) get(k pldMemoKey) (*pldMemoEntry, bool) {
	if m == nil {
		return nil, false
	}
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.entries[k]
	if !ok {
		return nil, false
	}
	e := el.Value.(*pldMemoEntry)
	e.owner.order.MoveToFront(el)
	return e, true
}

func (m *PLDMemo) getPMF(k pldMemoKey) (pmf, bool) {
	e, ok := m.get(k)
	if !ok {
		return pmf{}, false
	}
	return e.pmf, true
}

func (m *PLDMemo) putPMF(k pldMemoKey, d pmf) { m.put(&pldMemoEntry{key: k, pmf: d, points: len(d.p)}) }

func (m *PLDMemo) getCurve(state string) (pldCurve, bool) {
	e, ok := m.get(pldMemoKey{kind: "curve", state: state})
	if !ok {
		return pldCurve{}, false
	}
	return e.curve, true
}

func (m *PLDMemo) putCurve(state string, c pldCurve) {
	m.put(&pldMemoEntry{key: pldMemoKey{kind: "curve", state: state}, curve: c, points: len(c.d.p) + len(c.rdp) + len(state)/8})
}

func (m *PLDMemo) put(e *pldMemoEntry) {
	if m == nil || e.points > m.s.maxPoints/4 {
		return
	}
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[e.key]; ok {
		return
	}
	o := s.owners[m.owner]
	if o == nil {
		o = &pldOwner{name: m.owner, order: list.New()}
		s.owners[m.owner] = o
	}
	e.owner = o
	s.entries[e.key] = o.order.PushFront(e)
	o.points += e.points
	s.points += e.points
	for s.points > s.maxPoints {
		var top *pldOwner
		for _, c := range s.owners {
			if top == nil || c.points > top.points {
				top = c
			}
		}
		el := top.order.Back()
		old := el.Value.(*pldMemoEntry)
		top.order.Remove(el)
		delete(s.entries, old.key)
		top.points -= old.points
		s.points -= old.points
		if top.order.Len() == 0 {
			delete(s.owners, top.name)
		}
	}
}
