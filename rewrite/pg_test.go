package rewrite

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/internal/pgtest/demodb"
	"github.com/dpproxy/dpproxy/internal/upstream"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// hospitalSchema matches examples/policies/hospital.yaml (and the demo's
// tables).
const hospitalSchema = `
CREATE TABLE patients (patient_id bigint PRIMARY KEY, birth_year int, sex text, region text);
CREATE TABLE visits (visit_id bigint PRIMARY KEY, patient_id bigint, visit_date date, department text,
  diagnosis text, age int, cost numeric(10,2), length_of_stay int);`

// loadWithinLimits fills the tables with deterministic data that respects
// every bound of the hospital policy: values within [lower, upper], keys
// in the public domains, one patients row per patient, 1 to 4 visits per
// patient, and one diagnosis per patient (NULL on some visits). At most 4
// visits per patient keeps every query within the contribution limits
// (max_groups_per_unit 4, max_rows_per_unit 5) however it groups the
// visits (by department, age band, month, diagnosis, or not at all). On
// such data the emitted SQL must compute exactly what the analyst's query
// computes.
func loadWithinLimits(t *testing.T, ctx context.Context, conn *pgx.Conn, ds *policy.Dataset) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	depts := ds.Tables["visits"].Columns["department"].PublicValues
	regions := ds.Tables["patients"].Columns["region"].PublicValues
	diagnoses := []string{"flu", "J10", "J45", "A09", "it's", "a$$b", `a\%x`, "ONCO", "Flu", "x1y"}
	var patients, visits [][]any
	visitID := int64(0)
	start := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for p := int64(1); p <= 400; p++ {
		patients = append(patients, []any{p, 1910 + rng.IntN(115), []string{"F", "M"}[rng.IntN(2)], regions[rng.IntN(len(regions))]})
		// One diagnosis per patient (or NULL on some visits), so that
		// GROUP BY diagnosis, and department × diagnosis, stay within
		// max_groups_per_unit (private keys, partition selection).
		pdiag := diagnoses[rng.IntN(len(diagnoses))]
		n := 1 + rng.IntN(4)
		for k := 0; k < n; k++ {
			visitID++
			var cost, diag, age any
			if rng.IntN(10) > 0 {
				cost = fmt.Sprintf("%d.%02d", rng.IntN(20000), rng.IntN(100))
			}
			if rng.IntN(8) > 0 {
				diag = pdiag
			}
			if rng.IntN(12) > 0 {
				age = rng.IntN(111)
			}
			visits = append(visits, []any{visitID, p, start.AddDate(0, 0, rng.IntN(1826)), depts[rng.IntN(len(depts))], diag,
				age, cost, rng.IntN(61)})
		}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"patients"}, []string{"patient_id", "birth_year", "sex", "region"}, pgx.CopyFromRows(patients)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"visits"}, []string{"visit_id", "patient_id", "visit_date", "department", "diagnosis", "age", "cost", "length_of_stay"}, pgx.CopyFromRows(visits)); err != nil {
		t.Fatal(err)
	}
}

// freshConn connects to a new empty database of the shared test cluster
// and returns a context bounded by timeout; both are closed when the test
// ends.
func freshConn(t *testing.T, timeout time.Duration) (context.Context, *pgx.Conn) {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return ctx, conn
}

// queryText runs sql and returns its rows as text (NULL as nil).
func queryText(ctx context.Context, conn *pgx.Conn, sql string) ([][]*string, error) {
	rows, err := conn.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	return upstream.TextRows(rows)
}

func rat(s *string) *big.Rat {
	if s == nil {
		return nil
	}
	r, ok := new(big.Rat).SetString(*s)
	if !ok {
		return nil
	}
	return r
}

