package release

import (
	"context"
	"math"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest/demodb"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5"
)

// TestUnitsBias_Demo releases issue 29's query on the demo data under its
// policy (max_groups_per_unit 1, 20 rows per unit, dp.contribution = auto)
// at ε = 1:
//
//	SELECT department, COUNT(DISTINCT patient_id) FROM visits GROUP BY 1
//
// Weighting each patient in g departments by 1/g released about a third of
// the truth (cardiology 8,704 against 22,798). A distinct count now counts
// a unit whole in min(G, L0·R) = min(7, 20) = 7 groups (dpplan.UnitGroups),
// so no patient is weighted: every department's released count must lie
// within 4 times its stated 95% half-width of the truth, and the NOTICE
// must not speak of units left out. The noise is Laplace with the stated
// half-width b·ln 20, so one department misses with probability 20⁻⁴ and
// the test fails falsely with probability below 7·20⁻⁴ ≈ 4.4e-5.
func TestUnitsBias_Demo(t *testing.T) {
	_, conn := demodb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ds, err := policy.Load("../examples/policies/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const q = "SELECT department, COUNT(DISTINCT patient_id) FROM visits GROUP BY 1"
	truth := map[string]float64{}
	for _, row := range textQuery(t, ctx, conn, q) {
		truth[row[0]], _ = strconv.ParseFloat(row[1], 64)
	}
	p, err := rewrite.RewriteWith(ds, q, rewrite.Options{AutoBounds: true})
	if err != nil {
		t.Fatal(err)
	}
	r := newTestReleaser(t, &memLedger{limit: 1e9}, 3)
	res, err := r.Run(ctx, Request{Analyst: "a", Dataset: ds, Plan: p, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: &pgUpstream{conn: conn}, NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NOTICE: %s", res.Notice)
	m := regexp.MustCompile(`95% error ±([0-9.e+]+) \(count, epsilon`).FindStringSubmatch(res.Notice)
	if m == nil || regexp.MustCompile(`leave out|bounded counts`).MatchString(res.Notice) {
		t.Fatalf("NOTICE %q: want one half-width for the counts and no units left out", res.Notice)
	}
	h, _ := strconv.ParseFloat(m[1], 64)
	if len(res.Rows) != 7 {
		t.Fatalf("%d departments released, want 7", len(res.Rows))
	}
	for _, row := range res.Rows {
		d := *row[0]
		n, _ := strconv.ParseFloat(*row[1], 64)
		t.Logf("%s: released %v, truth %v, ±%v", d, n, truth[d], h)
		if math.Abs(n-truth[d]) > 4*h {
			t.Errorf("%s: released %v, truth %v: off by more than 4 × ±%v", d, n, truth[d], h)
		}
	}
}

// textQuery runs sql and returns its rows as text.
func textQuery(t *testing.T, ctx context.Context, conn *pgx.Conn, sql string) [][]string {
	t.Helper()
	rows, err := conn.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		var row []string
		for _, v := range rows.RawValues() {
			row = append(row, string(v))
		}
		out = append(out, row)
	}
	return out
}
