// Not in the privacy-critical set (docs/ARCHITECTURE.md): the answer cache
// stores only storedAnswers built from released, charged rows (execute,
// executeSampleAgg, RunBatch) and replays them to the analyst whose budget
// paid (cacheKey, in release.go, names the analyst): replaying a released
// answer is post-processing, so a bug here can serve a wrong or stale answer,
// never one that costs more than its charge.

package release

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
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

// answerKey names a cached answer; analyst is the one cacheKey names, kept
// apart to share the cache fairly among analysts.
type answerKey struct {
	dataset, version, analyst, key string
}

type answerEntry struct {
	key    answerKey
	answer *storedAnswer
	size   int
}

// answerCache is a bounded cache of released answers, shared by all
// analysts and fair among them: beyond the bound it evicts the least
// recently used answer of the analyst who holds the most, so an analyst
// who holds no more than an equal share of it never loses an answer to
// another's statements (attack round 50: one analyst's large answers
// evicted everyone else's). Safe for concurrent use.
type answerCache struct {
	mu       sync.Mutex
	maxBytes int
	maxEntry int // bigger answers are not kept
	bytes    int
	entries  map[answerKey]*list.Element
	owners   map[string]*answerOwner // by analyst
}

// answerOwner is one analyst's answers, most recently used first (values
// *answerEntry), and their size.
type answerOwner struct {
	order *list.List
	bytes int
}

func newAnswerCache(maxBytes int) *answerCache {
	return &answerCache{maxBytes: maxBytes, maxEntry: maxBytes / maxEntryFraction,
		entries: map[answerKey]*list.Element{}, owners: map[string]*answerOwner{}}
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
	c.owners[k.analyst].order.MoveToFront(el)
	return el.Value.(*answerEntry).answer, true
}

// put stores the answer of k, evicting beyond the bound the least recently
// used answers of whoever holds the most (k's analyst on a tie). An answer
// already stored for k is kept (the first answer this process saw stays
// the one it serves).
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
	o := c.owners[k.analyst]
	if o == nil {
		o = &answerOwner{order: list.New()}
		c.owners[k.analyst] = o
	}
	c.entries[k] = o.order.PushFront(&answerEntry{key: k, answer: a, size: size})
	o.bytes += size
	c.bytes += size
	for c.bytes > c.maxBytes {
		who, most := k.analyst, o
		for name, other := range c.owners {
			if other.bytes > most.bytes {
				who, most = name, other
			}
		}
		el := most.order.Back()
		e := el.Value.(*answerEntry)
		most.order.Remove(el)
		most.bytes -= e.size
		delete(c.entries, e.key)
		c.bytes -= e.size
		if most.order.Len() == 0 {
			delete(c.owners, who)
		}
	}
}

