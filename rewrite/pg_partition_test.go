package rewrite

import (
	"fmt"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/pgemit"
)

// TestRewrite_PostgresPartitionUnits checks on a real PostgreSQL the
// column partition selection thresholds: on data within the contribution
// limits, the last column of the emitted SQL is exactly PostgreSQL's
// COUNT(DISTINCT patient_id) of the group (the threshold "off": what the
// release compares with τ); and a patient with rows in 7 groups is counted
// in exactly max_groups_per_unit = 4 of them.
func TestRewrite_PostgresPartitionUnits(t *testing.T) {
	ctx, conn := freshConn(t, time.Minute)
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	ds := loadHospital(t)
	loadWithinLimits(t, ctx, conn, ds)
	p, err := Rewrite(ds, "SELECT department, diagnosis, COUNT(*) FROM visits GROUP BY 1, 2")
	if err != nil {
		t.Fatal(err)
	}
	units := func() map[string]string {
		rows, err := queryText(ctx, conn, p.SQL)
		if err != nil {
			t.Fatalf("emitted SQL: %v\n%s", err, p.SQL)
		}
		out := map[string]string{}
		for _, r := range rows {
			if r[0] == nil || r[1] == nil || r[3] == nil {
				t.Fatalf("row with a NULL key or unit count: %v", r)
			}
			out[*r[0]+"/"+*r[1]] = *r[3]
		}
		return out
	}
	got := units()
	direct, err := queryText(ctx, conn, "SELECT department, diagnosis, COUNT(DISTINCT patient_id) FROM visits WHERE diagnosis IS NOT NULL GROUP BY 1, 2")
	if err != nil {
		t.Fatal(err)
	}
	if len(direct) != len(got) || len(got) < 10 {
		t.Fatalf("emitted SQL returned %d groups, PostgreSQL %d", len(got), len(direct))
	}
	for _, r := range direct {
		if k := *r[0] + "/" + *r[1]; got[k] != *r[2] {
			t.Errorf("group %s: emitted unit count %q, PostgreSQL COUNT(DISTINCT patient_id) %s", k, got[k], *r[2])
		}
	}

	// Patient 999 in 7 new groups (one per department, a new diagnosis):
	// after bounding, in exactly 4 of them, with a unit count of 1.
	for i, d := range ds.Tables["visits"].Columns["department"].PublicValues {
		if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO visits (visit_id, patient_id, department, diagnosis) VALUES (%d, 999, %s, 'Z99')",
			100000+i, pgemit.QuoteString(d))); err != nil {
			t.Fatal(err)
		}
	}
	for run := 0; run < 3; run++ {
		n := 0
		for k, v := range units() {
			if len(k) > 4 && k[len(k)-4:] == "/Z99" {
				n++
				if v != "1" {
					t.Errorf("group %s has unit count %s, want 1", k, v)
				}
			}
		}
		if n != p.MaxGroupsPerUnit || n != 4 {
			t.Fatalf("run %d: patient 999 is counted in %d groups, want max_groups_per_unit = 4", run, n)
		}
	}
}
