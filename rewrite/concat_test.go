package rewrite

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

func TestConcat_Patterns(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	for _, tc := range []struct{ where, want string }{
		// Cube's contains / startsWith / endsWith, $1 bound as a literal.
		{`"visits".department ILIKE '%' || 'onc' || '%'`, `"department" END ILIKE '%onc%'`},
		{`department LIKE 'card' || '%'`, `"department" END LIKE 'card%'`},
		{`department NOT ILIKE '%' || 'ology'::text`, `"department" END NOT ILIKE '%ology'`},
		{`department LIKE '%' || 'a!%' || '%' ESCAPE '!'`, `"department" END LIKE E'%a\\%%'`},
		{`diagnosis = 'J' || 45`, `"diagnosis" = 'J45'::text`},
		{`(department = 'sur' || 'gery')`, `"department" = 'surgery'::text`},
	} {
		p, err := Rewrite(ds, "SELECT COUNT(*) FROM visits WHERE "+tc.where)
		if err != nil {
			t.Errorf("%s: %v", tc.where, err)
			continue
		}
		if !strings.Contains(p.SQL, tc.want) {
			t.Errorf("%s: SQL\n%s\nwant it to contain %s", tc.where, p.SQL, tc.want)
		}
	}
	for _, tc := range []struct{ where, msg string }{
		{`department || 'x' LIKE 'a%'`, "not with a column"},
		{`department ILIKE '%' || diagnosis`, "not with a column"},
		{`department ILIKE '%' || NULL || '%'`, "NULL"},
		{`age = 1 + '2' || '3'`, "arithmetic"},
		{`department LIKE 'a' || '1' + 1`, "arithmetic"},
		{`department LIKE 'a' || 1.5`, "integer constants"},
		{`age = '1' || '2'`, "42804"},
	} {
		_, err := Rewrite(ds, "SELECT COUNT(*) FROM visits WHERE "+tc.where)
		pe, ok := pgerr.As(err)
		if !ok || !strings.Contains(pe.Message, tc.msg) && pe.Code != tc.msg || pe.Hint == "" {
			t.Errorf("%s: got %v, want %q with a hint", tc.where, err, tc.msg)
		}
	}
}
