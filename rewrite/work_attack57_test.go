package rewrite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// TestAttack57_FilterAndCaseKeyWorkUncounted (attack round 57, severity
// medium: the time slot of an accepted query is 27–52 times too short, and
// an accepted query reaches the upstream statement_timeout after its
// charge, which SECURITY.md ("Time", "Refused before the charge") says
// cannot happen "however its data is made").
//
// The work bound weighs every row by the plan's RowOps (dpplan/work.go
// WorkOf: rows × (1 + RowOps/16)), and rewrite/build.go sets
//
//	p.RowOps = dpplan.PredWork(b.where) + b.rowOps
//
// — the WHERE clause, which is also capped at maxWhereWork (1,024 units,
// 54001 beyond), plus the arithmetic and CASE conditions inside the
// aggregates' values (ValueOps, capped at 64). Two other places plan
// WHERE-style conditions that PostgreSQL evaluates on every row of the
// scan, and neither is counted nor capped:
//
//   - an aggregate's FILTER (WHERE cond) (rewrite/filter.go aggFilter →
//     b.pred; the emitter writes CASE WHEN cond THEN value END per row);
//   - a CASE bucket group key's WHEN conditions (rewrite/casekey.go
//     planCaseKey → b.pred), evaluated per row (twice: the CASE is
//     emitted twice in the SQL).
//
// Their only limit is the 64 KiB text, which holds 200 ILIKEs of
// 248-character patterns (3,300 units, three times the WHERE cap). With
// the example policy (visits: max_rows 250,000; work_rate 500,000 rows/s)
// the same 200 ILIKEs in WHERE are refused (54001), 58 of them in WHERE
// get a 29.5 s work bound, and in FILTER or a CASE key they get RowOps 0:
// a work bound of 250,000 rows, 0.5 s, the first slot. Measured on the
// demo's 200,000 visits (PostgreSQL 15, this machine, loaded by a
// parallel mutation run; the emitted SQL run directly, fixed bounds):
//
//	SELECT COUNT(*) FROM visits                          56 ms   bound 0.5 s
//	… WHERE <58 ILIKEs>                                 3.2 s   bound 29.5 s
//	SELECT COUNT(*) FILTER (WHERE <200 ILIKEs>) …      13.7 s   bound 0.5 s
//	SELECT CASE WHEN <200 ILIKEs> THEN 'x' ELSE 'y'
//	  END AS k, COUNT(*) FROM visits GROUP BY 1        26.0 s   bound 0.5 s
//
// So the answer lands at the 32nd or 64th multiple of the slot (its step on
// the ladder shows the data's work: which rows end the OR chain early,
// how long their texts are), and at the declared 250,000 rows the CASE
// shape passes the 30 s statement_timeout after the charge: an incident
// (one bit and the breaker) or, under another analyst's load, a free
// 57014. Per person, the rows they add each cost the uncounted work
// (0.07–0.13 ms here, 4–8 times what the WHERE cap allows a row).
//
// In a unit self-join the condition runs on every joined row: 150 such
// ILIKEs in a FILTER over visits ⋈ visits get RowOps 0 and the join's own
// bound (5.5 million rows, an 11 s slot), on up to 20 joined rows a visit.
//
// The test is deterministic (no timing): with the same condition C,
// FILTER (WHERE C) and a CASE key over C must each be either refused, as C
// is in WHERE, or carry a work bound that weighs every row by C's work.
//
// Suggested fix: count every planned condition in RowOps — add PredWork of
// each measure's Filter and of each CASE key's WHEN conditions (twice for
// the CASE while it is emitted twice) in build.go — and apply
// maxWhereWork to the total per-row predicate work of the plan (WHERE,
// FILTERs and CASE keys together), not to the WHERE clause alone.
func TestAttack57_FilterAndCaseKeyWorkUncounted(t *testing.T) {
	ds, err := policy.Load("../examples/policies/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	visits, ok := ds.Table("visits")
	if !ok || visits.MaxRows == 0 {
		t.Fatal("the example policy's visits declare no max_rows")
	}
	// 200 ILIKEs of 248-character patterns, none of which any demo
	// diagnosis matches (each is a distinct pattern).
	var ors []string
	for i := 0; i < 200; i++ {
		ors = append(ors, fmt.Sprintf("diagnosis ILIKE '%%%s%c%c%%'", strings.Repeat("q", 244), 'a'+i%26, 'a'+i/26))
	}
	cond := strings.Join(ors, " OR ")

	// The control: C in WHERE is refused before any charge (54001).
	if _, err := RewriteWith(ds, "SELECT COUNT(*) FROM visits WHERE "+cond, Options{}); err == nil {
		t.Fatal("control: 200 ILIKEs of 248 characters in WHERE were accepted; the WHERE cap (maxWhereWork) no longer holds")
	}
	// C's work per row, as PredWork counts it (an OR adds nothing to its
	// sides; each pattern is 248 characters).
	work := 200 * dpplan.PredWork(dpplan.PredLike{Col: "diagnosis", Pattern: strings.Repeat("q", 248), ILike: true})
	if work < 200*16 {
		t.Fatalf("PredWork of 200 ILIKEs of 248 characters is %d, want at least %d", work, 200*16)
	}
	// The least bound a plan needs to count C on every row its scan
	// evaluates it on: the rows of the same plan without C, times C's
	// weight (work/16; WorkOf weighs a row 1 + RowOps/16).
	base := func(q string) float64 {
		t.Helper()
		p, err := RewriteWith(ds, q, Options{})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return float64(p.Work.Rows)
	}
	one := base("SELECT COUNT(*) FROM visits")
	self := base("SELECT COUNT(*) FROM visits v1 JOIN visits v2 ON v1.patient_id = v2.patient_id")
	// 150 of the ILIKEs, on the second table of the join (the text stays
	// under 64 KiB).
	selfCond := strings.ReplaceAll(strings.Join(ors[:150], " OR "), "diagnosis", "v2.diagnosis")
	selfWork := 150 * work / 200

	for _, c := range []struct {
		name string
		q    string
		want float64
		work int
	}{
		{"FILTER", "SELECT COUNT(*) FILTER (WHERE " + cond + ") FROM visits", one * float64(work) / 16, work},
		{"CASE key", "SELECT CASE WHEN " + cond + " THEN 'x' ELSE 'y' END AS k, COUNT(*) FROM visits GROUP BY 1", one * float64(work) / 16, work},
		// In a unit self-join C runs on every joined row (up to 20 per
		// visit with the example's limits).
		{"FILTER in a unit self-join", "SELECT COUNT(*) FILTER (WHERE " + selfCond + ") FROM visits v1 JOIN visits v2 ON v1.patient_id = v2.patient_id", self * float64(selfWork) / 16, selfWork},
	} {
		if len(c.q) > 64<<10 {
			t.Fatalf("%s: %d bytes, over CheckText's 64 KiB", c.name, len(c.q))
		}
		p, err := RewriteWith(ds, c.q, Options{})
		if err != nil {
			continue // refused before the charge, as in WHERE: fixed
		}
		if float64(p.Work.Rows) < c.want {
			t.Errorf("%s over ILIKEs of 248 characters (%d units a row; 200 of them in WHERE are refused): accepted with RowOps %d and a work bound of %d rows in %d scan(s) (%.1f s at the example's 500,000 rows/s), want at least %.0f rows: the time slot is fixed too short and the query can reach the statement_timeout after its charge (measured on 200,000 demo visits against a 0.5 s slot: 13.7 s for the FILTER, 26 s for the CASE key)",
				c.name, c.work, p.RowOps, p.Work.Rows, p.Work.Scans, float64(p.Work.Rows)/5e5, c.want)
		}
	}
}
