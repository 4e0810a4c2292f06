package release

import (
	"context"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5"
)

// TestUnitsBias_GroupedDistinctCount releases
//
//	SELECT department, COUNT(DISTINCT patient_id) FROM visits GROUP BY 1
//
// on PostgreSQL where 3,000 patients each visit all 7 departments
// (max_groups_per_unit 4) with SET dp.max_rows_per_unit = 1: a distinct
// count then counts a unit whole in min(G, L0·R) = min(7, 4) = 4 groups
// (dpplan.UnitGroups), so each patient counts 4/7 in each department, and
// every released count is about 1,714 where 3,000 patients are there, and
// the units left out sum to 3,000·3 = 9,000 over the groups (none is
// clipped: C ≥ G − L0 = 3). Issue 29 saw such counts stated "±3" with no word
// of the difference. The NOTICE must state the DP estimate of the units
// left out and that the intervals cover the bounded counts, not the
// numbers of distinct units, with the estimate per group (about 1,286 in
// each); the estimate (Laplace, a tenth of the query's ε, L1 = C =
// max(L0·R, G − 4) = 4; the total's half-width is √7 times one group's)
// must
// cover 9,000 in at least 85 of 100 releases (its stated 95% half-width is
// conservative, so a false rejection needs a Binomial(100, ≥ 0.95) below
// 85: probability below 1e-4). With dp.bias = off the NOTICE says in
// words what the intervals cover; EXPLAIN names the estimate.
func TestUnitsBias_GroupedDistinctCount(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE TABLE visits (visit_id bigint, patient_id bigint, visit_date date, department text,
		diagnosis text, age int, cost numeric(10,2), length_of_stay int);
		INSERT INTO visits SELECT p * 10 + d, p, '2021-01-01', (ARRAY['cardiology', 'emergency', 'neurology', 'oncology', 'orthopedics', 'pediatrics', 'surgery'])[d],
			'flu', 40, 10, 1 FROM generate_series(1, 3000) p, generate_series(1, 7) d`); err != nil {
		t.Fatal(err)
	}
	ds := loadPolicy(t)
	const q = "SELECT department, COUNT(DISTINCT patient_id) AS n FROM visits GROUP BY 1"
	p, err := rewrite.RewriteWith(ds, q, rewrite.Options{MaxRowsPerUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasBias() || !p.Measures[len(p.Measures)-1].Units {
		t.Fatalf("plan measures %+v: want the distinct counts' bias estimate", p.Measures)
	}
	r := newTestReleaser(t, &memLedger{limit: 1e9}, 7)
	up := &pgUpstream{conn: conn}
	est := regexp.MustCompile(`leave out about (-?[0-9]+) units summed over the groups \(([0-9.]+)% of the total, ±([0-9.e+]+), epsilon [0-9.]+\); per group about cardiology [0-9]+, emergency [0-9]+, [^;]* \(each ±[0-9.e+]+\); the intervals cover these bounded counts, not the numbers of distinct units`)
	covered, notice := 0, ""
	for range 100 {
		res, err := r.Run(ctx, Request{Analyst: "a", Dataset: ds, Plan: p, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true})
		if err != nil {
			t.Fatal(err)
		}
		notice = res.Notice
		m := est.FindStringSubmatch(res.Notice)
		if m == nil {
			t.Fatalf("NOTICE %q does not state the units the distinct counts leave out", res.Notice)
		}
		x, _ := strconv.ParseFloat(m[1], 64)
		h, _ := strconv.ParseFloat(m[3], 64)
		if math.Abs(x-9000) <= h {
			covered++
		}
		for _, row := range res.Rows {
			if n, _ := strconv.ParseFloat(*row[1], 64); n < 1600 || n > 1830 {
				t.Fatalf("%s: released %v, want the bounded count 1,714 (4/7 of 3,000) within its noise", *row[0], n)
			}
		}
	}
	t.Logf("the estimate of the units left out covered 9,000 in %d of 100 releases; last NOTICE: %s", covered, notice)
	if covered < 85 {
		t.Errorf("the estimate covered the 9,000 units left out in %d of 100 releases, want ≥ 85", covered)
	}

	// dp.bias = off: no estimate, but the words.
	off, err := rewrite.RewriteWith(ds, q, rewrite.Options{NoBias: true, MaxRowsPerUnit: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(ctx, Request{Analyst: "a", Dataset: ds, Plan: off, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Notice, "their intervals cover these bounded counts, which can be far below the numbers of distinct units") {
		t.Errorf("NOTICE %q (dp.bias = off) does not say what the intervals cover", res.Notice)
	}
	for _, tc := range []struct {
		plan *rewrite.Plan
		want string
	}{{p, "units left out of the distinct counts by weighting"}, {off, "Note: distinct counts count each unit in at most 4 groups"}} {
		_, rows, err := Explain(ds, tc.plan, Params{Epsilon: 1, Mechanism: policy.MechanismLaplace})
		if err != nil {
			t.Fatal(err)
		}
		var text []string
		for _, row := range rows {
			text = append(text, *row[0])
		}
		if !strings.Contains(strings.Join(text, "\n"), tc.want) {
			t.Errorf("EXPLAIN does not contain %q:\n%s", tc.want, strings.Join(text, "\n"))
		}
	}
}
