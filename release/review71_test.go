package release

// Review of 514e795..d5c339a (review71): partition selection's first K
// groups (firstk.go) in sample-and-aggregate and the selection's NOTICE.

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// endHookUpstream streams its rows and calls atEnd after the last one,
// while the releaser still holds what it kept of the scan.
type endHookUpstream struct {
	fakeUpstream
	atEnd func()
}

func (u *endHookUpstream) QueryEach(ctx context.Context, sql string, each func([]*string) error, args ...any) error {
	rows, err := u.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := each(r); err != nil {
			return err
		}
	}
	u.atEnd()
	return nil
}

// TestReview71_SampleAggKeptGroupsHoldEveryBlockLevel: since 2759666,
// sample-and-aggregate by a private key keeps its selected groups
// (firstK, up to dpplan.MaxSelectedGroups) until the scan ends and
// measures them after. Each kept group holds its whole block-level map
// (len(SampleAgg.Levels) levels × len(Measures) big.Rat), although its
// level k is already fixed by its noisy count ñ (ChooseBlocks, drawn
// before offer) and finish reads only lv[k]. MaxSelectedGroups sizes K so
// that the answer fits dpplan.MaxAnswerBytes (16 MiB); the scan holds
// about L = 12 times more (here six statistics by a private key, K = 8,571:
// tens of MB held per answer before its rows exist; before 2759666 a
// group's levels were dropped once it was measured).
//
// Severity low–medium (the proxy's memory after the charge, per
// concurrent answer; not privacy). Fix: at offer time compute k =
// ChooseBlocks(ñ) (and the min_units suppression), and keep only lv[k]
// (or nothing for a suppressed group) in saGroup.
//
// The measure is the live heap after a full GC (runtime.GC, HeapAlloc)
// when the last candidate has been read, against the live heap before the
// release: deterministic up to the GC's bookkeeping, far from the bound.
func TestReview71_SampleAggKeptGroupsHoldEveryBlockLevel(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.Rewrite(ds, "SELECT diagnosis, corr(cost, age), corr(age, length_of_stay), corr(cost, length_of_stay), regr_r2(cost, age), regr_r2(age, length_of_stay), regr_r2(cost, length_of_stay) FROM visits GROUP BY diagnosis")
	if err != nil {
		t.Fatal(err)
	}
	k := dpplan.MaxSelectedGroups(plan)
	if plan.SampleAgg == nil || !plan.PrivateGroups() || len(plan.SampleAgg.Levels) < 8 || k < 1000 {
		t.Fatalf("premise: sample-and-aggregate by a private key, %d groups an answer", k)
	}
	answerBytes := AnswerBytes(plan, len(plan.Outputs))
	if answerBytes > MaxAnswerBytes {
		t.Fatalf("premise: the answer's bound %d fits %d", answerBytes, MaxAnswerBytes)
	}
	// k groups of 40,000 units each (every one passes the selection),
	// in key order as the SQL streams them; the value texts are shared
	// between groups, so the rows themselves weigh little.
	base := saRows(plan, 0.4, 40000)
	rows := make([][]*string, 0, k*len(base))
	for g := 0; g < k; g++ {
		name := fmt.Sprintf("code-%07d", g)
		for _, r := range base {
			rows = append(rows, append([]*string{&name}, r...))
		}
	}
	var before, atEnd runtime.MemStats
	up := &endHookUpstream{fakeUpstream: fakeUpstream{rows: rows}, atEnd: func() {
		runtime.GC()
		runtime.ReadMemStats(&atEnd)
	}}
	r := newTestReleaser(t, &memLedger{limit: 1000}, 71)
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan,
		Epsilon: 1, Delta: 1e-6, Mechanism: policy.MechanismLaplace, Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != k {
		t.Fatalf("premise: %d groups released, want %d", len(res.Rows), k)
	}
	held := int64(atEnd.HeapAlloc) - int64(before.HeapAlloc)
	if held > int64(MaxAnswerBytes) {
		t.Errorf("at the scan's end the proxy holds %d MB for %d kept groups (%d block levels × %d measures each), "+
			"over the %d MiB an answer may hold (this answer's bound: %d MB); only each group's chosen level is read after the scan",
			held>>20, k, len(plan.SampleAgg.Levels), len(plan.Measures), MaxAnswerBytes>>20, answerBytes>>20)
	}
}

