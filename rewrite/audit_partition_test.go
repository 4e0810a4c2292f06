package rewrite

import (
	"fmt"
	"math/big"
	"sort"
	"strings"
)

// auditUnits extends the sensitivity audit to plans with private keys
// (partition selection, partition.go): the last column of each group is its
// number of distinct units after bounding, the count release thresholds.
// Between D and D' = D + one unit it checks that
//
//   - the count changes by at most 1 in each group (L∞ = 1) and in at most
//     MaxGroupsPerUnit groups: the added unit appears in at most
//     max_groups_per_unit groups after bounding (L1 ≤ L0);
//   - every group of D is still a group of D' (other units' choices do not
//     depend on the added unit), and every group that exists only in D' has
//     a count of exactly 1: it is the added unit's alone, the case the
//     threshold's δ covers.
//
// d and d2 map group keys to the measures followed by the count.
func auditUnits(p *Plan, d, d2 auditResult) []string {
	var bad []string
	// A quantile's histogram takes Quantile.Buckets values (runAudit).
	nm := 0
	for _, m := range p.Measures {
		if m.Kind == MeasureQuantile {
			nm += m.Quantile.Buckets
		} else {
			nm++
		}
	}
	units := func(r auditResult, k string) *big.Rat {
		if ms, ok := r[k]; ok {
			if len(ms) != nm+1 {
				bad = append(bad, fmt.Sprintf("group %q has %d values, want %d measure values and the unit count", k, len(ms), nm))
				return new(big.Rat)
			}
			return ms[nm]
		}
		return nil
	}
	var keys []string
	for k := range d {
		keys = append(keys, k)
	}
	for k := range d2 {
		if _, ok := d[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	one := big.NewRat(1, 1)
	changed := 0
	for _, k := range keys {
		a, b := units(d, k), units(d2, k)
		name := strings.ReplaceAll(k, "\x00", ",")
		switch {
		case b == nil:
			bad = append(bad, fmt.Sprintf("group %q of D vanished when a unit was added", name))
		case a == nil:
			changed++
			if b.Cmp(one) != 0 {
				bad = append(bad, fmt.Sprintf("group %q exists only in D' but has %s units, want 1", name, b.RatString()))
			}
		default:
			diff := new(big.Rat).Sub(b, a)
			if diff.Sign() != 0 {
				changed++
			}
			if diff.Sign() < 0 || diff.Cmp(one) > 0 {
				bad = append(bad, fmt.Sprintf("group %q: unit count went from %s to %s, want +0 or +1", name, a.RatString(), b.RatString()))
			}
		}
	}
	if changed > p.MaxGroupsPerUnit {
		bad = append(bad, fmt.Sprintf("the added unit is counted in %d groups, max_groups_per_unit %d", changed, p.MaxGroupsPerUnit))
	}
	return bad
}
