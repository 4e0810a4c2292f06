package release

import (
	"context"
	"math"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5"
)

// TestUnitsBias_Demo releases issue 29's query on the demo data under its
// policy (max_groups_per_unit 1, dp.contribution = auto) at ε = 1:
//
//	SELECT department, COUNT(DISTINCT patient_id) FROM visits GROUP BY 1
//
// Each patient in g departments counts 1/g in each, so the released counts
// are about a third of the truth (cardiology 8,704 against 22,798). The
// NOTICE's estimate of the units left out, per department, added to the
// released count must come within 4 times the estimate's stated 95%
// half-width of the truth (C ≥ G − L0 = 6: nothing is clipped and the
// estimate is unbiased). Its noise is
// Laplace with that half-width equal to b·ln 20, so one department misses
// with probability 20⁻⁴ and the test fails falsely with probability below
// 7·20⁻⁴ ≈ 4.4e-5 (the counts' own noise, ±4, is negligible beside ±666).
func TestUnitsBias_Demo(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the demo's 200,000 visits")
	}
	dsn := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := demo.Load(ctx, dsn, demo.Generate(demo.Seed)); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
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
	m := regexp.MustCompile(`; per group about ([^;]*) \(each ±([0-9.e+]+)\); the intervals cover these bounded counts`).FindStringSubmatch(res.Notice)
	if m == nil {
		t.Fatalf("NOTICE %q has no per-group estimate", res.Notice)
	}
	h, _ := strconv.ParseFloat(m[2], 64)
	left := map[string]float64{}
	for _, item := range regexp.MustCompile(`([a-z]+) ([0-9]+)`).FindAllStringSubmatch(m[1], -1) {
		left[item[1]], _ = strconv.ParseFloat(item[2], 64)
	}
	for _, row := range res.Rows {
		d := *row[0]
		n, _ := strconv.ParseFloat(*row[1], 64)
		l, ok := left[d]
		if !ok {
			t.Fatalf("no estimate for %s in %q", d, m[1])
		}
		t.Logf("%s: released %v + left out about %v = %v; truth %v", d, n, l, n+l, truth[d])
		if n > truth[d]/2 {
			t.Errorf("%s: released %v of %v: the demo's patients should count about 1/g in each department", d, n, truth[d])
		}
		if math.Abs(n+l-truth[d]) > 4*h {
			t.Errorf("%s: released %v + estimate %v = %v, truth %v: off by more than 4 × ±%v", d, n, l, n+l, truth[d], h)
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
