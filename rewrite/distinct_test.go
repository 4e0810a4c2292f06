package rewrite

import (
	"reflect"
	"slices"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

const hospitalPolicy = "../internal/testdata/hospital.yaml"

func loadHospital(t testing.TB) *policy.Dataset {
	t.Helper()
	ds, err := policy.Load(hospitalPolicy)
	if err != nil {
		t.Fatalf("load %s: %v", hospitalPolicy, err)
	}
	return ds
}

func TestPublicDistinct(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	deps := []string{"cardiology", "emergency", "neurology", "oncology", "orthopedics", "pediatrics", "surgery"}
	rev := slices.Clone(deps)
	slices.Reverse(rev)
	tests := []struct {
		q      string
		name   string
		values []string
	}{
		{"SELECT DISTINCT department FROM visits", "department", deps},
		{"select distinct department from visits order by department", "department", deps},
		{`SELECT DISTINCT "department" FROM "public"."visits" ORDER BY 1 DESC`, "department", rev},
		{"SELECT DISTINCT v.department AS d FROM visits AS v ORDER BY d DESC NULLS LAST LIMIT 2", "d", rev[:2]},
		{"SELECT DISTINCT public.visits.department FROM public.visits ORDER BY visits.department LIMIT 100", "department", deps},
		{"SELECT DISTINCT region FROM patients ORDER BY region", "region", []string{"central", "east", "north", "south", "west"}},
		{"SELECT DISTINCT sex dept FROM patients p ORDER BY p.sex DESC", "dept", []string{"M", "F"}},
		// GROUP BY without an aggregate: the filter drop-downs of BI tools.
		{"SELECT department FROM visits GROUP BY department ORDER BY department", "department", deps},
		{"SELECT v.department AS d FROM visits v GROUP BY d ORDER BY 1 DESC LIMIT 2", "d", rev[:2]},
		{"SELECT DISTINCT sex FROM patients GROUP BY 1", "sex", []string{"F", "M"}},
		// knex: select distinct "department", "department" from "visits".
		{`select distinct "department", "department" from "visits"`, "department", deps},
	}
	for _, tc := range tests {
		got := PublicDistinct(ds, tc.q)
		if got == nil {
			t.Errorf("PublicDistinct(%q) = nil", tc.q)
			continue
		}
		if got.Name != tc.name || got.PGType != "text" || !reflect.DeepEqual(got.Values, tc.values) {
			t.Errorf("PublicDistinct(%q) = %+v; want name %s, values %v", tc.q, got, tc.name, tc.values)
		}
	}
	if got := PublicDistinct(ds, `select distinct "department", v.department AS d2 from "visits" v`); got == nil || !reflect.DeepEqual(got.Names, []string{"department", "d2"}) {
		t.Errorf("a column selected twice: %+v, want names department, d2", got)
	}
	for _, q := range []string{
		"SELECT department FROM visits", // not DISTINCT
		"SELECT department FROM visits GROUP BY age",
		"SELECT department FROM visits GROUP BY department HAVING COUNT(*) > 5",
		"SELECT department FROM visits GROUP BY 2",
		"SELECT DISTINCT diagnosis FROM visits",                 // no public values
		"SELECT DISTINCT visit_id FROM visits",                  // hidden
		"SELECT DISTINCT department FROM visits WHERE age > 30", // filtered: the data decides
		"SELECT DISTINCT department, age FROM visits",
		"SELECT DISTINCT department, department, age FROM visits",
		"SELECT DISTINCT department, v.department FROM visits",
		"SELECT DISTINCT ON (department) department FROM visits",
		"SELECT DISTINCT department FROM visits v ORDER BY visits.department",
		"SELECT DISTINCT x.department FROM visits",
		"SELECT DISTINCT department FROM other.visits",
		`SELECT DISTINCT "Department" FROM visits`,
		"SELECT DISTINCT department FROM visits ORDER BY 2",
		"SELECT DISTINCT department FROM visits ORDER BY age",
		"SELECT DISTINCT department FROM visits LIMIT $1",
		"SELECT DISTINCT department FROM visits, patients",
		"SELECT DISTINCT lower(department) FROM visits",
		"SELECT DISTINCT department FROM visits AS",
	} {
		if got := PublicDistinct(ds, q); got != nil {
			t.Errorf("PublicDistinct(%q) = %+v; want nil", q, got)
		}
	}
}

func TestSortValues(t *testing.T) {
	t.Parallel()
	ints := []string{"10", "9", "-1", "100"}
	sortValues(ints, policy.TypeInt, false)
	if want := []string{"-1", "9", "10", "100"}; !reflect.DeepEqual(ints, want) {
		t.Errorf("ints = %v, want %v", ints, want)
	}
	bools := []string{"true", "false"}
	sortValues(bools, policy.TypeBool, false)
	if want := []string{"false", "true"}; !reflect.DeepEqual(bools, want) {
		t.Errorf("bools = %v, want %v", bools, want)
	}
	dates := []string{"2021-01-02", "2020-12-31", "2021-01-01"}
	sortValues(dates, policy.TypeDate, true)
	if want := []string{"2021-01-02", "2021-01-01", "2020-12-31"}; !reflect.DeepEqual(dates, want) {
		t.Errorf("dates desc = %v, want %v", dates, want)
	}
}