// releaseExact computes the analyst's output rows from the emitted SQL's
// rows without noise: what release would answer with noise disabled. Each
// cell is rendered canonically (numbers as exact rationals, averages to 12
// significant digits) so that it compares with PostgreSQL's own answer.
func releaseExact(p *Plan, rows [][]*string) [][]string {
	var out [][]string
	nk := len(p.Keys)
	all := append(append([]Output(nil), p.Outputs...), p.Hidden...)
	for _, r := range rows {
		m := func(i int) *big.Rat {
			if v := rat(r[nk+i]); v != nil {
				return v
			}
			return new(big.Rat) // NULL measure: release treats it as 0
		}
		vals := make([]*big.Rat, len(all))
		cells := make([]string, len(all))
		for i, o := range all {
			switch o.Kind {
			case OutputKey:
				cells[i] = *r[o.Key]
			case OutputQuantile:
				cells[i] = "quantile" // compared by checkQuantileRows
			case OutputCount:
				vals[i] = m(o.Measure)
				cells[i] = vals[i].RatString()
			case OutputSum:
				vals[i] = m(o.Measure)
				if c := centreOf(p, o); c != nil {
					// Derived from the normalized sum: S_c + c·C.
					vals[i].Add(vals[i], new(big.Rat).Mul(c, m(o.CountMeasure)))
				}
				cells[i] = vals[i].RatString()
			case OutputAvg:
				c := m(o.CountMeasure)
				if c.Sign() == 0 {
					cells[i] = "NULL"
				} else {
					vals[i] = new(big.Rat).Quo(m(o.Measure), c)
					if centre := centreOf(p, o); centre != nil {
						vals[i].Add(vals[i], centre) // c + S_c/C
					}
					cells[i] = approx(vals[i])
				}
			case OutputVariance:
				// Noise off: (Q − S²/C) / C or / (C − 1), NULL when C is
				// 0 (or 1 for the sample forms), as PostgreSQL does.
				c, s, q := m(o.CountMeasure), m(o.Measure), m(o.SumSqMeasure)
				min := int64(1)
				if o.Sample {
					min = 2
				}
				if c.Cmp(big.NewRat(min, 1)) < 0 {
					cells[i] = "NULL"
					continue
				}
				ss := new(big.Rat).Sub(q, new(big.Rat).Quo(new(big.Rat).Mul(s, s), c))
				d := new(big.Rat).Set(c)
				if o.Sample {
					d.Sub(d, big.NewRat(1, 1))
				}
				vals[i] = new(big.Rat).Quo(ss, d)
				v, _ := vals[i].Float64()
				if o.Sqrt {
					v = math.Sqrt(v)
					vals[i].SetFloat64(v)
				}
				cells[i] = approxF(v)
			}
		}
		for i, o := range all {
			if o.Kind != OutputExpr {
				continue
			}
			vals[i] = o.Expr.Eval(vals)
			switch {
			case vals[i] == nil:
				cells[i] = "NULL"
			case o.PGType == "int8":
				cells[i] = vals[i].RatString()
			default:
				cells[i] = approx(vals[i])
			}
		}
		for i, o := range p.Outputs {
			if o.PGType == "float8" {
				cells[i] = floatCell(cells[i])
			}
		}
		if p.Having != nil && !p.Having.Holds(vals) {
			continue
		}
		out = append(out, cells[:len(p.Outputs)])
	}
	return out
}

// centreOf is the centre of the normalized sum an output reads (nil for a
// plain sum).
func centreOf(p *Plan, o Output) *big.Rat {
	if c := p.Measures[o.Measure].Centre; c != "" {
		r, _ := new(big.Rat).SetString(c)
		return r
	}
	return nil
}

func approx(r *big.Rat) string {
	f, _ := r.Float64()
	return approxF(f)
}

func approxF(f float64) string { return fmt.Sprintf("%.12g", f) }

// canonical renders PostgreSQL's own answer the same way.
func canonical(p *Plan, rows [][]*string) [][]string {
	var out [][]string
rows:
	for _, r := range rows {
		var row []string
		for i, o := range p.Outputs {
			v := r[i]
			switch {
			case o.Kind == OutputKey && v == nil:
				// The NULL group (e.g. width_bucket of a NULL value) is
				// not released: rows with a NULL key are not counted.
				continue rows
			case o.Kind == OutputKey && o.PGType == "bool":
				// PostgreSQL's text output of booleans is t/f; the
				// emitted SQL's ::text is true/false, as in the policy.
				row = append(row, map[string]string{"t": "true", "f": "false"}[*v])
			case o.Kind == OutputKey:
				row = append(row, *v)
			case o.Kind == OutputQuantile:
				row = append(row, "quantile") // compared by checkQuantileRows
			case v == nil && (o.Kind == OutputAvg || o.Kind == OutputVariance || o.Kind == OutputExpr):
				row = append(row, "NULL")
			case o.Kind == OutputExpr && o.PGType == "int8":
				row = append(row, rat(v).RatString())
			case o.Kind == OutputExpr:
				row = append(row, approx(rat(v)))
			case v == nil:
				row = append(row, "0") // SUM over no rows
			case o.Kind == OutputAvg || o.Kind == OutputVariance:
				row = append(row, approx(rat(v)))
			default:
				row = append(row, rat(v).RatString())
			}
		}
		for i, o := range p.Outputs {
			if o.PGType == "float8" && i < len(row) {
				row[i] = floatCell(row[i])
			}
		}
		out = append(out, row)
	}
	return out
}

