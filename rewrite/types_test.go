package rewrite

import (
	"slices"
	"testing"
)

// TestResultTypes_FromTheCatalog: with the columns' types read from the
// database (policy.Column.PGType, internal/catalog), MIN, MAX and
// percentile_disc have the column's own type and the SUM of a numeric(p,
// s) column keeps its scale and that of an integer column is bigint, as
// PostgreSQL types them; without them, the types that hold every value
// (int8, numeric).
func TestResultTypes_FromTheCatalog(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	q := "SELECT MIN(age), MAX(cost), percentile_disc(0.5) WITHIN GROUP (ORDER BY age), percentile_cont(0.5) WITHIN GROUP (ORDER BY age), SUM(cost), SUM(age) FROM visits"
	types := func() ([]string, int) {
		p, err := Rewrite(ds, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range p.Outputs {
			out = append(out, o.PGType)
		}
		return out, p.Outputs[4].Scale
	}
	got, scale := types()
	if want := []string{"int8", "numeric", "int8", "float8", "numeric", "numeric"}; !slices.Equal(got, want) || scale != 0 {
		t.Errorf("without the catalog: %v scale %d, want %v", got, scale, want)
	}
	vis, _ := ds.Table("visits")
	vis.Columns["age"].PGType = "int4"
	vis.Columns["cost"].PGType, vis.Columns["cost"].Scale = "numeric", 2
	got, scale = types()
	if want := []string{"int4", "numeric", "int4", "float8", "numeric", "int8"}; !slices.Equal(got, want) || scale != 2 {
		t.Errorf("with the catalog: %v scale %d, want %v and scale 2", got, scale, want)
	}
}
