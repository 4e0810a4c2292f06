package release

import (
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
)

// TestReleasedOnly: the NOTICE's text reads the released groups only; a
// group withheld by min_units_per_cell leaves no value, label or width
// (attack round 67), and with nothing withheld everything stays.
func TestReleasedOnly(t *testing.T) {
	noisy := [][]*big.Rat{{big.NewRat(1, 1)}, {big.NewRat(2, 1)}, {big.NewRat(3, 1)}}
	groups := [][]string{{"F"}, {"M"}, {"X"}}
	widths := [][]float64{nil, {1, 2, 3}}
	tn, tg, tw := releasedOnly([]bool{false, true, false}, noisy, groups, widths)
	if len(tn) != 2 || tn[1][0].Cmp(big.NewRat(3, 1)) != 0 {
		t.Errorf("noisy = %v, want groups F and X", tn)
	}
	if !reflect.DeepEqual(tg, [][]string{{"F"}, {"X"}}) {
		t.Errorf("groups = %v", tg)
	}
	if tw[0] != nil || !reflect.DeepEqual(tw[1], []float64{1, 3}) {
		t.Errorf("widths = %v", tw)
	}
	// All withheld: empty, not nil, widths (errorsText says "no group
	// released" rather than taking the max of nothing).
	_, _, tw = releasedOnly([]bool{true, true, true}, noisy, groups, widths)
	if tw[1] == nil || len(tw[1]) != 0 {
		t.Errorf("all withheld: widths %v, want empty", tw[1])
	}
	tn, _, _ = releasedOnly(nil, noisy, groups, widths)
	if len(tn) != 3 {
		t.Errorf("nothing withheld: %d groups", len(tn))
	}
	// A sample-and-aggregate note without the withheld group's k: one
	// ungrouped group withheld names no k.
	sa := &dpplan.SampleAgg{Levels: []int{64, 16, 4}, CountMeasure: 0, BlockUnits: 10}
	note := sampleAggNote(sa, &dpplan.Plan{}, nil)
	if strings.Contains(note, "k=") || !strings.Contains(note, "no group released") {
		t.Errorf("note for a withheld ungrouped answer: %q", note)
	}
}

// TestSwampedText: an AVG group whose half-width covers its whole range
// is named as saying only that the truth lies in the range; other groups,
// and other outputs, are not.
func TestSwampedText(t *testing.T) {
	avg := dpplan.Output{Kind: dpplan.OutputAvg, Name: "avg", Lower: 0, Upper: 20000}
	groups := [][]string{{"cardiology"}, {"pediatrics"}}
	got := swampedText(avg, []float64{101.9, 20000}, groups)
	if got != "avg: pediatrics came out at an edge of the range (noise, or a true value near that edge), each saying only that the average lies in [0, 20000]" {
		t.Errorf("swampedText = %q", got)
	}
	if got := swampedText(avg, []float64{101.9, 449}, groups); got != "" {
		t.Errorf("no group swamped: %q", got)
	}
	variance := dpplan.Output{Kind: dpplan.OutputVariance, Lower: 0, Upper: 20000}
	if got := swampedText(variance, []float64{1e9, 1e9}, groups); got != "" {
		t.Errorf("a variance: %q", got)
	}
}
