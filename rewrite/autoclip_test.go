package rewrite

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/dpplan"
)

// TestClipEdges: the candidate upper bounds halve the range towards its
// lower end, the lower bounds towards its upper end; strictly inside,
// ascending, whole numbers for int columns.
func TestClipEdges(t *testing.T) {
	if got, want := clipEdges(0, 20000, false, false), []float64{78.125, 156.25, 312.5, 625, 1250, 2500, 5000, 10000}; !slices.Equal(got, want) {
		t.Fatalf("upper candidates of [0, 20000] = %v, want %v", got, want)
	}
	if got, want := clipEdges(0, 20000, false, true), []float64{10000, 15000, 17500, 18750, 19375, 19687.5, 19843.75, 19921.875}; !slices.Equal(got, want) {
		t.Fatalf("lower candidates of [0, 20000] = %v, want %v", got, want)
	}
	if got, want := clipEdges(0, 60, true, false), []float64{1, 2, 4, 8, 15, 30}; !slices.Equal(got, want) {
		t.Fatalf("upper candidates of int [0, 60] = %v, want %v", got, want)
	}
	if got := clipEdges(0, 1, true, false); len(got) != 0 {
		t.Fatalf("clipEdges(0, 1, int) = %v, want none", got)
	}
}

// TestAutoClip_Eligible: only sums of plain bounded numeric columns get
// a histogram; the replanned statement has the chosen bounds and the
// same measures.
func TestAutoClip_Eligible(t *testing.T) {
	ds := loadHospital(t)
	for q, want := range map[string][]string{
		"SELECT COUNT(*) FROM visits":                                                   nil,
		"SELECT SUM(cost), AVG(length_of_stay) FROM visits":                             {"cost", "length_of_stay"},
		"SELECT department, VAR_SAMP(age) FROM visits GROUP BY department":              {"age"},
		"SELECT SUM(cost * 2) FROM visits":                                              nil, // an expression: its bounds are derived
		"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits":          nil, // quantiles choose no weights
		"SELECT diagnosis, SUM(cost) FROM visits GROUP BY diagnosis":                    nil, // private keys
		"SELECT COUNT(*), SUM(cost) FILTER (WHERE age > 30) FROM visits WHERE age < 90": nil, // summed under FILTER
		"SELECT SUM(cost), AVG(age) FILTER (WHERE cost > 15000) FROM visits":            {"cost"},
	} {
		p, err := RewriteWith(ds, q, Options{AutoClip: true})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var got []string
		if p.Clip != nil {
			for _, c := range p.Clip.Columns {
				got = append(got, c.Column)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: clip columns %v, want %v", q, got, want)
		}
	}
	p, err := RewriteWith(ds, "SELECT SUM(cost), AVG(cost) FROM visits", Options{AutoClip: true})
	if err != nil {
		t.Fatal(err)
	}
	np, err := Replan(ds, p, []ClipBounds{{Lower: 0, Upper: 625}})
	if err != nil {
		t.Fatal(err)
	}
	if np.Clip != nil || len(np.Measures) != len(p.Measures) {
		t.Fatalf("replanned: clip %v, %d measures, want none and %d", np.Clip, len(np.Measures), len(p.Measures))
	}
	for i, m := range np.Measures {
		if m.Kind != p.Measures[i].Kind || m.LInf > p.Measures[i].LInf {
			t.Errorf("measure %d: %v linf %v, declared %v linf %v", i, m.Kind, m.LInf, p.Measures[i].Kind, p.Measures[i].LInf)
		}
		if m.Kind == MeasureSum && m.Upper != 625 {
			t.Errorf("measure %d: upper %v, want 625", i, m.Upper)
		}
	}
	if c := ds.Tables["visits"].Columns["cost"]; c.UpperNum != 20000 || c.Upper != "20000" {
		t.Fatalf("Replan changed the shared policy: cost upper %v %q", c.UpperNum, c.Upper)
	}
}

// TestAutoClip_HistogramOnPostgres runs the histogram query on random
// units and checks it against a model: of every unit, over the rows the
// plan reads that have a value, the largest and the smallest clamped
// value each land in the bin width_bucket gives them (side 0 and 1), and
// each unit counts once per column and side. Then a neighbour: one more
// unit (40 rows of extreme values) moves each of the 2k histograms by
// exactly one in one bin, so the vector by 2k in L1.
func TestAutoClip_HistogramOnPostgres(t *testing.T) {
	ctx, conn := freshConn(t, time.Minute)
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	ds := loadHospital(t)
	p, err := RewriteWith(ds, "SELECT department, SUM(cost), AVG(length_of_stay) FROM visits WHERE age > 30 GROUP BY department", Options{AutoClip: true})
	if err != nil || p.Clip == nil {
		t.Fatalf("%v %+v", err, p)
	}
	depts := ds.Tables["visits"].Columns["department"].PublicValues
	rng := rand.New(rand.NewPCG(3, 9))
	type row struct {
		unit int64
		dept string
		age  int
		cost *float64
		stay int
	}
	var data []row
	id := int64(1)
	copyRows := func(rs []row) {
		var in [][]any
		for _, r := range rs {
			var cost any
			if r.cost != nil {
				cost = strconv.FormatFloat(*r.cost, 'f', 2, 64)
			}
			in = append(in, []any{id, r.unit, "2021-01-01", r.dept, "flu", r.age, cost, r.stay})
			id++
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"visits"}, []string{"visit_id", "patient_id", "visit_date", "department", "diagnosis", "age", "cost", "length_of_stay"}, pgx.CopyFromRows(in)); err != nil {
			t.Fatal(err)
		}
		data = append(data, rs...)
	}
	var batch []row
	for u := int64(1); u <= 80; u++ {
		for range 1 + rng.IntN(35) {
			var cost *float64
			if rng.IntN(10) > 0 {
				v := math.Round(rng.Float64()*30000*100)/100 - 2000 // some beyond [0, 20000]
				cost = &v
			}
			dept := depts[rng.IntN(len(depts))]
			if rng.IntN(20) == 0 {
				dept = "dermatology" // outside the key domain: not read
			}
			batch = append(batch, row{u, dept, 20 + rng.IntN(60), cost, rng.IntN(70)})
		}
	}
	copyRows(batch)
	hist := func() map[[3]int]int {
		rows, err := queryText(ctx, conn, p.Clip.SQL)
		if err != nil {
			t.Fatalf("%v\n%s", err, p.Clip.SQL)
		}
		out := map[[3]int]int{}
		for _, r := range rows {
			var k [3]int
			for j := range 3 {
				k[j], _ = strconv.Atoi(*r[j])
			}
			out[k], _ = strconv.Atoi(*r[3])
		}
		return out
	}
	model := func() map[[3]int]int {
		type key struct {
			unit int64
			col  int
		}
		hi, lo := map[key]float64{}, map[key]float64{}
		for _, r := range data {
			if r.age <= 30 || !slices.Contains(depts, r.dept) {
				continue
			}
			stay := float64(r.stay)
			for i, v := range []*float64{r.cost, &stay} {
				if v == nil {
					continue
				}
				col := p.Clip.Columns[i]
				x := math.Max(col.Lower, math.Min(col.Upper, *v))
				k := key{r.unit, i}
				if h, ok := hi[k]; !ok || x > h {
					hi[k] = x
				}
				if l, ok := lo[k]; !ok || x < l {
					lo[k] = x
				}
			}
		}
		out := map[[3]int]int{}
		for side, m := range []map[key]float64{hi, lo} {
			for k, x := range m {
				b := 0
				edges := p.Clip.Columns[k.col].UpperEdges
				if side == 1 {
					edges = p.Clip.Columns[k.col].LowerEdges
				}
				for _, e := range edges {
					if x >= e {
						b++
					}
				}
				out[[3]int{k.col, side, b}]++
			}
		}
		return out
	}
	check := func() map[[3]int]int {
		got, want := hist(), model()
		if len(got) != len(want) {
			t.Fatalf("%d non-empty bins, model %d: %v vs %v", len(got), len(want), got, want)
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("bin %v = %d, model %d", k, got[k], w)
			}
		}
		return got
	}
	before := check()
	// A neighbour: one more unit with 40 rows at the extremes.
	var extra []row
	for j := range 40 {
		v := float64(1e6)
		if j%2 == 0 {
			v = -1e6
		}
		extra = append(extra, row{999, depts[j%len(depts)], 50, &v, 1000 * (j % 2)})
	}
	copyRows(extra)
	after := check()
	l1 := 0
	for k := range after {
		d := after[k] - before[k]
		l1 += max(d, -d)
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			l1 += before[k]
		}
	}
	if want := 2 * len(p.Clip.Columns); l1 != want {
		t.Errorf("one unit moved the histograms by %d in L1, want exactly 2k = %d", l1, want)
	}
}

