package rewrite

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/policy"
)

// allocatedBy77 returns the bytes f allocates (runtime.MemStats.TotalAlloc)
// and its wall time.
func allocatedBy77(f func()) (uint64, time.Duration) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	start := time.Now()
	f()
	el := time.Since(start)
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc, el
}

// nestedProjections77 nests d projections of visits, each selecting body
// AS a over the one inside it, under one SUM(a).
func nestedProjections77(d int, body string) string {
	q := "SELECT age AS a FROM visits"
	for i := 0; i < d; i++ {
		q = "SELECT " + body + " AS a FROM (" + q + ") s"
	}
	return "SELECT SUM(a) FROM (" + q + ") s"
}

// TestAttack77_FlattenDoublesTextPerRound (attack round 77, severity high:
// rule 1, proxy CPU and memory before any charge grow exponentially in a
// statement of a few hundred bytes; nothing counts them, and enough of it
// ends the proxy for every analyst).
//
// rewrite.Post (post.go:187) flattens projection subqueries round after
// round (flattenOnce, up to maxPostRounds = 64) before anything checks the
// text it produces: CheckText runs on the analyst's text only, once, at
// post.go:183. flatten (postflat.go, "References to the derived table's
// columns") replaces every reference to a derived table's column by the
// whole expression it names. So a projection that names its inner column
// twice (SELECT a+a AS a FROM (…) s) doubles the text at each level:
// d levels are d rounds and 2^d copies of the innermost column. The text
// is only refused at the end, by the planner's CheckText (54000 "DP
// statement too long"), once it has been built, relexed every round and
// handed to the planner.
//
// Measured (pipeline.Prepare, 2-core machine with CI beside it), against
// a control of the same length with a+1 (one reference per level):
//
//	d = 16, 450 bytes   0.46 s   252 MiB allocated  (control 1.5 ms, < 1 MiB)
//	d = 18, 500 bytes   2.3 s    1,012 MiB
//	d = 20, 550 bytes  11.0 s    4,066 MiB          (final text 16 MiB)
//
// Peak heap in use during rewrite.Post alone (sampled every 2 ms): d = 16
// 82 MiB, d = 18 399 MiB, d = 20 1,589 MiB (3.4 s). Each two more levels
// multiply it by four: d = 22 (600 bytes) needs about 6 GiB and d = 24
// (650 bytes) about 25 GiB, so one statement under 1 KB exhausts the
// proxy's memory and ends every analyst's session (a+a+a+a, four copies a
// level, gets there in half the levels). This runs in the analyst's planning slot, so it takes one core
// per analyst, but its memory is not charged to max_memory_per_analyst_mb
// and nothing bounds its time (a statement_timeout or cancel does not
// stop Post). It is refused without a charge, so it is free to repeat,
// and a refused text is not in the plan cache.
//
// The test runs d = 14 (400 bytes) and wants the flattening to allocate
// at most 32 times what the control of the same length allocates; it
// allocates several hundred times more.
//
// Suggested fix: check every round's output before the next round
// (CheckText(next), or at least len(next) > MaxStatementBytes → 54000, and
// a bound on the rounds' total bytes), so that flattening costs at most
// maxPostRounds passes over MaxStatementBytes; better, refuse in flatten
// an edit set whose result exceeds MaxStatementBytes before building it.
func TestAttack77_FlattenDoublesTextPerRound(t *testing.T) {
	ds, err := policy.Load(hospitalPolicy)
	if err != nil {
		t.Fatal(err)
	}
	const d = 14
	attack, control := nestedProjections77(d, "a+a"), nestedProjections77(d, "a+1")
	if len(attack) != len(control) {
		t.Fatalf("lengths differ: %d, %d", len(attack), len(control))
	}
	var errA, errC error
	ctl, tc := allocatedBy77(func() { _, errC = Post(ds, control) })
	att, ta := allocatedBy77(func() { _, errA = Post(ds, attack) })
	t.Logf("%d-byte statements: control %d KiB in %v (err %v); doubling %d KiB in %v (err %v)",
		len(attack), ctl>>10, tc, errC, att>>10, ta, errA)
	if att > 32*ctl {
		t.Errorf("flattening a %d-byte statement allocated %d KiB, %.0f× the %d KiB of a control of the same length: "+
			"the text doubles every round and is checked only after all of them (post.go flatten loop)",
			len(attack), att>>10, float64(att)/float64(ctl), ctl>>10)
	}
}

