package proxy

import (
	"context"
	"strings"
	"testing"
	"time"
)

// aliasChain is a catalog-route statement whose classification is
// quadratic in its length: d nested parentheses, each closed by ") abs(1)",
// and a call of a function that is not on the allow-list at the end. For every "abs(" after a ")",
// pgsql.aliasColumns asks openParen for the "(" that the ")" closes, and
// openParen walks back over everything nested inside it: the n-th walk
// covers about 5n tokens, so d levels cost about 2.5·d² token steps before
// the statement is refused (pg_sleep is not allowed) — nothing reaches the
// shadow, nothing is planned, nothing is charged.
func aliasChain(d int) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	b.WriteString(strings.Repeat("(", d))
	b.WriteString("1")
	for i := 0; i < d; i++ {
		b.WriteString(") abs(1)")
	}
	b.WriteString(", lo_unknown_fn(1)")
	return b.String()
}

// TestAttack64_CatalogClassificationQuadratic (attack round 64, severity
// medium: rule 1, proxy CPU per statement before any charge, unbounded by
// the planning slot, the 64 KiB DP text limit or the statement's own
// timeout).
//
// Every statement of every route passes pgsql.Classify on the session's
// goroutine before anything else: outside the analyst's planning slot
// (which covers DP planning only), outside the statement context (neither
// the client's statement_timeout nor a CancelRequest stops it) and bounded
// only by MaxMessage (1 MiB), not by rewrite.CheckText's 64 KiB (which
// applies to DP statements). SECURITY.md ("Planning") states that
// classification is linear in the statement (10 ms for 128 KiB). It is
// not: CheckCatalog's aliasColumns calls openParen, a backward scan to the
// matching "(", for every identifier followed by "(" after a ")", so
// aliasChain(d) costs O(d²). Measured on the 2-core test machine
// (pgsql.Classify alone): d = 1,000 (9 KB) 7.6 ms; d = 4,000 (36 KB)
// 113 ms; d = 16,000 (144 KB) 1.94 s; extrapolated to a 1 MiB Query
// message (d ≈ 116,000) about 100 s of one core per message, repeated
// every time since texts over 4 KiB are not cached. The statement is
// refused (42501) with nothing charged, so it is free to repeat, and one
// analyst's max_connections_per_analyst sessions (a quarter of
// max_connections) each keep a core busy: far more than the one core
// SECURITY.md says one analyst's statements can take, and other analysts'
// sessions (their classification, planning, the release's noise and
// padding goroutines) share what is left.
//
// The same scan runs for the query of a DECLARE … CURSOR FOR and a COPY
// (…) TO STDOUT (classifyWrapper: 2.6 s for a 180 KB DECLARE, and
// runSimple classifies that query a second time), and for a Parse message.
//
// The test sends aliasChain(48,000) (≈ 430 KB, under MaxMessage) as a
// simple Query and wants its refusal within 2 s; the linear shapes of 1 MiB
// (IN lists, nested calls, WITH lists, parentheses) classify in under
// 0.25 s here. Measured: about 17 s (ratio ≈ 9; the test's own deadline is
// 60 s). Assumes an otherwise idle core.
//
// Fix direction: make openParen O(1) with parenMatches' table (computed
// once per statement, as cteColumnLists already does) — or track the
// matching "(" of each ")" while scanning — and bound every route's text
// before classification (a catalog statement's length, or its parenthesis
// depth as CheckText does for DP statements), with a benchmark of
// Classify on adversarial 1 MiB shapes in BenchmarkClassify_*.
func TestAttack64_CatalogClassificationQuadratic(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	// refuse sends the statement of d levels and returns the fastest of
	// three refusals (the least disturbed by other work on the machine).
	refuse := func(d int) time.Duration {
		q := aliasChain(d)
		if len(q) >= 1<<20 {
			t.Fatalf("statement of %d bytes over MaxMessage", len(q))
		}
		best := time.Duration(1 << 62)
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			start := time.Now()
			_, err := pc.Exec(ctx, q).ReadAll()
			took := time.Since(start)
			cancel()
			if sqlstate(err) != "42501" {
				t.Fatalf("want the allow-list's refusal 42501, got %v", err)
			}
			best = min(best, took)
		}
		t.Logf("%d-byte catalog statement refused after %v", len(q), best)
		return best
	}
	// Four times the levels: four times the time when classification is
	// linear, sixteen when quadratic (measured before the fix: 1.9 s for
	// 16,000 levels, 17.7 s for 48,000). The ratio, not a time, is
	// asserted, so a slower machine or the race detector does not matter.
	small, large := refuse(12000), refuse(48000)
	if ratio := float64(large) / float64(small); ratio > 9 {
		t.Errorf("4× the nested \") abs(1)\" levels took %.1f× the time (%v against %v): classification is not linear in the statement", ratio, large.Round(time.Millisecond), small.Round(time.Millisecond))
	}
}
