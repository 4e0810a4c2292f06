package pgemit

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// TestKeyValueSQL: a key is grouped and released as one text per value
// (attack round 55): a numeric column without a declared scale through
// trim_scale (1.50 and 1.5 are one group, released as 1.5), a float
// column as x + 0 (-0 and 0 are one group, released as 0); a numeric
// with a declared scale, other types and key expressions as they are.
func TestKeyValueSQL(t *testing.T) {
	tb := &policy.Table{Columns: map[string]*policy.Column{
		"n":  {Name: "n", Type: policy.TypeNumeric},
		"n2": {Name: "n2", Type: policy.TypeNumeric, PGType: "numeric", Scale: 2},
		"f":  {Name: "f", Type: policy.TypeFloat},
		"i":  {Name: "i", Type: policy.TypeInt},
		"s":  {Name: "s", Type: policy.TypeText},
		"ci": {Name: "ci", Type: policy.TypeText, PGType: "citext"},
	}}
	for _, c := range []struct {
		key  dpplan.Key
		want string
	}{
		{dpplan.Key{Column: "n", Type: policy.TypeNumeric}, `trim_scale("n")`},
		{dpplan.Key{Column: "n2", Type: policy.TypeNumeric}, `"n2"`},
		{dpplan.Key{Column: "f", Type: policy.TypeFloat}, `("f" + 0)`},
		{dpplan.Key{Column: "i", Type: policy.TypeInt}, `"i"`},
		{dpplan.Key{Column: "s", Type: policy.TypeText}, `"s"`},
		{dpplan.Key{Column: "ci", Type: policy.TypeText}, `lower("ci" COLLATE "default")`},
		// A private key's value is bounded in length.
		{dpplan.Key{Column: "s", Type: policy.TypeText, Private: true}, `CASE WHEN octet_length("s") <= 1024 THEN "s" END`},
		{dpplan.Key{Column: "n", Type: policy.TypeNumeric, Private: true}, `CASE WHEN (NOT (trim_scale("n") BETWEEN -1e1025 AND 1e1025 OR trim_scale("n") = trim_scale("n") * 0.5) OR scale(trim_scale("n")) > 1024) THEN NULL WHEN octet_length(trim_scale("n")::text) <= 1024 THEN trim_scale("n") END`},
		{dpplan.Key{Column: "i", Type: policy.TypeInt, Private: true}, `"i"`},
		{dpplan.Key{Column: "n", Type: policy.TypeNumeric, Func: "width_bucket", Args: []string{"0", "10", "5"}}, `width_bucket(NULLIF("n"::numeric, 'NaN'), (0)::numeric, (10)::numeric, 5)`},
	} {
		if got := keyValueSQL(tb, c.key); got != c.want {
			t.Errorf("keyValueSQL(%+v) = %s, want %s", c.key, got, c.want)
		}
	}
}

// TestUnitSQL: the unit is read as one text per value: lower(u) for a
// citext unit, trim_scale(u) for a numeric one, the column itself for
// types whose text is already a function of the value (attack round 61).
func TestUnitSQL(t *testing.T) {
	for base, want := range map[string]string{
		"citext": `lower("pid" COLLATE "default")`, "numeric": `trim_scale("pid")`,
		"int8": `"pid"`, "text": `"pid"`, "uuid": `"pid"`, "": `"pid"`,
	} {
		if got := unitSQL(&policy.Table{UnitColumn: "pid", UnitPGType: base}); got != want {
			t.Errorf("unitSQL(%q unit) = %s, want %s", base, got, want)
		}
	}
	// The bounded SQL reads it so (sample-and-aggregate and automatic
	// clipping take the same unitSQL).
	tb := &policy.Table{Schema: "public", Name: "t", UnitColumn: "pid", UnitPGType: "citext", MaxRowsPerUnit: 1,
		Columns: map[string]*policy.Column{}}
	p := &dpplan.Plan{MaxGroupsPerUnit: 1, Measures: []dpplan.Measure{{Kind: dpplan.MeasureCount}}}
	if s := SQL(tb, p, nil); !strings.Contains(s, `lower("pid" COLLATE "default") AS dp_unit`) {
		t.Errorf("SQL reads the unit as %s", s)
	}
}
