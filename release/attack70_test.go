package release

// Attack round 70: partition selection's cap on selected groups
// (dpplan.MaxSelectedGroups) and the candidates' work (dpplan.Work.Candidates).

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// a70Values are key texts of type typ as the emitted SQL releases them
// (pgemit keyValueSQL: trim_scale'd numerics, float x + 0, lower'd citext),
// including the special values PostgreSQL prints.
func a70Value(rng *rand.Rand, typ policy.Type) string {
	switch typ {
	case policy.TypeInt:
		return fmt.Sprint(rng.IntN(401) - 200)
	case policy.TypeNumeric:
		special := []string{"NaN", "Infinity", "-Infinity", "0", "-0.5", "0.5", "100", "-100", "1e5"}
		if rng.IntN(3) == 0 {
			return special[rng.IntN(len(special))]
		}
		return fmt.Sprintf("%d.%d", rng.IntN(41)-20, rng.IntN(10))
	case policy.TypeFloat:
		special := []string{"NaN", "Infinity", "-Infinity", "0", "1e+100", "-1e+100", "1.5e-05", "-1.5e-05", "3"}
		if rng.IntN(3) == 0 {
			return special[rng.IntN(len(special))]
		}
		return fmt.Sprint(float64(rng.IntN(401)-200) / 8)
	case policy.TypeDate:
		special := []string{"infinity", "-infinity", "0044-03-15 BC", "10000-01-01"}
		if rng.IntN(4) == 0 {
			return special[rng.IntN(len(special))]
		}
		return fmt.Sprintf("20%02d-%02d-%02d", rng.IntN(30), 1+rng.IntN(12), 1+rng.IntN(28))
	default:
		alpha := []string{"a", "B", "b", "é", "", " ", "-", "1", "Z", "\u00a0"}
		n := rng.IntN(4)
		var sb strings.Builder
		for i := 0; i < n; i++ {
			sb.WriteString(alpha[rng.IntN(len(alpha))])
		}
		return sb.String()
	}
}

// a70Selection is a selection that keeps a candidate with many units and
// drops one of one unit (each with probability 1 − e^{−10⁸}, Laplace of
// scale 1): which candidates pass is fixed by the data, whatever the
// order they arrive in.
func a70Selection(t testing.TB, seed uint64) *selection {
	mech, err := noise.NewLaplace(noise.Params{Epsilon: 1, Sensitivity: 1, Integer: true, Cells: 1, Rand: rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 70})})
	if err != nil {
		t.Fatal(err)
	}
	return &selection{mech: mech, threshold: big.NewRat(100_000_000, 1), delta: 1e-6, l0: 1}
}

// TestAttack70_LessKeysStrictTotalOrder: lessKeys is a strict total order
// on canonical key tuples of every type, special values included
// (NaN, ±Infinity, BC dates, 1e5 beside 100000): irreflexive, total on
// distinct tuples, transitive. A guard (it passes): the cap's "first K by
// key" is well defined only if it holds.
func TestAttack70_LessKeysStrictTotalOrder(t *testing.T) {
	types := []policy.Type{policy.TypeInt, policy.TypeNumeric, policy.TypeFloat, policy.TypeDate, policy.TypeText}
	rng := rand.New(rand.NewPCG(70, 1))
	for trial := 0; trial < 50; trial++ {
		nk := 1 + rng.IntN(3)
		keys := make([]dpplan.Key, nk)
		for i := range keys {
			keys[i] = dpplan.Key{Column: fmt.Sprint("k", i), Type: types[rng.IntN(len(types))], Private: true}
		}
		seen := map[string]bool{}
		var tuples [][]string
		for tries := 0; len(tuples) < 40 && tries < 10000; tries++ {
			tup := make([]string, nk)
			for i, k := range keys {
				tup[i] = canonicalKey(k.Type, a70Value(rng, k.Type))
			}
			if id := strings.Join(tup, "\x00"); !seen[id] {
				seen[id] = true
				tuples = append(tuples, tup)
			}
		}
		for _, a := range tuples {
			if lessKeys(keys, a, a) {
				t.Fatalf("%v: %q < itself", keys, a)
			}
			for _, b := range tuples {
				ab, ba := lessKeys(keys, a, b), lessKeys(keys, b, a)
				if strings.Join(a, "\x00") != strings.Join(b, "\x00") && ab == ba {
					t.Fatalf("%v: %q and %q: a<b %v, b<a %v", keys, a, b, ab, ba)
				}
				if !ab {
					continue
				}
				for _, c := range tuples {
					if lessKeys(keys, b, c) && !lessKeys(keys, a, c) {
						t.Fatalf("%v: not transitive: %q < %q < %q", keys, a, b, c)
					}
				}
			}
		}
	}
}

