package rewrite

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestRewrite_DepthLimit: statements nested deeper than maxExprDepth are
// refused with 54001 before any charge (PostgreSQL's parser would fail on
// the emitted SQL near 5,000 levels); long flat IN lists and chains within
// the limit are accepted (TestEmittedSQL_Total runs one on PostgreSQL).
func TestRewrite_DepthLimit(t *testing.T) {
	ds := loadHospital(t)
	deep := func(n int, open, leaf, close string) string {
		return strings.Repeat(open, n) + leaf + strings.Repeat(close, n)
	}
	tests := []struct {
		name  string
		query string
		ok    bool
	}{
		{"or chain 900", "SELECT COUNT(*) FROM visits WHERE age > 1" + strings.Repeat(" OR age = 2", 900), true},
		{"in list 20000", "SELECT COUNT(*) FROM visits WHERE age IN (1" + strings.Repeat(", 2", 20000) + ")", true},
		{"or chain 1100", "SELECT COUNT(*) FROM visits WHERE age > 1" + strings.Repeat(" OR age = 2", 1100), false},
		{"not 5000", "SELECT COUNT(*) FROM visits WHERE " + deep(5000, "NOT (", "age > 1", ")"), false},
		{"sum 5000", "SELECT SUM(" + deep(5000, "ABS(", "age", ")") + ") FROM visits", false},
		{"filter 1100", "SELECT COUNT(*) FILTER (WHERE " + deep(1100, "(", "age > 1", " AND age < 9)") + ") FROM visits", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Rewrite(ds, tt.query)
			if tt.ok {
				if err != nil {
					t.Fatalf("Rewrite = %v, want a plan", err)
				}
				return
			}
			if e, ok := pgerr.As(err); !ok || e.Code != "54001" {
				t.Fatalf("Rewrite = %v, want 54001", err)
			}
		})
	}
}
