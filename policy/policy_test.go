package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestLoad_Example(t *testing.T) {
	d, err := Load("../examples/policies/hospital.yaml")
	if err != nil {
		t.Fatalf("Load(example) = %v", err)
	}
	if d.Name != "hospital" || d.Budget.Epsilon != 3 || d.Budget.Delta != 1e-6 || d.Defaults.Epsilon != 0.1 {
		t.Fatalf("Load(example) = %+v", d)
	}
	v, ok := d.Table("VISITS")
	if !ok || v.UnitColumn != "patient_id" || v.MaxGroupsPerUnit != 1 || v.MaxRowsPerUnit != 20 {
		t.Fatalf("visits = %+v", v)
	}
	cost, _ := v.Column("cost")
	if !cost.HasBounds || cost.LowerNum != 0 || cost.UpperNum != 20000 || cost.Upper != "20000" {
		t.Fatalf("cost = %+v", cost)
	}
	if got := strings.Join(v.VisibleColumns(), ","); got != "patient_id,visit_date,department,diagnosis,age,cost,length_of_stay" {
		t.Fatalf("VisibleColumns = %s", got)
	}
	vd, _ := v.Column("visit_date")
	if vd.LowerNum != 18262 { // 2020-01-01 is day 18262 after 1970-01-01
		t.Fatalf("visit_date lower = %v", vd.LowerNum)
	}
	if len(d.Version) != 16 {
		t.Fatalf("Version = %q", d.Version)
	}
	if b := d.AnalystBudget("alice"); b.Epsilon != 3 {
		t.Fatalf("AnalystBudget(alice) = %+v", b)
	}
}

