package rewrite

import (
	"strings"
	"testing"
	"time"
)

// TestNarrowKeys: a key's released domain loses exactly the values the
// query's own WHERE excludes (top-level AND conjuncts on the key's column),
// and nothing else: OR, NOT and other columns narrow nothing.
func TestNarrowKeys(t *testing.T) {
	ds := loadHospital(t)
	cases := []struct {
		query string
		want  string // the first key's domain, joined by ","; "" = the policy's
		n     int    // its size when want is long
	}{
		{query: "SELECT date_trunc('month', visit_date), COUNT(*) FROM visits WHERE visit_date >= '2024-01-01' GROUP BY 1", n: 12},
		{query: "SELECT date_trunc('month', visit_date), COUNT(*) FROM visits WHERE visit_date > '2024-01-31' AND visit_date < '2024-04-01' GROUP BY 1", want: "2024-02-01,2024-03-01"},
		{query: "SELECT date_trunc('month', visit_date), COUNT(*) FROM visits WHERE visit_date BETWEEN '2023-12-15' AND '2024-01-10' GROUP BY 1", want: "2023-12-01,2024-01-01"},
		{query: "SELECT date_trunc('year', visit_date), COUNT(*) FROM visits WHERE visit_date >= '2023-06-01' GROUP BY 1", want: "2023-01-01,2024-01-01"},
		{query: "SELECT EXTRACT(YEAR FROM visit_date), COUNT(*) FROM visits WHERE visit_date < '2021-03-01' GROUP BY 1", want: "2020,2021"},
		{query: "SELECT department, COUNT(*) FROM visits WHERE department = 'oncology' GROUP BY department", want: "oncology"},
		{query: "SELECT department, COUNT(*) FROM visits WHERE department IN ('surgery', 'oncology', 'nowhere') AND age > 3 GROUP BY department", want: "oncology,surgery"},
		// <> and NOT IN drop their values (SQLAlchemy's !=, knex's whereNot).
		{query: "SELECT department, COUNT(*) FROM visits WHERE department <> 'oncology' GROUP BY department", n: 6},
		{query: "SELECT department, COUNT(*) FROM visits WHERE department NOT IN ('oncology', 'surgery') AND department IN ('oncology', 'pediatrics') GROUP BY department", want: "pediatrics"},
		// Nothing implied: OR, NOT, another column, an impossible value.
		{query: "SELECT department, COUNT(*) FROM visits WHERE department = 'oncology' OR age > 3 GROUP BY department", n: 7},
		{query: "SELECT department, COUNT(*) FROM visits WHERE NOT department = 'oncology' GROUP BY department", n: 7},
		{query: "SELECT department, COUNT(*) FROM visits WHERE department = 'nowhere' GROUP BY department", n: 7},
		{query: "SELECT date_trunc('month', visit_date), COUNT(*) FROM visits WHERE age >= 2024 GROUP BY 1", n: 60},
	}
	for _, c := range cases {
		p, err := Rewrite(ds, c.query)
		if err != nil {
			t.Errorf("%s: %v", c.query, err)
			continue
		}
		var got []string
		for _, v := range p.Keys[0].Domain {
			got = append(got, dateHead(v)) // a date_trunc key's day (its text: trunckey.go)
		}
		switch {
		case c.want != "" && strings.Join(got, ",") != c.want:
			t.Errorf("%s\n  domain %v, want %s", c.query, got, c.want)
		case c.want == "" && len(got) != c.n:
			t.Errorf("%s\n  domain of %d values, want %d", c.query, len(got), c.n)
		}
	}
	// The narrowed date_trunc key guards the truncation to its own range.
	p, err := Rewrite(ds, cases[1].query)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.SQL, `"visit_date" >= '2024-02-01'::date AND "visit_date" < '2024-04-01'::date`) {
		t.Errorf("emitted SQL does not truncate within the narrowed domain:\n%s", p.SQL)
	}
}

// TestNarrowKeys_Postgres: a narrowed plan's answer, without noise, is
// PostgreSQL's own answer to the query on the same data.
func TestNarrowKeys_Postgres(t *testing.T) {
	ctx, conn := freshConn(t, 2*time.Minute)
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	ds := loadHospital(t)
	loadWithinLimits(t, ctx, conn, ds)
	for _, q := range []string{
		"SELECT date_trunc('month', visit_date), COUNT(*), SUM(cost) FROM visits WHERE visit_date >= '2022-01-01' AND visit_date < '2022-07-01' GROUP BY 1",
		"SELECT EXTRACT(YEAR FROM visit_date), AVG(age) FROM visits WHERE visit_date BETWEEN '2021-03-01' AND '2022-02-28' GROUP BY 1",
		"SELECT department, COUNT(*) FROM visits WHERE department IN ('surgery', 'oncology') GROUP BY department",
	} {
		p, err := Rewrite(ds, q)
		if err != nil {
			t.Fatal(err)
		}
		diffPostgres(t, ctx, conn, p, q)
	}
}

// TestTimestampLiterals: a timestamp at midnight compared with a date
// column is that date (drivers and BI tools send dates so); an untyped
// literal with a time of day is read as its date, as PostgreSQL reads it;
// a typed timestamp with a time of day compares as the next midnight
// (datefold.go; TestDateFold_MatchesPostgres checks these against
// PostgreSQL).
func TestTimestampLiterals(t *testing.T) {
	ds := loadHospital(t)
	for lit, want := range map[string]string{
		"'2024-01-01 00:00:00'":           "'2024-01-01'::date",
		"'2024-01-01T00:00:00.000000Z'":   "'2024-01-01'::date",
		"'2024-01-01 00:00:00+02:00'":     "'2024-01-01'::date",
		"'2024-01-01 10:30:00'":           "'2024-01-01'::date",
		"TIMESTAMP '2024-01-01 10:30:00'": "'2024-01-02'::date",
	} {
		p, err := Rewrite(ds, "SELECT COUNT(*) FROM visits WHERE visit_date >= "+lit)
		if want == "" {
			if err == nil || !strings.Contains(err.Error(), "time of day") {
				t.Errorf("%s: %v, want refused", lit, err)
			}
			continue
		}
		if err != nil || !strings.Contains(p.SQL, `"visit_date" >= `+want) {
			t.Errorf("%s: %v", lit, err)
		}
	}
}