// floatCell compares a float8 output to 12 significant digits: PostgreSQL
// sums float8 values in float arithmetic (SUM(cost::float8)), the emitted
// SQL exactly.
func floatCell(c string) string {
	if r, ok := new(big.Rat).SetString(c); ok {
		return approx(r)
	}
	return c
}

func sortRows(rows [][]string) {
	sort.Slice(rows, func(i, j int) bool { return strings.Join(rows[i], "\x00") < strings.Join(rows[j], "\x00") })
}

// orderColumns projects rows on the ORDER BY outputs (deterministic even
// when rows tie).
func orderColumns(p *Plan, rows [][]string) [][]string {
	var out [][]string
	for _, r := range rows {
		var row []string
		for _, ob := range p.OrderBy {
			row = append(row, r[ob.Output])
		}
		out = append(out, row)
	}
	return out
}

// TestRewrite_Postgres runs the SQL of every accepted golden (over the
// hospital policy) on a real PostgreSQL loaded with data within the
// policy's bounds and contribution limits, and checks that it returns
// exactly what the analyst's own query returns there. This is the start
// of issue 5's differential test.
func TestRewrite_Postgres(t *testing.T) {
	ctx, conn := freshConn(t, 2*time.Minute)
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	ds := loadHospital(t)
	loadWithinLimits(t, ctx, conn, ds)
	n := 0
	for _, gc := range loadGolden(t) {
		if _, ok := gc.ar.files["want.sql"]; !ok {
			continue
		}
		if p, err := Rewrite(gc.ds, gc.query); err == nil && p.Join != nil {
			continue // joins: TestRewrite_PostgresJoins (join_test.go)
		}
		n++
		conn := conn
		if _, own := gc.ar.files["policy.yaml"]; own {
			// A golden with its own policy gets its own database, with
			// tables and data derived from that policy.
			conn = policyDatabase(t, ctx, gc.ds)
		}
		t.Run(gc.name, func(t *testing.T) {
			p, err := Rewrite(gc.ds, gc.query)
			if err != nil {
				t.Fatalf("Rewrite(%q): %v", gc.query, err)
			}
			if p.SampleAgg != nil {
				return // compared block by block in TestSampleAgg_Postgres
			}
			diffPostgres(t, ctx, conn, p, gc.query)
		})
	}
	if n < 15 {
		t.Fatalf("only %d goldens were checked against PostgreSQL", n)
	}
}

// diffPostgres runs the plan's emitted SQL and the analyst's own query on
// conn and checks that the emitted SQL's rows, released without noise
// (releaseExact), are what PostgreSQL returns for the query: the same rows,
// or with ORDER BY the same order columns of the same page.
func diffPostgres(t *testing.T, ctx context.Context, conn *pgx.Conn, p *Plan, query string) {
	t.Helper()
	emitted, err := queryText(ctx, conn, p.SQL)
	if err != nil {
		t.Fatalf("emitted SQL failed: %v\n%s", err, p.SQL)
	}
	direct, err := queryText(ctx, conn, query)
	if err != nil {
		t.Fatalf("analyst query failed on PostgreSQL: %v", err)
	}
	got, want := releaseExact(p, emitted), canonical(p, direct)
	sortRows(got)
	if len(p.OrderBy) > 0 {
		// Apply the post-processing the plan asks for: sort by the
		// order columns, then compare the order columns of the
		// page PostgreSQL returned (ties may be broken either way).
		sortByPlan(p, got)
		got = page(p, got)
		g, w := orderColumns(p, got), orderColumns(p, want)
		if dropped := len(direct) - len(want); dropped > 0 && p.Limit >= 0 && p.Offset == 0 && len(g) >= len(w) {
			// PostgreSQL's page held rows of NULL groups, which are not
			// released (canonical drops them): its other rows are the
			// first rows of the released page.
			g = g[:len(w)]
		}
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Fatalf("ordered page differs:\n got %v\nwant %v", g, w)
		}
		return
	}
	got = page(p, got)
	sortRows(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("emitted SQL answers differ from the analyst's query:\n got %v\nwant %v", got, want)
	}
}

