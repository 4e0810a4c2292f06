package proxy

import (
	"strings"
	"testing"
	"time"
)

// TestAttack73_WidthBucketBoundOutOfRangeIsIncident (attack round 73,
// severity medium-high: rules 3 and 1, and G5's totality: a statement the
// planner admits fails upstream on every row after its charge, is recorded
// as the analyst's incident and suspends her on the dataset).
//
// width_bucket's bounds are checked by rewrite.planExprKey
// (rewrite/keyexpr.go:131) only to match decimalRE and to parse as a
// big.Rat, which accepts decimal exponents up to 10⁶; their text is
// emitted as is into the upstream SQL. PostgreSQL's numeric holds at most
// 131,072 digits before the point and 16,383 after, so
// width_bucket(age, 0, 1e999999, 10) (or a bound of 1e-999999) makes the
// data server raise 22003 "value overflows numeric format" while parsing
// the emitted SQL. That happens after the reservation: the analyst gets
// the fixed XX000 "failed after its privacy charge", the charge stands,
// the ledger records an incident, and with the default incident_limit of 1
// every further DP statement of the analyst on the dataset is refused
// (42501) until a steward resumes her. WHERE and FILTER literals of the
// same size are refused before the charge with 22003 (the planner checks
// them); the bounds of width_bucket are not.
//
// The failure depends on the text alone (no data), so it leaks nothing,
// but it is a charge lost to a statement that should have been refused,
// an incident that is not one, and a self-suspension any analyst can
// trigger, repeatable to flood the steward with incidents.
//
// Asserted: the statement is refused before its charge, or answered; and
// the analyst's next DP statement is answered.
//
// Suggested fix: hold width_bucket's bounds to the planner's literal
// bounds (30 significant digits, magnitude 10⁻³⁰…10³⁰, as inside
// aggregates), or at least to numeric's range, refusing with 22003 and a
// hint before the charge.
func TestAttack73_WidthBucketBoundOutOfRangeIsIncident(t *testing.T) {
	r := startRealDP(t, nil)
	pc := r.connect(t)
	for _, q := range []string{
		"SELECT width_bucket(age, 0, 1e999999, 10) AS k, COUNT(*) FROM visits GROUP BY 1",
		"SELECT width_bucket(age, 0, 1e-999999, 10) AS k, COUNT(*) FROM visits GROUP BY 1",
	} {
		n0 := len(r.charges(t))
		_, err := execLong65(t, pc, q)
		charged := len(r.charges(t)) - n0
		t.Logf("%q: %s %v; %d charges", q, sqlstate(err), err, charged)
		if err != nil && charged > 0 {
			t.Errorf("%q: charged %d, then failed with %s %q: a bound PostgreSQL's numeric cannot hold must be refused before the charge",
				q, charged, sqlstate(err), err)
		}
	}
	if _, err := execLong65(t, pc, "SELECT COUNT(*) FROM visits"); err != nil {
		t.Errorf("the analyst's next DP statement: %s %v (suspended by an incident her own statement's text caused)", sqlstate(err), err)
	}
}

// TestAttack73_WidthBucketLongBoundPassesWorkBound (attack round 73,
// severity medium: rule 1, the data server's work per row and the time
// slot; an accepted statement passes its time-out after the charge and
// suspends the analyst).
//
// The work bound (dpplan/work.go) weighs a row by the conditions of the
// WHERE clause, FILTERs and CASE keys and by the expressions inside the
// aggregates, whose constants have at most 30 significant digits. A
// width_bucket key's bounds are neither counted nor limited in digits
// (rewrite/keyexpr.go:131: any decimal big.Rat parses): PostgreSQL's
// width_bucket(numeric) computes (x − low)·count / (high − low) per row at
// the bounds' full precision, so a bound of 1,000 digits makes every row
// cost about 0.3 ms (round 73's probe: 10,000 rows in 3.4 s against 21 ms
// with width_bucket(age, 0, 110.3, 10); 16,000 digits reached the 30 s
// time-out). The plan's work bound and time slot are the same as for
// short bounds, so the statement is accepted and charged, then times out
// upstream: XX000 after the charge, an incident, and the analyst is
// suspended on the dataset (incident_limit 1).
//
// Set-up as TestAttack60_QuantilesPassTimeoutAfterCharge: 20,000 visits,
// max_rows 20,000, work_rate 500,000 rows/s, response_time 500 ms and a
// 1 s statement time-out (every figure scales with the rows).
//
// Asserted: a statement the proxy charges finishes within its time-out
// (answered, or refused before the charge), and the analyst is not
// suspended by a statement the planner accepted.
//
// Suggested fix: hold width_bucket's bounds to the literal bounds of
// dpplan/value.go (30 significant digits, 10⁻³⁰…10³⁰), or weigh the key's
// per-row work by its bounds' digits in the work bound.
func TestAttack73_WidthBucketLongBoundPassesWorkBound(t *testing.T) {
	b, ts := startTimedDP(t)
	pc := ts.connect(t)
	key := func(low string) string {
		return "SELECT width_bucket(age, " + low + ", 110.3, 10) AS k, COUNT(*) FROM visits GROUP BY 1"
	}
	start := time.Now()
	if _, err := execAll(t, pc, key("0")); err != nil {
		t.Fatalf("control: width_bucket(age, 0, 110.3, 10): %v", err)
	}
	t.Logf("control answered in %v", time.Since(start).Round(time.Millisecond))
	long := key("0." + strings.Repeat("7", 1000))
	for _, q := range []string{key("0"), long} {
		explain, err := execAll(t, pc, "EXPLAIN "+q)
		if err != nil && q == long && sqlstate(err) == "22003" {
			t.Logf("EXPLAIN of the long bound refused before any charge: %v", err)
			continue
		}
		if err != nil {
			t.Fatalf("EXPLAIN: %v", err)
		}
		for _, row := range rows(explain[0]) {
			if strings.Contains(row[0], "Work:") || strings.Contains(row[0], "Time slot:") {
				t.Logf("EXPLAIN (a %d-byte statement): %s", len(q), row[0])
			}
		}
	}
	before := len(chargesOf(t, b.ledgerDSN))
	start = time.Now()
	_, err := execAll(t, pc, long)
	took := time.Since(start)
	charged := len(chargesOf(t, b.ledgerDSN)) > before
	t.Logf("a width_bucket bound of 1,000 digits: %s %v after %v (charged: %v)", sqlstate(err), err, took.Round(time.Millisecond), charged)
	if err != nil && charged {
		t.Errorf("a width_bucket bound of 1,000 digits was accepted at the work bound of a short one and charged, then failed after %v: %v — an accepted query passed the %v statement time-out after its charge",
			took.Round(time.Millisecond), err, timedDPTimeout)
	}
	if _, err := execAll(t, pc, "SELECT COUNT(*) FROM visits"); err != nil {
		t.Errorf("after that query the analyst's next DP statement fails: %v", err)
	}
}
