package rewrite

import (
	"fmt"
	"strings"
	"testing"
)

// TestRegrFromSums: regr_slope and regr_intercept are planned from five
// shared sums (no sample-and-aggregate), typed float8 as PostgreSQL types
// them.
func TestRegrFromSums(t *testing.T) {
	ds := loadHospital(t)
	const q = "SELECT department, regr_slope(cost, age), regr_intercept(cost, age) AS b0 FROM visits GROUP BY department"
	p, err := RewriteWith(ds, q, Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.SampleAgg != nil {
		t.Fatal("planned as sample-and-aggregate")
	}
	var names []string
	for _, o := range p.Outputs {
		names = append(names, o.Name+":"+o.PGType)
	}
	if got := strings.Join(names, ","); got != "department:text,regr_slope:float8,b0:float8" {
		t.Errorf("outputs %s", got)
	}
	var exprs []string
	for _, m := range p.Measures {
		e := fmt.Sprint(m.Kind)
		if m.Expr != nil {
			e += "(" + m.Expr.String() + ")"
		} else if m.Column != "" {
			e += "(" + m.Column + ")"
		}
		if m.Filter == nil {
			t.Errorf("measure %s has no filter: want x IS NOT NULL AND y IS NOT NULL", e)
		}
		exprs = append(exprs, e)
	}
	if len(p.Measures) != 5 {
		t.Errorf("%d measures %v, want the five shared sums n, Sx, Sy, Sxy, Sxx", len(p.Measures), exprs)
	}
	// Two integer columns: the quotient is exact, not integer division.
	if _, err := RewriteWith(ds, "SELECT regr_slope(length_of_stay, age) FROM visits", Options{NoBias: true}); err != nil {
		t.Errorf("integer columns: %v", err)
	}
	// The four statistics of two columns share the five sums and mix with
	// other aggregates (TestRewrite_Postgres compares their noiseless
	// answers with PostgreSQL's on the goldens regr_*).
	p, err = RewriteWith(ds, "SELECT COUNT(*), covar_pop(cost, age), covar_samp(cost, age), regr_slope(cost, age), regr_intercept(cost, age) FROM visits", Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Measures) != 6 {
		t.Errorf("%d measures, want COUNT(*) and the five shared sums", len(p.Measures))
	}
	for _, o := range p.Outputs[1:] {
		if o.PGType != "float8" || o.Kind != OutputExpr {
			t.Errorf("output %s: %s %v, want a float8 expression", o.Name, o.PGType, o.Kind)
		}
	}
}