// TestAutoClip_ReplanKeepsKeys: tighter bounds change how values are
// clamped, never which rows the plan reads or which groups it releases.
// floor(col/W)*W takes its key domain and its row condition (col BETWEEN
// lower AND upper) from the column's bounds (datekey.go), so a column
// bucketed as a key must keep its declared bounds: replanned with an
// upper bound of 30, SUM(length_of_stay) GROUP BY floor(length_of_stay/
// 10)*10 dropped every row above 30 (from the COUNT too) instead of
// clamping it, and released groups 40–60 that the new plan no longer
// reads. Every replan, at every pair of edges, has the declared keys.
func TestAutoClip_ReplanKeepsKeys(t *testing.T) {
	ds := loadHospital(t)
	for _, q := range []string{
		"SELECT floor(length_of_stay/10)*10 AS b, COUNT(*), SUM(length_of_stay) FROM visits GROUP BY 1",
		"SELECT floor(age/10)*10 AS b, AVG(age), SUM(length_of_stay) FROM visits GROUP BY 1",
		"SELECT department, floor(age/5)*5 AS b, VAR_SAMP(age), SUM(cost) FROM visits GROUP BY 1, 2",
	} {
		p, err := RewriteWith(ds, q, Options{AutoClip: true})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if p.Clip == nil {
			continue
		}
		for _, c := range p.Clip.Columns {
			for _, k := range p.Keys {
				if k.Column == c.Column {
					t.Errorf("%s: %s is a key column and a clip column", q, c.Column)
				}
			}
		}
		for i, c := range p.Clip.Columns {
			edges := append(append([]float64{}, c.UpperEdges...), c.LowerEdges...)
			slices.Sort(edges)
			for lo := range edges {
				for hi := lo + 1; hi < len(edges); hi++ {
					bounds := make([]ClipBounds, len(p.Clip.Columns))
					for j, d := range p.Clip.Columns {
						bounds[j] = ClipBounds{Lower: d.Lower, Upper: d.Upper}
					}
					bounds[i] = ClipBounds{Lower: edges[lo], Upper: edges[hi]}
					np, err := Replan(ds, p, bounds)
					if err != nil {
						continue // release keeps the declared bounds
					}
					if !reflect.DeepEqual(np.Keys, p.Keys) {
						t.Fatalf("%s: replanned with %s in [%v, %v]: keys %v, declared %v", q, c.Column, edges[lo], edges[hi], np.Keys, p.Keys)
					}
				}
			}
		}
	}
}

// TestClipEdges_NoNegativeZero: an int column's edge rounded from just
// below 0 is 0, not -0 (which the NOTICE and the emitted SQL would write
// as "-0").
func TestClipEdges_NoNegativeZero(t *testing.T) {
	for _, r := range [][2]float64{{-1, 2}, {-3, 1}, {-1, 10}, {-100, 1}, {-7, 5}} {
		for _, e := range append(clipEdges(r[0], r[1], true, false), clipEdges(r[0], r[1], true, true)...) {
			if s := dpplan.BoundText(e); strings.HasPrefix(s, "-0") {
				t.Errorf("clipEdges(%v, %v, int) has the edge %q", r[0], r[1], s)
			}
		}
	}
}
