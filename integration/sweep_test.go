package integration

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/examples"
	"github.com/jackc/pgx/v5"
)

// TestSweep_Honesty is issue 29's honesty sweep ("done when" 1): grouped
// and ungrouped shapes at ε = 1 through a real `dpproxy serve` on the demo
// data and the demo's own policy (examples/policies/hospital.yaml: rows
// per unit chosen by DP, bias estimates on), its per-analyst budget raised
// so that each shape's releases fit. Every aggregate kind (COUNT, COUNT
// DISTINCT, SUM, AVG, STDDEV, VAR_SAMP, percentile_cont, percentile_disc,
// MIN, MAX) over public keys, date keys (date_trunc), a private key
// (diagnosis, DP partition selection), a join on the unit (visits JOIN
// patients) and no keys; each shape is released SWEEP_RELEASES times
// (default 500 with make sweep; the test is skipped unless it is set) with
// SET dp.cache = off, and every released cell is compared with the truth
// read upstream:
//
//   - coverage: the share of cells whose stated 95% half-width (the error
//     column of SET dp.error_columns = on) covers the quantity the interval
//     is about. That is the bounded truth PRIVACY.md defines ("Two levels of
//     bounding"), computed here in SQL of our own from the policy's limits at
//     the rows per unit the NOTICE states: each patient's rows capped at R
//     per group and weighted by min(1, L0·R/t) with public keys; for a
//     distinct count each patient counts min(1, L0/g) in each of its g
//     groups; with a private key or a quantile each patient keeps its L0
//     groups first in the order of hashtextextended(unit ‖ keys, 7919). The
//     NOTICE of each of these says that the interval covers the bounded
//     answer. Quantiles state their interval in ranks ("within ±K rows
//     of the true one in the order of …, to the bucket width W"): a release covers when the ranks of the released value
//     (± the bucket width) lie within K of the target rank of the bounded
//     values.
//   - extreme errors: no cell may be farther from the truth than 3× its
//     stated half-width plus its stated bias (for distinct counts the
//     NOTICE's estimate of the units the weighting left out, per group,
//     with 3× its own half-width; for counts the rows bounding removed, in
//     all groups, with 3× its half-width). The truth here is the plain
//     aggregate on PostgreSQL where a bias estimate is stated, and the
//     bounded truth otherwise (private keys and quantiles, whose NOTICE says
//     that what the choice of groups removed is not estimated).
//
// False rejections (per shape and column, n = releases × groups cells,
// independent given the data: each cell has its own noise; shapes without
// keys, one cell per release, run 4 × SWEEP_RELEASES releases):
//   - coverage must lie in [0.93, 0.97]. For calibrated intervals the
//     number of covered cells is Binomial(n, 0.95); P(outside) is 0.030 at
//     n = 500 (why ungrouped shapes run 2,000), 4.5·10⁻⁵ at n = 2,000,
//     5.9·10⁻⁶ at n = 2,500 (5 groups), 1.1·10⁻⁷ at n = 3,500. Intervals
//     that are conservative (coverage above 0.97) fail on purpose: the issue
//     asks for intervals that are tight as well as honest. Two exceptions
//     are reported in the table but only held to the lower limit: the
//     quantiles' rank statement, which release/quantile.go derives as a
//     bound "whatever the data" (the exponential mechanism's utility
//     bound: ±1,016 ranks for a department's median at ε = 1, where the
//     errors seen are far smaller), and whole-number outputs whose stated
//     half-width is below 20: a released count is an integer, so the
//     smallest half-width that covers 95% for every truth covers more for
//     some (noise of scale 1.11: ±3 covers 96.1%, ±2 only 90.4%).
//   - a cell beyond 3× its half-width: for Laplace noise (continuous or
//     discrete) the probability is at most 0.05³ = 1.25·10⁻⁴ per cell (far
//     less for Gaussian noise, and for sums of independent Laplace noises
//     such as a derived SUM's; AVG and variances are ratios of noisy values,
//     whose tails this sweep measures), so the test allows the smallest k with
//     P(Binomial(n, 1.25·10⁻⁴) > k) < 10⁻⁴: false rejection below 0.01% per
//     column.
//
// Over the sweep's 30 columns the test falsely rejects with probability
// below 0.5%.
//
// Results (the table this test prints) are recorded in BENCHMARKS.md,
// "Issue 29: the honesty sweep". Run it with
//
//	make sweep                    # SWEEP_RELEASES=500
//	SWEEP_RELEASES=40 SWEEP_ONLY=public,join go test -count=1 -run '^TestSweep_Honesty$' -v ./integration
func TestSweep_Honesty(t *testing.T) {
	releases, _ := strconv.Atoi(os.Getenv("SWEEP_RELEASES"))
	if releases <= 0 {
		t.Skip("the honesty sweep: set SWEEP_RELEASES (make sweep sets 500)")
	}
	requireDemo(t)
	only := os.Getenv("SWEEP_ONLY")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	var polErr error
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		text := strings.Replace(string(examples.HospitalPolicy()), "  epsilon: 3.0 ", "  epsilon: 100000 ", 1)
		text = strings.Replace(text, "  delta: 1.0e-6\n", "  delta: 0.01\n", 1)
		if !strings.Contains(text, "epsilon: 100000") || !strings.Contains(text, "delta: 0.01") {
			polErr = errors.New("the demo policy's budget line changed")
			return
		}
		dir := t.TempDir()
		polErr = os.WriteFile(filepath.Join(dir, "hospital.yaml"), []byte(text), 0o600)
		cfg["policies"] = dir
	})
	if polErr != nil {
		t.Fatal(polErr)
	}
	shapes := sweepShapes()
	for i := range shapes {
		withAnalyst(t, cfgPath, fmt.Sprintf("sweep%02d", i))
	}
	p := startProxy(t, cfgPath, addr)

	var table []string
	table = append(table, fmt.Sprintf("%-34s %-16s %6s %8s %9s %7s %s", "shape", "column", "cells", "covered", "coverage", ">3h+b", "rows/unit chosen"))
	failed := false
	for i, sh := range shapes {
		if !sweepChosen(sh.name, only) {
			continue
		}
		analyst := fmt.Sprintf("sweep%02d", i)
		start := time.Now()
		n := releases
		if sh.keys == 0 {
			n = 4 * releases // one cell per release: at least 2,000 cells per column (see the comment)
		}
		res := runSweepShape(t, ctx, p.dsn(analyst), sh, n)
		t.Logf("%s: %d releases in %v", sh.name, n, time.Since(start).Round(time.Second))
		for _, col := range res.cols {
			c := res.byCol[col]
			cov := float64(c.covered) / float64(c.cells)
			allowed := allowedMisses(c.cells, 1.25e-4, 1e-4)
			mark := ""
			switch {
			case cov < 0.93:
				mark += " COVERAGE"
			case cov > 0.97 && c.rankBound:
				mark += " (rank bound: not tight)"
			case cov > 0.97 && c.whole && c.minWidth < 20:
				mark += " (whole numbers, ±" + strconv.FormatFloat(c.minWidth, 'g', 4, 64) + ": quantized)"
			case cov > 0.97:
				mark += " COVERAGE"
			}
			if c.extreme > allowed {
				mark += " EXTREME"
			}
			if c.cells < n {
				mark += " FEW-CELLS"
			}
			if strings.Contains(mark, "COVERAGE") || strings.Contains(mark, "EXTREME") || strings.Contains(mark, "FEW-CELLS") {
				failed = true
			}
			line := fmt.Sprintf("%-34s %-16s %6d %8d %9.4f %4d/%-2d %s%s", sh.name, col, c.cells, c.covered, cov, c.extreme, allowed, res.rowsChosen(), mark)
			table = append(table, line)
			t.Log(line) // as each shape ends: a long sweep shows its progress
		}
	}
	t.Logf("issue 29 sweep, ε = 1, %d releases per shape:\n%s", releases, strings.Join(table, "\n"))
	if failed {
		t.Errorf("a shape is outside its target (marked in the table)")
	}
}

