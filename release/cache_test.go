package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// countingLedger counts the ledger calls of the cache path and can fail
// Release.
type countingLedger struct {
	*memLedger
	cached, status int
	failRelease    bool
}

func (l *countingLedger) Cached(ctx context.Context, dataset, fingerprint, version string) ([]byte, bool, error) {
	l.cached++
	return l.memLedger.Cached(ctx, dataset, fingerprint, version)
}

func (l *countingLedger) Status(ctx context.Context, analyst string, ds *policy.Dataset) (accountant.Status, error) {
	l.status++
	return l.memLedger.Status(ctx, analyst, ds)
}

func (l *countingLedger) Release(ctx context.Context, res *accountant.Reservation, answer []byte) error {
	if l.failRelease {
		return errors.New("ledger down")
	}
	return l.memLedger.Release(ctx, res, answer)
}

func sameRows(t *testing.T, a, b *Result) {
	t.Helper()
	if len(a.Rows) != len(b.Rows) {
		t.Fatalf("%d rows vs %d", len(a.Rows), len(b.Rows))
	}
	for i := range a.Rows {
		for j := range a.Rows[i] {
			if (a.Rows[i][j] == nil) != (b.Rows[i][j] == nil) || (a.Rows[i][j] != nil && *a.Rows[i][j] != *b.Rows[i][j]) {
				t.Fatalf("answers differ at row %d col %d", i, j)
			}
		}
	}
}

// TestRun_MemoryCache: a repeated query is answered from memory (no ledger
// call, no charge, no upstream read) with exactly the stored answer; a new
// Releaser on the same ledger (a restart) loads it from the ledger once.
func TestRun_MemoryCache(t *testing.T) {
	ds := loadPolicy(t)
	up := &fakeUpstream{rows: [][]*string{{s("oncology"), s("10"), s("100"), s("10")}}}
	led := &countingLedger{memLedger: &memLedger{limit: 3}}
	r := newTestReleaser(t, led, 7)
	req := Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace, Upstream: up}
	first, err := r.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	cachedBefore, statusBefore := led.cached, led.status
	for range 3 {
		again, err := r.Run(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if !again.Cached {
			t.Fatal("repeated query not served from the cache")
		}
		sameRows(t, first, again)
		if again.Notice != "dp: cached answer, epsilon 0 spent (pure), 2.9 of 3 remaining; "+first.Notice[len("dp: epsilon 0.1 spent (pure), 2.9 of 3 remaining; "):] {
			t.Fatalf("cached Notice %q does not repeat the answer's error text (first: %q)", again.Notice, first.Notice)
		}
	}
	if led.cached != cachedBefore || led.status != statusBefore || len(up.calls) != 1 || len(led.reserved) != 1 {
		t.Fatalf("memory hits made %d Cached and %d Status calls, %d upstream calls, %d charges; want 0, 0, 1, 1",
			led.cached-cachedBefore, led.status-statusBefore, len(up.calls), len(led.reserved))
	}

	// A restart: the answer comes from the ledger, then from memory.
	r2 := newTestReleaser(t, led, 8)
	cachedBefore = led.cached
	for range 2 {
		again, err := r2.Run(context.Background(), req)
		if err != nil || !again.Cached {
			t.Fatalf("after restart: cached=%v err=%v", again != nil && again.Cached, err)
		}
		sameRows(t, first, again)
	}
	if led.cached-cachedBefore != 1 || len(led.reserved) != 1 {
		t.Fatalf("after restart: %d ledger Cached calls and %d charges, want 1 and 1", led.cached-cachedBefore, len(led.reserved))
	}

	// A new policy version misses: charged afresh.
	ds2 := *ds
	ds2.Version = ds.Version + "-reloaded"
	q := req
	q.Dataset = &ds2
	if res, err := r.Run(context.Background(), q); err != nil || res.Cached {
		t.Fatalf("after a policy reload: cached=%v err=%v; want a fresh answer", res != nil && res.Cached, err)
	}
	if len(led.reserved) != 2 {
		t.Fatalf("charges = %d, want 2", len(led.reserved))
	}
}

