package dpplan

import (
	"strconv"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// TestUnitGroups: a distinct count counts a unit whole in min(G, L0·R)
// groups when a single-table plan weights groups (G > L0), and in L0
// groups otherwise: ungrouped, G ≤ L0, private keys, joins,
// sample-and-aggregate, quantiles, or no rows per unit to go by.
func TestUnitGroups(t *testing.T) {
	domain := func(n int) []string {
		d := make([]string, n)
		for i := range d {
			d[i] = strconv.Itoa(i)
		}
		return d
	}
	key := func(n int) Key { return Key{Column: "k", Type: policy.TypeInt, Domain: domain(n)} }
	for _, c := range []struct {
		name string
		plan Plan
		rows int
		want int
	}{
		{"7 departments, L0 1, R 20: all 7", Plan{Keys: []Key{key(7)}, MaxGroupsPerUnit: 1}, 20, 7},
		{"7 departments, L0 4, R 1: the allowance 4", Plan{Keys: []Key{key(7)}, MaxGroupsPerUnit: 4}, 1, 4},
		{"1827 days, L0 4, R 5: the allowance 20", Plan{Keys: []Key{key(1827)}, MaxGroupsPerUnit: 4}, 5, 20},
		{"two keys 5 × 7, L0 1, R 20: the allowance 20", Plan{Keys: []Key{key(5), key(7)}, MaxGroupsPerUnit: 1}, 20, 20},
		{"two keys 2 × 3, L0 1, R 20: the 6 groups", Plan{Keys: []Key{key(2), key(3)}, MaxGroupsPerUnit: 1}, 20, 6},
		{"G ≤ L0 (not weighted): L0", Plan{Keys: []Key{key(3)}, MaxGroupsPerUnit: 4}, 5, 4},
		{"ungrouped: L0", Plan{MaxGroupsPerUnit: 1}, 20, 1},
		{"private key: L0", Plan{Keys: []Key{{Column: "d", Type: policy.TypeText, Private: true}}, MaxGroupsPerUnit: 4}, 5, 4},
		{"join: L0", Plan{Keys: []Key{key(7)}, MaxGroupsPerUnit: 1, Join: &Join{}}, 20, 1},
		{"sample-and-aggregate: L0", Plan{Keys: []Key{key(7)}, MaxGroupsPerUnit: 1, SampleAgg: &SampleAgg{}}, 20, 1},
		{"quantile (groups chosen, not weighted): L0", Plan{Keys: []Key{key(7)}, MaxGroupsPerUnit: 1, Measures: []Measure{{Kind: MeasureQuantile}}}, 20, 1},
		{"no rows per unit: L0", Plan{Keys: []Key{key(7)}, MaxGroupsPerUnit: 1}, 0, 1},
	} {
		if got := UnitGroups(&c.plan, c.rows); got != c.want {
			t.Errorf("%s: UnitGroups = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestCellsChanged: the groups whose values one unit can change are every
// group of the key domains when groups are weighted, else the allowance
// L0; the count stops at MaxPublicGroups, the most release answers, so it
// is exact for every answered plan (review of 7 December: it stopped at
// 2²⁰, right only while release's limit stayed below that).
func TestCellsChanged(t *testing.T) {
	domain := func(n int) []string {
		d := make([]string, n)
		for i := range d {
			d[i] = strconv.Itoa(i)
		}
		return d
	}
	key := func(n int) Key { return Key{Column: "k", Type: policy.TypeInt, Domain: domain(n)} }
	for _, c := range []struct {
		name string
		plan Plan
		want int
	}{
		{"7 departments, L0 1 (weighted): 7", Plan{Keys: []Key{key(7)}, MaxGroupsPerUnit: 1}, 7},
		{"3 departments, L0 4 (all kept): 4", Plan{Keys: []Key{key(3)}, MaxGroupsPerUnit: 4}, 4},
		{"ungrouped: 1", Plan{MaxGroupsPerUnit: 1}, 1},
		{"1,000 × 1,000, the most answered: all of them", Plan{Keys: []Key{key(1000), key(1000)}, MaxGroupsPerUnit: 1}, 1_000_000},
		{"1,000 × 1,001, refused by release: the limit", Plan{Keys: []Key{key(1000), key(1001)}, MaxGroupsPerUnit: 1}, MaxPublicGroups},
	} {
		if got := c.plan.CellsChanged(); got != c.want {
			t.Errorf("%s: CellsChanged = %d, want %d", c.name, got, c.want)
		}
	}
	if MaxPublicGroups != 1_000_000 {
		t.Errorf("MaxPublicGroups = %d: the 1,000 × 1,000 case above must be its value", MaxPublicGroups)
	}
}