// sweepShape is one statement of the sweep. Its truths return, per group,
// the keys (as text, dates as their day) and one value per released
// column, in the statement's order.
type sweepShape struct {
	name  string
	sql   string
	keys  int
	delta bool // SET dp.delta = 1e-6 (private keys)
	// bounded is the truth the interval covers, at r rows per unit.
	bounded func(r int) string
	// raw is the plain aggregate, compared with the released value plus
	// its stated bias; "" when no bias is stated (the bounded truth is
	// used).
	raw string
	// quant names the columns that are quantiles: their values come from
	// values(r) and they are checked in ranks.
	quant map[string]quantSpec
}

type quantSpec struct {
	q    float64
	cont bool // percentile_cont (else disc, MIN, MAX)
	// values is SQL returning (key, value) of the bounded values, sorted
	// by key and value.
	values func(r int) string
}

// visitsCTE is the per (patient, key) aggregation of the sweep's visits
// truths: n rows, s the sum of the clamped cost, sc the sum of (cost − c)
// and qc of (cost − c)² (c = 10000, the midpoint of [0, 20000]); vals the
// FROM clause.
func sweepUnitRows(from, key, value string, lo, hi float64) string {
	c := (lo + hi) / 2
	v := fmt.Sprintf("least(greatest(%s::numeric, %g), %g)", value, lo, hi)
	return fmt.Sprintf(`SELECT patient_id AS u, (%s) AS k, count(%s) AS n, sum(%s) AS s, sum(%s - %g) AS sc, sum((%s - %g)^2) AS qc FROM %s GROUP BY 1, 2`,
		key, value, v, v, c, v, c, from)
}

