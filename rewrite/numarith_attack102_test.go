package rewrite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest/demodb"
	"github.com/dpproxy/dpproxy/policy"
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
// short one (before the rounding: 3.4 s slower, against 2 ms).
func TestAttack102_LongNumericArithmetic(t *testing.T) {
	_, conn := demodb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ds, err := policy.Load("../examples/policies/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const patient = 901021
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("ALTER TABLE visits ALTER COLUMN cost TYPE numeric")
	exec("INSERT INTO patients (patient_id, birth_year, sex, region) VALUES ($1, 1970, 'F', 'north')", patient)
	exec(`INSERT INTO visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay)
		SELECT 90102100 + g, $1, '2023-01-01', 'oncology', 'short', 50, 100, 1 FROM generate_series(1, 20) g`, patient)
	exec(`CREATE TABLE long_costs AS SELECT 90102100 + g AS visit_id, ('10000.' || (SELECT string_agg(floor(random() * 10)::int::text, '')
		FROM generate_series(1, 16383) WHERE g > 0))::numeric AS cost FROM generate_series(1, 20) g`)

	queries := []string{
		"SUM(" + strings.Repeat("cost * cost + ", 7) + "cost * cost)",
		"STDDEV(cost)", "VARIANCE(cost + 1)",
		"AVG(age / GREATEST(cost, 1))", "SUM(age / GREATEST(cost, 1) + 100 / GREATEST(cost, 2))",
		"percentile_cont(0.5) WITHIN GROUP (ORDER BY cost * cost)",
	}
	var plans []*Plan
	for _, m := range queries {
		q := fmt.Sprintf("SELECT %s FROM visits WHERE patient_id = %d", m, patient)
		p, err := RewriteWith(ds, q, Options{})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		plans = append(plans, p)
	}
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
	run() // warm
	short, long := time.Hour, time.Hour
	for range 3 {
		exec("UPDATE visits v SET cost = l.cost FROM long_costs l WHERE l.visit_id = v.visit_id")
		long = min(long, run())
		exec("UPDATE visits SET cost = 100 WHERE patient_id = $1", patient)
		short = min(short, run())
	}
	t.Logf("fastest run with the patient's costs short: %v, of 16,383 decimals: %v", short, long)
	if long-short > 250*time.Millisecond {
		t.Errorf("the emitted SQL took %v longer when one patient's 20 costs had 16,383 decimals (%v against %v): its arithmetic reads the values whole", long-short, long, short)
	}
}
