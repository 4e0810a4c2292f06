package rewrite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// TestAttack101_ConditionsReadLongText is attack round 101's lead: beyond
// LIKE, an ordering comparison or BETWEEN of a text column detoasts the
// value whole (varstr_cmp) and an IN list of 9 or more values hashes it
// whole, once per condition, so one patient's long diagnoses made each
// condition cost milliseconds (measured: 3 ms a `>` and 18 ms an IN of 10
// for 20 diagnoses of 1 MB), and a WHERE of many of them ran seconds
// longer on that patient's database than on its neighbour: past a small
// table's slot, the time says whether the patient's texts are long. The
// emitted SQL reads such a value through a length test on its header
// (pgemit boundedText), so its time no longer grows with the value.
// `=` and `<>`, which compare the lengths first, stay unguarded; the
// query has 60 of them to show they cost nothing either.
//
// The emitted SQL runs on the demo database with the patient's 20
// diagnoses short, then 2 MB each, three times each alternately; the test
// fails when the fastest long run is more than 250 ms slower than the
// fastest short one (before the guard: 1.02 s slower, against 0.4 ms).
func TestAttack101_ConditionsReadLongText(t *testing.T) {
	_, conn, ctx, ds := demoHospital(t)
	const patient = 901020
	exec := execer(t, ctx, conn)
	exec("INSERT INTO patients (patient_id, birth_year, sex, region) VALUES ($1, 1970, 'F', 'north')", patient)
	exec(`INSERT INTO visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay)
		SELECT 90102000 + g, $1, '2023-01-01', 'oncology', 'short', 50, 100, 1 FROM generate_series(1, 20) g`, patient)

	var conds []string
	for i := range 60 {
		conds = append(conds, fmt.Sprintf("diagnosis > 'A%03d'", i), fmt.Sprintf("diagnosis BETWEEN 'B%03d' AND 'zz'", i), fmt.Sprintf("diagnosis <> 'C%03d'", i))
	}
	var in []string
	for i := range 10 {
		in = append(in, fmt.Sprintf("'D%02d'", i))
	}
	for range 30 {
		conds = append(conds, "diagnosis NOT IN ("+strings.Join(in, ", ")+")")
	}
	q := fmt.Sprintf("SELECT COUNT(*) FROM visits WHERE patient_id = %d AND %s", patient, strings.Join(conds, " AND "))
	p, err := RewriteWith(ds, q, Options{})
	if err != nil {
		t.Fatal(err)
	}
	short, long := fastestShortLong(t, ctx, conn, ds, []*Plan{p}, func(on bool) {
		if on {
			exec("UPDATE visits SET diagnosis = repeat('the patient was seen for a routine check and reports mild pain ', 32000) WHERE patient_id = $1", patient)
		} else {
			exec("UPDATE visits SET diagnosis = 'short' WHERE patient_id = $1", patient)
		}
	})
	t.Logf("fastest run with the patient's diagnoses short: %v, 2 MB each: %v", short, long)
	if long-short > 250*time.Millisecond {
		t.Errorf("the emitted SQL took %v longer when one patient's 20 diagnoses were 2 MB each (%v against %v): its conditions read the values whole", long-short, long, short)
	}
}

// fastestShortLong runs the plans' SQL once to warm PostgreSQL, then three
// times with one person's values made long (setLong(true)) and three with
// them short, alternately, and returns the fastest run of each: the
// minimum is the run least disturbed by the machine's other load.
func fastestShortLong(t *testing.T, ctx context.Context, conn *pgx.Conn, ds *policy.Dataset, plans []*Plan, setLong func(bool)) (short, long time.Duration) {
	t.Helper()
	run := func() time.Duration {
		t.Helper()
		start := time.Now()
		for _, p := range plans {
			rows, err := conn.Query(ctx, p.SQL, p.QueryArgs(ds)...)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start)
	}
	run()
	short, long = time.Hour, time.Hour
	for range 3 {
		setLong(true)
		long = min(long, run())
		setLong(false)
		short = min(short, run())
	}
	return short, long
}
