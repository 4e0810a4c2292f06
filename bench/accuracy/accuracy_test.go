//go:build accuracybench

// Package accuracy measures dpproxy's answers against the truth on the
// shared PUMS sample (issue 16): for each query and ε, the error of the
// released values against the analyst's SQL run directly on all rows, and
// how often the stated 95% half-width covers that truth.
//
//	go test -tags accuracybench -run TestAccuracy_PUMS -v -timeout 30m ./bench/accuracy
//
// Two tables, read in place (never copied into the repository):
// PUMS_pid.csv (1,000 people, one row each) and PUMS_dup.csv (the same
// people with 1 to 4 rows each, 2,000 rows), both with max_rows_per_unit
// 2: on PUMS_dup contribution bounding removes rows, so the truth differs
// from the bounded value and coverage measures what the intervals say
// about the analyst's question, not only about the noise.
//
// Method: each query is planned, its SQL run once on PostgreSQL, and the
// answer released `runs` times through release.Releaser (fresh noise,
// crypto/rand, in-memory ledger, no cache). Per output: MAE and the 95th
// percentile of |released − truth|, and coverage, the share of releases
// whose stated half-width (the NOTICE's "±h (name, …)") covers the truth.
package accuracy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/benchkit"
	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5"
)

var runs = envInt("ACCURACY_RUNS", 200)

const policyYAML = `dataset: pums
privacy_unit: person
budget: {epsilon: 1.0e9, delta: 1.0e-3, accountant: pure}
defaults: {epsilon: 1, mechanism: laplace}
tables:
  pums_pid: &t
    unit_column: pid
    max_groups_per_unit: 1
    max_rows_per_unit: 4
    columns:
      age:     {type: int, lower: 0, upper: 100}
      sex:     {type: int, lower: 0, upper: 1, public_values: [0, 1]}
      educ:    {type: int, lower: 1, upper: 16}
      income:  {type: numeric, lower: 0, upper: 500000}
      married: {type: int, lower: 0, upper: 1}
  pums_dup: *t
`

// queries are written with one alias per output, the name the NOTICE uses.
var queries = []string{
	"SELECT COUNT(*) AS n FROM %s",
	"SELECT SUM(income) AS total FROM %s",
	"SELECT AVG(age) AS mean_age, AVG(income) AS mean_income FROM %s",
	"SELECT VAR_SAMP(age) AS var_age, STDDEV_SAMP(income) AS sd_income FROM %s",
	"SELECT sex, COUNT(*) AS n, AVG(income) AS mean_income FROM %s GROUP BY sex",
	"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY income) AS median_income FROM %s",
}

// load copies a PUMS file into table name (benchkit.LoadPUMS); the test
// is skipped outside CI when the sample is not on this machine.
func load(t *testing.T, ctx context.Context, conn *pgx.Conn, file, name string) {
	t.Helper()
	if err := benchkit.LoadPUMS(ctx, conn, file, name); err != nil {
		if errors.Is(err, fs.ErrNotExist) && !pgtest.InCI() {
			t.Skipf("PUMS sample not found: %v", err)
		}
		t.Fatal(err)
	}
}

var halfWidthRE = regexp.MustCompile(`±([0-9.e+\-]+)(?: ranks)?[^(]*\(([a-z_]+),`)

// statedHalfWidths maps each output name to the 95% half-width the NOTICE
// states for it (the widest over the groups; quantiles' rank bounds left
// out).
func statedHalfWidths(notice string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range halfWidthRE.FindAllStringSubmatch(notice, -1) {
		if h, err := strconv.ParseFloat(m[1], 64); err == nil && !strings.Contains(m[0], "ranks") {
			out[m[2]] = h
		}
	}
	return out
}

// perGroupRE finds an output's per-group half-widths in a NOTICE
// ("(name, epsilon …; per group: key ±h, key ±h)").
var perGroupRE = regexp.MustCompile(`\(([a-z_]+), [^;)]*; per group: ([^)]*)\)`)

