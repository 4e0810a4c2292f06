package proxy

import (
	"strconv"
	"strings"
	"testing"
)

// Attack round 56: citext keys. internal/catalog accepts a citext column
// for `type: text` (textTypes), and its collation is the default one
// (deterministic), so the catalog check passes. But citext's equality is
// case-insensitive: PostgreSQL groups 'D1' and 'd1' together and gives the
// group the text of whichever row represents it, exactly the numeric
// 1.5 / 1.50 of round 55 (pgemit/key_sql.go keyValueSQL normalises
// numeric and float keys, not citext ones). The emitted SQL releases
// dp_k0::text, the representative row's writing.

// citextSeed is the data of both tests: 2,000 patients with 3 visits
// each; col is made citext and patient 1000's visits write it as odd,
// everyone else's as even.
func citextSeed(col, even, odd string) []string {
	return []string{
		`CREATE EXTENSION IF NOT EXISTS citext`,
		`ALTER TABLE visits ALTER COLUMN ` + col + ` TYPE citext`,
		`INSERT INTO patients SELECT p, 1930 + p % 90, CASE WHEN p % 2 = 0 THEN 'F' ELSE 'M' END,
			(ARRAY['north','south','east','west','central'])[1 + p % 5] FROM generate_series(1, 2000) p`,
		// Visit v belongs to patient 1 + v % 2000; patient 1000's visits
		// (v % 2000 = 999) are written odd, everyone else's even.
		`INSERT INTO visits (patient_id, visit_date, department, diagnosis, age, cost, length_of_stay)
			SELECT 1 + v % 2000, DATE '2020-01-01' + (v * 7) % 1800, 'surgery', 'D1', 1 + (v * 37) % 100, 10, (v * 13) % 60
			FROM generate_series(1, 6000) v`,
		`UPDATE visits SET ` + col + ` = CASE WHEN patient_id = 1000 THEN '` + odd + `' ELSE '` + even + `' END`,
	}
}

// TestAttack56_CitextPrivateKeyTextFromOneUnit (severity medium: G2 — a
// released private key's text is one person's writing of it, at ε = ∞).
//
// diagnosis is citext (type: text in the policy, no public values: a
// private key). Every visit's diagnosis is 'D1' except patient 1000's,
// written 'd1'. SELECT diagnosis, COUNT(*) FROM visits WHERE patient_id >=
// 1000 GROUP BY diagnosis releases the one group under the text of its
// representative row, the smallest unit's (the partition selection SQL's
// input is ordered by unit): "d1", patient 1000's writing; from patient
// 1001 on it is "D1". The neighbours (with and without patient 1000) give
// different released bytes with probability 1 at any ε.
//
// Suggested fix: refuse citext for type: text in internal/catalog (or
// accept it only with access: none / public values), or group and release
// a canonical text (lower(x)::text) for citext keys, as keyValueSQL does
// for numeric and float.
func TestAttack56_CitextPrivateKeyTextFromOneUnit(t *testing.T) {
	r := startRealDPOver(t, citextSeed("diagnosis", "D1", "d1"), nil, nil)
	pc := r.connect(t)
	if _, err := execAll(t, pc, "SET dp.epsilon = 1; SET dp.delta = 1e-7"); err != nil {
		t.Fatal(err)
	}
	released := func(from int) []string {
		return releasedKeys(t, pc, "SELECT diagnosis, COUNT(*) FROM visits WHERE patient_id >= "+strconv.Itoa(from)+" GROUP BY diagnosis")
	}
	without := released(1001)
	with := released(1000)
	t.Logf("released keys: without patient 1000 %q, with %q (1,000 patients write D1, patient 1000 writes d1)", without, with)
	// The neighbours must release the same key texts (the fix releases
	// lower(x), "d1", in both; before it, "D1" without patient 1000 and
	// patient 1000's own "d1" with).
	if strings.Join(with, ",") != strings.Join(without, ",") {
		t.Errorf("released keys %q with patient 1000, %q without: the text of patient 1000's rows, the smallest unit the WHERE keeps (an ε = ∞ release of how one person's value is written)", with, without)
	}
}

// TestAttack56_CitextPublicKeyGroupVanishes (severity high: G1 — one
// person's row decides whether a whole public group's measures are
// released, at ε = ∞).
//
// department is citext with public values [cardiology, …, surgery]. The
// emitted SQL filters `department IN ('cardiology', …)`, which citext
// matches case-insensitively, groups case-insensitively, and returns the
// group under its representative row's text; release/release.go collect
// then looks that text up among the public values and silently drops a
// group whose text is not one of them. Every visit is 'surgery' except
// patient 1000's, written 'SURGERY'. SELECT department, COUNT(*) FROM
// visits WHERE patient_id >= 1000 GROUP BY department: the surgery group's
// representative is patient 1000's row, its text "SURGERY" matches no
// public value, and the released surgery count is noise around 0 instead
// of about 3,003 (1,001 patients × 3 visits). From patient 1001 on the
// group's text is "surgery" and its count about 3,000. One person's row
// moves a released count by thousands, far beyond the sensitivity the
// noise was calibrated to.
//
// Suggested fix: as above (refuse citext, or key on lower(x) and compare
// with lower(public value)); and emit public text keys so that the value
// released is the one compared (e.g. GROUP BY the matching public constant
// through a CASE or a join to VALUES), never the data's text.
func TestAttack56_CitextPublicKeyGroupVanishes(t *testing.T) {
	r := startRealDPOver(t, citextSeed("department", "surgery", "SURGERY"), nil, nil)
	pc := r.connect(t)
	if _, err := execAll(t, pc, "SET dp.epsilon = 1"); err != nil {
		t.Fatal(err)
	}
	surgery := func(from int) float64 {
		return releasedValue(t, pc, "SELECT department, COUNT(*) FROM visits WHERE patient_id >= "+strconv.Itoa(from)+" GROUP BY department", "surgery")
	}
	without := surgery(1001)
	with := surgery(1000)
	t.Logf("released surgery count: without patient 1000 %v, with %v (about 3,000 visits either way)", without, with)
	if with < 1000 {
		t.Errorf("with patient 1000 the released surgery count is %v, without %v: patient 1000's 'SURGERY' represents the group, its text matches no public value and the whole group's count is dropped (one person moves a released count by about 3,000)", with, without)
	}
}
