// Privacy-critical: needs DP review.

package accountant

import (
	"container/list"
	"sync"
)

// PLDMemo remembers intermediate privacy-loss distributions of the pld
// method so that one more charge on a budget row costs a few small
// convolutions instead of recomputing the whole composition (BENCHMARKS.md,
// "Accountant"). It is pure memoisation: every value it returns is exactly
// what the same computation without it returns (same operations in the same
// order on the same inputs), so a figure never depends on whether, or in
// which order, states were evaluated before — `dpproxy ledger verify`, which
// recomputes without the memo, finds the same numbers.
//
// What is kept (each for one release type (Laplace ε₀ or generic (ε, δ))
// on one grid h):
//
//   - the repeated squarings sq[b] = base^(2^b) of the type's discretised
//     loss (pmf.power);
//   - the partial products of pmf.power, pre(M) = ⊗ sq[b] over the set bits
//     b of M taken from the highest down, for every prefix M of a count n
//     (n with its low bits cleared). Counts n and n+1 share all prefixes
//     above the lowest bits that change, so the next charge recomputes only
//     the last convolutions, each with a small sq[b];
//   - the composed curve of a whole state (so evaluating one state twice,
//     e.g. for Reserve and then for a status, composes once).
//
// Bounded by the total number of grid points held (least recently used
// first out). Safe for concurrent use. Each Ledger has its own.
type PLDMemo struct {
	mu        sync.Mutex
	maxPoints int
	points    int
	order     *list.List // front: most recently used; values *pldMemoEntry
	entries   map[pldMemoKey]*list.Element
}

// pldMemoKey names one memoised value: kind "sq" (n = the exponent b),
// "pre" (n = the prefix M) or "curve" (state = the canonical state JSON).
type pldMemoKey struct {
	kind           string
	laplace        bool
	epsilon, delta float64
	h              float64
	n              int64
	state          string
}

type pldMemoEntry struct {
	key    pldMemoKey
	pmf    pmf
	curve  pldCurve
	points int
}

// DefaultPLDMemoPoints bounds a ledger's memo: 2²¹ float64 grid points
// (16 MiB), enough for the chains of a few dozen long-running budgets.
const DefaultPLDMemoPoints = 1 << 21

// NewPLDMemo returns an empty memo holding at most maxPoints grid points
// ([DefaultPLDMemoPoints] for a ledger).
func NewPLDMemo(maxPoints int) *PLDMemo {
	return &PLDMemo{maxPoints: maxPoints, order: list.New(), entries: map[pldMemoKey]*list.Element{}}
}

func (m *PLDMemo) get(k pldMemoKey) (*pldMemoEntry, bool) {
	if m == nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.entries[k]
	if !ok {
		return nil, false
	}
	m.order.MoveToFront(el)
	return el.Value.(*pldMemoEntry), true
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
	if m == nil || e.points > m.maxPoints/4 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries[e.key]; ok {
		return
	}
	m.entries[e.key] = m.order.PushFront(e)
	m.points += e.points
	for m.points > m.maxPoints {
		el := m.order.Back()
		old := el.Value.(*pldMemoEntry)
		m.order.Remove(el)
		delete(m.entries, old.key)
		m.points -= old.points
	}
}