// TestAttack70_GroupSelectorOrderIndependent: the groups the selector
// keeps are the first limit selected groups by key — sort-then-take —
// whatever order the candidates arrive in (random orders, ties in value
// such as 100 and 1e5's neighbours, limits from 1 to past the selected
// count, candidates that fail interleaved). A guard (it passes).
func TestAttack70_GroupSelectorOrderIndependent(t *testing.T) {
	types := []policy.Type{policy.TypeInt, policy.TypeNumeric, policy.TypeFloat, policy.TypeDate, policy.TypeText}
	rng := rand.New(rand.NewPCG(70, 2))
	for trial := 0; trial < 300; trial++ {
		nk := 1 + rng.IntN(3)
		plan := &dpplan.Plan{Measures: []dpplan.Measure{{Kind: dpplan.MeasureCount, Integer: true}}}
		for i := 0; i < nk; i++ {
			plan.Keys = append(plan.Keys, dpplan.Key{Column: fmt.Sprint("k", i), Type: types[rng.IntN(len(types))], Private: true})
		}
		seen := map[string]bool{}
		var rows [][]*string
		var passed [][]string
		for tries := 0; len(rows) < 60 && tries < 10000; tries++ {
			tup := make([]string, nk)
			canon := make([]string, nk)
			for i, k := range plan.Keys {
				tup[i] = a70Value(rng, k.Type)
				canon[i] = canonicalKey(k.Type, tup[i])
			}
			id := strings.Join(canon, "\x00")
			if seen[id] {
				continue
			}
			seen[id] = true
			units := "1"
			if rng.IntN(3) > 0 {
				units = "1000000000"
				passed = append(passed, canon)
			}
			row := []*string{}
			for i := range tup {
				row = append(row, s(tup[i]))
			}
			rows = append(rows, append(row, s("7"), s(units)))
		}
		sort.Slice(passed, func(a, b int) bool { return lessKeys(plan.Keys, passed[a], passed[b]) })
		limit := 1 + rng.IntN(len(passed)+3)
		want := passed[:min(limit, len(passed))]
		for order := 0; order < 5; order++ {
			rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
			gs := newGroupSelector(plan, a70Selection(t, uint64(trial*10+order)))
			gs.first.limit = limit
			for _, r := range rows {
				if err := gs.add(r); err != nil {
					t.Fatal(err)
				}
			}
			got, _, _, err := gs.result()
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("trial %d order %d, keys %v, limit %d:\n got  %q\n want %q", trial, order, plan.Keys, limit, got, want)
			}
			if gs.first.passed != len(passed) {
				t.Fatalf("passed %d, want %d", gs.first.passed, len(passed))
			}
			if note := gs.note(); (note != "") != (len(passed) > limit) {
				t.Fatalf("note %q with %d passed, limit %d", note, len(passed), limit)
			}
		}
	}
}