// sweepWeighted is the bounded truth of COUNT, SUM, AVG, STDDEV and
// VAR_SAMP of value grouped by key with public keys (or none: key "0" and
// l0r = r), rows capped at r per group and weighted by min(1, l0r/t).
// Columns: key, then those named in aggs ("count", "sum", "avg",
// "stddev", "var").
func sweepWeighted(from, key, value string, lo, hi float64, r, l0r int, aggs ...string) string {
	w := fmt.Sprintf("least(n, %d)::numeric / n * least(1.0, %d.0 / t)", r, l0r)
	cols := []string{"k::text"}
	for _, a := range aggs {
		switch a {
		case "count":
			cols = append(cols, "sum(n * "+w+")")
		case "sum":
			cols = append(cols, "sum(s * "+w+")")
		case "avg":
			cols = append(cols, "sum(s * "+w+") / sum(n * "+w+")")
		case "var":
			cols = append(cols, "(sum(qc * "+w+") - sum(sc * "+w+")^2 / sum(n * "+w+")) / (sum(n * "+w+") - 1)")
		case "stddev":
			cols = append(cols, "sqrt((sum(qc * "+w+") - sum(sc * "+w+")^2 / sum(n * "+w+")) / (sum(n * "+w+") - 1))")
		}
	}
	return fmt.Sprintf(`WITH pu AS (%s), g AS (SELECT u, sum(least(n, %d)) AS t FROM pu GROUP BY 1)
		SELECT %s FROM pu JOIN g USING (u) GROUP BY k ORDER BY 1`, sweepUnitRows(from, key, value, lo, hi), r, strings.Join(cols, ", "))
}

// sweepDistinct is the bounded truth of COUNT(DISTINCT patient_id) grouped
// by key: each patient counts min(1, lu/g) in each of its g groups, lu the
// groups a unit counts whole in (dpplan.UnitGroups: min(G, L0·R) on one
// table, where min(1, L0·R/g) is the same weight as g ≤ G; L0 in a join).
func sweepDistinct(from, key string, l0 int) string {
	return fmt.Sprintf(`WITH pu AS (SELECT DISTINCT patient_id AS u, (%s) AS k FROM %s), g AS (SELECT u, count(*) AS g FROM pu GROUP BY 1)
		SELECT k::text, sum(least(1.0, %d.0 / g)) FROM pu JOIN g USING (u) GROUP BY 1 ORDER BY 1`, key, from, l0)
}

