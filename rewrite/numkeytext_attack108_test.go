package rewrite

import (
	"strings"
	"testing"
	"time"
)

// TestAttack108_NumericKeyTextTime is attack round 108's second finding: a
// private numeric key was kept when its text had at most 1,024
// characters, measured by writing the text, octet_length(x::text), on
// every row. A numeric's stored size does not bound its text: 9e131071
// is 10 bytes stored and 131,072 characters, about 60 µs to write, so
// one patient's 15,000 visits (within the table's max_rows) with that
// cost made `SELECT cost, COUNT(*) FROM visits GROUP BY cost` run 0.9 s
// longer upstream, and 30,000 of them past its 2 s slot. The key's text
// is now measured only when its weight and scale, read from the header,
// let it fit (pgemit numericTextLongSQL), with the same groups as before.
//
// The emitted SQL runs on the demo database, cost made a plain numeric,
// with one patient's 20,000 visits costing 100, then 9e131071, three
// times each alternately; the test fails when the fastest long run is
// more than 300 ms slower than the fastest short one. It also checks that
// the key keeps exactly the values it kept before.
func TestAttack108_NumericKeyTextTime(t *testing.T) {
	_, conn, ctx, ds := demoHospital(t)
	exec := execer(t, ctx, conn)
	exec("ALTER TABLE visits DROP CONSTRAINT IF EXISTS visits_patient_id_fkey")
	exec("ALTER TABLE visits ALTER COLUMN cost TYPE numeric")
	exec(`INSERT INTO visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay)
		SELECT 90108000 + g, 90108, '2023-01-01', 'oncology', 'x', 50, 100, 1 FROM generate_series(1, 20000) g`)
	exec("ANALYZE visits")

	p, err := RewriteWith(ds, "SELECT cost, COUNT(*) FROM visits GROUP BY cost", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.SQL, `octet_length(trim_scale("cost")::text) <= 1024`) {
		t.Fatalf("the key's length test is not in\n%s", p.SQL)
	}
	short, long := fastestShortLong(t, ctx, conn, ds, []*Plan{p}, func(on bool) {
		if on {
			exec("UPDATE visits SET cost = 9e131071 WHERE patient_id = 90108")
		} else {
			exec("UPDATE visits SET cost = 100 WHERE patient_id = 90108")
		}
	})
	t.Logf("fastest run with the patient's 20,000 costs 100: %v, 9e131071: %v", short, long)
	if long-short > 300*time.Millisecond {
		t.Errorf("the emitted SQL took %v longer when one patient's 20,000 visits cost 9e131071 (%v against %v): the key's text is written to measure it", long-short, long, short)
	}

	// The same values are keys as with the text measured alone.
	key := keyOf(p.SQL)
	var differ []string
	for _, v := range []string{"100", "1.50", "-0.0001", "NaN", "Infinity", "-Infinity", "9e131071", "-9e131071", "1e-16383",
		"1e1023", "-1e1023", "1e1024", "9e1024", "1e1025", "1e1026", "1.5e-1021", "1.5e-1022", "12345.6789e-1000", "0"} {
		var same bool
		q := "SELECT (" + strings.ReplaceAll(key, `"cost"`, "x") + ") IS NOT DISTINCT FROM (CASE WHEN octet_length(trim_scale(x)::text) <= 1024 THEN trim_scale(x) END) FROM (SELECT $1::numeric AS x) s"
		if err := conn.QueryRow(ctx, q, v).Scan(&same); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if !same {
			differ = append(differ, v)
		}
	}
	if len(differ) > 0 {
		t.Errorf("the key differs from the measured text's for %v", differ)
	}
}

// keyOf is the key expression dp_k0 of a single-table private-key SQL.
func keyOf(sql string) string {
	end := strings.Index(sql, " AS dp_k0")
	start := strings.LastIndex(sql[:end], `"patient_id" AS dp_unit, `)
	return sql[start+len(`"patient_id" AS dp_unit, `) : end]
}