// cteJoins77 defines one projection CTE whose body holds an IN list of
// about body bytes and references name refs+1 times, each after JOIN.
func cteJoins77(body, refs int, name string) string {
	b := "SELECT age AS a FROM visits WHERE age IN (" + strings.Repeat("1,", body/2) + "1)"
	return "WITH c AS (" + b + ") SELECT COUNT(*) FROM " + strings.Repeat(name+" JOIN ", refs) + name
}

// TestAttack77_CTEInlineCopiesBodyPerReference (attack round 77, severity
// high: rule 1, minutes of proxy CPU and hundreds of GB allocated for one
// refused statement under the 64 KiB limit, before any charge).
//
// inlineCTE (postflat.go) replaces every reference to a projection CTE
// after FROM or JOIN by a copy of its body: a body of B bytes referenced
// r times becomes B·r bytes (quadratic in the statement: B = 32 KiB and
// r = 5,000 fit 64 KiB and make 160 MiB). Nothing checks that text, and
// the flattening loop (post.go:187) then flattens one derived table per
// round, relexing and rebuilding the whole text each round, for
// maxPostRounds (64) rounds, before refusing the statement with 0A000
// "the statement nests too many subqueries". So the cost is 64 × B·r.
//
// Measured (pipeline.Prepare, one statement, 2-core machine with CI
// beside it), against a control of the same length whose JOINs name a
// table that is no CTE:
//
//	 7.6 KB (B 4 KB, r 500)     18.1 s     27 GB allocated   (control 8 ms, 6 MB)
//	15 KB   (B 8 KB, r 1,000)   62 s      116 GB
//	30 KB   (B 16 KB, r 2,000)  278 s     490 GB             (control 15 ms, 22 MB)
//
// A 64 KiB statement is about four times the last: some 20 minutes of a
// core per statement, uncharged and repeatable, uncancellable (no
// statement_timeout or cancel reaches Post), its garbage (GBs a second)
// slowing every other analyst's sessions through the collector; one
// analyst's planning slot keeps it to one core per analyst, colluding
// analysts take every core.
//
// The test runs B = 400, r = 50 (829 bytes; 52 rounds, after which Post
// returns a 43 KB flat text that the planner refuses with 0A000, no join
// condition) and wants at most 32 times the allocation of the control of
// the same length (whose JOINs name no CTE).
//
// Suggested fix: as for TestAttack77_FlattenDoublesTextPerRound, refuse
// (54000) a flattening round whose output exceeds MaxStatementBytes before
// building or relexing it; inlineCTE can compute len(body) × references
// before applying its edits.
func TestAttack77_CTEInlineCopiesBodyPerReference(t *testing.T) {
	ds, err := policy.Load(hospitalPolicy)
	if err != nil {
		t.Fatal(err)
	}
	const body, refs = 400, 50
	attack, control := cteJoins77(body, refs, "c"), cteJoins77(body, refs, "x")
	if len(attack) != len(control) {
		t.Fatalf("lengths differ: %d, %d", len(attack), len(control))
	}
	var errA, errC error
	ctl, tc := allocatedBy77(func() { _, errC = Post(ds, control) })
	att, ta := allocatedBy77(func() { _, errA = Post(ds, attack) })
	t.Logf("%d-byte statements: control %d KiB in %v (err %v); CTE joins %d KiB in %v (err %v)",
		len(attack), ctl>>10, tc, errC, att>>10, ta, errA)
	if att > 32*ctl {
		t.Errorf("flattening a %d-byte statement allocated %d KiB, %.0f× the %d KiB of a control of the same length: "+
			"every JOIN copies the CTE's body and the loop relexes the copies for 64 rounds (postflat.go inlineCTE, post.go flatten loop)",
			len(attack), att>>10, float64(att)/float64(ctl), ctl>>10)
	}
}
