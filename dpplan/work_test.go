package dpplan

import (
	"slices"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// TestWorkOf: the work bound of each plan shape, by hand from the formula
// of work.go (declared rows, scans, join fan-outs), with no parser and no
// database.
func TestWorkOf(t *testing.T) {
	ds := &policy.Dataset{Tables: map[string]*policy.Table{
		"visits":   {Name: "visits", UnitColumn: "pid", MaxGroupsPerUnit: 1, MaxRowsPerUnit: 20, MaxRows: 250_000},
		"patients": {Name: "patients", UnitColumn: "pid", MaxGroupsPerUnit: 1, MaxRowsPerUnit: 1, MaxRows: 60_000},
		"labs":     {Name: "labs", UnitColumn: "pid", MaxGroupsPerUnit: 1, MaxRowsPerUnit: 2},
		"wards": {Name: "wards", Public: true, MaxRows: 500, Columns: map[string]*policy.Column{
			"ward_id": {Name: "ward_id", MaxRowsPerValue: 2},
			"wing":    {Name: "wing"},
		}},
	}}
	unit := func(tables ...string) *Join {
		j := &Join{Shape: JoinUnit, RowsPerUnit: make([]int, len(tables))}
		for k, n := range tables {
			jt := JoinTable{Name: n, Public: ds.Tables[n].Public}
			if k > 0 {
				jt.On = []JoinOn{{Table: 0, Column: "pid", Other: "pid"}}
				if jt.Public {
					jt.On = []JoinOn{{Table: 0, Column: "ward_id", Other: "ward_id"}}
				} else {
					t := ds.Tables[n]
					j.RowsPerUnit[k] = t.MaxGroupsPerUnit * t.MaxRowsPerUnit
				}
			}
			j.Tables = append(j.Tables, jt)
		}
		return j
	}
	// wards joined to visits, then a second public table (wards again, as a
	// lookup) joined to wards.wing, declared one row per value there.
	ds.Tables["wards"].Columns["wing"].MaxRowsPerValue = 1
	lookup := unit("visits", "wards")
	lookup.Tables = append(lookup.Tables, JoinTable{Name: "wards", Public: true, On: []JoinOn{{Table: 1, Column: "wing", Other: "wing"}}})
	lookupWing := &Join{Shape: JoinUnit, RowsPerUnit: []int{0, 0, 0}, Tables: []JoinTable{
		{Name: "visits"},
		{Name: "wards", Public: true, On: []JoinOn{{Table: 0, Column: "pid", Other: "ward_name"}}},
		{Name: "wards", Public: true, On: []JoinOn{{Table: 1, Column: "wing", Other: "wing"}}},
	}}
	for _, c := range []struct {
		name       string
		plan       *Plan
		rows       int64
		scans      int
		undeclared []string
	}{
		{"one table", &Plan{Table: "visits"}, 250_000, 1, nil},
		{"automatic bounds: two scans", &Plan{Table: "visits", Auto: &AutoBounds{}}, 500_000, 2, nil},
		{"automatic bounds and clipping: three", &Plan{Table: "visits", Auto: &AutoBounds{}, Clip: &AutoClip{}}, 750_000, 3, nil},
		{"undeclared table", &Plan{Table: "labs"}, 0, 1, []string{"labs"}},
		// Per-row work: 32 units of predicates weigh each row 1 + 32/16 = 3.
		{"a costly WHERE", &Plan{Table: "visits", RowOps: 32}, 750_000, 1, nil},
		// 250,000 + 60,000 read, each visit meets 1 patient row.
		{"visits ⋈ patients", &Plan{Table: "visits", Join: unit("visits", "patients")}, 560_000, 1, nil},
		// 2 × 250,000 read, each visit meets at most 20 of the same person.
		{"self-join", &Plan{Table: "visits", Join: unit("visits", "visits")}, 5_500_000, 1, nil},
		// A public table multiplies by its join column's max_rows_per_value.
		{"visits ⋈ wards", &Plan{Table: "visits", Join: unit("visits", "wards")}, 250_000 + 500 + 2*250_000, 1, nil},
		{"join with an undeclared table", &Plan{Table: "visits", Join: unit("visits", "labs")}, 0, 1, []string{"labs"}},
		// Each quantile weighs 1 + R/10 per row (R = 20: 3).
		{"two quantiles", &Plan{Table: "visits", Measures: []Measure{{Kind: MeasureQuantile}, {Kind: MeasureCount}, {Kind: MeasureQuantile}}}, 250_000 * 7, 1, nil},
		// A lookup joined to wards on another column does not bound
		// wards' rows per visit (attack round 60): wards.wing is joined
		// by the lookup, wards meets visits on ward_id (2 per value).
		{"visits ⋈ wards ⋈ lookup", &Plan{Table: "visits", Join: lookup}, 250_000 + 500 + 500 + 2*250_000, 1, nil},
		{"visits ⋈ wards on an undeclared column ⋈ lookup", &Plan{Table: "visits", Join: lookupWing}, 250_000 + 500 + 500 + 500*250_000, 1, nil},
	} {
		w := WorkOf(ds, c.plan)
		if w.Rows != c.rows || w.Scans != c.scans || !slices.Equal(w.Undeclared, c.undeclared) {
			t.Errorf("%s: %+v, want rows %d in %d scans, undeclared %v", c.name, w, c.rows, c.scans, c.undeclared)
		}
	}
	// A bound beyond int64 saturates instead of wrapping.
	huge := &policy.Dataset{Tables: map[string]*policy.Table{"t": {Name: "t", MaxRows: 1e15}}}
	if w := WorkOf(huge, &Plan{Table: "t", Auto: &AutoBounds{}, Clip: &AutoClip{}}); w.Rows != 3e15 {
		t.Errorf("3 scans of 1e15 rows: %d", w.Rows)
	}
	if w := WorkOf(huge, &Plan{Table: "t", Join: &Join{Shape: JoinUnit, Tables: []JoinTable{{Name: "t"}, {Name: "t"}, {Name: "t"}}, RowsPerUnit: []int{0, 1e6, 1e6}}}); w.Rows != maxWorkRows {
		t.Errorf("a fan-out of 10¹² over 10¹⁵ rows: %d, want the saturated %d", w.Rows, maxWorkRows)
	}
}

// TestWorkOf_Candidates: a plan with a private key (partition selection)
// bounds its candidate groups by one scan's rows, whatever its scans and
// per-row weights; a plan over public keys has none.
func TestWorkOf_Candidates(t *testing.T) {
	ds := &policy.Dataset{Tables: map[string]*policy.Table{
		"visits":   {Name: "visits", UnitColumn: "pid", MaxGroupsPerUnit: 4, MaxRowsPerUnit: 20, MaxRows: 250_000},
		"patients": {Name: "patients", UnitColumn: "pid", MaxGroupsPerUnit: 1, MaxRowsPerUnit: 1, MaxRows: 60_000},
	}}
	private := []Key{{Column: "diagnosis", Private: true}}
	public := []Key{{Column: "department", Domain: []string{"a", "b"}}}
	join := &Join{Shape: JoinUnit, RowsPerUnit: []int{0, 1}, Tables: []JoinTable{{Name: "visits"},
		{Name: "patients", On: []JoinOn{{Table: 0, Column: "pid", Other: "pid"}}}}}
	for _, c := range []struct {
		name       string
		plan       *Plan
		candidates int64
	}{
		{"public keys", &Plan{Table: "visits", Keys: public}, 0},
		{"no keys", &Plan{Table: "visits"}, 0},
		{"a private key", &Plan{Table: "visits", Keys: private}, 250_000},
		{"a private key and a public one", &Plan{Table: "visits", Keys: append(slices.Clone(public), private...)}, 250_000},
		// Automatic bounds and a costly WHERE scan more, but partition
		// selection reads one result.
		{"a private key, automatic bounds, a costly WHERE", &Plan{Table: "visits", Keys: private, Auto: &AutoBounds{}, RowOps: 32}, 250_000},
		// A join's groups come from its joined rows (one patient row per
		// visit) and what it reads.
		{"a private key over a join", &Plan{Table: "visits", Keys: private, Join: join}, 310_000 + 250_000},
		{"undeclared", &Plan{Table: "labs", Keys: private}, 0},
		// Sample-and-aggregate: a row per block level (12) each, one
		// statistic: 1 + 12·2/2 = 13 a candidate.
		{"sample-and-aggregate by a private key", &Plan{Table: "visits", Keys: private,
			SampleAgg: &SampleAgg{Levels: make([]int, 12), Calls: make([]SampleCall, 1)}}, 250_000 * 13},
	} {
		if w := WorkOf(ds, c.plan); w.Candidates != c.candidates {
			t.Errorf("%s: %d candidates, want %d (%+v)", c.name, w.Candidates, c.candidates, w)
		}
	}
}

// TestPredWork: a condition's per-row units.
func TestPredWork(t *testing.T) {
	like := PredLike{Col: "d", Pattern: string(make([]byte, 248))}
	for _, c := range []struct {
		p    Pred
		want int
	}{
		{nil, 0},
		{PredCmp{Col: "a", Op: "=", Lit: "1"}, 1},
		{PredIn{Col: "a", Lits: make([]string, 20)}, 1},
		{PredIn{Col: "a", Lits: make([]string, 20000)}, 21},
		{like, 16},
		{PredBool{Op: "OR", L: like, R: PredNot{X: PredNull{Col: "a"}}}, 17},
		{PredConst{V: "TRUE"}, 0},
	} {
		if got := PredWork(c.p); got != c.want {
			t.Errorf("PredWork(%#v) = %d, want %d", c.p, got, c.want)
		}
	}
}

// TestCondWork_FilterPerMeasure: the emitter writes an aggregate's FILTER
// as a CASE in each measure that carries it, and PostgreSQL evaluates each
// one on every row, so a variance's FILTER (three measures) costs three
// times its work. CondWork counts it per measure; RowOpsOf adds the values.
func TestCondWork_FilterPerMeasure(t *testing.T) {
	like := PredLike{Col: "diagnosis", Pattern: "%" + strings.Repeat("x", 160) + "%"}
	where := PredCmp{Col: "age", Op: ">", Lit: "3"}
	one := PredWork(like)
	p := &Plan{Measures: []Measure{
		{Kind: MeasureSum, Column: "cost", Filter: like},
		{Kind: MeasureCount, Column: "cost", Filter: like},
		{Kind: MeasureSumSq, Column: "cost", Filter: like},
		{Kind: MeasureCount},
	}}
	if got, want := CondWork(p, where), 1+3*one; got != want {
		t.Errorf("CondWork = %d, want the WHERE's 1 and the FILTER's %d three times: %d", got, one, want)
	}
	if got := RowOpsOf(p, where); got != CondWork(p, where) {
		t.Errorf("RowOpsOf = %d with no measure value, want CondWork's %d", got, CondWork(p, where))
	}
	p.Measures[0].Expr = op(ValMul, cost(), age())
	if got, want := RowOpsOf(p, where), CondWork(p, where)+MeasureValueOps(p.Measures[0]); got != want {
		t.Errorf("RowOpsOf = %d, want CondWork plus the value's %d: %d", got, MeasureValueOps(p.Measures[0]), want)
	}
}