// sweepSelected restricts from to the rows of each patient's first l0
// groups in the order the emitted SQL uses (pgemit/bounds_sql.go,
// GroupsSelect: hashtextextended(unit::text || ',' || key::text, 7919),
// then the key).
func sweepSelected(from, key string, l0 int) string {
	return fmt.Sprintf(`(SELECT v.* FROM %[1]s JOIN (SELECT u, k FROM (SELECT u, k, row_number() OVER (PARTITION BY u ORDER BY hashtextextended(u::text || ',' || k::text, 7919), k) AS rk
		FROM (SELECT DISTINCT patient_id AS u, (%[2]s) AS k FROM %[1]s) d) r WHERE rk <= %[3]d) sel ON sel.u = v.patient_id AND sel.k = (%[2]s)) AS v`, from, key, l0)
}

func sweepShapes() []sweepShape {
	_, L0 := visitsLimits()
	const dept = "v.department"
	const year = "date_trunc('year', v.visit_date)::date"
	const quarter = "date_trunc('quarter', v.visit_date)::date"
	visits := "visits v"
	joined := "(SELECT v.*, p.region, p.birth_year FROM visits v JOIN patients p USING (patient_id)) v"
	grouped := func(from, key, value string, lo, hi float64, aggs ...string) func(int) string {
		return func(r int) string { return sweepWeighted(from, key, value, lo, hi, r, L0*r, aggs...) }
	}
	ungrouped := func(from, value string, lo, hi float64, aggs ...string) func(int) string {
		// One group with the unit's whole allowance: r rows (the NOTICE
		// states the ungrouped R = L0·R of the policy).
		return func(r int) string { return sweepWeighted(from, "0", value, lo, hi, r, r, aggs...) }
	}
	plainAggs := func(from, key, value string) string {
		return fmt.Sprintf("SELECT (%s)::text, count(*), sum(%s), avg(%s), stddev(%s) FROM %s GROUP BY 1 ORDER BY 1", key, value, value, value, from)
	}
	quantVals := func(from, key, value string, selected bool) func(int) string {
		return func(int) string {
			if selected {
				from = sweepSelected(from, key, L0)
			}
			return fmt.Sprintf("SELECT (%s)::text, %s::float8 FROM %s ORDER BY 1, 2", key, value, from)
		}
	}
	return []sweepShape{
		{name: "public key: count/sum/avg/stddev", keys: 1,
			sql:     "SELECT department, COUNT(*), SUM(cost), AVG(cost), STDDEV(cost) FROM visits GROUP BY 1",
			bounded: grouped(visits, dept, "v.cost", 0, 20000, "count", "sum", "avg", "stddev"),
			raw:     plainAggs(visits, dept, "v.cost")},
		{name: "public key: avg/stddev alone", keys: 1,
			// One row per unit in all (a plan of averages and deviations
			// alone under dp.contribution = auto, rewrite/autobounds.go).
			sql:     "SELECT department, AVG(cost), STDDEV(cost) FROM visits GROUP BY 1",
			bounded: func(int) string { return sweepWeighted(visits, dept, "v.cost", 0, 20000, 1, 1, "avg", "stddev") }},
		{name: "public key: count distinct", keys: 1,
			sql:     "SELECT department, COUNT(DISTINCT patient_id) FROM visits GROUP BY 1",
			bounded: func(r int) string { return sweepDistinct(visits, dept, L0*r) },
			raw:     "SELECT department, count(DISTINCT patient_id) FROM visits GROUP BY 1 ORDER BY 1"},
		{name: "date key: count/sum/avg/var", keys: 1,
			sql:     "SELECT date_trunc('year', visit_date), COUNT(*), SUM(cost), AVG(cost), VAR_SAMP(cost) FROM visits GROUP BY 1",
			bounded: grouped(visits, year, "v.cost", 0, 20000, "count", "sum", "avg", "var"),
			raw:     fmt.Sprintf("SELECT (%s)::text, count(*), sum(v.cost), avg(v.cost), var_samp(v.cost) FROM visits v GROUP BY 1 ORDER BY 1", year)},
		{name: "epoch day key (Grafana): count", keys: 1,
			sql: `SELECT floor(extract(epoch from visit_date)/86400)*86400 AS "time", count(*) AS "value" FROM visits
				WHERE visit_date BETWEEN '2024-03-01T00:00:00Z' AND '2024-03-31T23:59:59.999Z' GROUP BY 1 ORDER BY 1`,
			bounded: grouped("(SELECT * FROM visits WHERE visit_date BETWEEN '2024-03-01' AND '2024-03-31') v", "floor(extract(epoch from v.visit_date)/86400)*86400", "1", 0, 1, "count"),
			raw:     "SELECT (floor(extract(epoch from visit_date)/86400)*86400)::text, count(*) FROM visits WHERE visit_date BETWEEN '2024-03-01' AND '2024-03-31' GROUP BY 1 ORDER BY 1"},
		{name: "date key: count distinct", keys: 1,
			sql:     "SELECT date_trunc('quarter', visit_date), COUNT(DISTINCT patient_id) FROM visits GROUP BY 1",
			bounded: func(r int) string { return sweepDistinct(visits, quarter, L0*r) },
			raw:     fmt.Sprintf("SELECT (%s)::text, count(DISTINCT patient_id) FROM visits v GROUP BY 1 ORDER BY 1", quarter)},
		{name: "private key: count/sum/avg", keys: 1, delta: true,
			sql: "SELECT diagnosis, COUNT(*), SUM(cost), AVG(cost) FROM visits GROUP BY 1",
			bounded: func(r int) string {
				return sweepWeighted(sweepSelected(visits, "v.diagnosis", L0), "v.diagnosis", "v.cost", 0, 20000, r, 1<<30, "count", "sum", "avg")
			}},
		{name: "join: count/sum/avg/stddev", keys: 1,
			sql:     "SELECT p.region, COUNT(*), SUM(v.cost), AVG(v.cost), STDDEV(p.birth_year) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY 1",
			bounded: sweepJoinBounded(joined, L0),
			raw:     "SELECT v.region, count(*), sum(v.cost), avg(v.cost), stddev(v.birth_year) FROM " + joined + " GROUP BY 1 ORDER BY 1"},
		{name: "join: count distinct", keys: 1,
			sql:     "SELECT p.region, COUNT(DISTINCT v.patient_id) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY 1",
			bounded: func(int) string { return sweepDistinct(joined, "v.region", L0) },
			raw:     "SELECT v.region, count(DISTINCT patient_id) FROM " + joined + " GROUP BY 1 ORDER BY 1"},
		{name: "no keys: count/sum/avg/stddev", keys: 0,
			sql:     "SELECT COUNT(*), SUM(cost), AVG(cost), STDDEV(cost) FROM visits",
			bounded: ungrouped(visits, "v.cost", 0, 20000, "count", "sum", "avg", "stddev"),
			raw:     plainAggs(visits, "0", "v.cost")},
		{name: "no keys: count distinct/percentile", keys: 0,
			sql:     "SELECT COUNT(DISTINCT patient_id), percentile_cont(0.25) WITHIN GROUP (ORDER BY cost) FROM visits",
			bounded: func(int) string { return "SELECT '0', count(DISTINCT patient_id), 0 FROM visits" },
			quant: map[string]quantSpec{
				"percentile_cont": {q: 0.25, cont: true, values: quantVals(visits, "0", "v.cost", false)},
			}},
		{name: "patients public key: count/avg", keys: 1,
			sql: "SELECT region, COUNT(*), AVG(birth_year) FROM patients GROUP BY 1",
			bounded: func(int) string {
				return "SELECT region, count(*), avg(birth_year) FROM patients GROUP BY 1 ORDER BY 1"
			}},
		{name: "public key: percentile_cont/max", keys: 1,
			sql: "SELECT department, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost), MAX(age) FROM visits GROUP BY 1",
			quant: map[string]quantSpec{
				"percentile_cont": {q: 0.5, cont: true, values: quantVals(visits, dept, "v.cost", true)},
				"max":             {q: 1, values: quantVals(visits, dept, "v.age", true)},
			}},
		{name: "date key: percentile_disc/min", keys: 1,
			sql: "SELECT date_trunc('year', visit_date), percentile_disc(0.9) WITHIN GROUP (ORDER BY cost), MIN(age) FROM visits GROUP BY 1",
			quant: map[string]quantSpec{
				"percentile_disc": {q: 0.9, values: quantVals(visits, year, "v.cost", true)},
				"min":             {q: 0, values: quantVals(visits, year, "v.age", true)},
			}},
	}
}

