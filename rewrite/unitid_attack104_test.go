package rewrite

import (
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/policy"
)

// TestAttack104_LongUnitIDTime is attack round 104: a unit column may be
// text (policy init guesses any _id column; internal/catalog accepts text,
// varchar, char, citext, bytea and numeric units), and the emitted SQL
// groups, sorts and partitions by the unit several times a row. A value
// stored in the TOAST table is fetched whole at each comparison, so one
// patient whose 20 visits carry a 1 MB patient_id made the demo's
// grouped COUNT, AVG and median (one scan, a 2 s slot) run 3.8–5.7 s
// against 1.6–2.7 s with the patient's short id: the time says whether
// the patient is in the table. A row whose unit value is longer than
// dpplan.MaxUnitBytes now has no unit and is excluded, as a NULL unit is
// (pgemit unitKeptSQL, read from the header without the value).
//
// The emitted SQL runs on the demo database, patient_id made text, with
// one patient's id short, then 1 MB of random hex, three times each
// alternately; the test fails when the fastest long run is more than
// 300 ms slower than the fastest short one.
func TestAttack104_LongUnitIDTime(t *testing.T) {
	_, conn, ctx, ds := demoHospital(t)
	visits, _ := ds.Table("visits")
	visits.UnitType, visits.UnitTypeName, visits.UnitPGType = policy.TypeText, "text", "text"
	exec := execer(t, ctx, conn)
	exec("ALTER TABLE visits DROP CONSTRAINT IF EXISTS visits_patient_id_fkey")
	exec("DROP INDEX IF EXISTS visits_patient_id") // a btree entry holds at most 8 KB
	exec("ALTER TABLE visits ALTER COLUMN patient_id TYPE text")
	exec(`INSERT INTO visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay)
		SELECT 90104000 + g, '90104', '2023-01-01', 'oncology', 'short', 50, 100, 1 FROM generate_series(1, 20) g`)
	exec(`CREATE TABLE long_id AS SELECT (SELECT string_agg(md5(g::text || random()::text), '') FROM generate_series(1, 32768) g) AS id`)
	exec("ANALYZE visits")

	var plans []*Plan
	for _, q := range []string{
		"SELECT department, COUNT(*), AVG(cost), percentile_cont(0.5) WITHIN GROUP (ORDER BY age) FROM visits GROUP BY department",
	} {
		p, err := RewriteWith(ds, q, Options{})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if !strings.Contains(p.SQL, `octet_length("patient_id") <= 1024`) {
			t.Errorf("%s: no unit length test in\n%s", q, p.SQL)
		}
		plans = append(plans, p)
	}
	short, long := fastestShortLong(t, ctx, conn, ds, plans, func(on bool) {
		if on {
			exec("UPDATE visits SET patient_id = (SELECT id FROM long_id) WHERE patient_id = '90104'")
		} else {
			exec("UPDATE visits SET patient_id = '90104' WHERE visit_id BETWEEN 90104001 AND 90104020")
		}
	})
	t.Logf("fastest run with the patient's id short: %v, of 1 MB: %v", short, long)
	// The other readers of the unit test its length too, and their SQL
	// runs (a unit self-join's cut per unit, sample-and-aggregate).
	exec("UPDATE visits SET patient_id = (SELECT id FROM long_id) WHERE patient_id = '90104'")
	for _, q := range []string{
		"SELECT COUNT(*) FROM visits v1 JOIN visits v2 ON v1.patient_id = v2.patient_id WHERE v1.visit_date = '2023-01-01'",
		"SELECT corr(age, cost) FROM visits",
	} {
		p, err := RewriteWith(ds, q, Options{})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if !strings.Contains(p.SQL, `octet_length("patient_id") <= 1024`) {
			t.Errorf("%s: no unit length test in\n%s", q, p.SQL)
		}
		start := time.Now()
		rows, err := conn.Query(ctx, p.SQL, p.QueryArgs(ds)...)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		t.Logf("%s: %v with the 1 MB id", q, time.Since(start))
	}
	if long-short > 300*time.Millisecond {
		t.Errorf("the emitted SQL took %v longer when one patient's 20 visits had a 1 MB unit id (%v against %v): the unit is compared whole", long-short, long, short)
	}
}
