package rewrite

import (
	"slices"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

func TestArithKey(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	for _, tc := range []struct {
		key, typ, sql string
		dom           []string
	}{
		// Metabase's day of week (Sunday 1 … Saturday 7).
		{`((CAST(extract(isodow from "public"."visits"."visit_date") AS integer) % 7) + 1)`, "int4",
			`(((CASE WHEN isfinite("visit_date") THEN EXTRACT(ISODOW FROM "visit_date") END)::int8 % (7)) + (1))`, []string{"1", "2", "3", "4", "5", "6", "7"}},
		{`extract(dow from visit_date)::bigint + 1`, "int8", `((CASE WHEN isfinite("visit_date") THEN EXTRACT(DOW FROM "visit_date") END)::int8 + (1))`, []string{"1", "2", "3", "4", "5", "6", "7"}},
		{`extract(month from visit_date) % 3`, "numeric", `(EXTRACT(MONTH FROM "visit_date") % (3))`, []string{"0", "1", "2"}},
		{`10 + date_part('dow', visit_date)`, "float8", `date_part('dow', "visit_date")`, []string{"10", "11", "12", "13", "14", "15", "16"}},
		{`extract(isodow from visit_date) - 8`, "numeric", `- (8)`, []string{"-7", "-6", "-5", "-4", "-3", "-2", "-1"}},
		{`(extract(isodow from visit_date) - 8) % 3`, "numeric", `% (3)`, []string{"-2", "-1", "0"}},
	} {
		q := "SELECT " + tc.key + " AS d, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1"
		p, err := Rewrite(ds, q)
		if err != nil {
			t.Errorf("%s: %v", tc.key, err)
			continue
		}
		k := p.Keys[0]
		if p.Outputs[0].PGType != tc.typ || !slices.Equal(k.Domain, tc.dom) || !strings.Contains(p.SQL, tc.sql) {
			t.Errorf("%s: type %s, domain %v, SQL\n%s\nwant %s, %v, %s", tc.key, p.Outputs[0].PGType, k.Domain, p.SQL, tc.typ, tc.dom, tc.sql)
		}
	}
	for _, tc := range []struct{ key, code string }{
		{`date_part('dow', visit_date) % 7`, "42883"},
		{`extract(isodow from visit_date) % 0`, "22012"},
		{`extract(isodow from visit_date) * 2`, pgerr.FeatureNotSupported},
		{`age % 10`, pgerr.FeatureNotSupported},
		{`extract(epoch from visit_date) + 1`, pgerr.FeatureNotSupported},
	} {
		_, err := Rewrite(ds, "SELECT "+tc.key+", COUNT(*) FROM visits GROUP BY 1")
		pe, ok := pgerr.As(err)
		if !ok || pe.Code != tc.code || pe.Hint == "" {
			t.Errorf("%s: got %v, want %s with a hint", tc.key, err, tc.code)
		}
	}
}
