package rewrite

import (
	"context"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// combinedProfile runs a plan's Auto.CombinedSQL and returns its profile:
// the last len(Candidates) + 1 columns summed over the rows.
func combinedProfile(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, p *Plan) ([]int, error) {
	rows, err := q.Query(ctx, p.Auto.CombinedSQL, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	k := len(p.Auto.Candidates) + 1
	out := make([]int, k)
	for rows.Next() {
		raw := rows.RawValues()
		for i, v := range raw[len(raw)-k:] {
			if v == nil {
				continue
			}
			n, err := strconv.Atoi(string(v))
			if err != nil {
				return nil, err
			}
			out[i] += n
		}
	}
	return out, rows.Err()
}

func TestAutoCandidates(t *testing.T) {
	for r, want := range map[int][]int{
		2:  {1, 2},
		3:  {1, 3},
		5:  {1, 2, 5},
		20: {1, 2, 3, 4, 6, 8, 20},
		64: {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64},
	} {
		if got := autoCandidates(r); !slices.Equal(got, want) {
			t.Errorf("autoCandidates(%d) = %v, want %v", r, got, want)
		}
	}
}

// TestAutoBounds_Plan: with dp.contribution = auto an eligible plan
// carries one plan per smaller candidate, each exactly the plan of SET
// dp.max_rows_per_unit = c; ineligible shapes and an explicit
// dp.max_rows_per_unit carry none.
func TestAutoBounds_Plan(t *testing.T) {
	ds := loadHospital(t)
	for _, q := range []string{
		"SELECT COUNT(*), SUM(length_of_stay) FROM visits WHERE department = 'oncology'",
		"SELECT department, COUNT(*), AVG(cost) FROM visits GROUP BY department",
	} {
		p, err := RewriteWith(ds, q, Options{AutoBounds: true})
		if err != nil {
			t.Fatal(err)
		}
		if p.Auto == nil {
			t.Fatalf("%s: no candidates", q)
		}
		if got := p.Auto.Candidates; got[len(got)-1] != p.RowsPerUnit || len(p.Auto.Plans) != len(got)-1 {
			t.Fatalf("%s: candidates %v, %d plans, RowsPerUnit %d", q, got, len(p.Auto.Plans), p.RowsPerUnit)
		}
		for i, c := range p.Auto.Candidates[:len(p.Auto.Candidates)-1] {
			want, err := RewriteWith(ds, q, Options{MaxRowsPerUnit: c})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Auto.Plans[i]; got.SQL != want.SQL || got.Fingerprint != want.Fingerprint {
				t.Errorf("%s: candidate %d is not the plan of dp.max_rows_per_unit = %d", q, c, c)
			}
		}
		fixed, _ := RewriteWith(ds, q, Options{})
		if fixed.Fingerprint == p.Fingerprint || fixed.SQL != p.SQL {
			t.Errorf("%s: the auto plan must share the fixed plan's SQL and differ in fingerprint", q)
		}
	}
	for _, tc := range []struct {
		q    string
		opts Options
	}{
		{"SELECT COUNT(*) FROM visits", Options{AutoBounds: true, MaxRowsPerUnit: 3}},
		{"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits", Options{AutoBounds: true}},
		{"SELECT COUNT(*) FROM patients", Options{AutoBounds: true}}, // one row per unit: nothing to choose
		{"SELECT p.region, COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY p.region", Options{AutoBounds: true}},
	} {
		p, err := RewriteWith(ds, tc.q, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if p.Auto != nil {
			t.Errorf("%s %+v: candidates %v, want none", tc.q, tc.opts, p.Auto.Candidates)
		}
	}
}

// TestAutoBounds_OneWeight: under dp.contribution = auto a plan of
// averages and deviations alone is the plan of
// dp.max_rows_per_unit = 1 and dp.max_groups_per_unit = 1 (one row's
// weight per unit in all), marked for the NOTICE; a plan that also
// releases or uses a count, a sum or a quantile, a join, a private key, or a session's
// own bound does not get it.
func TestAutoBounds_OneWeight(t *testing.T) {
	ds := loadHospital(t)
	for _, q := range []string{
		"SELECT department, AVG(cost) FROM visits GROUP BY department",
		"SELECT AVG(cost), STDDEV(length_of_stay) FROM visits WHERE visit_date >= '2023-01-01'",
		"SELECT department, AVG(cost) * 2, STDDEV_POP(age) FROM visits GROUP BY 1 HAVING AVG(cost) > 100 ORDER BY 2",
		"SELECT region, VAR_SAMP(birth_year) FROM patients GROUP BY region",
	} {
		p, err := RewriteWith(ds, q, Options{AutoBounds: true})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		want, err := RewriteWith(ds, q, Options{MaxRowsPerUnit: 1, MaxGroupsPerUnit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !p.OneWeight || p.Auto != nil || p.SQL != want.SQL || p.RowsPerUnit != 1 || p.MaxGroupsPerUnit != 1 {
			t.Errorf("%s: OneWeight %v, candidates %v, rows %d, groups %d; want the plan of one row per unit", q, p.OneWeight, p.Auto != nil, p.RowsPerUnit, p.MaxGroupsPerUnit)
		}
		if p.Fingerprint == want.Fingerprint {
			t.Errorf("%s: the one-weight plan must differ in fingerprint from the session's own bound", q)
		}
		// Made again with clamping bounds chosen by DP, it still says so.
		if c, err := RewriteWith(ds, q, Options{AutoBounds: true, AutoClip: true}); err == nil && c.Clip != nil {
			var b []ClipBounds
			for _, col := range c.Clip.Columns {
				b = append(b, ClipBounds{Lower: col.Lower, Upper: col.Lower + math.Floor((col.Upper-col.Lower)/2)})
			}
			r, err := Replan(ds, c, b)
			if err != nil || !r.OneWeight || r.RowsPerUnit != 1 {
				t.Errorf("%s: replanned with clamping bounds: %v, OneWeight %v", q, err, r != nil && r.OneWeight)
			}
		}
	}
	for _, tc := range []struct {
		q    string
		opts Options
	}{
		{"SELECT department, COUNT(*), AVG(cost) FROM visits GROUP BY department", Options{AutoBounds: true}},
		{"SELECT department, AVG(cost) FROM visits GROUP BY department HAVING COUNT(*) > 10", Options{AutoBounds: true}},
		{"SELECT department, SUM(cost) / COUNT(*) FROM visits GROUP BY department", Options{AutoBounds: true}},
		{"SELECT department, percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits GROUP BY 1", Options{AutoBounds: true}},
		{"SELECT department, AVG(cost), MAX(age) FROM visits GROUP BY 1", Options{AutoBounds: true}},
		{"SELECT department, AVG(cost) FROM visits GROUP BY department", Options{}},
		{"SELECT department, AVG(cost) FROM visits GROUP BY department", Options{AutoBounds: true, MaxRowsPerUnit: 3}},
		{"SELECT department, AVG(cost) FROM visits GROUP BY department", Options{AutoBounds: true, MaxGroupsPerUnit: 2}},
		{"SELECT diagnosis, AVG(cost) FROM visits GROUP BY diagnosis", Options{AutoBounds: true}}, // private key
		{"SELECT p.region, AVG(v.cost) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY p.region", Options{AutoBounds: true}},
	} {
		p, err := RewriteWith(ds, tc.q, tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		if p.OneWeight {
			t.Errorf("%s %+v: planned at one row per unit", tc.q, tc.opts)
		}
	}
}

// TestAutoBounds_ProfileOnPostgres runs the profile query on PostgreSQL
// and checks its counts against the data, and its sensitivity: adding one
// unit with many rows changes N by 1 and each count by 0 or 1, so the
// number of units cut, N − count_c, moves by 0 or 1 (Δu = w for the utility −w·cut − h_c, release/autobounds.go).
func TestAutoBounds_ProfileOnPostgres(t *testing.T) {
	ctx, conn := freshConn(t, time.Minute)
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	ds := loadHospital(t)
	// Patient u has u visits in cardiology (1..6) and one in oncology;
	// patient 100 has no visit in the query's departments.
	var rows [][]any
	id := int64(1)
	add := func(patient int64, dept string) {
		rows = append(rows, []any{id, patient, "2021-01-01", dept, "flu", 40, "10", 1})
		id++
	}
	for u := int64(1); u <= 6; u++ {
		for range u {
			add(u, "cardiology")
		}
		add(u, "oncology")
	}
	add(100, "dermatology")
	copyRows := func() {
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"visits"}, []string{"visit_id", "patient_id", "visit_date", "department", "diagnosis", "age", "cost", "length_of_stay"}, pgx.CopyFromRows(rows)); err != nil {
			t.Fatal(err)
		}
		rows = nil
	}
	copyRows()
	p, err := RewriteWith(ds, "SELECT department, COUNT(*) FROM visits GROUP BY department", Options{AutoBounds: true})
	if err != nil || p.Auto == nil {
		t.Fatalf("%v %+v", err, p)
	}
	profile := func() []int {
		out, err := combinedProfile(ctx, conn, p)
		if err != nil {
			t.Fatalf("profile: %v\n%s", err, p.Auto.CombinedSQL)
		}
		return out
	}
	before := profile()
	// Candidates 1, 2, 5 (R = 5); largest per-group counts 1..6.
	if want := []int{6, 1, 2, 5}; !slices.Equal(before, want) {
		t.Fatalf("profile = %v, want %v (N, then units with at most c rows in one group)", before, want)
	}
	// A neighbour: patient 7 with 40 visits in each department.
	for _, d := range ds.Tables["visits"].Columns["department"].PublicValues {
		for range 40 {
			add(7, d)
		}
	}
	copyRows()
	after := profile()
	if after[0] != before[0]+1 {
		t.Fatalf("N %d → %d, want +1", before[0], after[0])
	}
	for i := 1; i < len(after); i++ {
		if d := after[i] - before[i]; d < 0 || d > 1 {
			t.Errorf("count for candidate %d moved by %d", p.Auto.Candidates[i-1], d)
		}
	}
}

// TestCellsChanged: with groups weighted (public keys with more groups
// than L0) one unit can change every group of the domain, so the noise
// must charge rounding for all of them; otherwise at most L0.
func TestCellsChanged(t *testing.T) {
	ds := loadHospital(t)
	for q, want := range map[string]int{
		"SELECT COUNT(*) FROM visits":                                            1,
		"SELECT department, COUNT(*) FROM visits GROUP BY department":            7, // 7 departments > L0 = 4
		"SELECT sex, COUNT(*) FROM patients GROUP BY sex":                        2, // L0 = 1 < 2 values: a patient with rows in both is weighted in both
		"SELECT date_trunc('year', visit_date), COUNT(*) FROM visits GROUP BY 1": 5,
	} {
		p, err := Rewrite(ds, q)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.CellsChanged(); got != want {
			t.Errorf("%s: CellsChanged = %d, want %d", q, got, want)
		}
	}
}
