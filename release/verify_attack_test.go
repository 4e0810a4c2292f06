package release

// Plans an attack review built (issue 28) that verify.go accepted
// although their SQL released more than the charge. Each tampers a plan
// the way a planner bug could build it, re-emits the SQL with pgemit (so
// it is "what the emitter writes for the plan"), and expects release to
// refuse it: pgemit.CheckInputs now allows only constants, the table's
// quoted columns and closed sets of words where the emitter pastes plan
// data, and verify.go refuses quantiles with automatic bounds.

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// otherUnits is a scalar subquery over the whole protected table: a row
// predicate or key that reads it depends on every unit's rows, so one
// unit can flip every row's filter or group (sensitivity unbounded).
func otherUnits(t *policy.Table) string {
	return "(SELECT COUNT(*) FROM " + pgemit.QuoteIdent(t.Schema) + "." + pgemit.QuoteIdent(t.Name) + ")"
}

func mustRefuse(t *testing.T, ds *policy.Dataset, p *dpplan.Plan, what string) {
	t.Helper()
	if err := verifyPlan(ds, p); err == nil {
		t.Errorf("%s: verifyPlan accepted a plan whose SQL reads other units' rows:\n%.400s", what, p.SQL)
	}
	req := Request{Dataset: ds, Plan: p, Epsilon: 1, Delta: 1e-6, Mechanism: policy.MechanismLaplace, Upstream: noUpstream{}}
	if _, err := (&Releaser{}).calibrate(req); err == nil {
		t.Errorf("%s: calibrate accepted it too: Run would charge ε=1 and release it", what)
	}
}

// TestVerify_RefusesWhereSubquery: the literal of a WHERE
// comparison is plan text (dpplan.PredCmp.Lit) that pgemit pastes as is;
// verify re-emits the same bytes. A planner bug in literal.go/pred.go
// that let a subquery through would make the filter of every row depend
// on the whole table.
func TestVerify_RefusesWhereSubquery(t *testing.T) {
	ds := loadPolicy(t)
	p, err := rewrite.RewriteWith(ds, "SELECT COUNT(*) FROM visits WHERE age > 30", rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := dpplan.SourceOf(p)
	cp := *p
	cp.Auto = nil
	where := dpplan.PredCmp{Col: pgemit.QuoteIdent("age"), Op: ">", Lit: otherUnits(tb) + " / 1000"}
	dpplan.SetSource(&cp, tb, where)
	cp.SQL = pgemit.SQL(tb, &cp, where)
	if !strings.Contains(cp.SQL, "SELECT COUNT(*) FROM") {
		t.Fatal("tamper did not reach the SQL")
	}
	mustRefuse(t, ds, &cp, "WHERE literal")
}

// TestVerify_RefusesCaseKeySubquery: a CASE group key is one raw
// SQL string (Key.Args[0], rewrite/casekey.go, pasted by pgemit keySQL).
// A key that reads the whole table moves every unit's rows between
// groups when one unit is added; GroupsAll/GroupsScale bounding assumes
// a unit's group is a function of its own row.
func TestVerify_RefusesCaseKeySubquery(t *testing.T) {
	ds := loadPolicy(t)
	p, err := rewrite.RewriteWith(ds, "SELECT CASE WHEN age < 18 THEN 'child' ELSE 'adult' END AS g, COUNT(*) FROM visits GROUP BY 1",
		rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	tb, where := dpplan.SourceOf(p)
	cp := *p
	cp.Auto = nil
	cp.Keys = append([]dpplan.Key(nil), p.Keys...)
	if cp.Keys[0].Func != "case" {
		t.Fatalf("key func %q", cp.Keys[0].Func)
	}
	k := cp.Keys[0]
	k.Args = []string{"(CASE WHEN " + otherUnits(tb) + " % 2 = 0 THEN 'child' ELSE 'adult' END)"}
	cp.Keys[0] = k
	cp.SQL = pgemit.SQL(tb, &cp, where)
	mustRefuse(t, ds, &cp, "CASE key")
}

// TestVerify_RefusesSampleCallText: SampleCall.Fn and Q are pasted
// raw into the per-block aggregate (pgemit.SampleAggSQL). A block answer
// that reads the whole table depends on units of every block, so one unit
// moves all k clipped answers: sensitivity k·(u − l), charged u − l.
func TestVerify_RefusesSampleCallText(t *testing.T) {
	ds := loadPolicy(t)
	p, err := rewrite.Rewrite(ds, "SELECT corr(cost, age) FROM visits")
	if err != nil || p.SampleAgg == nil {
		t.Fatalf("%v", err)
	}
	tb, where := dpplan.SourceOf(p)
	cp := *p
	sa := *p.SampleAgg
	sa.Calls = append([]dpplan.SampleCall(nil), p.SampleAgg.Calls...)
	sa.Calls[0].Fn = otherUnits(tb) + " + corr"
	cp.SampleAgg = &sa
	cp.SQL = pgemit.SampleAggSQL(tb, &cp, where)
	mustRefuse(t, ds, &cp, "sample-and-aggregate Fn")
}