// TestAttack70_SampleAggPrivateKeyHoldsFirstGroups: sample-and-aggregate
// (corr) by a private key should hold at most dpplan.MaxSelectedGroups
// selected groups, the first by key, like every other plan with a private
// key (SECURITY.md "Groups of a private key": "Their number is capped like
// an answer over public keys"; EXPLAIN's groups line says so). Here a key
// and 999 corr columns weigh 1,000 cells a group, so 60 groups; 100 groups
// of 40,000 units each pass (each dropped with probability < e^{−1000}).
//
// FAILS on ce38aa4: executeSampleAgg has no cap (neither its streamed
// groupReader path nor its Query path), so all 100 groups' 999 columns are
// noised and released after the charge: the selected groups' CPU and
// memory are bounded by nothing public. Severity medium (proxy CPU/memory
// after the charge, outside the slot; the claim in SECURITY.md is wrong
// for sample-and-aggregate). Fix: keep the first MaxSelectedGroups released
// groups by key in executeSampleAgg's release callback (the same heap
// as groupSelector, evicting the largest key; draw a group's statistics'
// noise only after the scan, for kept groups), count the passed ones and
// add the same note to the NOTICE.
func TestAttack70_SampleAggPrivateKeyHoldsFirstGroups(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.Rewrite(ds, "SELECT diagnosis"+strings.Repeat(", corr(cost, age)", 999)+" FROM visits GROUP BY diagnosis")
	if err != nil {
		t.Fatal(err)
	}
	limit := dpplan.MaxSelectedGroups(plan)
	if !plan.PrivateGroups() || plan.SampleAgg == nil || limit != 60 {
		t.Fatalf("premise: private %v, sample-and-aggregate %v, %d groups an answer", plan.PrivateGroups(), plan.SampleAgg != nil, limit)
	}
	var names []string
	for i := 0; i < 100; i++ {
		names = append(names, fmt.Sprintf("D%03d", (i*37)%100))
	}
	for _, streamed := range []bool{false, true} {
		var up Upstream = &fakeUpstream{rows: saGroupRows(plan, names, 0.4, 40000)}
		if streamed {
			// The streamed path reads groups in key order (the SQL's ORDER BY).
			sorted := append([]string(nil), names...)
			sort.Strings(sorted)
			up = &streamingUpstream{fakeUpstream: fakeUpstream{rows: saGroupRows(plan, sorted, 0.4, 40000)}}
		}
		res, err := newTestReleaser(t, &memLedger{limit: 1000}, 70).Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan,
			Epsilon: 1, Delta: 1e-6, Mechanism: policy.MechanismLaplace, Upstream: up})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Rows) > limit {
			t.Errorf("streamed %v: %d selected groups released (%d answer cells), want at most dpplan.MaxSelectedGroups = %d, the first by key",
				streamed, len(res.Rows), len(res.Rows)*(len(res.Columns)-1), limit)
		}
	}
}

// a70SampleAggRows are n candidate groups of a sample-and-aggregate plan,
// units units each, every block level present (as a group with a unit
// has), in key order.
func a70SampleAggRows(plan *rewrite.Plan, n, units int) [][]*string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("code-%07d", i)
	}
	return saGroupRows(plan, names, 0.4, units)
}

// BenchmarkAttack70_SampleAggCandidates: the proxy's CPU per candidate
// group of a private-key sample-and-aggregate (one row per block level
// each), none selected (one unit each) and all selected, against
// dpplan.CandidateCost. Production noise (crypto/rand), streamed.
func BenchmarkAttack70_SampleAggCandidates(b *testing.B) {
	t := &testing.T{}
	ds := loadPolicy(t)
	for _, q := range []struct{ name, sql string }{
		{"corr", "SELECT diagnosis, corr(cost, age) FROM visits GROUP BY diagnosis"},
		{"corr6", "SELECT diagnosis, corr(cost, age), corr(age, length_of_stay), corr(cost, length_of_stay), regr_r2(cost, age), regr_r2(age, length_of_stay), regr_r2(cost, length_of_stay) FROM visits GROUP BY diagnosis"},
	} {
		plan, err := rewrite.Rewrite(ds, q.sql)
		if err != nil {
			b.Fatal(err)
		}
		for _, units := range []int{1, 40000} {
			const n = 20_000
			rows := a70SampleAggRows(plan, n, units)
			b.Run(fmt.Sprintf("%s/units=%d/levels=%d/measures=%d", q.name, units, len(plan.SampleAgg.Levels), len(plan.Measures)), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					r := newTestReleaser(t, &memLedger{limit: 1000}, uint64(i+1))
					r.testOnlyRand = nil
					res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Delta: 1e-6,
						Mechanism: policy.MechanismLaplace, Upstream: &streamingUpstream{fakeUpstream: fakeUpstream{rows: rows}}})
					if err != nil {
						b.Fatal(err)
					}
					if (units == 1) != (len(res.Rows) == 0) {
						b.Fatalf("%d groups released", len(res.Rows))
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/candidate")
			})
		}
	}
}