// TestReview71_FirstKNoteNamesTheBindingBound: when more groups pass the
// selection than an answer holds, the NOTICE says the answer holds "the
// first K by key (at most 60000 noisy cells an answer)". Since 2759666
// K = dpplan.MaxSelectedGroups is also bounded by 16 MiB of answer at
// 1 KiB a private key (and by a post-processing leaf's GroupsCap), and
// for the commonest query, a COUNT by one private key, that bound is the
// one that applies: K = 12,945 where 60,000 cells would hold 30,000
// groups. The NOTICE (and docs/SQL.md, "as many selected groups as fit
// 60,000 noisy cells") give the analyst a reason that is not the one.
//
// Severity low (text). Fix: say "at most K groups an answer (60,000
// noisy cells, 16 MiB of answer)" or name the bound that applies
// (pass the plan to firstKNote).
func TestReview71_FirstKNoteNamesTheBindingBound(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.Rewrite(ds, "SELECT diagnosis, COUNT(*) FROM visits GROUP BY diagnosis")
	if err != nil {
		t.Fatal(err)
	}
	k := dpplan.MaxSelectedGroups(plan)
	byCells := dpplan.MaxAnswerCells / dpplan.CellWeight(plan)
	if !plan.PrivateGroups() || k >= byCells {
		t.Fatalf("premise: %d groups an answer, %d by cells", k, byCells)
	}
	note := firstKNote(k+1, k)
	if strings.Contains(note, fmt.Sprintf("at most %d noisy cells", dpplan.MaxAnswerCells)) && !strings.Contains(note, "MiB") {
		t.Errorf("note %q gives 60,000 cells as the reason the answer holds %d groups; cells would allow %d, the 16 MiB answer bound is what applies", note, k, byCells)
	}
}

// TestReview71_PrivateKeyQuantilesPastTheCellBound: fitQuantileGrids
// (rewrite/quantile.go) coarsens a private key's quantile grids so that
// 128 groups fit 60,000 cells, but when that would take a grid below 64
// buckets it returns unfitted, "refused before the charge (release
// checkAnswerCells)" — and checkAnswerCells returns nil for every plan with
// a private key. dpplan.MaxSelectedGroups is then max(1, 60,000/weight) =
// 1: one kept group is measured at the full weight, here 99 medians-like
// quantiles of cost over 16,384 buckets each (≈147,000 cells, 2.5 times
// the bound the cap exists for; attack round 64: 600 such medians took
// 8.5 s of proxy CPU after the charge). SECURITY.md: "a private key's
// quantile grids are coarsened so that at least 128 groups fit" and
// "Their number is capped like an answer over public keys".
//
// Severity medium (proxy CPU after the charge, outside the slot, with the
// grid a query chooses; one group is enough). Fix: in checkAnswerCells
// refuse a private-key plan whose CellWeight exceeds MaxAnswerCells
// (or MaxAnswerCells/privateQuantileGroups), i.e. apply to one group what
// the public path applies to its groups; and drop MaxSelectedGroups'
// max(1, …) floor for such a plan.
func TestReview71_PrivateKeyQuantilesPastTheCellBound(t *testing.T) {
	ds := loadPolicy(t)
	var cols []string
	for i := 1; i <= 99; i++ {
		cols = append(cols, fmt.Sprintf("percentile_cont(%g) WITHIN GROUP (ORDER BY cost)", float64(i)/100))
	}
	plan, err := rewrite.Rewrite(ds, "SELECT diagnosis, "+strings.Join(cols, ", ")+" FROM visits GROUP BY diagnosis")
	if err != nil {
		t.Fatalf("premise: %v", err)
	}
	if !plan.PrivateGroups() {
		t.Fatal("premise: a private key")
	}
	err = Check(Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Delta: 1e-6, Mechanism: policy.MechanismLaplace, Upstream: &fakeUpstream{}})
	if pe, ok := pgerr.As(err); err != nil && (!ok || pe.Code == pgerr.InternalError) {
		t.Fatalf("premise: %v", err)
	}
	if err != nil {
		return // refused before the charge: the safe behaviour
	}
	if cells := dpplan.MaxSelectedGroups(plan) * dpplan.CellWeight(plan); cells > dpplan.MaxAnswerCells {
		t.Errorf("accepted before the charge: an answer of up to %d group(s) × %d cells a group (%d quantile grids) = %d noisy cells, over dpplan.MaxAnswerCells = %d",
			dpplan.MaxSelectedGroups(plan), dpplan.CellWeight(plan), len(plan.Measures), cells, dpplan.MaxAnswerCells)
	}
}
