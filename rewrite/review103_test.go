package rewrite

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

// TestReview103_PaddedCharConditions: a char(n) value is stored padded to
// n characters, and octet_length, which the emitted SQL's length test
// reads (pgemit boundedText), counts the padding: on PostgreSQL 15
// octet_length('abc'::char(300)) is 300. So for a char(n) column with n
// over dpplan.MaxConditionTextBytes (256) every value was NULL to a LIKE,
// an ordering comparison, BETWEEN and an IN list of 9 values or more:
// such a condition held for no row, and the statement answered noise
// around zero for its full price, with no word of why. The schema is
// public, so the planner refuses it before the charge (0A000, with a
// hint); `=`, `<>` and short IN lists, which read no length test, and
// char(n) columns of at most 256 characters plan as before.
func TestReview103_PaddedCharConditions(t *testing.T) {
	ds, err := policy.Load("../examples/policies/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	diag := ds.Tables["visits"].Columns["diagnosis"]
	diag.PGType, diag.PadChars = "bpchar", 300
	nine := "('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i')"
	for _, cond := range []string{
		"diagnosis LIKE 'J4%'",
		"diagnosis NOT ILIKE '%asthma%'",
		"diagnosis > 'M'",
		"'M' <= diagnosis",
		"diagnosis BETWEEN 'A' AND 'K'",
		"diagnosis NOT IN " + nine,
	} {
		for _, q := range []string{
			"SELECT COUNT(*) FROM visits WHERE " + cond,
			"SELECT COUNT(*) FILTER (WHERE " + cond + ") FROM visits",
		} {
			_, err := RewriteWith(ds, q, Options{})
			pe, ok := pgerr.As(err)
			if !ok || pe.Code != pgerr.FeatureNotSupported || !strings.Contains(pe.Message, "char(300)") || pe.Hint == "" {
				t.Errorf("%s: err %v, want 0A000 naming char(300), with a hint", q, err)
			}
		}
	}
	for _, cond := range []string{"diagnosis = 'x'", "diagnosis <> 'x'", "diagnosis IN ('a', 'b')", "diagnosis IS NULL"} {
		if _, err := RewriteWith(ds, "SELECT COUNT(*) FROM visits WHERE "+cond, Options{}); err != nil {
			t.Errorf("%s: %v", cond, err)
		}
	}
	diag.PadChars = 256
	if _, err := RewriteWith(ds, "SELECT COUNT(*) FROM visits WHERE diagnosis LIKE 'J4%' AND diagnosis > 'M'", Options{}); err != nil {
		t.Errorf("char(256): %v", err)
	}
}