func sortByPlan(p *Plan, rows [][]string) {
	sort.SliceStable(rows, func(i, j int) bool {
		for _, ob := range p.OrderBy {
			c := compareCells(p.Outputs[ob.Output], rows[i][ob.Output], rows[j][ob.Output])
			if c != 0 {
				return c < 0 != ob.Desc
			}
		}
		return false
	})
}

func compareCells(o Output, a, b string) int {
	if o.Kind != OutputKey || o.PGType != "text" {
		ra, oka := new(big.Rat).SetString(a)
		rb, okb := new(big.Rat).SetString(b)
		if oka && okb {
			return ra.Cmp(rb)
		}
	}
	return strings.Compare(a, b) // text keys here are ASCII: same as the C/en_US order
}

func page(p *Plan, rows [][]string) [][]string {
	off := int(min(p.Offset, int64(len(rows))))
	rows = rows[off:]
	if p.Limit >= 0 && int(p.Limit) < len(rows) {
		rows = rows[:p.Limit]
	}
	return rows
}

// TestRewrite_PostgresBounds checks on a real PostgreSQL that the emitted
// SQL enforces the contribution bounds and the clamping when the data
// violates them: one patient with 30 visits of cost 50000 in one
// department, and one patient in all 7 departments.
func TestRewrite_PostgresBounds(t *testing.T) {
	ctx, conn := freshConn(t, time.Minute)
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	ds := loadHospital(t)
	depts := ds.Tables["visits"].Columns["department"].PublicValues
	var rows [][]any
	for i := 0; i < 30; i++ {
		rows = append(rows, []any{int64(i + 1), int64(1), "2021-01-01", "cardiology", "flu", 200, "50000", 5})
	}
	capRows := int64(ds.Tables["visits"].MaxRowsPerUnit)
	for i, d := range depts {
		// Patient 2: capRows+1 visits in each of the 7 departments, so
		// 7·capRows bounded rows against an allowance of L0·capRows.
		for j := range capRows + 1 {
			rows = append(rows, []any{int64(1000 + 100*int64(i) + j), int64(2), "2021-01-01", d, "flu", -3, "-7", 5})
		}
		// Patient 4: one visit in each department, 7 rows within the
		// allowance: never weighted.
		rows = append(rows, []any{int64(100 + i), int64(4), "2021-01-01", d, "flu", -3, "-7", 5})
	}
	// A row outside the public domain and one with a NULL unit.
	rows = append(rows, []any{int64(200), int64(3), "2021-01-01", "dermatology", "flu", 30, "10", 5})
	rows = append(rows, []any{int64(201), nil, "2021-01-01", "cardiology", "flu", 30, nil, 5})
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"visits"}, []string{"visit_id", "patient_id", "visit_date", "department", "diagnosis", "age", "cost", "length_of_stay"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}

	p, err := Rewrite(ds, "SELECT department, COUNT(*), SUM(cost), SUM(age), COUNT(cost) FROM visits GROUP BY department")
	if err != nil {
		t.Fatal(err)
	}
	res, err := queryText(ctx, conn, p.SQL)
	if err != nil {
		t.Fatalf("emitted SQL failed: %v\n%s", err, p.SQL)
	}
	groups := map[string][]*big.Rat{}
	for _, r := range res {
		var ms []*big.Rat
		for _, v := range r[1:] {
			x := rat(v)
			if x == nil {
				x = new(big.Rat)
			}
			ms = append(ms, x)
		}
		groups[*r[0]] = ms
	}
	if _, ok := groups["dermatology"]; ok {
		t.Errorf("a group outside the public domain was returned")
	}
	// Patient 2 (capRows+1 visits in each of the 7 departments) has
	// 7·capRows bounded rows, more than its allowance T = L0·capRows, so
	// each group's count is weighted by T/(7·capRows) = 4/7 (bounds.go,
	// "Two levels of bounding"): capRows·4/7 truncated, never more, and
	// the patient's counts sum to at most T. Patient 4 (7 rows, within
	// T) adds exactly 1 to each group.
	want := big.NewRat(4*capRows, 7)
	total := new(big.Rat)
	for _, d := range depts {
		if d == "cardiology" {
			continue
		}
		ms, ok := groups[d]
		if !ok {
			t.Errorf("group %s missing: patient 2's visits there are weighted, not dropped", d)
			continue
		}
		c := new(big.Rat).Sub(ms[p.Outputs[1].Measure], big.NewRat(1, 1))
		if c.Sign() <= 0 || c.Cmp(want) > 0 || new(big.Rat).Sub(want, c).Cmp(big.NewRat(1, 1_000_000_000)) > 0 {
			t.Errorf("group %s: COUNT(*) − patient 4's 1 = %s, want %s truncated towards zero", d, c.FloatString(20), want.FloatString(20))
		}
		total.Add(total, c)
	}
	if total.Cmp(big.NewRat(int64(p.MaxGroupsPerUnit)*capRows, 1)) > 0 || p.MaxGroupsPerUnit != 4 {
		t.Errorf("patient 2's counts sum to %s over the non-cardiology groups, MaxGroupsPerUnit %d, want ≤ 4·%d", total.FloatString(20), p.MaxGroupsPerUnit, capRows)
	}
	// The bias estimate (bias.go), the last measure, counts removed rows
	// and rows with a summed value outside its bounds: patient 1 lost 25
	// cardiology rows and has 30 costs above 20,000, 55 clipped to
	// C = L0·R = 20; patient 2 lost 42 − 20 = 22 rows and has 42 costs
	// below 0, (22/7 + 6) per group, clipped to 20 in all (20/7 per
	// group, truncated); patient 4 lost none but has 7 costs below 0, one
	// per group (7 ≤ C: not clipped).
	if !p.HasBias() {
		t.Fatalf("plan has no bias estimate: %+v", p.Measures)
	}
	r := len(p.Measures) - 1
	if c := float64(p.MaxGroupsPerUnit) * float64(capRows); p.Measures[r].LInf != c || p.Measures[r].L1 != c {
		t.Errorf("bias measure bounds %+v, want LInf = L1 = %v", p.Measures[r], c)
	}
	perGroup := big.NewRat(4*capRows, 7)
	removedTotal := new(big.Rat)
	for _, d := range depts {
		want := new(big.Rat).Add(perGroup, big.NewRat(1, 1))
		if d == "cardiology" {
			want.Add(want, big.NewRat(4*capRows, 1))
		}
		got := groups[d][r]
		if got.Cmp(want) > 0 || new(big.Rat).Sub(want, got).Cmp(big.NewRat(1, 1_000_000_000)) > 0 {
			t.Errorf("group %s: removed rows %s, want %s truncated towards zero", d, got.FloatString(12), want.FloatString(12))
		}
		removedTotal.Add(removedTotal, got)
	}
	if removedTotal.Cmp(big.NewRat(3*4*capRows, 1)) > 0 {
		t.Errorf("removed rows sum to %s, more than 3 units × C", removedTotal.FloatString(12))
	}
	measureOf := func(o int) int { return p.Outputs[o].Measure }
	card := groups["cardiology"]
	if card == nil {
		t.Fatalf("no cardiology group: %v", res)
	}
	// Cardiology: patient 1 capped at max_rows_per_unit rows, each cost clamped to 20000
	// and age to 110; patient 2 weighted (cost -7 → 0, age -3 → 0), patient 4's 1;
	// the NULL-unit row is excluded (rows without a unit are never counted).
	count := card[measureOf(1)]
	sumCost := card[measureOf(2)]
	sumAge := card[measureOf(3)]
	if lo, hi := new(big.Rat).Add(big.NewRat(capRows+1, 1), want).Sub(new(big.Rat).Add(big.NewRat(capRows+1, 1), want), big.NewRat(1, 1_000_000_000)), new(big.Rat).Add(big.NewRat(capRows+1, 1), want); count.Cmp(lo) < 0 || count.Cmp(hi) > 0 {
		t.Errorf("cardiology COUNT(*) = %v, want %d + 1 + %s (capped rows, patients 4 and 2; the NULL-unit row excluded)", count.FloatString(12), capRows, want.FloatString(12))
	}
	if want := big.NewRat(capRows*20000, 1); sumCost.Cmp(want) != 0 {
		t.Errorf("cardiology SUM(cost) = %v, want %v (capped rows clamped to 20000; -7 clamped to 0; NULL ignored)", sumCost.RatString(), want.RatString())
	}
	if want := big.NewRat(capRows*110, 1); sumAge.Cmp(want) != 0 {
		t.Errorf("cardiology SUM(age) = %v, want %v", sumAge.RatString(), want.RatString())
	}
	for i, m := range p.Measures {
		for g, ms := range groups {
			if f, _ := new(big.Rat).Abs(ms[i]).Float64(); f > m.LInf*float64(3) {
				t.Errorf("group %s measure %d = %v exceeds 3 units × LInf %v", g, i, f, m.LInf)
			}
		}
	}
}

