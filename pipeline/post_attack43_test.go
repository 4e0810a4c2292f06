package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestAttack43_PostLeavesMultiplyStatementTimeout (attack round 43,
// severity medium: upstream work far beyond what the proxy bounds before
// the charge, and a statement that must reach the time-outs it was
// admitted under).
//
// SECURITY.md ("Time", "Refused before the charge"): a plan whose work
// bound needs longer than statement_timeout at the dataset's work_rate is
// refused with 54000, uncharged, "so no accepted query's work can reach
// the time-out however its data is made". A post-processing statement
// (rewrite/POSTPROCESSING.md) has up to 16 DP leaves, released one after
// the other under one admission slot; CheckPost (post.go) calls TimeSlot
// for each leaf, which refuses a leaf whose own bound exceeds the time-out,
// and then adds the slots up (PostRun.Slot) without comparing the sum with
// anything. internal/upstream gives each leaf's query its own
// statement_timeout. So one accepted statement of 16 leaves, each just
// under the bound, makes the data server do 16 × statement_timeout of
// work (8 minutes with the default 30 s) in one admission slot, for one
// charge; the slot and its padding hold the analyst's DP admission ticket
// (and the pinned shadow connection of the outer SQL) for the summed time
// slot (here 16 × 32 s = 8.5 minutes), so two such statements keep the
// analyst's two fair-share slots, and colluding analysts the dataset's
// dp_concurrency, for that long while other analysts' DP statements fail
// with 53000 after dp_queue_timeout.
//
// The test plans, with a 30 s statement_timeout and 500,000 rows/s, a
// statement of 16 COUNT leaves over a table declared at 10 million rows
// (each leaf: 20 s of work, accepted alone — the control) and wants
// CheckPost to refuse the statement with 54000 before any charge, since
// together the leaves need 320 s.
//
// Suggested fix: in CheckPost, add up the leaves' work (Σ Work.Rows, or
// the needs TimeSlot computes) and refuse with 54000 when the sum exceeds
// the statement_timeout, as TimeSlot does for one plan (and say so in the
// hint: fewer DP aggregates per statement).
func TestAttack43_PostLeavesMultiplyStatementTimeout(t *testing.T) {
	env, _ := testEnv(t)
	env.StatementTimeout = 30 * time.Second
	env.WorkRate = 500_000
	env.ResponseTime = 500 * time.Millisecond
	env.Policy.Tables["visits"].MaxRows = 10_000_000 // 20 s of work per scan at 500,000 rows/s
	s := testSettings()
	leaf := func(i int) string {
		return fmt.Sprintf("SELECT COUNT(*) AS n FROM visits WHERE age > %d", i)
	}
	// Control: one such leaf and a small one (patients, 300,000 rows)
	// fit the time-out together and are accepted.
	one, err := Prepare(env, s, nil, leaf(0)+" UNION ALL SELECT COUNT(*) FROM patients")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckPost(context.Background(), env, s, one, nil, nil); err != nil {
		t.Fatalf("control: one 20 s leaf and a small one: %v, want accepted", err)
	}
	var parts []string
	for i := 0; i < 16; i++ {
		parts = append(parts, leaf(i))
	}
	st, err := Prepare(env, s, nil, strings.Join(parts, " UNION ALL "))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Leaves) != 16 {
		t.Fatalf("%d leaves, want 16", len(st.Leaves))
	}
	run, err := CheckPost(context.Background(), env, s, st, nil, nil)
	if err == nil {
		var rows int64
		for _, r := range run.Requests {
			rows += r.Plan.Work.Rows
		}
		t.Fatalf("16 leaves of 20 s each accepted: %d rows of work at %g rows/s = %v upstream under a statement_timeout of %v, time slot %v (want 54000 before the charge)",
			rows, env.WorkRate, time.Duration(float64(rows)/env.WorkRate*float64(time.Second)), env.StatementTimeout, run.Slot)
	}
	if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.ProgramLimitExceeded {
		t.Fatalf("CheckPost: %v, want 54000", err)
	}
}