// TestRun_UnrecordedAnswerNotCached: an answer the ledger failed to record
// is returned (it was paid for) but not served again from memory.
func TestRun_UnrecordedAnswerNotCached(t *testing.T) {
	ds := loadPolicy(t)
	up := &fakeUpstream{rows: [][]*string{{s("oncology"), s("10"), s("100"), s("10")}}}
	led := &countingLedger{memLedger: &memLedger{limit: 3}, failRelease: true}
	r := newTestReleaser(t, led, 7)
	req := Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace, Upstream: up}
	for i := range 2 {
		res, err := r.Run(context.Background(), req)
		if err != nil || res.Cached {
			t.Fatalf("run %d: cached=%v err=%v; want a fresh, charged answer", i, res != nil && res.Cached, err)
		}
	}
	if len(led.reserved) != 2 {
		t.Fatalf("charges = %d, want 2", len(led.reserved))
	}
}

func TestAnswerCache_Bounded(t *testing.T) {
	row := func(v string) *storedAnswer {
		return &storedAnswer{Columns: []Column{{Name: "count", PGType: "int8"}}, Rows: [][]*string{{&v}}}
	}
	key := func(i int) answerKey { return answerKey{dataset: "d", version: "v", key: fmt.Sprint(i)} }
	size := answerSize(key(0), row("1"))
	c := newAnswerCache(3 * size)
	c.maxEntry = 2 * size
	for i := range 3 {
		c.put(key(i), row(fmt.Sprint(i)))
	}
	if _, ok := c.get(key(0)); !ok { // 0 is now the most recently used
		t.Fatal("entry 0 missing")
	}
	c.put(key(3), row("3")) // evicts 1, the least recently used
	if _, ok := c.get(key(1)); ok {
		t.Fatal("least recently used entry not evicted")
	}
	for _, i := range []int{0, 2, 3} {
		if a, ok := c.get(key(i)); !ok || *a.Rows[0][0] != fmt.Sprint(i) {
			t.Fatalf("entry %d: %v %v", i, a, ok)
		}
	}
	if o := c.owners[""]; c.bytes > c.maxBytes || len(c.entries) != 3 || o.order.Len() != 3 || o.bytes != c.bytes {
		t.Fatalf("bytes %d of %d, %d entries, %d in order (%d bytes)", c.bytes, c.maxBytes, len(c.entries), o.order.Len(), o.bytes)
	}
	// The first answer stored for a key stays.
	c.put(key(3), row("other"))
	if a, _ := c.get(key(3)); *a.Rows[0][0] != "3" {
		t.Fatal("a stored answer was replaced")
	}
	// Too big for the bound: not stored.
	big := &storedAnswer{Columns: []Column{{Name: "x"}}}
	for range 100 {
		big.Rows = append(big.Rows, []*string{s("0123456789")})
	}
	c.put(key(9), big)
	if _, ok := c.get(key(9)); ok {
		t.Fatal("an answer over the entry bound was stored")
	}
	// Off: a nil cache stores nothing.
	var off *answerCache
	off.put(key(1), row("1"))
	if _, ok := off.get(key(1)); ok {
		t.Fatal("nil cache returned an entry")
	}
}

func TestStatusCache_TTL(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newStatusCache()
	c.now = func() time.Time { return now }
	k := statusKey{analyst: "a", dataset: "d", version: "v"}
	c.put(k, accountant.Status{Dataset: "d"})
	if _, ok := c.get(k); !ok {
		t.Fatal("fresh status missing")
	}
	now = now.Add(statusTTL + time.Millisecond)
	if _, ok := c.get(k); ok {
		t.Fatal("status older than the TTL returned")
	}
}

