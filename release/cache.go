// Privacy-critical: needs DP review.

package release

import (
	"container/list"
	"sync"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
)

// The in-memory answer cache sits in front of the ledger's (Store.Cached):
// a repeated query is answered from memory with no ledger round trip, no
// mechanism and no charge.
//
// What it returns: only answers that were released, charged and recorded
// on the ledger (stored after Store.Release succeeded) or read back from the
// ledger (Store.Cached). So a hit never shows an analyst anything their
// budget has not paid for, and the answer is exactly the stored noisy
// answer (same rows, same error text).
//
// Keys: (dataset, policy version, cacheKey), where cacheKey covers the
// analyst, the canonical plan and the privacy parameters; a policy reload
// changes the version and so misses every older entry.
//
// Several proxies sharing one ledger: each keeps its own memory. If two
// proxies (or two sessions of one proxy) miss on the same query at once,
// both charge and release, and each may then keep serving its own answer
// while the ledger returns the newest. Every such answer was charged in
// full, so this costs budget, never privacy; within one proxy an entry, once
// stored, is returned until it is evicted (bounded LRU) or the process
// restarts, after which the ledger's newest answer is loaded.
//
// The NOTICE of a cached answer reports the remaining budget. It comes
// from the last figure this process saw for the (analyst, dataset) — from
// its own charges or a ledger read — and is re-read from the ledger when
// older than statusTTL: charges through other proxies and steward grants
// show after at most statusTTL. The budget check itself is never cached; it
// is done by the ledger at every charge.

const (
	// defaultCacheBytes bounds the memory of cached answers (estimated
	// size of the rows and column names).
	defaultCacheBytes = 32 << 20
	// maxEntryFraction: an answer bigger than this share of the bound is
	// served from the ledger only.
	maxEntryFraction = 16
	// statusTTL is how long a remaining-budget figure is reused for the
	// NOTICE of cached answers.
	statusTTL = 2 * time.Second
)

type answerKey struct {
	dataset, version, key string
}

type answerEntry struct {
	key    answerKey
	answer *storedAnswer
	size   int
}

// answerCache is a bounded LRU of released answers. Safe for concurrent use.
type answerCache struct {
	mu       sync.Mutex
	maxBytes int
	maxEntry int // bigger answers are not kept
	bytes    int
	order    *list.List // front: most recently used; values *answerEntry
	entries  map[answerKey]*list.Element
}

func newAnswerCache(maxBytes int) *answerCache {
	return &answerCache{maxBytes: maxBytes, maxEntry: maxBytes / maxEntryFraction, order: list.New(), entries: map[answerKey]*list.Element{}}
}

// get returns the stored answer of k. The answer is shared: callers must
// not modify it.
func (c *answerCache) get(k answerKey) (*storedAnswer, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*answerEntry).answer, true
}

// put stores the answer of k, evicting the least recently used entries
// beyond the bound. An answer already stored for k is kept (the first
// answer this process saw stays the one it serves).
func (c *answerCache) put(k answerKey, a *storedAnswer) {
	if c == nil || a == nil {
		return
	}
	size := answerSize(k, a)
	if size > c.maxEntry {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; ok {
		return
	}
	c.entries[k] = c.order.PushFront(&answerEntry{key: k, answer: a, size: size})
	c.bytes += size
	for c.bytes > c.maxBytes {
		el := c.order.Back()
		e := el.Value.(*answerEntry)
		c.order.Remove(el)
		delete(c.entries, e.key)
		c.bytes -= e.size
	}
}

// answerSize estimates the memory an entry holds.
func answerSize(k answerKey, a *storedAnswer) int {
	n := 128 + len(k.dataset) + len(k.version) + len(k.key) + len(a.Errors)
	for _, col := range a.Columns {
		n += 32 + len(col.Name) + len(col.PGType)
	}
	for _, rows := range [][][]*string{a.Rows, a.Widths} {
		for _, row := range rows {
			n += 24 + 8*len(row)
			for _, v := range row {
				if v != nil {
					n += 16 + len(*v)
				}
			}
		}
	}
	return n
}

type statusKey struct {
	analyst, dataset, version string
}

type statusEntry struct {
	st        accountant.Status
	remaining accountant.Spent // st.Remaining()
	at        time.Time
	// cachedNotice is the NOTICE of a cached answer under this status,
	// without its error half-widths: noticeText(0, st, remaining, true, "").
	cachedNotice string
}

// notice is the NOTICE of a cached answer whose error half-widths are errs.
func (e statusEntry) notice(errs string) string {
	if errs == "" {
		return e.cachedNotice
	}
	return e.cachedNotice + noticeErrors + errs
}

// statusCache keeps the last remaining-budget figure per analyst and
// dataset for the NOTICE of cached answers. Bounded: it is cleared when
// it reaches maxStatuses entries.
type statusCache struct {
	mu      sync.Mutex
	entries map[statusKey]statusEntry
	now     func() time.Time
}

const maxStatuses = 10_000

func newStatusCache() *statusCache {
	return &statusCache{entries: map[statusKey]statusEntry{}, now: time.Now}
}

// get returns the status of k and its remaining budget.
func (c *statusCache) get(k statusKey) (statusEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || c.now().Sub(e.at) > statusTTL {
		return statusEntry{}, false
	}
	return e, true
}

func (c *statusCache) put(k statusKey, st accountant.Status) statusEntry {
	e := statusEntry{st: st, remaining: st.Remaining(), at: c.now()}
	e.cachedNotice = noticeText(accountant.Spent{}, st, e.remaining, true, "")
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxStatuses {
		clear(c.entries)
	}
	c.entries[k] = e
	return e
}
