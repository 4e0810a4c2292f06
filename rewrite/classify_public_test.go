package rewrite

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
)

// TestPublicTable_RoutesToShadow: a statement that names only public
// tables runs on the shadow catalog, which holds their rows
// (internal/shadow, mirror.go), and SELECT DISTINCT of a public table's
// column with public_values is answered there (its real values), not from
// the declared values; a statement naming a protected table stays DP.
func TestPublicTable_RoutesToShadow(t *testing.T) {
	t.Parallel()
	ds, err := policy.Parse(strings.NewReader(`dataset: d
privacy_unit: u
budget: {epsilon: 1}
tables:
  visits:
    unit_column: uid
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      wing: {type: text, public_values: [east, west]}
  wards:
    public: true
    columns:
      ward_id: {type: int}
      wing: {type: text, public_values: [east, west]}
`), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := PublicDistinct(ds, "SELECT DISTINCT wing FROM wards ORDER BY 1"); got != nil {
		t.Errorf("PublicDistinct on a public table = %+v, want nil (the shadow's rows answer)", got)
	}
	if got := PublicDistinct(ds, "SELECT DISTINCT wing FROM visits ORDER BY 1"); got == nil || strings.Join(got.Values, ",") != "east,west" {
		t.Errorf("PublicDistinct on a protected table = %+v, want the declared values", got)
	}
	for q, want := range map[string]pgsql.Route{
		"SELECT * FROM wards": pgsql.RouteCatalog,
		"SELECT count(*) FROM wards w JOIN wards x USING (ward_id)": pgsql.RouteCatalog,
		"SELECT count(*) FROM visits JOIN wards USING (wing)":       pgsql.RouteDP,
	} {
		if got, err := pgsql.Classify(ds, q); got != want {
			t.Errorf("Classify(%q) = %v, %v; want %v", q, got, err, want)
		}
	}
}