// TestRemembered: Remembered answers exactly what Run's cache would, and
// only from memory: not before an answer was recorded, not after a
// restart (the answer is in the ledger only), not with dp.cache = off,
// not for another ε, not while the analyst's queries are suspended; and
// never with a ledger or upstream call.
func TestRemembered(t *testing.T) {
	ds := loadPolicy(t)
	up := &fakeUpstream{rows: [][]*string{{s("oncology"), s("10"), s("100"), s("10")}}}
	led := &countingLedger{memLedger: &memLedger{limit: 3}}
	r := newTestReleaser(t, led, 7)
	req := Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace, Upstream: up}
	if _, ok := r.Remembered(req); ok {
		t.Fatal("Remembered answered a query never run")
	}
	first, err := r.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	viaRun, err := r.Run(context.Background(), req)
	if err != nil || !viaRun.Cached {
		t.Fatalf("Run: cached=%v err=%v", viaRun != nil && viaRun.Cached, err)
	}
	calls, cached, status := len(up.calls), led.cached, led.status
	got, ok := r.Remembered(req)
	if !ok {
		t.Fatal("Remembered missed an answer in memory")
	}
	sameRows(t, first, got)
	if got.Notice != viaRun.Notice || got.Fingerprint != viaRun.Fingerprint || !got.Cached {
		t.Fatalf("Remembered = {%q %q %v}, Run's cache = {%q %q %v}", got.Notice, got.Fingerprint, got.Cached, viaRun.Notice, viaRun.Fingerprint, viaRun.Cached)
	}
	if len(up.calls) != calls || led.cached != cached || led.status != status {
		t.Fatal("Remembered called the upstream or the ledger")
	}

	q := req
	q.NoCache = true
	if _, ok := r.Remembered(q); ok {
		t.Error("Remembered answered with dp.cache = off")
	}
	q = req
	q.Epsilon = 0.2
	if _, ok := r.Remembered(q); ok {
		t.Error("Remembered answered another ε")
	}
	q = req
	q.Epsilon = -1
	if _, ok := r.Remembered(q); ok {
		t.Error("Remembered answered a request Run refuses")
	}
	if _, ok := newTestReleaser(t, led, 8).Remembered(req); ok {
		t.Error("a new Releaser remembered an answer it never loaded")
	}
	r.addUnrecorded(suspensionKey(req), 1)
	if _, ok := r.Remembered(req); ok {
		t.Error("Remembered answered while the analyst's queries are suspended")
	}
}

// TestCacheKey_Format: the answer cache's key is the hash of the same
// bytes as before it was built without fmt, so answers cached in the
// ledger by an earlier version are found again (a miss would charge the
// analyst a second time for the same question).
func TestCacheKey_Format(t *testing.T) {
	for _, req := range []Request{
		{Analyst: "alice", Plan: &rewrite.Plan{Fingerprint: "abc"}, Mechanism: "laplace", Epsilon: 0.1},
		{Analyst: `o"brien\x`, Plan: &rewrite.Plan{Fingerprint: ""}, Mechanism: "gaussian", Epsilon: 1e-7, Delta: 1e-9},
		{Analyst: "zoë\x00\n", Plan: &rewrite.Plan{Fingerprint: "f\u00e9"}, Mechanism: "laplace", Epsilon: 3, Delta: 0.25},
	} {
		h := sha256.New()
		fmt.Fprintf(h, "%q\x00%q\x00%q\x00%v\x00%v", req.Analyst, req.Plan.Fingerprint, req.Mechanism,
			strconv.FormatFloat(req.Epsilon, 'g', -1, 64), strconv.FormatFloat(req.Delta, 'g', -1, 64))
		if want := hex.EncodeToString(h.Sum(nil)[:16]); cacheKey(req) != want {
			t.Errorf("cacheKey(%q) = %s, want %s", req.Analyst, cacheKey(req), want)
		}
	}
}

