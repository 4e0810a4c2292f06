package rewrite

import (
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Cube's time dimension and range filter, as it writes them (the filter's
// $1/$2 bound as the proxy binds them: checked literals).
const cubeMonthly = `SELECT date_trunc('month', ("visits".visit_date::timestamptz AT TIME ZONE 'UTC')) "visits__visit_date_month", count(*) "visits__count" FROM public.visits AS "visits" WHERE ("visits".visit_date::timestamptz AT TIME ZONE 'UTC' >= '2024-01-01T00:00:00.000'::timestamptz AND "visits".visit_date::timestamptz AT TIME ZONE 'UTC' <= '2024-06-30T23:59:59.999'::timestamptz) GROUP BY 1 ORDER BY 1 ASC LIMIT 10000`

func TestAtTimeZone_Cube(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	p, err := Rewrite(ds, cubeMonthly)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Keys) != 1 || p.Outputs[0].PGType != "timestamp" {
		t.Fatalf("keys %+v, output %+v", p.Keys, p.Outputs[0])
	}
	k := p.Keys[0]
	if len(k.Domain) != 6 || k.Domain[0] != "2024-01-01 00:00:00" || k.Domain[5] != "2024-06-01 00:00:00" {
		t.Errorf("domain %q, want the six months of the filter as timestamps", k.Domain)
	}
	for _, want := range []string{`"visit_date" >= '2024-01-01'::date`, `"visit_date" <= '2024-06-30'::date`, `::date::timestamp`} {
		if !strings.Contains(p.SQL, want) {
			t.Errorf("SQL lacks %s:\n%s", want, p.SQL)
		}
	}
	// The same under a session zone equal to the zone written.
	loc, _ := time.LoadLocation("Europe/Paris")
	q := strings.ReplaceAll(cubeMonthly, "'UTC'", "'Europe/Paris'")
	if _, err := RewriteWith(ds, q, Options{TimeZone: "Europe/Paris", Location: loc}); err != nil {
		t.Errorf("Europe/Paris under Europe/Paris: %v", err)
	}
	// Other keys over it: the same values as over the date.
	for _, g := range []string{
		"EXTRACT(YEAR FROM visit_date::timestamptz AT TIME ZONE 'UTC')",
		"date_trunc('day', visit_date AT TIME ZONE 'UTC')",
	} {
		if _, err := Rewrite(ds, "SELECT "+g+", COUNT(*) FROM visits GROUP BY 1"); err != nil {
			t.Errorf("%s: %v", g, err)
		}
	}
}

func TestAtTimeZone_Refused(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	paris, _ := time.LoadLocation("Europe/Paris")
	for _, tc := range []struct {
		q    string
		opts Options
		msg  string
	}{
		{"SELECT COUNT(*) FROM visits WHERE visit_date::timestamptz AT TIME ZONE department > '2024-01-01'", Options{}, "constant zone"},
		{"SELECT COUNT(*) FROM visits WHERE visit_date::timestamptz AT TIME ZONE 'Europe/Paris' > '2024-01-01'", Options{}, "would move"},
		{cubeMonthly, Options{TimeZone: "Europe/Paris", Location: paris}, "would move"},
		{"SELECT COUNT(*) FROM visits WHERE visit_date::timestamptz AT TIME ZONE 'EST5' > '2024-01-01'", Options{}, "not one dpproxy reproduces"},
		{"SELECT COUNT(*) FROM visits WHERE age::timestamptz AT TIME ZONE 'UTC' > '2024-01-01'", Options{}, "date columns"},
		{"SELECT COUNT(*) FROM visits WHERE visit_date::timestamp AT TIME ZONE 'UTC' > '2024-01-01'", Options{}, "timestamptz"},
		{"SELECT COUNT(*) FROM visits WHERE (visit_date + 1) AT TIME ZONE 'UTC' > '2024-01-01'", Options{}, "over a date column only"},
		{"SELECT visit_date AT TIME ZONE 'UTC', COUNT(*) FROM visits GROUP BY 1", Options{}, "inside date_trunc"},
		{`SELECT COUNT(*) FROM visits WHERE "dp_at_time_zone"(visit_date, 'UTC', '') > '2024-01-01'`, Options{}, "does not exist"},
		// America/Havana moves its clocks at midnight.
		{strings.ReplaceAll(cubeMonthly, "'UTC'", "'America/Havana'"), Options{TimeZone: "America/Havana", Location: mustLoc(t, "America/Havana")}, "skips or repeats a midnight"},
	} {
		_, err := RewriteWith(ds, tc.q, tc.opts)
		pe, ok := pgerr.As(err)
		if !ok || !strings.Contains(pe.Message, tc.msg) || pe.Hint == "" {
			t.Errorf("%s: got %v, want %q with a hint", tc.q, err, tc.msg)
		}
	}
}

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
