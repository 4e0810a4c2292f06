package integration

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRound111_PandasRoundOverAggregate: a new analyst's pandas
// `pd.read_sql("SELECT department, ROUND(AVG(cost), 2) … GROUP BY
// department", engine)` was refused with 0A000 ("function round is not
// supported in DP queries", with a hint that did not say how to round),
// though the same ROUND over a window function was answered. Scalar
// functions over aggregates are now post-processing of the released
// values (one charge per statement): ROUND gives two decimals, sqrt, floor
// and AVG(cost)::int (an int column in the DataFrame) are answered, and ROUND of a raw column is still refused.
func TestRound111_PandasRoundOverAggregate(t *testing.T) {
	requireDemo(t)
	needPython(t, "python3-psycopg2 python3-sqlalchemy python3-pandas", "psycopg2", "sqlalchemy", "pandas")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := driverProxy(t, "prd")
	url := strings.Replace(p.dsn("prd"), "postgres://", "postgresql+psycopg2://", 1)
	out := runClient(t, ctx, nil, python3, "testdata/drivers/pandas_round.py", url)
	wantLines(t, "pandas", out, "columns department,avg_cost", "rows 7", "two decimals True",
		"in range True", "sqrt floor sd,k 1", "int cast int64 7", "raw rounded refused 0A000")
	// The ::int statement's leaf is the ROUND statement's (department,
	// AVG(cost)): its answer comes from the cache, uncharged.
	wantCharges(t, ctx, "prd", 2)
}

// TestReview112_OuterErrorUncharged: an outer SQL that names a column the
// DP aggregates' results do not have (the analyst forgot a GROUP BY key:
// SELECT department, ROUND(AVG(age), 1), diagnosis … GROUP BY
// department) failed with 42703 on the shadow only after its leaf was
// charged (round 111 made this common: the same statement without ROUND
// is refused uncharged by the planner). The outer SQL is described on the
// shadow before any charge.
func TestReview112_OuterErrorUncharged(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := driverProxy(t, "rv112")
	c := connect(t, ctx, p.dsn("rv112"))
	for _, q := range []string{
		"SELECT department, ROUND(AVG(age), 1), diagnosis FROM visits GROUP BY department",
		"SELECT department, rank() OVER (ORDER BY COUNT(*)), diagnosis FROM visits GROUP BY department",
		"SELECT round(SUM(cost), 2), cost FROM visits",
	} {
		_, err := c.Exec(ctx, q)
		if got := sqlState(err); got != "42703" {
			t.Errorf("%s: SQLSTATE %q (%v), want 42703", q, got, err)
		}
	}
	wantCharges(t, ctx, "rv112", 0)
	// A correct statement is still answered and charged once.
	if _, err := c.Exec(ctx, "SELECT department, ROUND(AVG(age), 1) FROM visits GROUP BY department"); err != nil {
		t.Fatal(err)
	}
	wantCharges(t, ctx, "rv112", 1)
}

// TestOuterRuntimeErrorSaysCharged: an outer SQL that fails only on the
// released values (sqrt of a noisy average minus 1,000, below zero) fails
// after its leaf was charged; the error said only "the error is in the
// SQL around the DP aggregates", so the analyst could not tell that ε was
// spent nor that the corrected statement is free. Its hint now says both,
// the corrected statement is answered from the cache uncharged, and an
// error found before the charge says nothing was charged.
func TestOuterRuntimeErrorSaysCharged(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := driverProxy(t, "orun")
	c := connect(t, ctx, p.dsn("orun"))
	_, err := c.Exec(ctx, "SELECT sqrt(AVG(age) - 1000) FROM visits")
	if got := sqlState(err); got != "2201F" {
		t.Fatalf("sqrt of a negative: SQLSTATE %q (%v), want 2201F", got, err)
	}
	if h := hintOf(err); !strings.Contains(h, "were charged") || !strings.Contains(h, "no charge") {
		t.Errorf("hint %q does not say the aggregates were charged and the corrected statement is free", h)
	}
	wantCharges(t, ctx, "orun", 1)
	// The same error again, from the cache: nothing more charged, and the
	// hint does not claim a charge.
	_, err = c.Exec(ctx, "SELECT sqrt(AVG(age) - 1000) FROM visits")
	if h := hintOf(err); sqlState(err) != "2201F" || strings.Contains(h, "were charged") {
		t.Errorf("repeated from the cache: %v, hint %q", err, h)
	}
	if _, err := c.Exec(ctx, "SELECT sqrt(AVG(age)) FROM visits"); err != nil {
		t.Fatal(err)
	}
	wantCharges(t, ctx, "orun", 1)
	_, err = c.Exec(ctx, "SELECT department, ROUND(AVG(age), 1), diagnosis FROM visits GROUP BY department")
	if h := hintOf(err); sqlState(err) != "42703" || !strings.Contains(h, "nothing was charged") {
		t.Errorf("before the charge: %v, hint %q", err, h)
	}
	wantCharges(t, ctx, "orun", 1)
}
