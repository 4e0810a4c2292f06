package rewrite

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestAttack102_LongNumericArithmetic is attack round 102: a numeric
// column without a declared scale holds up to 16,383 digits after the
// point, and clamping to the policy's bounds keeps such a value whole
// when it lies within them (10000.1234…). PostgreSQL multiplies and
// divides numerics digit by digit, in time that grows with the product
// of the operands' lengths, so a product of the column with itself (an
// expression, STDDEV's and VARIANCE's squares, a quantile of an
// expression) or a division by it cost each of one patient's rows
// milliseconds (measured: 5.7 ms a product, 11 ms a division), which the
// work bound counts as a sixteenth of a row's 2 µs. Sixteen products
// ran 1.8 s longer over one patient's 20 visits than over their
// neighbour's short values: past the slot, the time says whether the
// patient's values are long, and under CASE WHEN cost > c THEN cost*cost
// whether each is above c. The emitted SQL rounds a non-integer column
// to dpplan.MaxConstDigits decimals before it clamps it (pgemit
// columnNumeric), so the arithmetic's operands have a bounded length.
//
// The emitted SQL runs on the demo database, its cost column made an
// unconstrained numeric, with the patient's 20 costs short, then of
// 16,383 random decimals, three times each alternately; the test fails
// when the fastest long run is more than 250 ms slower than the fastest
// short one (before the rounding: 1.93 s slower, against 1 ms).
func TestAttack102_LongNumericArithmetic(t *testing.T) {
	short, long := longCostTimes(t, 901021, "('10000.' || (SELECT string_agg(floor(random() * 10)::int::text, '') FROM generate_series(1, 16383) WHERE g > 0))::numeric",
		"SUM("+strings.Repeat("cost * cost + ", 7)+"cost * cost)",
		"STDDEV(cost)", "VARIANCE(cost + 1)",
		"AVG(age / GREATEST(cost, 1))", "SUM(age / GREATEST(cost, 1) + 100 / GREATEST(cost, 2))",
		"percentile_cont(0.5) WITHIN GROUP (ORDER BY cost * cost)")
	t.Logf("fastest run with the patient's costs short: %v, of 16,383 decimals: %v", short, long)
	if long-short > 250*time.Millisecond {
		t.Errorf("the emitted SQL took %v longer when one patient's 20 costs had 16,383 decimals (%v against %v): its arithmetic reads the values whole", long-short, long, short)
	}
}

// TestAttack102_LongNumericRead: a value is read whole, from its TOAST
// table, at every use of its column, and a numeric holds 131,072 digits
// before the point (74 KB stored): 30 STDDEVs of cost + i read each of
// one patient's 20 costs 120 times or more (the sum, the square's two
// factors; scale and round, or GREATEST and LEAST), 0.5 s longer than
// short costs once the arithmetic was rounded. A measure reads a value
// of at most dpplan.MaxNumericBytes stored bytes (pgemit readNumeric,
// pg_column_size from the header): the test fails when the fastest long
// run is more than 150 ms slower than the fastest short one (before:
// 411 ms against 1.5 ms; after: no slower).
func TestAttack102_LongNumericRead(t *testing.T) {
	var ms []string
	for i := range 30 {
		ms = append(ms, fmt.Sprintf("STDDEV(cost + %d)", i+1))
	}
	short, long := longCostTimes(t, 901022, "((SELECT string_agg((1 + floor(random() * 9))::int::text, '') FROM generate_series(1, 131072) WHERE g > 0) || '.5')::numeric",
		strings.Join(ms, ", "))
	t.Logf("fastest run with the patient's costs short: %v, of 131,072 digits: %v", short, long)
	if long-short > 150*time.Millisecond {
		t.Errorf("the emitted SQL took %v longer when one patient's 20 costs had 131,072 digits (%v against %v): its measures read the values whole", long-short, long, short)
	}
}

// longCostTimes runs the emitted SQL of SELECT <measures> FROM visits
// WHERE patient_id = patient on the demo database, its cost column made
// an unconstrained numeric, with the patient's 20 costs short, then
// long (the SQL expression longSQL of g, the visit's number), three
// times each alternately, and returns the fastest run of each.
func longCostTimes(t *testing.T, patient int, longSQL string, measures ...string) (short, long time.Duration) {
	t.Helper()
	_, conn, ctx, ds := demoHospital(t)
	exec := execer(t, ctx, conn)
	exec("ALTER TABLE visits ALTER COLUMN cost TYPE numeric")
	exec("INSERT INTO patients (patient_id, birth_year, sex, region) VALUES ($1, 1970, 'F', 'north')", patient)
	exec(`INSERT INTO visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay)
		SELECT $1::bigint * 100 + g, $1, '2023-01-01', 'oncology', 'short', 50, 100, 1 FROM generate_series(1, 20) g`, patient)
	exec(fmt.Sprintf("CREATE TABLE long_costs AS SELECT %d + g AS visit_id, %s AS cost FROM generate_series(1, 20) g", patient*100, longSQL))

	var plans []*Plan
	for _, m := range measures {
		q := fmt.Sprintf("SELECT %s FROM visits WHERE patient_id = %d", m, patient)
		p, err := RewriteWith(ds, q, Options{})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		plans = append(plans, p)
	}
	return fastestShortLong(t, ctx, conn, ds, plans, func(on bool) {
		if on {
			exec("UPDATE visits v SET cost = l.cost FROM long_costs l WHERE l.visit_id = v.visit_id")
		} else {
			exec("UPDATE visits SET cost = 100 WHERE patient_id = $1", patient)
		}
	})
}
