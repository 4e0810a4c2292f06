package pgemit

import (
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// TestCheckInputs: what the emitter pastes into the SQL as it stands must
// be a constant, a quoted column of the table or a word of a closed set.
func TestCheckInputs(t *testing.T) {
	t.Parallel()
	tb := &policy.Table{Name: "visits", Schema: "public", UnitColumn: "patient_id", Columns: map[string]*policy.Column{
		"age": {Name: "age", Type: policy.TypeInt}, "dept": {Name: "dept", Type: policy.TypeText}, "o\"dd": {Name: "o\"dd", Type: policy.TypeText}}}
	sub := `(SELECT COUNT(*) FROM "public"."visits")`
	ok := []dpplan.Pred{
		dpplan.PredCmp{Col: `"age"`, Op: ">=", Lit: "(-1.5e3)"},
		dpplan.PredCmp{Col: `'a'::text`, Op: "=", Lit: `'b'::text`},
		dpplan.PredIn{Col: `"dept"`, Lits: []string{`'x''y'`, `E'a\\b'`, "NULL"}},
		dpplan.PredBetween{Col: `"o""dd"`, Lo: `'2020-01-01'::date`, Hi: `'2021-01-01'::date`},
		dpplan.PredBool{Op: "AND", L: dpplan.PredNull{Col: `"patient_id"`}, R: dpplan.PredNot{X: dpplan.PredConst{V: "TRUE"}}},
		dpplan.PredLike{Col: `"dept"`, Pattern: `'%card%'`},
	}
	bad := []dpplan.Pred{
		dpplan.PredCmp{Col: `"age"`, Op: ">", Lit: sub},
		dpplan.PredCmp{Col: `"age"`, Op: ">", Lit: "(1) OR TRUE"},
		dpplan.PredCmp{Col: `"salary"`, Op: ">", Lit: "(1)"},
		dpplan.PredCmp{Col: `"age"`, Op: "> (SELECT 1) AND 1 >", Lit: "(1)"},
		dpplan.PredIn{Col: `"dept"`, Lits: []string{`'a' || (SELECT 'b')`}},
		dpplan.PredLike{Col: `"dept"`, Pattern: `'%' || 'x'`},
		dpplan.PredConst{V: "random() < 0.5"},
		dpplan.PredBool{Op: "AND NOT", L: dpplan.PredConst{V: "TRUE"}, R: dpplan.PredConst{V: "TRUE"}},
		dpplan.PredCmp{Col: `"age"`, Op: "=", Lit: `E'\''`},
	}
	for _, p := range ok {
		if err := CheckInputs(tb, &dpplan.Plan{}, p); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	for _, p := range bad {
		if err := CheckInputs(tb, &dpplan.Plan{}, p); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	caseKey := func(sql string) *dpplan.Plan {
		return &dpplan.Plan{Keys: []dpplan.Key{{Column: "age", Func: "case", Args: []string{sql}}}}
	}
	if err := CheckInputs(tb, caseKey(`CASE WHEN ("age" < (18)) THEN 'child'::text ELSE 'adult'::text END`), nil); err != nil {
		t.Errorf("CASE key: %v", err)
	}
	for _, k := range []string{`CASE WHEN (SELECT 1) = 1 THEN 'a'::text END`, `CASE WHEN "salary" > (1) THEN 'a'::text END`,
		`CASE WHEN random() > (1) THEN 'a'::text END`, `(CASE WHEN "age" > (1) THEN 'a'::text END)`} {
		if err := CheckInputs(tb, caseKey(k), nil); err == nil {
			t.Errorf("CASE key %q accepted", k)
		}
	}
	v := &dpplan.Value{Op: dpplan.ValMul, Args: []*dpplan.Value{{Op: dpplan.ValCol, Col: "age", Lo: "0", Hi: "120"}, {Op: dpplan.ValConst, Num: "1.5"}}}
	if err := CheckInputs(tb, &dpplan.Plan{Measures: []dpplan.Measure{{Expr: v}}}, nil); err != nil {
		t.Errorf("row value: %v", err)
	}
	for _, bv := range []*dpplan.Value{{Op: dpplan.ValConst, Num: "1) + (SELECT 2"}, {Op: "pow", Args: []*dpplan.Value{v, v}}, {Op: dpplan.ValCol, Col: "salary", Lo: "0", Hi: "1"}} {
		if err := CheckInputs(tb, &dpplan.Plan{Measures: []dpplan.Measure{{Expr: bv}}}, nil); err == nil {
			t.Errorf("row value %s accepted", bv)
		}
	}
	for _, s := range []dpplan.SampleCall{{Fn: "corr(1,1) + corr", Y: "age", X: "age"}, {Fn: "corr", Y: "age", X: "salary"}, {Fn: "percentile_cont", Y: "age", X: "age"}} {
		if err := CheckInputs(tb, &dpplan.Plan{SampleAgg: &dpplan.SampleAgg{Calls: []dpplan.SampleCall{s}}}, nil); err == nil {
			t.Errorf("statistic %+v accepted", s)
		}
	}
}