// policyDatabase creates a database with the tables of a policy and data
// within its bounds and contribution limits: every unit has between 1 and
// max_rows_per_unit rows, all with the same values in the public-value
// columns, so a unit falls in exactly one group of any GROUP BY.
func policyDatabase(t *testing.T, ctx context.Context, ds *policy.Dataset) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	rng := rand.New(rand.NewPCG(3, 4))
	sqlType := map[policy.Type]string{policy.TypeInt: "bigint", policy.TypeNumeric: "numeric", policy.TypeFloat: "float8",
		policy.TypeText: "text", policy.TypeDate: "date", policy.TypeBool: "boolean", "": "text"}
	for _, name := range ds.TableOrder {
		tb := ds.Tables[name]
		if tb.Public {
			continue
		}
		cols := []string{tb.UnitColumn}
		defs := []string{pgx.Identifier{tb.UnitColumn}.Sanitize() + " bigint"}
		for _, c := range tb.ColumnOrder {
			if c == tb.UnitColumn {
				continue
			}
			cols = append(cols, c)
			defs = append(defs, pgx.Identifier{c}.Sanitize()+" "+sqlType[tb.Columns[c].Type])
		}
		ddl := "CREATE TABLE " + pgx.Identifier{tb.Schema, name}.Sanitize() + " (" + strings.Join(defs, ", ") + ")"
		if _, err := conn.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
		var rows [][]any
		for u := int64(1); u <= 60; u++ {
			fixed := map[string]any{}
			for _, c := range tb.ColumnOrder {
				if pv := tb.Columns[c].PublicValues; pv != nil {
					fixed[c] = valueOf(tb.Columns[c], pv[rng.IntN(len(pv))])
				}
			}
			for r := 0; r < 1+rng.IntN(tb.MaxRowsPerUnit); r++ {
				row := []any{u}
				for _, c := range cols[1:] {
					col := tb.Columns[c]
					if v, ok := fixed[c]; ok {
						row = append(row, v)
						continue
					}
					row = append(row, randomValue(rng, col))
				}
				rows = append(rows, row)
			}
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{tb.Schema, name}, cols, pgx.CopyFromRows(rows)); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// valueOf converts a policy literal (public value) to a Go value for COPY.
func valueOf(c *policy.Column, v string) any {
	switch c.Type {
	case policy.TypeInt:
		var x int64
		fmt.Sscan(v, &x)
		return x
	case policy.TypeBool:
		return v == "true"
	case policy.TypeDate:
		d, _ := time.Parse("2006-01-02", v)
		return d
	}
	return v
}

// randomValue draws a value within the column's bounds (NULL one time in
// eight for columns other than keys).
func randomValue(rng *rand.Rand, c *policy.Column) any {
	if c.Hidden || rng.IntN(8) == 0 {
		return nil
	}
	lo, hi := -100.0, 100.0
	if c.HasBounds {
		lo, hi = c.LowerNum, c.UpperNum
	}
	switch c.Type {
	case policy.TypeInt:
		return int64(lo) + rng.Int64N(int64(hi-lo)+1)
	case policy.TypeNumeric:
		return fmt.Sprintf("%.2f", lo+(hi-lo)*rng.Float64())
	case policy.TypeFloat:
		// Multiples of 1/8 sum exactly in float8, so PostgreSQL's float
		// SUM/AVG match the emitted numeric sums.
		return float64(int64((lo+(hi-lo)*rng.Float64())*8)) / 8
	case policy.TypeDate:
		return time.Unix(int64(lo+(hi-lo)*rng.Float64())*86400, 0).UTC()
	case policy.TypeBool:
		return rng.IntN(2) == 0
	}
	return []string{"a", "b", "c"}[rng.IntN(3)]
}

// demoHospital is the demo database and the example hospital policy, for
// the attack tests that time emitted SQL on it: the database's DSN, a
// connection to it, a context of five minutes and the policy.
func demoHospital(t *testing.T) (string, *pgx.Conn, context.Context, *policy.Dataset) {
	t.Helper()
	dsn, conn := demodb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	ds, err := policy.Load("../examples/policies/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return dsn, conn, ctx, ds
}

// execer runs statements on conn for a test's set-up, failing the test on
// an error.
func execer(t *testing.T, ctx context.Context, conn *pgx.Conn) func(sql string, args ...any) {
	return func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}
