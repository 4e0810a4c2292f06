package rewrite

import "testing"

// TestCasts_BI plans the casts BI tools write around columns (cast.go).
func TestCasts_BI(t *testing.T) {
	ds := loadHospital(t)
	for _, sql := range []string{
		`SELECT CAST(department AS TEXT) AS d, COUNT(*) FROM visits GROUP BY CAST(department AS TEXT)`,
		`SELECT department::varchar, COUNT(*) FROM visits GROUP BY 1`,
		`SELECT SUM(CAST(age AS DOUBLE PRECISION)), AVG(cost::float8) FROM visits`,
		`SELECT COUNT(*) FROM visits WHERE CAST(visit_date AS TIMESTAMP) >= TIMESTAMP '2023-01-01 00:00:00'`,
		`SELECT COUNT(*) FROM visits WHERE visit_date::timestamp < '2024-01-01T00:00:00Z'::timestamptz`,
		`SELECT COUNT(*) FROM visits WHERE visit_date >= TO_TIMESTAMP('2023-01-01', 'YYYY-MM-DD')`,
		`SELECT CAST(EXTRACT(YEAR FROM visit_date) AS INTEGER) AS y, COUNT(*) FROM visits GROUP BY CAST(EXTRACT(YEAR FROM visit_date) AS INTEGER)`,
		`SELECT date_trunc('month', visit_date)::date AS m, COUNT(*) FROM visits GROUP BY 1`,
		`SELECT date_trunc('month', CAST(visit_date AS TIMESTAMP)) AS m, COUNT(*) FROM visits GROUP BY 1`,
		`SELECT COUNT(*) FROM visits WHERE visit_date >= TIMESTAMP '2023-01-01 12:00:00'`, // datefold.go
		`SELECT COUNT(*) FROM visits WHERE visit_date BETWEEN '2024-01-01T00:00:00Z' AND '2024-03-31T23:59:59Z'`,
		`SELECT COUNT(*) FROM visits WHERE visit_date < to_timestamp(1704067200) AND visit_date >= TO_TIMESTAMP('2023-01-01 08:00:00', 'YYYY-MM-DD HH24:MI:SS')`,
	} {
		if _, err := Rewrite(ds, sql); err != nil {
			t.Errorf("Rewrite(%q) = %v", sql, err)
		}
	}
	for _, sql := range []string{
		`SELECT SUM(cost::int) FROM visits`, // rounding: not value-preserving
		`SELECT COUNT(*) FROM visits WHERE CAST(visit_date AS TIMESTAMP) >= '2023-01-01 12:00:00'`, // untyped: a timestamp here
		`SELECT COUNT(*) FROM visits WHERE visit_date IN (TIMESTAMP '2023-01-01 12:00:00')`,
		`SELECT COUNT(*) FROM visits WHERE visit_date >= to_timestamp(1704067200.5)`,
	} {
		if _, err := Rewrite(ds, sql); err == nil {
			t.Errorf("Rewrite(%q) succeeded, want a refusal", sql)
		}
	}
}

// TestDateBuckets_BI plans the date buckets BI tools group by, with their
// domains from the policy's bounds (2020-01-01 … 2024-12-31).
func TestDateBuckets_BI(t *testing.T) {
	ds := loadHospital(t)
	for _, tt := range []struct {
		sql    string
		groups int
	}{
		{`SELECT date_trunc('quarter', visit_date), COUNT(*) FROM visits GROUP BY 1`, 20},
		{`SELECT date_trunc('week', visit_date), COUNT(*) FROM visits GROUP BY 1`, 262},
		{`SELECT date_trunc('day', visit_date), COUNT(*) FROM visits WHERE visit_date >= '2024-12-01' GROUP BY 1`, 31},
		{`SELECT EXTRACT(QUARTER FROM visit_date), COUNT(*) FROM visits GROUP BY 1`, 4},
		{`SELECT EXTRACT(MONTH FROM visit_date) AS m, COUNT(*) FROM visits GROUP BY 1`, 12},
		{`SELECT date_trunc('week', visit_date) AS w, COUNT(*) FROM visits WHERE visit_date BETWEEN '2024-01-01' AND '2024-01-31' GROUP BY 1`, 5},
		{`SELECT floor(extract(epoch from visit_date)/86400)*86400 AS "time", count(*) FROM visits GROUP BY 1 ORDER BY 1`, 1827},
		{`SELECT floor(extract(epoch from visit_date)/86400)*86400 AS "time", count(*) AS "value" FROM visits WHERE visit_date BETWEEN '2024-01-01T00:00:00Z' AND '2024-03-31T23:59:59Z' GROUP BY 1 ORDER BY 1`, 91},
		{`SELECT floor(extract(epoch from visit_date)/604800)*604800 AS "time", count(*) FROM visits GROUP BY 1`, 262},
		{`SELECT extract(epoch from visit_date) as "time", count(*) FROM visits WHERE visit_date >= '2024-12-01' GROUP BY 1`, 31},
		{`SELECT EXTRACT(DOW FROM visit_date), COUNT(*) FROM visits GROUP BY 1`, 7},
		{`SELECT date_part('isodow', visit_date) AS d, COUNT(*) FROM visits GROUP BY d ORDER BY d`, 7},
		{`SELECT EXTRACT(DOY FROM visit_date), COUNT(*) FROM visits GROUP BY 1`, 366},
		{`SELECT floor((age)/10)*10 AS "time", COUNT(*) FROM visits GROUP BY 1`, 12},
	} {
		p, err := Rewrite(ds, tt.sql)
		if err != nil {
			t.Errorf("Rewrite(%q) = %v", tt.sql, err)
			continue
		}
		if got := len(p.Keys[0].Domain); got != tt.groups {
			t.Errorf("Rewrite(%q): %d groups %v…, want %d", tt.sql, got, p.Keys[0].Domain[:min(3, got)], tt.groups)
		}
	}
}
