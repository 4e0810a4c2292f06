package rewrite

import (
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

func TestExplainTarget(t *testing.T) {
	ds := loadHospital(t)
	ok := []struct{ in, want string }{
		{"EXPLAIN SELECT COUNT(*) FROM visits", "SELECT COUNT(*) FROM visits"},
		{"explain verbose select count(*) from visits", "select count(*) from visits"},
		{"/* c */ EXPLAIN (COSTS off, FORMAT TEXT, verbose) SELECT department, COUNT(*) FROM visits GROUP BY 1",
			"SELECT department, COUNT(*) FROM visits GROUP BY 1"},
	}
	for _, tc := range ok {
		got, isExplain, err := ExplainTarget(tc.in)
		if err != nil || !isExplain || got != tc.want {
			t.Fatalf("ExplainTarget(%q) = %q, %v, %v; want %q", tc.in, got, isExplain, err, tc.want)
		}
		if _, err := Rewrite(ds, got); err != nil {
			t.Fatalf("Rewrite(%q) = %v", got, err)
		}
	}
	if _, isExplain, err := ExplainTarget("SELECT COUNT(*) FROM visits"); isExplain || err != nil {
		t.Fatalf("a SELECT is not an EXPLAIN: %v %v", isExplain, err)
	}
	for _, in := range []string{
		"EXPLAIN ANALYZE SELECT COUNT(*) FROM visits",
		"EXPLAIN (ANALYZE) SELECT COUNT(*) FROM visits",
		"EXPLAIN (FORMAT JSON) SELECT COUNT(*) FROM visits",
		"EXPLAIN (BUFFERS) SELECT COUNT(*) FROM visits",
		"EXPLAIN",
		"EXPLAIN (COSTS",
	} {
		_, _, err := ExplainTarget(in)
		pe, ok := pgerr.As(err)
		if !ok || pe.Code != pgerr.FeatureNotSupported && pe.Code != pgerr.SyntaxError || pe.Hint == "" {
			t.Fatalf("ExplainTarget(%q) = %v, want 0A000 or 42601 with a hint", in, err)
		}
	}
}