// answerSize estimates the memory an entry holds.
func answerSize(k answerKey, a *storedAnswer) int {
	n := 128 + len(k.dataset) + len(k.version) + len(k.analyst) + len(k.key) + len(a.Errors)
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

// cached returns the stored answer of an earlier identical query, if any:
// from memory, else from the ledger (then kept in memory). The rows of a
// cached Result are shared with the cache and must not be modified.
func (r *Releaser) cached(ctx context.Context, req Request, key string) (*Result, bool, error) {
	ak := answerKeyOf(req, key)
	sa, ok := r.answers.get(ak)
	sk := statusKeyOf(req)
	se, fresh := r.statuses.get(sk)
	if !ok || !fresh {
		// The ledger reads of a free statement take the analyst's one
		// share of the ledger pool (internal/share; attack round 66).
		done, err := r.ledgerShare.Acquire(ctx, req.Analyst)
		if err != nil {
			return nil, false, err
		}
		defer done()
	}
	if !ok {
		answer, found, err := r.ledger.Cached(ctx, req.Dataset.Name, key, req.Dataset.Version)
		if err != nil || !found {
			return nil, false, err
		}
		sa = &storedAnswer{}
		if err := json.Unmarshal(answer, sa); err != nil {
			// An unreadable entry is not an answer: charge and answer afresh.
			return nil, false, nil
		}
	}
	if len(sa.Columns) != len(req.Plan.Outputs) {
		return nil, false, nil
	}
	if !ok {
		r.answers.put(ak, sa)
	}
	if !fresh {
		st, err := r.ledger.Status(ctx, req.Analyst, req.Dataset)
		if err != nil {
			return nil, false, err
		}
		se = r.statuses.put(sk, st)
	}
	return cachedResult(sa, se, key), true, nil
}

// remembered is cached without I/O: the answer and the budget figure of
// its NOTICE both in memory (the figure fresh), or not found.
func (r *Releaser) remembered(req Request, key string) (*Result, bool) {
	sa, ok := r.answers.get(answerKeyOf(req, key))
	if !ok || len(sa.Columns) != len(req.Plan.Outputs) {
		return nil, false
	}
	se, fresh := r.statuses.get(statusKeyOf(req))
	if !fresh {
		return nil, false
	}
	return cachedResult(sa, se, key), true
}

func cachedResult(sa *storedAnswer, se statusEntry, key string) *Result {
	return &Result{Columns: sa.Columns, Rows: sa.Rows, Widths: sa.Widths, Cached: true, Fingerprint: key,
		Notice: se.notice(sa.Errors), Errors: sa.Errors}
}

// Remembered answers req as Run would from the answer cache when both the
// answer and the budget figure of its NOTICE are in this process's
// memory: no I/O, nothing charged, nothing run, and cheap enough to call
// on the session's own goroutine before starting a release (issue 15:
// the goroutine, its stack growth and the key's formatting were a third
// of a cached answer's CPU). Otherwise it reports false and Run answers.
//
// It checks what Run checks before its cache lookup, except groupKeys
// (and the sample-and-aggregate plan's shape): they are functions of the
// plan and the policy, whose fingerprint and version are part of the key,
// and the answer under that key was released by a Run that passed them
// (this process's, or an earlier one's, loaded from the ledger).
func (r *Releaser) Remembered(req Request) (*Result, bool) {
	if req.NoCache || checkRequest(req) != nil || r.suspendedHere(req) != nil {
		return nil, false
	}
	return r.remembered(req, cacheKey(req))
}

func answerKeyOf(req Request, key string) answerKey {
	return answerKey{dataset: req.Dataset.Name, version: req.Dataset.Version, analyst: req.Analyst, key: key}
}

func statusKeyOf(req Request) statusKey {
	return statusKey{analyst: req.Analyst, dataset: req.Dataset.Name, version: req.Dataset.Version}
}

// maxStoredAnswer bounds the JSON of an answer the ledger stores for the
// answer cache: the in-memory cache's largest entry. A larger answer's
// charge is released without it, so repeating that query charges again
// (budget, never privacy: each answer is charged). Attack round 84: the
// whole answer (up to 16 MiB in the proxy) had been encoded and stored,
// and escaping made its JSON up to six times that (Go's encoder wrote
// '<', '>' and '&' as \u003c…, and control characters are \u0001…):
// 82 MB per statement copied uncounted in the proxy, parsed by the ledger,
// and read back as much on every free repetition.
const maxStoredAnswer = defaultCacheBytes / maxEntryFraction

// storedJSON is sa's JSON for the ledger (as json.Marshal writes it, but
// for HTML escaping), or nil when it would exceed maxStoredAnswer. It is
// built a row at a time and given up as soon as it is too long: it never
// holds more than maxStoredAnswer and one row.
func storedJSON(sa *storedAnswer) []byte {
	w := newAnswerWriter()
	w.answer(sa)
	return w.bytes()
}

// storedBatchJSON is the JSON array of a batch's answers, bounded as
// storedJSON is.
func storedBatchJSON(answers []*storedAnswer) []byte {
	w := newAnswerWriter()
	w.raw("[")
	for i, sa := range answers {
		if i > 0 {
			w.raw(",")
		}
		w.answer(sa)
	}
	w.raw("]")
	return w.bytes()
}

type answerWriter struct {
	buf  bytes.Buffer
	enc  *json.Encoder
	over bool
}

func newAnswerWriter() *answerWriter {
	w := &answerWriter{}
	w.enc = json.NewEncoder(&w.buf)
	w.enc.SetEscapeHTML(false)
	return w
}

func (w *answerWriter) raw(s string) {
	if !w.over {
		w.buf.WriteString(s)
	}
}

// value appends v's JSON (Encode's newline is whitespace between values).
func (w *answerWriter) value(v any) {
	if w.over {
		return
	}
	if err := w.enc.Encode(v); err != nil || w.buf.Len() > maxStoredAnswer {
		w.over = true
		w.buf = bytes.Buffer{}
	}
}

// answer appends sa with storedAnswer's field names.
func (w *answerWriter) answer(sa *storedAnswer) {
	w.raw(`{"columns":`)
	w.value(sa.Columns)
	for _, part := range []struct {
		name string
		rows [][]*string
	}{{"rows", sa.Rows}, {"widths", sa.Widths}} {
		if len(part.rows) == 0 && part.name == "widths" {
			continue // omitempty
		}
		w.raw(`,"` + part.name + `":`)
		if part.rows == nil {
			w.raw("null")
			continue
		}
		w.raw("[")
		for i, row := range part.rows {
			if i > 0 {
				w.raw(",")
			}
			w.value(row)
		}
		w.raw("]")
	}
	w.raw(`,"errors":`)
	w.value(sa.Errors)
	w.raw("}")
}

func (w *answerWriter) bytes() []byte {
	if w.over {
		return nil
	}
	return w.buf.Bytes()
}
