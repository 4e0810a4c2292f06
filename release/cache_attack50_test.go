package release

import (
	"context"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestAttack50_OtherAnalystEvictsCachedAnswer (attack round 50, severity
// low: one analyst's statements change another analyst's cached answers;
// no privacy loss, no extra charge).
//
// Rule 1 lists an analyst's cached answers among what no other analyst's
// statement may change. Answers are cached per analyst (cacheKey names
// the analyst, release.go:311), but in ONE least-recently-used cache of
// 32 MiB for all analysts (release/cache.go answerCache, put evicts from
// the back whoever stored it, cache.go:117-123), and one answer may take
// up to a sixteenth of it (maxEntryFraction). An analyst whose answers are
// large — 10,000 groups of width_bucket(age, 0, 110, 9998), about 1.3 MB
// each — evicts every other analyst's remembered answers with about 25
// releases, which at the policy's floor of ε per query (10⁻³, a new ε
// each time for a new cache key) cost her 0.03 of her budget. The victim's next repetition of a paid-for query is then no
// longer answered from memory on the session's goroutine
// (proxy/dp.go remembered): it takes the Run path — a ledger round trip
// (Store.Cached and Store.Status), a DP admission slot, where it can wait
// behind other analysts' statements and fail with 53000 after
// dp_queue_timeout, and the padding of the plan's whole time slot instead
// of response_time. The attacker also learns, by timing their own
// repeated answers, how many bytes of answers other analysts released
// since (a memory hit is padded to response_time, an evicted one to its
// slot): a channel on other analysts' activity.
//
// The test releases Bob's grouped query, then Mallory's 26 large
// answers (each charged to Mallory), and wants Bob's answer still in
// memory, and his repetition answered without a ledger lookup.
//
// Suggested fix: give each analyst a share of the answer cache's bytes
// (evict an analyst's own least recently used entries when they exceed
// it), or keep one LRU per analyst with a per-analyst bound and a global
// one that evicts from the analyst holding the most.
func TestAttack50_OtherAnalystEvictsCachedAnswer(t *testing.T) {
	ds := loadPolicy(t)
	led := &countingLedger{memLedger: &memLedger{limit: 1000}}
	r := newTestReleaser(t, led, 50)
	ctx := context.Background()

	up := &fakeUpstream{rows: [][]*string{{s("oncology"), s("10"), s("100"), s("10")}}}
	bob := Request{Analyst: "bob", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace, Upstream: up}
	if _, err := r.Run(ctx, bob); err != nil {
		t.Fatal(err)
	}
	bobKey := answerKeyOf(bob, cacheKey(bob))
	if _, ok := r.answers.get(bobKey); !ok {
		t.Fatal("Bob's answer was not cached")
	}

	big, err := rewrite.RewriteWith(ds, "SELECT width_bucket(age, 0, 110, 9998) AS b, COUNT(*) FROM visits GROUP BY 1", rewrite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	empty := &fakeUpstream{}
	const releases = 26
	for i := range releases {
		// A new ε each time, at the policy's floor (10⁻³): a new answer,
		// charged to Mallory, 0.03 of her budget in all.
		eps := 0.001 + float64(i)/100000
		res, err := r.Run(ctx, Request{Analyst: "mallory", Dataset: ds, Plan: big, Epsilon: eps, Mechanism: policy.MechanismLaplace, Upstream: empty})
		if err != nil {
			t.Fatalf("Mallory's release %d: %v", i, err)
		}
		if res.Cached {
			t.Fatalf("Mallory's release %d was cached", i)
		}
	}
	r.answers.mu.Lock()
	held := r.answers.bytes
	r.answers.mu.Unlock()
	_, kept := r.answers.get(bobKey)
	before := led.cached
	again, err := r.Run(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cached {
		t.Fatal("Bob's repeated query was charged again")
	}
	lookups := led.cached - before
	t.Logf("after Mallory's %d releases the answer cache holds %d KiB; Bob's answer in memory: %v; his repetition made %d ledger lookups", releases, held>>10, kept, lookups)
	if !kept || lookups != 0 {
		t.Errorf("Mallory's %d releases evicted Bob's cached answer from memory (kept %v; Bob's repetition needed %d ledger lookups): the answer cache is one LRU for all analysts, so one analyst's statements change another's cached answers", releases, kept, lookups)
	}
}