// sweepJoinBounded is the bounded truth of the join shape: counts, sums
// and averages of cost and the sample deviation of birth_year over the
// joined rows, bounded per patient after the join like one table.
func sweepJoinBounded(joined string, l0 int) func(int) string {
	return func(r int) string {
		cost := sweepWeighted(joined, "v.region", "v.cost", 0, 20000, r, l0*r, "count", "sum", "avg")
		by := sweepWeighted(joined, "v.region", "v.birth_year", 1910, 2024, r, l0*r, "stddev")
		return fmt.Sprintf("SELECT a.*, b.stddev FROM (%s) a (k, count, sum, avg) JOIN (%s) b (k, stddev) USING (k) ORDER BY 1", cost, by)
	}
}

type sweepCol struct {
	cells, covered, extreme int
	rankBound               bool    // a quantile: the NOTICE states a rank bound
	whole                   bool    // every released value a whole number
	minWidth                float64 // the smallest stated half-width
}

type sweepResult struct {
	cols  []string
	byCol map[string]*sweepCol
	rows  map[int]int // rows per unit stated → releases
}

func (r *sweepResult) rowsChosen() string {
	var ks []int
	for k := range r.rows {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%d:%d", k, r.rows[k]))
	}
	return strings.Join(parts, " ")
}