// TestAnswerCache_FairAmongAnalysts: beyond the bound the analyst holding
// the most loses their least recently used answer, so one who holds no
// more than an equal share keeps everything however much another stores.
func TestAnswerCache_FairAmongAnalysts(t *testing.T) {
	row := func(v string) *storedAnswer {
		return &storedAnswer{Columns: []Column{{Name: "count", PGType: "int8"}}, Rows: [][]*string{{&v}}}
	}
	key := func(who string, i int) answerKey {
		return answerKey{dataset: "d", version: "v", analyst: who, key: fmt.Sprintf("%s%03d", who, i)}
	}
	size := answerSize(key("ann", 0), row("1"))
	c := newAnswerCache(10 * size)
	c.maxEntry = size
	for i := range 3 {
		c.put(key("ann", i), row("a"))
	}
	for i := range 100 {
		c.put(key("bob", i), row("b"))
	}
	for i := range 3 {
		if _, ok := c.get(key("ann", i)); !ok {
			t.Errorf("ann's answer %d (3 of a 10-answer cache) evicted by bob's 100", i)
		}
	}
	if c.bytes > c.maxBytes || c.owners["bob"].bytes != 7*size {
		t.Errorf("bytes %d of %d; bob holds %d, want %d", c.bytes, c.maxBytes, c.owners["bob"].bytes, 7*size)
	}
	// Bob's most recent answers are the ones kept.
	if _, ok := c.get(key("bob", 99)); !ok {
		t.Error("bob's most recent answer evicted")
	}
	if _, ok := c.get(key("bob", 0)); ok {
		t.Error("bob's oldest answer kept")
	}
	// Past an equal share ann loses her own oldest to bob, who holds
	// more: the cache evicts from whoever holds the most.
	for i := 3; i < 8; i++ {
		c.put(key("ann", i), row("a"))
	}
	if a, b := c.owners["ann"].bytes, c.owners["bob"].bytes; a != 5*size || b != 5*size {
		t.Errorf("after ann stored 8: ann holds %d answers, bob %d; want 5 each", a/size, b/size)
	}
}

// TestStoredJSON: the ledger's copy of an answer decodes to the answer
// (the form json.Marshal gave before attack round 84, read by Cached),
// writes '<', '>' and '&' as themselves (one byte, not six), and is
// given up (nil: released without a stored answer) past maxStoredAnswer.
func TestStoredJSON(t *testing.T) {
	s := func(v string) *string { return &v }
	sa := &storedAnswer{
		Columns: []Column{{Name: "k<&>", PGType: "text"}, {Name: "count", PGType: "int8"}},
		Rows:    [][]*string{{s("a<b>&c"), s("12")}, {nil, s("\x01\"q\"")}, {s("\u2028"), nil}},
		Widths:  [][]*string{{nil, s("3.5")}, {nil, nil}, {nil, s("1")}},
		Errors:  "±3.5 (count)",
	}
	for _, c := range []*storedAnswer{sa, {Columns: sa.Columns, Rows: sa.Rows, Errors: ""}, {Columns: []Column{}, Rows: nil}} {
		got := storedJSON(c)
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var a, b storedAnswer
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("storedJSON %s: %v", got, err)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("storedJSON decodes to %+v, json.Marshal to %+v", a, b)
		}
	}
	if got := storedJSON(sa); bytes.Contains(got, []byte(`\u003c`)) || !bytes.Contains(got, []byte("a<b>&c")) {
		t.Errorf("HTML characters escaped: %s", got)
	}
	var batch []storedAnswer
	if err := json.Unmarshal(storedBatchJSON([]*storedAnswer{sa, sa}), &batch); err != nil || len(batch) != 2 || !reflect.DeepEqual(batch[1].Rows, batch[0].Rows) {
		t.Fatalf("batch: %v %+v", err, batch)
	}

	// Past the bound: nil, for one answer and for a batch. Rows of '<'
	// (one byte each now) and of U+0001 (six bytes each in JSON).
	big := func(ch string, rows int) *storedAnswer {
		a := &storedAnswer{Columns: []Column{{Name: "k", PGType: "text"}}}
		for range rows {
			a.Rows = append(a.Rows, []*string{s(strings.Repeat(ch, 1000))})
		}
		return a
	}
	fits := maxStoredAnswer/1010 - 1
	if got := storedJSON(big("<", fits)); got == nil {
		t.Errorf("an answer of %d rows of 1,000 '<' (about %d bytes) was not stored", fits, fits*1000)
	}
	if got := storedJSON(big("\x01", fits)); got != nil {
		t.Errorf("an answer whose JSON is %d bytes was stored (bound %d)", len(got), maxStoredAnswer)
	}
	if got := storedBatchJSON([]*storedAnswer{big("<", fits/2+20), big("<", fits/2+20)}); got != nil {
		t.Errorf("a batch whose JSON is %d bytes was stored (bound %d)", len(got), maxStoredAnswer)
	}
}