// groupHalfWidths maps "name (key)" to the half-width the NOTICE states for
// that group.
func groupHalfWidths(notice string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range perGroupRE.FindAllStringSubmatch(notice, -1) {
		for _, item := range strings.Split(m[2], ", ") {
			k, h, ok := strings.Cut(item, " ±")
			if f, err := strconv.ParseFloat(h, 64); ok && err == nil {
				out[m[1]+" ("+k+")"] = f
			}
		}
	}
	return out
}

func TestAccuracy_PUMS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	load(t, ctx, conn, "PUMS_pid.csv", "pums_pid")
	load(t, ctx, conn, "PUMS_dup.csv", "pums_dup")
	ds, err := policy.Parse(strings.NewReader(policyYAML), "pums.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	out.WriteString("| table | output | ε | truth | MAE | p95 abs error | coverage of ±95% |\n|---|---|---|---|---|---|---|\n")
	for _, table := range []string{"pums_pid", "pums_dup"} {
		for _, qf := range queries {
			query := fmt.Sprintf(qf, table)
			plan, err := rewrite.Rewrite(ds, query)
			if err != nil {
				t.Fatalf("%s: %v", query, err)
			}
			rows, err := benchkit.QueryText(ctx, conn, plan.SQL)
			if err != nil {
				t.Fatalf("%s: emitted SQL: %v", query, err)
			}
			truth, err := benchkit.QueryText(ctx, conn, query+strings.Repeat(" ORDER BY 1", strings.Count(query, "GROUP BY")))
			if err != nil {
				t.Fatalf("%s: %v", query, err)
			}
			for _, eps := range []float64{0.1, 1} {
				r, err := release.New(release.Config{Ledger: &benchkit.MemLedger{}, Planner: rewrite.Replan})
				if err != nil {
					t.Fatal(err)
				}
				type acc struct {
					errs    []float64
					covered int
					stated  int
				}
				stats := map[string]*acc{}
				var order []string
				for i := 0; i < runs; i++ {
					res, err := r.Run(ctx, release.Request{Analyst: "bench", Dataset: ds, Plan: plan, Epsilon: eps, Delta: 1e-6,
						Mechanism: policy.MechanismLaplace, Upstream: benchkit.RowsUpstream{Rows: rows}, NoCache: true})
					if err != nil {
						t.Fatalf("%s at ε %v: %v", query, eps, err)
					}
					half := statedHalfWidths(res.Notice)
					sortRows(res.Rows)
					for ri, row := range res.Rows {
						for ci, c := range res.Columns {
							if c.Name == "sex" {
								continue
							}
							key := c.Name
							if len(res.Rows) > 1 {
								key = fmt.Sprintf("%s (sex=%s)", c.Name, *row[0])
							}
							if ri >= len(truth) || row[ci] == nil || truth[ri][ci] == nil {
								continue
							}
							got, _ := strconv.ParseFloat(*row[ci], 64)
							want, _ := strconv.ParseFloat(*truth[ri][ci], 64)
							a := stats[key]
							if a == nil {
								a = &acc{}
								stats[key] = a
								order = append(order, key)
							}
							e := math.Abs(got - want)
							a.errs = append(a.errs, e)
							if h, ok := half[c.Name]; ok {
								a.stated++
								if e <= h {
									a.covered++
								}
							}
						}
					}
				}
				for _, key := range order {
					a := stats[key]
					mae, p95 := maeP95(a.errs)
					cov := "—"
					if a.stated > 0 {
						cov = fmt.Sprintf("%.3f", float64(a.covered)/float64(a.stated))
					}
					tv := truthOf(truth, res0Columns(plan), key)
					fmt.Fprintf(&out, "| %s | %s | %g | %s | %s | %s | %s |\n", table, key, eps, tv, num(mae), num(p95), cov)
				}
			}
		}
	}
	t.Logf("errors against the analyst's SQL on all rows, %d releases per cell (Laplace):\n%s", runs, out.String())
}

func sortRows(rows [][]*string) {
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i][0] == nil || rows[j][0] == nil {
			return false
		}
		return *rows[i][0] < *rows[j][0]
	})
}