func TestParse_Errors(t *testing.T) {
	const base = `dataset: ds
privacy_unit: person
budget: {epsilon: 1}
tables:
  t:
    unit_column: uid
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      x: {type: int, lower: 0, upper: 10}
`
	tests := []struct {
		name     string
		doc      string
		wantLine int
		wantMsg  string
	}{
		{"unknown key", strings.Replace(base, "budget: {epsilon: 1}", "budget: {epsilon: 1, epsilo: 2}", 1), 3, `unknown key "epsilo"`},
		{"bad type", strings.Replace(base, "type: int", "type: integer", 1), 10, `unknown type "integer"`},
		// yaml.v3's type errors in the policy's words, never a Go type.
		{"text for a number", strings.Replace(base, "max_rows_per_unit: 1", "max_rows_per_unit: lots", 1), 8, `max_rows_per_unit needs a whole number, not the text "lots"`},
		{"list for a number", strings.Replace(base, "budget: {epsilon: 1}", "budget:\n  epsilon: [1]", 1), 4, "epsilon needs a number, not a list"},
		{"number for a table", strings.Replace(base, "  t:\n", "  s: 3\n  t:\n", 1), 5, "s needs keys with values"},
		{"list for the tables", "dataset: d\nbudget: {epsilon: 1}\ntables: [t]\n", 3, "tables needs keys with values (key: value, one per line, or {key: value, ...}), not a list"},
		// A list where a mapping belongs names its parent key, not the
		// item's (new-user run: "epsilon needs keys with values").
		{"list for the budget", strings.Replace(base, "budget: {epsilon: 1}", "budget:\n  - epsilon: 1", 1), 4, "budget needs keys with values"},
		{"list for the columns", strings.Replace(base, "      x: {type: int", "      - x: {type: int", 1), 10, "columns needs keys with values"},
		// A text for a list inside a flow mapping names the key it is the
		// value of (not the column's).
		{"text for public values", strings.Replace(base, "x: {type: int, lower: 0, upper: 10}", "x: {type: text, public_values: a, b}", 1), 10, `public_values needs a list ([a, b] or lines starting with -), not the text "a"`},

		{"lower above upper", strings.Replace(base, "lower: 0, upper: 10", "lower: 11, upper: 10", 1), 10, "greater than upper"},
		{"non-integer int bound", strings.Replace(base, "upper: 10", "upper: 10.5", 1), 10, "integer"},
		{"bound past a float's digits", strings.Replace(base, "{type: int, lower: 0, upper: 10}", "{type: numeric, lower: 0, upper: 1.0000000000000001}", 1), 10, "at most 15 significant digits"},
		{"missing unit", strings.Replace(base, "    unit_column: uid\n", "", 1), 5, "needs unit_column"},
		{"zero contribution", strings.Replace(base, "max_rows_per_unit: 1", "max_rows_per_unit: 0", 1), 8, "max_rows_per_unit must be"},
		{"negative epsilon", strings.Replace(base, "epsilon: 1", "epsilon: -1", 1), 3, "positive"},
		{"nan epsilon", strings.Replace(base, "epsilon: 1", "epsilon: .nan", 1), 3, "positive"},
		{"one bound", strings.Replace(base, "lower: 0, ", "", 1), 10, "only one of lower and upper"},
		{"gaussian without delta", base + "defaults: {mechanism: gaussian}\n", 11, "needs budget.delta"},
		{"bad accountant", strings.Replace(base, "{epsilon: 1}", "{epsilon: 1, accountant: magic}", 1), 3, "unknown accountant"},
		{"default above budget", base + "defaults: {epsilon: 2}\n", 11, "larger than budget.epsilon"},
		{"default below the floor", base + "defaults: {epsilon: 0.0005}\n", 11, "below budget.min_epsilon_per_query (0.001)"},
		{"default below a set floor", strings.Replace(base, "{epsilon: 1}", "{epsilon: 1, min_epsilon_per_query: 0.01}", 1) + "defaults: {epsilon: 0.005}\n", 11, "below budget.min_epsilon_per_query (0.01)"},
		{"budget below the default floor", strings.Replace(base, "{epsilon: 1}", "{epsilon: 0.0001}", 1), 3, "no query could run; lower min_epsilon_per_query"},
		{"floor above the budget", strings.Replace(base, "{epsilon: 1}", "{epsilon: 1, min_epsilon_per_query: 2}", 1), 3, "no query could run"},
		{"negative floor", strings.Replace(base, "{epsilon: 1}", "{epsilon: 1, min_epsilon_per_query: -1}", 1), 3, "min_epsilon_per_query must be a positive number"},
		{"nan floor", strings.Replace(base, "{epsilon: 1}", "{epsilon: 1, min_epsilon_per_query: .nan}", 1), 3, "min_epsilon_per_query must be a positive number"},
		{"analyst below the floor", base + "analysts:\n  bob: {epsilon: 0.0001}\n", 12, "below budget.min_epsilon_per_query"},
		{"analyst floor", base + "analysts:\n  bob: {min_epsilon_per_query: 0.1}\n", 12, "only epsilon and delta"},
		{"nan delta", strings.Replace(base, "{epsilon: 1}", "{epsilon: 1, delta: .nan}", 1), 3, "budget.delta must be in [0, 1)"},
		{"delta of one", strings.Replace(base, "{epsilon: 1}", "{epsilon: 1, delta: 1}", 1), 3, "budget.delta must be in [0, 1)"},
		{"negative default delta", strings.Replace(base, "{epsilon: 1}", "{epsilon: 1, delta: 0.1}", 1) + "defaults: {delta: -0.1}\n", 11, "defaults.delta must be in [0, 1)"},
		{"no tables", "dataset: ds\nprivacy_unit: p\nbudget: {epsilon: 1}\n", 1, "missing key tables"},
		{"syntax", "dataset: [\n", 1, "did not find"},
		{"zero multiplicity", base + "  lk:\n    public: true\n    columns:\n      k: {type: int, max_rows_per_value: 0}\n", 14, "max_rows_per_value must be between 1"},
		{"multiplicity on a protected table", strings.Replace(base, "upper: 10}", "upper: 10, max_rows_per_value: 3}", 1), 10, "protected tables are joined on their unit column only"},
		{"min units of one", base + "min_units_per_cell: 1\n", 11, "min_units_per_cell must be an integer from 2"},
		{"min units too large", base + "min_units_per_cell: 5000\n", 11, "min_units_per_cell must be an integer from 2"},
		{"min units not an integer", base + "min_units_per_cell: 10.5\n", 11, "min_units_per_cell"},
		{"multiplicity of a hidden column", strings.Replace(base, "{type: int, lower: 0, upper: 10}", "{access: none, max_rows_per_value: 3}", 1), 10, "access: none; it takes no other settings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.doc), "p.yaml")
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("Parse() = %v, want Errors", err)
			}
			e := es[0]
			if e.File != "p.yaml" || e.Line != tt.wantLine || !strings.Contains(e.Msg, tt.wantMsg) {
				t.Fatalf("Parse() first error = %q (line %d), want line %d containing %q", e.Error(), e.Line, tt.wantLine, tt.wantMsg)
			}
		})
	}
}

