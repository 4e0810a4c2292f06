package rewrite

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// TestMinUnits_Plans: under min_units_per_cell every DP plan carries the
// minimum and returns its unit count (public keys, none, private keys, a
// join on the unit, sample-and-aggregate with a fixed k, which then
// measures its unit count too); a join of two protected tables on another
// key is refused with 0A000 and a hint.
func TestMinUnits_Plans(t *testing.T) {
	src := strings.Replace(fuzzPolicy, "dataset: fuzz\n", "dataset: fuzz\nmin_units_per_cell: 11\n", 1)
	ds, err := policy.Parse(strings.NewReader(src), "minunits")
	if err != nil {
		t.Fatal(err)
	}
	if ds.MinUnitsPerCell != 11 {
		t.Fatalf("MinUnitsPerCell = %d", ds.MinUnitsPerCell)
	}
	for _, q := range []string{
		"SELECT COUNT(*) FROM ev",
		"SELECT lbl, COUNT(*), AVG(z) FROM ev GROUP BY lbl",
		"SELECT note, COUNT(*) FROM ev GROUP BY note",
		"SELECT e.tag, COUNT(*) FROM ev2 e JOIN ev USING (pid) GROUP BY e.tag",
		"SELECT lbl, percentile_cont(0.5) WITHIN GROUP (ORDER BY z) FROM ev GROUP BY lbl",
	} {
		p, err := RewriteWith(ds, q, Options{})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if p.MinUnits != 11 || !p.UnitsCounted() {
			t.Fatalf("%s: MinUnits %d", q, p.MinUnits)
		}
	}
	p, err := RewriteWith(ds, "SELECT corr(z, y) FROM ev", Options{SampleBlocks: 8})
	if err != nil {
		t.Fatal(err)
	}
	if p.SampleAgg == nil || p.MinUnits != 11 || p.SampleAgg.CountMeasure < 0 {
		t.Fatalf("sample-and-aggregate with a fixed k: MinUnits %d, count measure %v", p.MinUnits, p.SampleAgg)
	}
}
