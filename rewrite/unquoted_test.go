package rewrite

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

// TestUnquotedText: a text value written without quotes is a name that is
// no column: PostgreSQL's 42703 with a hint to quote it, not "comparisons
// between two columns" (the new-user run of 6 Dec 2026); two real columns
// still get that refusal.
func TestUnquotedText(t *testing.T) {
	ds, err := policy.Load("../internal/testdata/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]string{
		"SELECT COUNT(*) FROM visits WHERE department = oncology":    pgerr.UndefinedColumn,
		"SELECT COUNT(*) FROM visits WHERE oncology = department":    pgerr.UndefinedColumn,
		"SELECT COUNT(*) FROM visits WHERE department IN (oncology)": pgerr.UndefinedColumn,
		"SELECT COUNT(*) FROM visits WHERE department = diagnosis":   pgerr.FeatureNotSupported,
		"SELECT COUNT(*) FROM visits WHERE department = 'oncology'":  "",
	} {
		_, err := Rewrite(ds, q)
		pe, _ := pgerr.As(err)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", q, err)
		case want != "" && (pe == nil || pe.Code != want):
			t.Errorf("%s: %v, want %s", q, err, want)
		case want == pgerr.UndefinedColumn && !strings.Contains(pe.Hint, "'oncology'"):
			t.Errorf("%s: hint %q does not say to quote it", q, pe.Hint)
		}
	}
}

// TestUndeclaredValueWarning: a text column with declared values compared
// equal to another value ('Oncology' for oncology) plans with a warning
// the client sees before the answer; declared values, other operators and
// NOT IN plan without one.
func TestUndeclaredValueWarning(t *testing.T) {
	ds, err := policy.Load("../internal/testdata/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]bool{
		"SELECT COUNT(*) FROM visits WHERE department = 'Oncology'":                 true,
		"SELECT COUNT(*) FROM visits WHERE department IN ('oncology', 'Surgery')":   true,
		"SELECT COUNT(*) FROM visits WHERE department = 'oncology'":                 false,
		"SELECT COUNT(*) FROM visits WHERE department <> 'Oncology'":                false,
		"SELECT COUNT(*) FROM visits WHERE department NOT IN ('Oncology')":          false,
		"SELECT department, COUNT(*) FROM visits WHERE age > 3 GROUP BY department": false,
	} {
		p, err := Rewrite(ds, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if got := len(p.Warnings) > 0; got != want || want && !strings.Contains(p.Warnings[0], "not one of the values") {
			t.Errorf("%s: warnings %q, want some: %v", q, p.Warnings, want)
		}
	}
}