func TestParse_Valid(t *testing.T) {
	d, err := Parse(strings.NewReader(`dataset: ds
privacy_unit: person
budget: {epsilon: 1, delta: 1e-6, accountant: rdp}
defaults: {mechanism: gaussian, epsilon: 0.5}
tables:
  t:
    unit_column: uid
    max_groups_per_unit: 2
    max_rows_per_unit: 3
    columns:
      d: {type: date, lower: 2020-01-01, upper: 2020-12-31}
      s: {type: text, public_values: [a, b]}
      secret: {access: none}
      k: {type: int}
  lookup:
    public: true
    columns:
      k: {type: int, max_rows_per_value: 1}
      name: {type: text, public_values: [x, y]}
analysts:
  bob: {epsilon: 0.5}
`), "ok.yaml")
	if err != nil {
		t.Fatalf("Parse(valid) = %v", err)
	}
	if d.Budget.MinEpsilonPerQuery != DefaultMinEpsilonPerQuery || d.Budget.EpsilonFloor() != 1e-3 {
		t.Fatalf("min_epsilon_per_query = %v, want the default 1e-3", d.Budget.MinEpsilonPerQuery)
	}
	if c := d.Tables["lookup"].Columns["name"]; len(c.PublicValues) != 2 || c.MaxRowsPerValue != 0 {
		t.Fatalf("public table column = %+v", c)
	}
	if c := d.Tables["lookup"].Columns["k"]; c.MaxRowsPerValue != 1 {
		t.Fatalf("public table key = %+v, want max_rows_per_value 1", c)
	}
}

func TestParse_MinEpsilonPerQuery(t *testing.T) {
	d, err := Parse(strings.NewReader(`dataset: ds
privacy_unit: person
budget: {epsilon: 0.01, min_epsilon_per_query: 1e-5}
defaults: {epsilon: 1e-4}
tables:
  t:
    unit_column: uid
    max_groups_per_unit: 1
    max_rows_per_unit: 1
analysts:
  bob: {epsilon: 1e-5}
`), "floor.yaml")
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	if d.Budget.MinEpsilonPerQuery != 1e-5 || d.Defaults.Epsilon != 1e-4 || d.AnalystBudget("bob").EpsilonFloor() != 1e-5 {
		t.Fatalf("budget = %+v, defaults = %+v", d.Budget, d.Defaults)
	}
	if got := (Budget{}).EpsilonFloor(); got != DefaultMinEpsilonPerQuery {
		t.Fatalf("EpsilonFloor of a zero Budget = %v, want the default", got)
	}
}

func TestParse_MinUnitsPerCell(t *testing.T) {
	const doc = `dataset: ds
privacy_unit: person
budget: {epsilon: 1}
min_units_per_cell: 11
tables:
  t:
    unit_column: uid
    max_groups_per_unit: 1
    max_rows_per_unit: 1
`
	d, err := Parse(strings.NewReader(doc), "k.yaml")
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	if d.MinUnitsPerCell != 11 {
		t.Fatalf("MinUnitsPerCell = %d, want 11", d.MinUnitsPerCell)
	}
	d, err = Parse(strings.NewReader(strings.Replace(doc, "min_units_per_cell: 11\n", "", 1)), "k.yaml")
	if err != nil || d.MinUnitsPerCell != 0 {
		t.Fatalf("without the option: %v, MinUnitsPerCell = %d, want 0", err, d.MinUnitsPerCell)
	}
}

func FuzzPolicyParse(f *testing.F) {
	f.Add("dataset: ds\nbudget: {epsilon: 1}\n")
	f.Add("tables: {t: {columns: {x: {type: int, lower: 1, upper: 0}}}}")
	f.Fuzz(func(t *testing.T, doc string) {
		d, err := Parse(strings.NewReader(doc), "f.yaml")
		if err == nil && (d.Budget.Epsilon <= 0 || len(d.Tables) == 0) {
			t.Fatalf("accepted an invalid policy: %+v", d)
		}
		if err == nil && !(d.Defaults.Epsilon >= d.Budget.MinEpsilonPerQuery && d.Budget.MinEpsilonPerQuery > 0) {
			t.Fatalf("accepted a default ε %v below the floor %v", d.Defaults.Epsilon, d.Budget.MinEpsilonPerQuery)
		}
	})
}