// TestAttack70_SampleAggCandidateRowsCounted: the slot counts a private
// key's candidates at dpplan.CandidateCost each, one per row of the scan
// (Work.Candidates), a cost measured on GROUP BY's one row per candidate.
// Sample-and-aggregate by a private key hands the proxy one row per block
// level per candidate (12 levels here), each with its statistics' sums
// to parse, then the count's noise: on a table of 1,000 declared rows,
// 1,000 one-unit candidates (a key with a value per row, e.g. GROUP BY
// cost) make 12,000 rows in the proxy against 1,000 counted.
// BenchmarkAttack70_SampleAggCandidates measures 22.5 µs a candidate for
// one corr and 78 µs for six (BenchmarkPartitionSelection_Candidates:
// 3.9 µs, same machine and load), 6–20 times CandidateCost: at the demo's
// 250,000 declared visits, 1 s counted against 5.6–19.6 s of proxy CPU.
//
// FAILS on ce38aa4. Severity medium: the answer overruns its slot by a
// data-dependent amount (how many distinct values the private key takes;
// the release time's doubling shows it, ε = ∞ for that coarse count), and
// can reach statement_timeout after the charge — what 89904d4 fixed for
// GROUP BY. Fix: for a SampleAgg plan with private keys weigh each
// candidate by its rows, e.g. Work.Candidates = rows · L and a per-row cost
// measured with the statistics' parse (or a CandidateCost that grows with
// L·(1+m)), and measure it in a benchmark like this one.
func TestAttack70_SampleAggCandidateRowsCounted(t *testing.T) {
	ds := loadPolicy(t)
	for _, tb := range ds.Tables {
		tb.MaxRows = 1000
	}
	plan, err := rewrite.Rewrite(ds, "SELECT diagnosis, corr(cost, age) FROM visits GROUP BY diagnosis")
	if err != nil {
		t.Fatal(err)
	}
	if plan.SampleAgg == nil || !plan.PrivateGroups() || plan.Work.Candidates < 1000 {
		t.Fatalf("premise: work %+v", plan.Work)
	}
	up := &streamingUpstream{fakeUpstream: fakeUpstream{rows: a70SampleAggRows(plan, 1000, 1)}}
	if _, err := newTestReleaser(t, &memLedger{limit: 1000}, 70).Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan,
		Epsilon: 1, Delta: 1e-6, Mechanism: policy.MechanismLaplace, Upstream: up}); err != nil {
		t.Fatal(err)
	}
	if int64(up.streamed) > plan.Work.Candidates {
		t.Errorf("1,000 candidates: the proxy read %d rows (%d block levels each), the slot counted %d candidates at %v, one row each",
			up.streamed, len(plan.SampleAgg.Levels), plan.Work.Candidates, dpplan.CandidateCost)
	}
}

// BenchmarkAttack70_SortKept: result()'s sort and the heap compare keys
// with lessKeys, which parses both numbers with big.Rat on every
// comparison: 60,000 selected candidates of a numeric key (a COUNT(*) by
// it: 30,000 kept), d digits each. Measured on the 2-core machine under
// CI load: 12 µs a candidate at 8 digits (ascending) and 15 µs
// (descending), 43 µs at 100 digits, 288 µs at 1,000 (17 s), against
// CandidateCost's 4 µs (BenchmarkPartitionSelection_Candidates: 3.9 µs,
// none selected). Severity low (needs tens of thousands of selected
// groups, and long numbers in the data for the worst figures). Fix:
// parse a kept group's numeric keys once (keep []*big.Rat, or a sortable
// encoding, beside gs.groups) and compare those; measure CandidateCost
// with every candidate selected.
func BenchmarkAttack70_SortKept(b *testing.B) {
	for _, c := range []struct {
		digits int
		desc   bool
	}{{8, false}, {8, true}, {100, true}, {1000, true}} {
		digits := c.digits
		b.Run(fmt.Sprint("digits=", digits, "/descending=", c.desc), func(b *testing.B) {
			plan := &dpplan.Plan{Keys: []dpplan.Key{{Column: "k", Type: policy.TypeNumeric, Private: true}}, Measures: []dpplan.Measure{{Kind: dpplan.MeasureCount, Integer: true}}}
			rng := rand.New(rand.NewPCG(70, 3))
			rows := make([][]*string, 60_000)
			for i := range rows {
				var sb strings.Builder
				sb.WriteString(fmt.Sprint(100_000 + i)) // unique
				for j := 6; j < digits; j++ {
					sb.WriteByte(byte('0' + rng.IntN(10)))
				}
				rows[i] = []*string{s(sb.String()), s("7"), s("1000000000")}
			}
			// Descending: every candidate after the first 30,000 replaces the top.
			sort.Slice(rows, func(i, j int) bool { return (*rows[i][0] > *rows[j][0]) == c.desc })
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				gs := newGroupSelector(plan, a70Selection(b, uint64(i)))
				gs.first.limit = 30_000
				for _, r := range rows {
					if err := gs.add(r); err != nil {
						b.Fatal(err)
					}
				}
				gs.result()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/60_000, "ns/candidate")
		})
	}
}
