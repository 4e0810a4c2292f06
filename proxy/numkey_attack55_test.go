package proxy

import (
	"strconv"
	"testing"
)

// TestAttack55_NumericKeyTextFromOneUnit (attack round 55, severity
// medium: G2 — a released key's text is chosen by one person's row, not
// by DP: an ε = ∞ release of that row's written form).
//
// A GROUP BY key of an unconstrained numeric column (type: numeric, which
// internal/catalog accepts for `numeric` without a scale) without public
// values is a private key: its groups come from the data through
// partition selection. PostgreSQL groups equal numerics whatever their
// scale (1.5 = 1.50 = 1.500), and the emitted SQL releases dp_k0::text:
// the text of whichever row represents the group. In the partition
// selection SQL that is the first row the final GROUP BY meets, and its
// input comes ordered by unit (the window of dp_counted), so the released
// text is the smallest unit's: `WHERE patient_id >= 1000` makes it
// patient 1000's. The analyst learns, exactly and at any ε, how patient
// 1000's value is written (its scale: the precision a lab or a form
// recorded), which no noise covers; the text differs between neighbouring
// databases (with and without patient 1000) with probability 1.
//
// The same holds for float keys (-0 and 0 are one group, written "-0" or
// "0"), and sample-and-aggregate's SQL (ORDER BY its text output) splits
// one group into one partial group per representative text (levels
// released under "1.5", "1.50", "1.500", each missing the others' levels).
//
// Data: 2,000 patients with 3 visits each, cost 1.5, but patient 1000's
// visits are written 1.50. Statement: SELECT cost, COUNT(*) FROM visits
// WHERE patient_id >= 1000 GROUP BY cost. On the current code the released
// key is "1.50" (patient 1000's text); without patient 1000 it is "1.5".
//
// Suggested fix: emit a canonical text for private numeric keys (GROUP BY
// and output trim_scale(key), PostgreSQL 13+, or normalise the key in the
// innermost SELECT so every later GROUP BY, hash and ::text sees one
// representation; for float, key + 0.0 maps -0 to 0), or refuse private
// keys of numeric columns without a declared scale and of float columns at
// plan time.
func TestAttack55_NumericKeyTextFromOneUnit(t *testing.T) {
	r := startRealDPOver(t, []string{
		`ALTER TABLE visits ALTER COLUMN cost TYPE numeric`,
		`INSERT INTO patients SELECT p, 1930 + p % 90, CASE WHEN p % 2 = 0 THEN 'F' ELSE 'M' END,
			(ARRAY['north','south','east','west','central'])[1 + p % 5] FROM generate_series(1, 2000) p`,
		// Visit v belongs to patient 1 + v % 2000; patient 1000's visits
		// (v % 2000 = 999) are written 1.50, everyone else's 1.5.
		`INSERT INTO visits SELECT 1 + v % 2000, DATE '2020-01-01' + (v * 7) % 1800, 'surgery', 'D1',
			1 + (v * 37) % 100, CASE WHEN v % 2000 = 999 THEN 1.50 ELSE 1.5 END, (v * 13) % 60
			FROM generate_series(1, 6000) v`,
	}, nil, nil)
	pc := r.connect(t)
	if _, err := execAll(t, pc, "SET dp.epsilon = 1; SET dp.delta = 1e-7"); err != nil {
		t.Fatal(err)
	}
	released := func(from int) []string {
		return releasedKeys(t, pc, "SELECT cost, COUNT(*) FROM visits WHERE patient_id >= "+strconv.Itoa(from)+" GROUP BY cost")
	}
	// The neighbour without patient 1000: every key released is 1.5.
	t.Logf("from patient 1001: released keys %q", released(1001))
	keys := released(1000)
	t.Logf("released keys: %q (1,001 patients' visits are 1.5, patient 1000's are 1.50)", keys)
	for _, k := range keys {
		if k == "1.50" {
			t.Errorf("the released key is %q: the text of patient 1000's rows, the smallest unit the WHERE keeps; without patient 1000 it would be \"1.5\" (an ε = ∞ release of one person's row)", k)
		}
	}
}
