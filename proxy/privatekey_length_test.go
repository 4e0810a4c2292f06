package proxy

import (
	"testing"
)

// TestPrivateKey_LongValuesNotRead: a private group key's value is the
// data's, and the release reads every candidate group's (partition
// selection, one at a time): a key value longer than
// pgemit.MaxPrivateKeyBytes is not grouped, so no row the proxy reads
// holds it. One patient's diagnosis here is 200,000 bytes (a notes-like
// free text); the largest row the release reads stays under a few
// kilobytes, the answer comes, and no group has the long key.
func TestPrivateKey_LongValuesNotRead(t *testing.T) {
	r, meter := startRealDP53(t, []string{
		`INSERT INTO patients SELECT p, 1930 + p % 90, CASE WHEN p % 2 = 0 THEN 'F' ELSE 'M' END,
			(ARRAY['north','south','east','west','central'])[1 + p % 5] FROM generate_series(1, 2000) p`,
		`INSERT INTO visits (patient_id, visit_date, department, diagnosis, age, cost, length_of_stay)
			SELECT 1 + v % 2000, DATE '2020-01-01' + (v * 7) % 1800, 'surgery',
				CASE WHEN 1 + v % 2000 = 1000 THEN repeat('x', 200000) ELSE 'D' || (v % 3) END, 40, 10, 1
			FROM generate_series(1, 6000) v`,
	}, nil)
	pc := r.connect(t)
	if _, err := execAll(t, pc, "SET dp.epsilon = 1; SET dp.delta = 1e-7"); err != nil {
		t.Fatal(err)
	}
	res, err := execAll(t, pc, "SELECT diagnosis, COUNT(*) FROM visits GROUP BY diagnosis")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range res[len(res)-1].Rows {
		if len(row[0]) > 1024 {
			t.Errorf("a released key of %d bytes", len(row[0]))
		}
	}
	if _, bytes := meter.largest(); bytes > 4096 {
		t.Errorf("the release read a row of %d bytes: the 200,000-byte key reached the proxy", bytes)
	}
}
