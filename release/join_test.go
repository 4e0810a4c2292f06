package release

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// explainLines runs Explain on the plan of q and returns its lines.
func explainLines(t *testing.T, ds *policy.Dataset, q string, epsilon float64) []string {
	t.Helper()
	plan, err := rewrite.Rewrite(ds, q)
	if err != nil {
		t.Fatal(err)
	}
	return explainRows(t, ds, plan, epsilon, 0, policy.MechanismLaplace)
}

// explainRows runs Explain and returns its rows.
func explainRows(t *testing.T, ds *policy.Dataset, plan *rewrite.Plan, epsilon, delta float64, mechanism string) []string {
	t.Helper()
	_, rows, err := Explain(ds, plan, Params{Epsilon: epsilon, Delta: delta, Mechanism: mechanism})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range rows {
		lines = append(lines, *r[0])
	}
	return lines
}

// explainPlan runs Explain and returns its rows as one text.
func explainPlan(t *testing.T, ds *policy.Dataset, plan *rewrite.Plan, epsilon, delta float64, mechanism string) string {
	t.Helper()
	return strings.Join(explainRows(t, ds, plan, epsilon, delta, mechanism), "\n")
}

// TestExplain_Joins checks that joins are calibrated to the sensitivity of
// their shape (rewrite/join.go, PRIVACY.md): a join on the unit like a
// single table with the larger limits of the joined tables; protected tables
// joined on another key only are refused before any plan.
func TestExplain_Joins(t *testing.T) {
	ds := loadPolicy(t)
	// visits (5 rows, 4 groups per unit) JOIN patients (1, 1): ungrouped
	// count, L∞ = 5, L1 = 5, b = 5/0.5 = 10. Visits, the later table, is
	// cut to its allowance of 4·5 = 20 rows per patient before the join,
	// and EXPLAIN states the work bound it gives (issue 27).
	lines := explainLines(t, ds, "SELECT COUNT(*) FROM patients p JOIN visits v USING (patient_id)", 0.5)
	if !strings.Contains(lines[0], "on hospital.patients") || lines[1] != "  Join: unit join of patients, visits; later protected tables cut to [20] rows per unit before the join: a row of patients joins at most 20 rows" {
		t.Fatalf("EXPLAIN header = %q", lines[:2])
	}
	var found bool
	for _, l := range lines {
		if strings.Contains(l, "Measurement m0: count(*)") {
			found = true
			if field(t, l, "sensitivity") != 5 || field(t, l, "noise_scale") != 10 {
				t.Fatalf("unit join count line %q: want sensitivity=5 noise_scale=10", l)
			}
		}
	}
	if !found {
		t.Fatalf("no count measurement in %q", lines)
	}

	clinic, err := policy.Parse(strings.NewReader(`dataset: clinic
privacy_unit: patient
budget: {epsilon: 1}
tables:
  visits:
    unit_column: patient_id
    max_groups_per_unit: 2
    max_rows_per_unit: 3
    columns:
      ward_id: {type: int}
  labs:
    unit_column: patient_id
    max_groups_per_unit: 1
    max_rows_per_unit: 2
    columns:
      ward_id: {type: int}
      result: {type: float, lower: -4, upper: 10}
`), "clinic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = rewrite.Rewrite(clinic, "SELECT COUNT(*) FROM visits v JOIN labs l ON v.ward_id = l.ward_id")
	if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.FeatureNotSupported || !strings.Contains(pe.Hint, "AND a.patient_id = b.patient_id") {
		t.Fatalf("a join of protected tables on another key: %v, want 0A000 with the hint to add the unit", err)
	}
	// With the unit equality added, a unit join bounded by the larger
	// limits of the two tables: a count has L∞ = 3 rows per unit and
	// b = 3/0.25 = 12 (ε 0.5 over two measurements).
	lines = explainLines(t, clinic, "SELECT COUNT(*), SUM(l.result) FROM visits v JOIN labs l ON v.ward_id = l.ward_id AND v.patient_id = l.patient_id", 0.5)
	if !strings.Contains(lines[1], "unit join of visits, labs") {
		t.Fatalf("EXPLAIN join line = %q", lines[1])
	}
	for _, l := range lines {
		if strings.Contains(l, "Measurement") && strings.Contains(l, "count(*)") {
			if field(t, l, "sensitivity") != 3 || field(t, l, "noise_scale") != 12 {
				t.Fatalf("unit join count line %q: want sensitivity=3 noise_scale=12", l)
			}
			return
		}
	}
	t.Fatalf("no count measurement in %q", lines)
}
