package rewrite

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest/demodb"
	"github.com/dpproxy/dpproxy/policy"
)

// TestAttack107_LongTextJoinTime is attack round 107: a join reads a
// protected table's text values whole where the plan's conditions do not.
// A unit join's cut hashes each row's values (ROW(…)::text) and sorts
// them, and a hash join on a text column hashes the key. A compressible
// text is stored at about 1/90 of its length, so one patient's 20 visits
// with diagnoses of 100 MB (1.1 MB stored each) made the self-join
// below run 17.7 s against 0.23 s (a 16 s slot), and a join to a public
// table on the diagnosis 2.3 s against 0.1 s (a 1 s slot). Such values
// are now read through a length test (dpplan.MaxJoinTextBytes; pgemit
// joinText): NULL in a cut table, joining nothing in a join condition.
//
// The emitted SQL runs on the demo database with one patient's 20
// diagnoses short, then of 10 MB (repeated, so compressed), three times
// each alternately; the test fails when the fastest long run is more than
// 300 ms slower than the fastest short one (before: about 1.7 s slower).
func TestAttack107_LongTextJoinTime(t *testing.T) {
	_, conn := demodb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	text, err := os.ReadFile("../examples/policies/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.Replace(string(text), "\n  patients:\n", `
  codes:
    public: true
    max_rows: 100
    columns:
      code:    {type: text, max_rows_per_value: 1}
      chapter: {type: text, public_values: [A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P, Q, R, S, T, U, V, W, X, Y, Z]}
  patients:
`, 1)
	ds, err := policy.Parse(strings.NewReader(yaml), "hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exec := execer(t, ctx, conn)
	exec("CREATE TABLE codes AS SELECT DISTINCT diagnosis AS code, upper(left(diagnosis, 1)) AS chapter FROM visits")
	exec("ANALYZE codes")
	exec("INSERT INTO patients (patient_id, birth_year, sex, region) VALUES (90107, 1970, 'F', 'north')")
	exec(`INSERT INTO visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay)
		SELECT 90107000 + g, 90107, '2023-01-01', 'oncology', 'short', 50, 100, 1 FROM generate_series(1, 20) g`)
	exec("CREATE TABLE long_text AS SELECT 90107000 + g AS visit_id, repeat('a', 10000000) || g AS diagnosis FROM generate_series(1, 20) g")

	var plans []*Plan
	for _, q := range []string{
		"SELECT COUNT(*) FROM visits v1 JOIN visits v2 ON v1.patient_id = v2.patient_id WHERE v2.diagnosis = 'E11'",
		"SELECT COUNT(*) FROM visits v JOIN codes c ON v.diagnosis = c.code",
	} {
		p, err := RewriteWith(ds, q, Options{})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if !strings.Contains(p.SQL, `octet_length(`) || !strings.Contains(p.SQL, `"diagnosis") <= 1024`) {
			t.Errorf("%s: no length test of the diagnosis in\n%s", q, p.SQL)
		}
		plans = append(plans, p)
	}
	short, long := fastestShortLong(t, ctx, conn, ds, plans, func(on bool) {
		if on {
			exec("UPDATE visits v SET diagnosis = l.diagnosis FROM long_text l WHERE l.visit_id = v.visit_id")
		} else {
			exec("UPDATE visits SET diagnosis = 'short' WHERE patient_id = 90107")
		}
	})
	t.Logf("fastest run with the patient's diagnoses short: %v, of 10 MB: %v", short, long)
	if long-short > 300*time.Millisecond {
		t.Errorf("the joins took %v longer when one patient's 20 diagnoses had 10 MB (%v against %v): they read the values whole", long-short, long, short)
	}
}

// TestAttack107_LongPublicKeyTime: a public key's domain test of 9 values
// or more is an IN list PostgreSQL hashes, reading the value whole once a
// row (as lower() does a citext key's). One patient's 20 departments of
// 100 MB (compressed to 1.1 MB) made a grouped COUNT by a 9-value key run
// 2.35–2.50 s against 0.28–0.46 s upstream, past its 1 s slot. A value
// longer than any the domain test can accept is now NULL before it
// (pgemit publicKeyBytes). The test plants 20 MB values and fails when
// the fastest long run is more than 150 ms slower than the fastest short
// one (before: 213 ms slower; after: 6 ms).
func TestAttack107_LongPublicKeyTime(t *testing.T) {
	_, conn := demodb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	text, err := os.ReadFile("../examples/policies/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.Replace(string(text), "pediatrics, surgery]", "pediatrics, surgery, psychiatry, radiology]", 1)
	ds, err := policy.Parse(strings.NewReader(yaml), "hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exec := execer(t, ctx, conn)
	exec("INSERT INTO patients (patient_id, birth_year, sex, region) VALUES (90108, 1970, 'F', 'north')")
	exec(`INSERT INTO visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay)
		SELECT 90108000 + g, 90108, '2023-01-01', 'oncology', 'short', 50, 100, 1 FROM generate_series(1, 20) g`)
	exec("CREATE TABLE long_text AS SELECT 90108000 + g AS visit_id, repeat('a', 20000000) || g AS department FROM generate_series(1, 20) g")

	q := "SELECT department, COUNT(*) FROM visits GROUP BY department"
	p, err := RewriteWith(ds, q, Options{})
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if !strings.Contains(p.SQL, `octet_length("department") <= 44`) {
		t.Errorf("%s: no length test of the department in\n%s", q, p.SQL)
	}
	short, long := fastestShortLong(t, ctx, conn, ds, []*Plan{p}, func(on bool) {
		if on {
			exec("UPDATE visits v SET department = l.department FROM long_text l WHERE l.visit_id = v.visit_id")
		} else {
			exec("UPDATE visits SET department = 'oncology' WHERE patient_id = 90108")
		}
	})
	t.Logf("fastest run with the patient's departments short: %v, of 20 MB: %v", short, long)
	if long-short > 150*time.Millisecond {
		t.Errorf("the grouped count took %v longer when one patient's 20 departments had 20 MB (%v against %v): its domain test reads the values whole", long-short, long, short)
	}
}
