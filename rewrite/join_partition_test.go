package rewrite

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/pgemit"
)

// TestRewrite_PostgresJoinPartitionUnits is TestRewrite_PostgresPartitionUnits
// for private keys in a join on the unit (join_partition.go): on data within
// the contribution limits the emitted SQL's last column is exactly
// PostgreSQL's COUNT(DISTINCT patient_id) of the joined group, for a private
// key of either table; and a patient whose joined rows fall into 7 new
// groups is counted in exactly max_groups_per_unit = 4 of them, with a
// count of 1 in each (the group only that patient creates).
func TestRewrite_PostgresJoinPartitionUnits(t *testing.T) {
	ctx, conn := freshConn(t, time.Minute)
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	ds := loadHospital(t)
	loadWithinLimits(t, ctx, conn, ds)
	for _, tc := range []struct{ query, direct string }{
		{"SELECT v.diagnosis, p.region, COUNT(*) FROM visits v JOIN patients p USING (patient_id) GROUP BY 1, 2",
			"SELECT v.diagnosis, p.region, COUNT(DISTINCT v.patient_id) FROM visits v JOIN patients p USING (patient_id) WHERE v.diagnosis IS NOT NULL AND p.region IS NOT NULL GROUP BY 1, 2"},
		{"SELECT p.birth_year, MAX(v.age) FROM visits v JOIN patients p ON v.patient_id = p.patient_id WHERE v.department <> 'surgery' GROUP BY p.birth_year",
			"SELECT p.birth_year, COUNT(DISTINCT v.patient_id) FROM visits v JOIN patients p ON v.patient_id = p.patient_id WHERE v.department <> 'surgery' AND p.birth_year IS NOT NULL GROUP BY 1"},
	} {
		p, err := Rewrite(ds, tc.query)
		if err != nil {
			t.Fatal(err)
		}
		if !p.PrivateGroups() || p.Join == nil || p.Join.Shape != JoinUnit {
			t.Fatalf("%s: private %v, join %v", tc.query, p.PrivateGroups(), p.Join)
		}
		nk, last := len(p.Keys), len(p.Keys)+len(p.Measures)
		units := func() map[string]string {
			rows, err := queryText(ctx, conn, p.SQL)
			if err != nil {
				t.Fatalf("emitted SQL: %v\n%s", err, p.SQL)
			}
			out := map[string]string{}
			for _, r := range rows {
				var key []string
				for _, v := range r[:nk] {
					if v == nil {
						t.Fatalf("row with a NULL key: %v", r)
					}
					key = append(key, *v)
				}
				out[strings.Join(key, "/")] = *r[last]
			}
			return out
		}
		got := units()
		direct, err := queryText(ctx, conn, tc.direct)
		if err != nil {
			t.Fatal(err)
		}
		if len(direct) != len(got) || len(got) < 10 {
			t.Fatalf("%s: emitted SQL returned %d groups, PostgreSQL %d", tc.query, len(got), len(direct))
		}
		for _, r := range direct {
			var key []string
			for _, v := range r[:nk] {
				key = append(key, *v)
			}
			if k := strings.Join(key, "/"); got[k] != *r[nk] {
				t.Errorf("%s group %s: emitted unit count %q, PostgreSQL COUNT(DISTINCT patient_id) %s", tc.query, k, got[k], *r[nk])
			}
		}
	}

	// Patient 999 (a patients row and 7 visits, one per department, each
	// with a new diagnosis): after bounding on the joined rows, in exactly
	// 4 of the 7 groups, with a unit count of 1.
	p, err := Rewrite(ds, "SELECT v.diagnosis, COUNT(*) FROM visits v JOIN patients p USING (patient_id) GROUP BY v.diagnosis")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO patients (patient_id, birth_year, sex, region) VALUES (999, 1980, 'F', 'north')"); err != nil {
		t.Fatal(err)
	}
	for i, d := range ds.Tables["visits"].Columns["department"].PublicValues {
		if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO visits (visit_id, patient_id, department, diagnosis) VALUES (%d, 999, %s, 'Z9%d')",
			100000+i, pgemit.QuoteString(d), i)); err != nil {
			t.Fatal(err)
		}
	}
	for run := 0; run < 3; run++ {
		rows, err := queryText(ctx, conn, p.SQL)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range rows {
			if strings.HasPrefix(*r[0], "Z9") {
				n++
				if *r[2] != "1" {
					t.Errorf("group %s has unit count %s, want 1", *r[0], *r[2])
				}
			}
		}
		if n != p.MaxGroupsPerUnit || n != 4 {
			t.Fatalf("run %d: patient 999 is counted in %d groups, want max_groups_per_unit = 4", run, n)
		}
	}
}