var (
	sweepRowsRE     = regexp.MustCompile(`rows per unit: at most (\d+)`)
	sweepRemovedRE  = regexp.MustCompile(`removed(?:, or clamping changed,)?(?: at least)? about ([0-9.e+]+) rows \([^±]*±([0-9.e+]+),`)
	sweepUnitsRE    = regexp.MustCompile(`leave out about ([0-9.e+]+) units summed over the groups \([^±]*±([0-9.e+]+),`)
	sweepPerGroupRE = regexp.MustCompile(`per group about (.*?) \(each ±([0-9.e+]+)\)`)
	sweepRanksRE    = regexp.MustCompile(`(?:within ±|at most )([0-9.e+]+) rows (?:of the true one|above the smallest|below the largest) in the order of [^,]+, to the bucket width ([0-9.e+]+)[^(]*\(([^,)]+)`)
)

// runSweepShape releases sh n times through the proxy and compares each
// released cell with the truths. No released or true value is logged.
func runSweepShape(t *testing.T, ctx context.Context, dsn string, sh sweepShape, n int) *sweepResult {
	t.Helper()
	upc := connect(t, ctx, env.upstreamDSN)
	set := "SET dp.epsilon = 1; SET dp.cache = off; SET dp.error_columns = on"
	if sh.delta {
		set += "; SET dp.delta = 1e-6"
	}
	if extra := os.Getenv("SWEEP_SET"); extra != "" {
		set += "; " + extra // e.g. SWEEP_SET='SET dp.contribution = fixed'
	}
	// Releases run on sweepWorkers connections at once (the demo allows an
	// analyst 2 DP queries at a time); each is compared under mu.
	type release struct {
		rows   []textRow
		notice string
	}
	workers := sweepWorkers()
	jobs := make(chan int)
	out := make(chan release)
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		conn, notices := connectWithNotices(t, ctx, dsn)
		if _, err := conn.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
		go func() {
			seen := 0
			for range jobs {
				got, err := biRows(ctx, conn, sh.sql)
				if err != nil {
					errs <- err
					return
				}
				all := notices()
				out <- release{rows: got, notice: strings.Join(all[seen:], "\n")}
				seen = len(all)
			}
		}()
	}
	go func() {
		defer close(jobs)
		for i := 0; i < n; i++ {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	R, L0 := visitsLimits()
	res := &sweepResult{byCol: map[string]*sweepCol{}, rows: map[int]int{}}
	truthRows := func(sql string) map[string][]float64 {
		rows, err := biRows(ctx, upc, sql)
		if err != nil {
			t.Fatalf("%s: truth: %v\n%s", sh.name, err, sql)
		}
		out := map[string][]float64{}
		for _, r := range rows {
			var vs []float64
			for _, s := range r.vals[1:] {
				f, _ := strconv.ParseFloat(s, 64)
				vs = append(vs, f)
			}
			out[r.vals[0]] = vs
		}
		return out
	}
	bounded := map[int]map[string][]float64{}
	var raw map[string][]float64
	if sh.raw != "" {
		raw = truthRows(sh.raw)
	}
	quantVals := map[string]map[string][]float64{}
	for i := 0; i < n; i++ {
		var got []textRow
		var notice string
		select {
		case rel := <-out:
			got, notice = rel.rows, rel.notice
		case err := <-errs:
			t.Fatalf("%s: release %d: %v", sh.name, i, err)
		}
		r := R
		if m := sweepRowsRE.FindStringSubmatch(notice); m != nil {
			r, _ = strconv.Atoi(m[1])
		} else if strings.Contains(notice, "rows per unit: one in all") {
			r = 1
		} else if sh.keys == 0 {
			r = L0 * R
		}
		res.rows[r]++
		if sh.bounded != nil && bounded[r] == nil {
			bounded[r] = truthRows(sh.bounded(r))
		}
		// Stated biases.
		rowsBias := 0.0
		if m := sweepRemovedRE.FindStringSubmatch(notice); m != nil {
			x, _ := strconv.ParseFloat(m[1], 64)
			h, _ := strconv.ParseFloat(m[2], 64)
			rowsBias = x + 3*h
		}
		unitsBias := map[string]float64{}
		unitsTotal := 0.0
		if m := sweepUnitsRE.FindStringSubmatch(notice); m != nil {
			x, _ := strconv.ParseFloat(m[1], 64)
			h, _ := strconv.ParseFloat(m[2], 64)
			unitsTotal = x + 3*h
		}
		if m := sweepPerGroupRE.FindStringSubmatch(notice); m != nil {
			h, _ := strconv.ParseFloat(m[2], 64)
			for _, part := range strings.Split(m[1], ", ") {
				j := strings.LastIndex(part, " ")
				if j < 0 {
					continue
				}
				x, err := strconv.ParseFloat(part[j+1:], 64)
				if err == nil {
					unitsBias[part[:j]] = x + 3*h
				}
			}
		}
		ranks := map[string][2]float64{}
		for _, m := range sweepRanksRE.FindAllStringSubmatch(notice, -1) {
			k, _ := strconv.ParseFloat(m[1], 64)
			bw, _ := strconv.ParseFloat(m[2], 64)
			ranks[m[3]] = [2]float64{k, bw}
		}
		if len(got) == 0 {
			t.Fatalf("%s: release %d: no rows", sh.name, i)
		}
		for _, row := range got {
			key := "0"
			if sh.keys > 0 {
				key = row.vals[0]
			}
			moe := map[string]float64{}
			for j, name := range row.names {
				if base, ok := strings.CutSuffix(name, "_moe95"); ok {
					if f, err := strconv.ParseFloat(row.vals[j], 64); err == nil {
						moe[base] = f
					}
				}
			}
			vi := 0
			for j := sh.keys; j < len(row.names); j++ {
				name := row.names[j]
				if strings.HasSuffix(name, "_moe95") {
					continue
				}
				col := res.byCol[name]
				if col == nil {
					col = &sweepCol{whole: true, minWidth: math.Inf(1)}
					res.byCol[name] = col
					res.cols = append(res.cols, name)
				}
				idx := vi
				vi++
				v, err := strconv.ParseFloat(row.vals[j], 64)
				if err != nil {
					t.Fatalf("%s: %s: value %q", sh.name, name, row.vals[j])
				}
				if qs, ok := sh.quant[name]; ok {
					if quantVals[name] == nil {
						quantVals[name] = map[string][]float64{}
						for _, tr := range mustBiRows(t, ctx, upc, qs.values(r)) {
							f, _ := strconv.ParseFloat(tr.vals[1], 64)
							quantVals[name][tr.vals[0]] = append(quantVals[name][tr.vals[0]], f)
						}
					}
					kb, ok := ranks[name]
					if !ok {
						t.Fatalf("%s: %s: no ranks stated in the NOTICE", sh.name, name)
					}
					d := rankDistance(quantVals[name][key], qs, v, kb[1])
					col.rankBound = true
					col.cells++
					if d <= kb[0] {
						col.covered++
					}
					if d > 3*kb[0] {
						col.extreme++
					}
					continue
				}
				h, ok := moe[name]
				if !ok {
					t.Fatalf("%s: %s: no error column", sh.name, name)
				}
				b, ok := bounded[r][key]
				if !ok || idx >= len(b) {
					t.Fatalf("%s: released key %q (column %s) has no bounded truth", sh.name, key, name)
				}
				col.whole = col.whole && v == math.Trunc(v)
				col.minWidth = math.Min(col.minWidth, h)
				col.cells++
				if math.Abs(v-b[idx]) <= h {
					col.covered++
				}
				truth, bias := b[idx], 0.0
				if raw != nil {
					truth = raw[key][idx]
					switch {
					case strings.Contains(sh.sql, "DISTINCT"):
						bias = unitsTotal
						if x, ok := unitsBias[key]; ok {
							bias = x
						}
					case name == "count":
						bias = rowsBias
					}
				}
				if math.Abs(v-truth) > 3*h+bias {
					col.extreme++
				}
			}
		}
	}
	return res
}

// rankDistance is the distance, in ranks, from the ranks the released
// value v (± the bucket width bw) has among the sorted values to the
// quantile's target order statistics (release/quantile.go: [a, b] with
// a = b = max(1, ⌈q·n⌉) for percentile_disc, MIN and MAX, ⌊h⌋ and ⌈h⌉
// with h = 1 + q·(n − 1) for percentile_cont).
func rankDistance(vals []float64, qs quantSpec, v, bw float64) float64 {
	n := float64(len(vals))
	var a, b float64
	if qs.cont {
		h := 1 + qs.q*(n-1)
		a, b = math.Floor(h), math.Ceil(h)
	} else {
		a = math.Max(1, math.Ceil(qs.q*n))
		b = a
	}
	lo := float64(sort.SearchFloat64s(vals, v-bw))                                    // values < v − bw
	hi := float64(sort.Search(len(vals), func(i int) bool { return vals[i] > v+bw })) // values ≤ v + bw
	return math.Max(0, math.Max(lo+1-b, a-hi))
}

func mustBiRows(t *testing.T, ctx context.Context, c *pgx.Conn, sql string) []textRow {
	t.Helper()
	rows, err := biRows(ctx, c, sql)
	if err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	return rows
}

// sweepWorkers is SWEEP_WORKERS (default 2): releases in flight per shape.
func sweepWorkers() int {
	w, _ := strconv.Atoi(os.Getenv("SWEEP_WORKERS"))
	if w < 1 {
		return 2
	}
	return w
}

// sweepChosen reports whether the shape is selected by SWEEP_ONLY, a
// comma-separated list of parts of shape names (empty: every shape).
func sweepChosen(name, only string) bool {
	if only == "" {
		return true
	}
	for _, part := range strings.Split(only, ",") {
		if part != "" && strings.Contains(name, part) {
			return true
		}
	}
	return false
}
