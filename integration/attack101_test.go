package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestAttack101_LongTextLikeTime is attack round 101: the work bound
// counted a LIKE by its pattern's length, not by the bytes of the value it
// reads, and PostgreSQL's matcher compares a '%' segment at every start
// in the value (like_match.c): LIKE '% ____…____Q' costs about 220 steps
// per space of the value. One patient with 20 visits whose diagnosis is
// 1 MB of text made COUNT(*) … WHERE diagnosis LIKE that pattern run
// 1.3 s upstream against its 1 s slot: at ε = 0.001 every answer took 2 s
// on the neighbouring database where the patient's diagnoses are long and
// 1 s where they are short (and a leading condition, LIKE 'HIV%' with the
// patient's id, made the time say whether their text began so). Now a LIKE
// reads a value of at most dpplan.MaxConditionTextBytes (a longer one is NULL
// to it) and its work at that length is counted: the attack's pattern is
// refused before the charge (54001), and an accepted LIKE answers in the
// same slot on both databases.
//
// The two databases differ in one patient's rows (their diagnoses, short
// or 1 MB), alternated before each answer. For each query that is
// answered, the test fails when the answers' times on the two are
// distinguishable: Mann–Whitney p < timingAlpha over timingN answers each
// (false failure probability timingAlpha = 10⁻⁴ when the padding hides
// the difference; load shifts both kinds alike, since they alternate) or
// medians more than 250 ms apart (half the response time: the slots are
// whole doublings of it).
func TestAttack101_LongTextLikeTime(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	up := connect(t, ctx, env.upstreamDSN)
	const patient = 901010
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := up.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	cleanup := func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = up.Exec(c, "DELETE FROM visits WHERE patient_id = $1", patient)
		_, _ = up.Exec(c, "DELETE FROM patients WHERE patient_id = $1", patient)
	}
	cleanup()
	t.Cleanup(cleanup)
	exec("INSERT INTO patients (patient_id, birth_year, sex, region) VALUES ($1, 1970, 'F', 'north')", patient)
	exec(`INSERT INTO visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay)
		SELECT 90101000 + g, $1, '2023-01-01', 'oncology', 'HIV follow-up', 50, 100, 1 FROM generate_series(1, 20) g`, patient)
	long := func(on bool) {
		t.Helper()
		if on {
			exec("UPDATE visits SET diagnosis = 'HIV ' || repeat('the patient was seen for a routine check and reports mild pain ', 16000) WHERE patient_id = $1", patient)
		} else {
			exec("UPDATE visits SET diagnosis = 'HIV follow-up' WHERE patient_id = $1", patient)
		}
	}

	const pad = 500 * time.Millisecond
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		cfg["analysts"].(map[string]any)["wendy"] = map[string]any{"password": "plain:wendy"}
		cfg["datasets"].(map[string]any)["hospital"].(map[string]any)["response_time"] = pad.String()
	})
	p := startProxy(t, cfgPath, addr)
	c := connect(t, ctx, p.dsn("wendy"))
	if _, err := c.Exec(ctx, "SET dp.epsilon = 0.001; SET dp.cache = off; SET dp.contribution = fixed"); err != nil {
		t.Fatal(err)
	}
	median := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for _, tc := range []struct{ name, where string }{
		{"attack", "diagnosis LIKE '% " + strings.Repeat("_", 220) + "Q'"},
		{"prefix", fmt.Sprintf("patient_id = %d AND diagnosis LIKE 'HIV%%'", patient)},
	} {
		q := func(i int) string {
			return fmt.Sprintf("SELECT COUNT(*) FROM visits WHERE %s AND age <> %d", tc.where, 1000+i)
		}
		run := func(i int) (time.Duration, error) {
			start := time.Now()
			var v float64
			err := c.QueryRow(ctx, q(i)).Scan(&v)
			return time.Since(start), err
		}
		if _, err := run(0); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "54001" {
				t.Logf("%s: refused before the charge: %s", tc.name, pe.Message)
				continue
			}
			t.Fatalf("%s: %v", tc.name, err)
		}
		var longD, shortD []time.Duration
		for i := 1; i <= timingN; i++ {
			for _, on := range []bool{true, false} {
				long(on)
				d, err := run(2*i + map[bool]int{true: 0, false: 1}[on])
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				if on {
					longD = append(longD, d)
				} else {
					shortD = append(shortD, d)
				}
			}
		}
		diff := median(longD) - median(shortD)
		pv := mannWhitneyP(longD, shortD)
		t.Logf("%s: long diagnoses median %v, short %v; Mann–Whitney p = %.3g", tc.name, median(longD), median(shortD), pv)
		if diff > pad/2 || diff < -pad/2 || pv < timingAlpha {
			t.Errorf("%s: the answer's time shows whether one patient's diagnoses are long (medians %v and %v, p = %.3g)", tc.name, median(longD), median(shortD), pv)
		}
	}
}
