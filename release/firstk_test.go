package release

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// TestGroupSelector_KeptTwiceIsInternalError: a group the SQL returns
// twice (its GROUP BY rules that out) is an internal error when both are
// kept; the selector holds nothing per candidate to catch it otherwise.
// A dropped candidate with another's key is no error.
func TestGroupSelector_KeptTwiceIsInternalError(t *testing.T) {
	plan := &dpplan.Plan{Keys: []dpplan.Key{{Column: "k", Type: policy.TypeText, Private: true}},
		Measures: []dpplan.Measure{{Kind: dpplan.MeasureCount, Integer: true}}}
	row := func(k, units string) []*string { return []*string{s(k), s("7"), s(units)} }
	gs := newGroupSelector(plan, a70Selection(t, 1))
	for _, r := range [][]*string{row("a", "1000000000"), row("b", "1000000000"), row("a", "1000000000")} {
		if err := gs.add(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := gs.result(); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a kept twice: %v, want an internal error", err)
	}
	gs = newGroupSelector(plan, a70Selection(t, 2))
	for _, r := range [][]*string{row("a", "1000000000"), row("a", "1"), row("b", "1000000000")} {
		if err := gs.add(r); err != nil {
			t.Fatal(err)
		}
	}
	if got, _, _, err := gs.result(); err != nil || len(got) != 2 {
		t.Errorf("a kept once, dropped once: %v %v, want a and b", got, err)
	}
}