// res0Columns lists the plan's output names (for truthOf).
func res0Columns(p *rewrite.Plan) []string {
	var names []string
	for _, o := range p.Outputs {
		names = append(names, o.Name)
	}
	return names
}

// truthOf is the true value of an output key ("name" or "name (sex=v)").
func truthOf(truth [][]*string, names []string, key string) string {
	name, group, _ := strings.Cut(key, " (sex=")
	group = strings.TrimSuffix(group, ")")
	for _, row := range truth {
		if group != "" && (row[0] == nil || *row[0] != group) {
			continue
		}
		for i, n := range names {
			if n == name && row[i] != nil {
				f, _ := strconv.ParseFloat(*row[i], 64)
				return num(f)
			}
		}
	}
	return "?"
}

func num(x float64) string {
	switch {
	case x == 0:
		return "0"
	case math.Abs(x) >= 1e5:
		return strconv.FormatFloat(x, 'e', 3, 64)
	case math.Abs(x) >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

// TestAccuracy_Demo releases the README's queries on the demo data (seed 1,
// the hospital policy, its default ε 0.1) 200 times each and reports, per
// output, how often the answer is within 2% of the truth, the coverage of
// the stated 95% half-width against the truth and against the bounded
// value (the same query released at ε = 10⁹: no noise to speak of), and
// the stated half-width over the empirical 95th percentile of
// |released − bounded value| (issue 16: 93–97% coverage, at most 1.3×).
func TestAccuracy_Demo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := benchkit.LoadDemo(ctx, conn); err != nil {
		t.Fatal(err)
	}
	ds, err := demo.HospitalPolicy()
	if err != nil {
		t.Fatal(err)
	}
	demoQueries := []string{
		"SELECT COUNT(*) AS n FROM visits",
		"SELECT department, COUNT(*) AS n FROM visits GROUP BY department",
		"SELECT AVG(birth_year) AS mean_by, VAR_SAMP(birth_year) AS var_by, STDDEV_SAMP(birth_year) AS sd_by FROM patients",
		"SELECT AVG(cost) AS mean_cost, STDDEV_POP(cost) AS sd_cost FROM visits",
		"SELECT department, AVG(cost) AS mean_cost FROM visits GROUP BY department",
		"SELECT COUNT(*) AS onc, SUM(length_of_stay) AS onc_los FROM visits WHERE department = 'oncology' AND visit_date BETWEEN '2023-01-01' AND '2023-12-31'",
	}
	var out strings.Builder
	out.WriteString("| output | truth | within 2% | coverage vs truth | coverage vs bounded | stated / empirical p95 (vs bounded) |\n|---|---|---|---|---|---|\n")
	for _, query := range demoQueries {
		plan, err := rewrite.Rewrite(ds, query)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		rows, err := benchkit.QueryText(ctx, conn, plan.SQL)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		truth, err := benchkit.QueryText(ctx, conn, query+strings.Repeat(" ORDER BY 1", strings.Count(query, "GROUP BY")))
		if err != nil {
			t.Fatal(err)
		}
		r, err := release.New(release.Config{Ledger: &benchkit.MemLedger{}, Planner: rewrite.Replan})
		if err != nil {
			t.Fatal(err)
		}
		run := func(eps float64) *release.Result {
			res, err := r.Run(ctx, release.Request{Analyst: "bench", Dataset: ds, Plan: plan, Epsilon: eps, Delta: 1e-6,
				Mechanism: policy.MechanismLaplace, Upstream: benchkit.RowsUpstream{Rows: rows}, NoCache: true})
			if err != nil {
				t.Fatalf("%s: %v", query, err)
			}
			sortRows(res.Rows)
			return res
		}
		bounded := run(1e9)
		type acc struct {
			within, covT, covB, stated int
			dev                        []float64
			half                       float64
		}
		stats := map[string]*acc{}
		var order []string
		for i := 0; i < runs; i++ {
			res := run(0.1)
			eachCell(res, truth, func(cl cell) {
				if bounded.Rows[cl.row][cl.col] == nil {
					return
				}
				bv, _ := strconv.ParseFloat(*bounded.Rows[cl.row][cl.col], 64)
				a := stats[cl.key]
				if a == nil {
					a = &acc{}
					stats[cl.key] = a
					order = append(order, cl.key)
				}
				if math.Abs(cl.got-cl.want) <= 0.02*math.Abs(cl.want) {
					a.within++
				}
				a.dev = append(a.dev, math.Abs(cl.got-bv))
				if cl.stated {
					a.stated++
					a.half += cl.half
					if math.Abs(cl.got-cl.want) <= cl.half {
						a.covT++
					}
					if math.Abs(cl.got-bv) <= cl.half {
						a.covB++
					}
				}
			})
		}
		for _, key := range order {
			a := stats[key]
			sort.Float64s(a.dev)
			p95 := a.dev[len(a.dev)*95/100]
			ratio := "—"
			covT, covB := "—", "—"
			if a.stated > 0 {
				covT = fmt.Sprintf("%.3f", float64(a.covT)/float64(a.stated))
				covB = fmt.Sprintf("%.3f", float64(a.covB)/float64(a.stated))
				if p95 > 0 {
					ratio = fmt.Sprintf("%.2f", a.half/float64(a.stated)/p95)
				}
			}
			fmt.Fprintf(&out, "| %s | %s | %.3f | %s | %s | %s |\n", key, truthOf(truth, res0Columns(plan), strings.ReplaceAll(key, " (", " (sex=")), float64(a.within)/float64(runs), covT, covB, ratio)
		}
	}
	t.Logf("the demo at ε 0.1, %d releases per query (Laplace):\n%s", runs, out.String())
	t.Logf("the demo's default, dp.contribution = auto, at ε 0.1, %d releases per query (Laplace):\n%s", runs, autoTable(t, ctx, conn, ds, demoQueries))
}

// cell is one released value of a demo query with its truth and the
// NOTICE's half-width for it (a group's own when the NOTICE gives one).
type cell struct {
	key       string // the output name, with the group key when grouped
	row, col  int
	got, want float64
	half      float64
	stated    bool // the NOTICE states a half-width for it
}

// eachCell calls fn for every released value of res that has a truth
// (sorted rows, the key column "department" left out).
func eachCell(res *release.Result, truth [][]*string, fn func(cell)) {
	half, groupHalf := statedHalfWidths(res.Notice), groupHalfWidths(res.Notice)
	for ri, row := range res.Rows {
		for ci, c := range res.Columns {
			if c.Name == "department" || row[ci] == nil || truth[ri][ci] == nil {
				continue
			}
			cl := cell{key: c.Name, row: ri, col: ci}
			if len(res.Rows) > 1 {
				cl.key = fmt.Sprintf("%s (%s)", c.Name, *row[0])
			}
			cl.got, _ = strconv.ParseFloat(*row[ci], 64)
			cl.want, _ = strconv.ParseFloat(*truth[ri][ci], 64)
			cl.half, cl.stated = half[c.Name]
			if hg, ok := groupHalf[cl.key]; ok {
				cl.half, cl.stated = hg, true
			}
			fn(cl)
		}
	}
}

// memoUpstream runs each distinct SQL once on conn (the profile and the
// candidate plans of auto bounds) and returns its rows thereafter.
type memoUpstream struct {
	conn *pgx.Conn
	m    map[string][][]*string
}

func (u *memoUpstream) Query(ctx context.Context, sql string, _ ...any) ([][]*string, error) {
	if rows, ok := u.m[sql]; ok {
		return rows, nil
	}
	rows, err := benchkit.QueryText(ctx, u.conn, sql)
	if err == nil {
		u.m[sql] = rows
	}
	return rows, err
}

// autoTable releases each query with dp.contribution = auto (the demo
// policy's default) and reports, per output, how often the answer is
// within 2% of the truth, the stated interval's coverage of the truth,
// the median stated half-width, and the rows per unit chosen (median,
// and the range seen).
func autoTable(t *testing.T, ctx context.Context, conn *pgx.Conn, ds *policy.Dataset, queries []string) string {
	var out strings.Builder
	out.WriteString("| output | truth | within 2% | coverage vs truth | coverage vs bounded | median stated ± | rows per unit chosen: median (range) |\n|---|---|---|---|---|---|---|\n")
	chosenRE := regexp.MustCompile(`rows per unit: at most (\d+)`)
	up := &memoUpstream{conn: conn, m: map[string][][]*string{}}
	for _, query := range queries {
		plan, err := rewrite.RewriteWith(ds, query, rewrite.Options{AutoBounds: true})
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		truth, err := benchkit.QueryText(ctx, conn, query+strings.Repeat(" ORDER BY 1", strings.Count(query, "GROUP BY")))
		if err != nil {
			t.Fatal(err)
		}
		r, err := release.New(release.Config{Ledger: &benchkit.MemLedger{}, Planner: rewrite.Replan})
		if err != nil {
			t.Fatal(err)
		}
		// A plan without a choice has one bounded answer: released at ε
		// 1e9, it is the bounded value to the last digits.
		var bounded *release.Result
		if plan.Auto == nil {
			if bounded, err = r.Run(ctx, release.Request{Analyst: "bench", Dataset: ds, Plan: plan, Epsilon: 1e9, Delta: 1e-6,
				Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true}); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
			sortRows(bounded.Rows)
		}
		type acc struct {
			within, covT, covB, stated int
			halves                     []float64
		}
		stats := map[string]*acc{}
		var order []string
		var chosen []int
		for range runs {
			res, err := r.Run(ctx, release.Request{Analyst: "bench", Dataset: ds, Plan: plan, Epsilon: 0.1, Delta: 1e-6,
				Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true})
			if err != nil {
				t.Fatalf("%s: %v", query, err)
			}
			sortRows(res.Rows)
			if m := chosenRE.FindStringSubmatch(res.Notice); m != nil {
				c, _ := strconv.Atoi(m[1])
				chosen = append(chosen, c)
			}
			eachCell(res, truth, func(cl cell) {
				a := stats[cl.key]
				if a == nil {
					a = &acc{}
					stats[cl.key] = a
					order = append(order, cl.key)
				}
				if math.Abs(cl.got-cl.want) <= 0.02*math.Abs(cl.want) {
					a.within++
				}
				if cl.stated {
					a.stated++
					a.halves = append(a.halves, cl.half)
					if math.Abs(cl.got-cl.want) <= cl.half {
						a.covT++
					}
					if bounded != nil && bounded.Rows[cl.row][cl.col] != nil {
						bv, _ := strconv.ParseFloat(*bounded.Rows[cl.row][cl.col], 64)
						if math.Abs(cl.got-bv) <= cl.half {
							a.covB++
						}
					}
				}
			})
		}
		choice := "— (fixed: one row per patient)"
		if plan.OneWeight {
			choice = "one row's weight in all (averages and deviations alone)"
		}
		if len(chosen) > 0 {
			sort.Ints(chosen)
			choice = fmt.Sprintf("%d (%d–%d)", chosen[len(chosen)/2], chosen[0], chosen[len(chosen)-1])
		}
		for _, key := range order {
			a := stats[key]
			covT, covB, med := "—", "—", "—"
			if a.stated > 0 {
				covT = fmt.Sprintf("%.3f", float64(a.covT)/float64(a.stated))
				if bounded != nil {
					covB = fmt.Sprintf("%.3f", float64(a.covB)/float64(a.stated))
				}
				sort.Float64s(a.halves)
				med = fmt.Sprintf("%.4g", a.halves[len(a.halves)/2])
			}
			fmt.Fprintf(&out, "| %s | %s | %.3f | %s | %s | %s | %s |\n", key, truthOf(truth, res0Columns(plan), strings.ReplaceAll(key, " (", " (sex=")),
				float64(a.within)/float64(runs), covT, covB, med, choice)
		}
	}
	return out.String()
}

// envInt reads a positive integer from the environment (e.g.
// ACCURACY_RUNS=1000 for a tighter coverage estimate), or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// TestAccuracy_PUMSClipping releases SUM(income) and AVG(income) of
// PUMS_pid under a policy that declares incomes up to 5,000,000 (the data
// stop at 420,500) with dp.clipping = fixed and auto, at ε 0.1 and 1, and
// reports MAE, the 95th percentile of the error and the stated interval's
// coverage against the truth, and the upper bounds auto chose.
func TestAccuracy_PUMSClipping(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	load(t, ctx, conn, "PUMS_pid.csv", "pums_pid")
	loose := strings.Replace(policyYAML, "income:  {type: numeric, lower: 0, upper: 500000}", "income:  {type: numeric, lower: 0, upper: 5000000}", 1)
	ds, err := policy.Parse(strings.NewReader(loose), "pums.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const query = "SELECT SUM(income) AS total, AVG(income) AS mean_income FROM pums_pid"
	truth, err := benchkit.QueryText(ctx, conn, query)
	if err != nil {
		t.Fatal(err)
	}
	upperRE := regexp.MustCompile(`income clamped to \[0, ([0-9.]+)\]`)
	up := &memoUpstream{conn: conn, m: map[string][][]*string{}}
	var out strings.Builder
	out.WriteString("| clipping | ε | output | truth | MAE | p95 abs error | coverage of ±95% | upper bound: median (range) |\n|---|---|---|---|---|---|---|---|\n")
	for _, auto := range []bool{false, true} {
		plan, err := rewrite.RewriteWith(ds, query, rewrite.Options{AutoClip: auto})
		if err != nil {
			t.Fatal(err)
		}
		for _, eps := range []float64{0.1, 1} {
			r, err := release.New(release.Config{Ledger: &benchkit.MemLedger{}, Planner: rewrite.Replan})
			if err != nil {
				t.Fatal(err)
			}
			errs := make([][]float64, 2)
			covered := make([]int, 2)
			var uppers []float64
			for range runs {
				res, err := r.Run(ctx, release.Request{Analyst: "bench", Dataset: ds, Plan: plan, Epsilon: eps,
					Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true})
				if err != nil {
					t.Fatal(err)
				}
				half := statedHalfWidths(res.Notice)
				for ci, c := range res.Columns {
					got, _ := strconv.ParseFloat(*res.Rows[0][ci], 64)
					want, _ := strconv.ParseFloat(*truth[0][ci], 64)
					e := math.Abs(got - want)
					errs[ci] = append(errs[ci], e)
					if e <= half[c.Name] {
						covered[ci]++
					}
				}
				u := 5e6
				if m := upperRE.FindStringSubmatch(res.Notice); m != nil {
					u, _ = strconv.ParseFloat(m[1], 64)
				}
				uppers = append(uppers, u)
			}
			sort.Float64s(uppers)
			name := "fixed"
			bound := "5000000 (declared)"
			if auto {
				name = "auto"
				bound = fmt.Sprintf("%g (%g–%g)", uppers[len(uppers)/2], uppers[0], uppers[len(uppers)-1])
			}
			for ci, c := range []string{"total", "mean_income"} {
				mae, p95 := maeP95(errs[ci])
				fmt.Fprintf(&out, "| %s | %g | %s | %s | %s | %s | %.3f | %s |\n", name, eps, c, *truth[0][ci], num(mae),
					num(p95), float64(covered[ci])/float64(runs), bound)
			}
		}
	}
	t.Logf("income declared in [0, 5000000], %d releases per cell (Laplace):\n%s", runs, out.String())
}

// maeP95 sorts errs (absolute errors) and returns their mean and their
// 95th percentile.
func maeP95(errs []float64) (mae, p95 float64) {
	sort.Float64s(errs)
	for _, e := range errs {
		mae += e
	}
	return mae / float64(len(errs)), errs[len(errs)*95/100]
}
