package integration

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/examples"
	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"
)

// The BI corpus (issue 17, item 4): statements written the way Tableau,
// Superset, Metabase, Power BI, Grafana and Looker generate them (from
// their documentation and published query logs; our own text), sent
// through a real `dpproxy serve` with pgx, each by its own analyst at
// ε = 0.5. Each answer is compared with the truth computed directly on
// PostgreSQL: every released value must lie within the 95% half-width the
// NOTICE states for its column (the largest stated one when the outer SQL
// renamed it). The truth is the bounded one the DP answer estimates: on
// patients (one row per patient) it is the plain aggregate; on visits it
// applies the contribution bounds of the demo policy in SQL, as PRIVACY.md
// states them ("Two levels of bounding", "Contribution bounds per query"):
// at most R = max_rows_per_unit rows per patient and group, each patient's
// groups weighted by min(1, L0·R/t) for t its capped rows over all groups,
// or L0·R rows when ungrouped; sums scaled by min(n, R)/n. R and L0 are
// read from the policy (visitsLimits), and the session sets
// dp.contribution = fixed so that the answer is bounded at exactly these
// (the demo's default, auto, may choose fewer rows per unit). Until this
// was so the truth hard-coded the policy of before a46d56c (5 rows in each
// of 4 groups) while the demo allows 20 rows in one group: patients with
// more than 5 visits in a year, weekday or department made the answers
// exceed their "truth", and 13-17 of 166 values missed per run; with the
// policy's bounds 4-11 did (five runs), about the 8 expected.
//
// False rejections: each value falls outside its 95% interval with
// probability about 5% (the intervals are exact quantiles of the noise,
// and conservative when the largest half-width is used), so
// the number of misses among N values is at most Binomial(N, 0.05); the
// test allows the smallest k with P(misses > k) < 1e-3 (k = 8 for N = 60),
// so it falsely rejects with probability below 0.1%. Shapes dpproxy does
// not support on purpose are refused with their SQLSTATE and a hint, and
// charge nothing.

type biCase struct {
	tool, name string
	sql        string
	truth      string // on the data database: the same rows, keys first
	keys       int    // leading key columns
	refuse     string // SQLSTATE, when the shape is refused on purpose
	free       bool   // answered without a charge (public values)
}

// visitsBounded is the truth of COUNT(*) of visits grouped by key, under
// the demo policy's contribution bounds as PRIVACY.md ("Two levels of
// bounding") states them: each patient's rows capped at R rows per group,
// and weighted by min(1, T/t) for t its capped rows over all groups and
// T = L0·R its allowance. R and L0 are read from the demo's policy file
// (visitsLimits): the truth used to hard-code R = 5 and T = 20 (the policy
// before a46d56c, 4 groups × 5 rows), while the policy now allows 20 rows
// in one group (L0 = 1, R = 20), so patients with more than 5 visits in a
// year or weekday made the DP answer exceed that truth systematically.
func visitsBounded(key, where string) string {
	if where != "" {
		where = "WHERE " + where
	}
	r, l0 := visitsLimits()
	return fmt.Sprintf(`WITH pg AS (SELECT patient_id, %[3]s AS k, count(*) AS n FROM visits %[4]s GROUP BY 1, 2),
		g AS (SELECT patient_id, sum(least(n, %[1]d)) AS t FROM pg GROUP BY 1)
		SELECT k::text, sum(least(n, %[1]d) * least(1.0, %[2]d.0 / t)) FROM pg JOIN g USING (patient_id) GROUP BY 1`, r, l0*r, key, where)
}

// visitsUngrouped is the truth of an ungrouped COUNT(*) (agg "count") or
// SUM of a clamped column (agg "sum(least(greatest(col, lo), hi))") of
// visits: one group gets the unit's whole allowance, L0·R rows
// (PRIVACY.md, "Contribution bounds per query"), a sum scaled by
// min(n, L0·R)/n.
func visitsUngrouped(sumExpr, where string) string {
	if where != "" {
		where = "WHERE " + where
	}
	r, l0 := visitsLimits()
	if sumExpr == "" {
		return fmt.Sprintf(`SELECT sum(least(n, %d)) FROM (SELECT patient_id, count(*) AS n FROM visits %s GROUP BY 1) p`, l0*r, where)
	}
	return fmt.Sprintf(`SELECT sum(s * least(n, %d) / n) FROM (SELECT patient_id, count(*) AS n, sum(%s) AS s FROM visits %s GROUP BY 1) p`, l0*r, sumExpr, where)
}

// visitsLimits returns max_rows_per_unit and max_groups_per_unit of the
// visits table of the demo's policy (examples.HospitalPolicy, the file
// `dpproxy demo` writes and loads).
func visitsLimits() (rows, groups int) {
	raw := examples.HospitalPolicy()
	var pol struct {
		Tables map[string]struct {
			Rows   int `yaml:"max_rows_per_unit"`
			Groups int `yaml:"max_groups_per_unit"`
		} `yaml:"tables"`
	}
	if err := yaml.Unmarshal(raw, &pol); err != nil {
		panic(err)
	}
	v := pol.Tables["visits"]
	if v.Rows < 1 || v.Groups < 1 {
		panic(fmt.Sprintf("demo policy: visits has max_rows_per_unit %d, max_groups_per_unit %d", v.Rows, v.Groups))
	}
	return v.Rows, v.Groups
}

var biCorpus = []biCase{
	{tool: "Tableau", name: "count by dimension",
		sql:   `SELECT "patients"."sex" AS "sex", COUNT(*) AS "cnt:patients:ok" FROM "public"."patients" "patients" GROUP BY 1`,
		truth: `SELECT sex, count(*) FROM patients GROUP BY 1`, keys: 1},
	{tool: "Tableau", name: "year date part",
		sql:   `SELECT CAST(EXTRACT(YEAR FROM "visits"."visit_date") AS INTEGER) AS "yr:visit_date:ok", COUNT(*) AS "cnt:visits:ok" FROM "public"."visits" "visits" GROUP BY 1`,
		truth: visitsBounded("extract(year from visit_date)::int", ""), keys: 1},
	{tool: "Tableau", name: "top N over a derived table",
		sql:   `SELECT "t0"."region" AS "region", "t0"."c" AS "c" FROM (SELECT region, COUNT(*) AS c FROM patients GROUP BY region) "t0" ORDER BY 2 DESC LIMIT 3`,
		truth: `SELECT region, count(*) FROM patients GROUP BY 1`, keys: 1},
	{tool: "Tableau", name: "case bucket",
		sql:   `SELECT CASE WHEN "patients"."birth_year" < 1960 THEN 'before 1960' ELSE '1960 and later' END AS "bucket", COUNT(*) AS "n" FROM "public"."patients" "patients" GROUP BY 1`,
		truth: `SELECT CASE WHEN birth_year < 1960 THEN 'before 1960' ELSE '1960 and later' END, count(*) FROM patients GROUP BY 1`, keys: 1},
	{tool: "Tableau", name: "blend of two DP results",
		sql:   `SELECT a.region, a.c, b.avg_by FROM (SELECT region, COUNT(*) AS c FROM patients GROUP BY region) a JOIN (SELECT region, AVG(birth_year) AS avg_by FROM patients GROUP BY region) b ON a.region = b.region`,
		truth: `SELECT region, count(*), avg(birth_year) FROM patients GROUP BY 1`, keys: 1},
	{tool: "Superset", name: "table chart",
		sql:   `SELECT sex AS sex, count(*) AS count FROM public.patients GROUP BY sex ORDER BY count DESC LIMIT 10000`,
		truth: `SELECT sex, count(*) FROM patients GROUP BY 1`, keys: 1},
	{tool: "Superset", name: "virtual dataset",
		sql:   `SELECT region AS region, AVG(birth_year) AS "AVG(birth_year)" FROM (SELECT * FROM patients WHERE birth_year >= 1950) AS virtual_table GROUP BY region LIMIT 1000`,
		truth: `SELECT region, avg(birth_year) FROM patients WHERE birth_year >= 1950 GROUP BY 1`, keys: 1},
	{tool: "Superset", name: "time grain with TO_TIMESTAMP",
		sql: `SELECT DATE_TRUNC('quarter', visit_date) AS __timestamp, COUNT(*) AS count FROM public.visits
			WHERE visit_date >= TO_TIMESTAMP('2023-01-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') AND visit_date < TO_TIMESTAMP('2024-01-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US')
			GROUP BY DATE_TRUNC('quarter', visit_date) ORDER BY count DESC LIMIT 10000`,
		truth: visitsBounded("date_trunc('quarter', visit_date)::date", "visit_date >= '2023-01-01' AND visit_date < '2024-01-01'"), keys: 1},
	{tool: "Superset", name: "big number over a virtual table",
		sql:   `SELECT COUNT(*) AS count FROM (SELECT * FROM visits WHERE department = 'oncology') AS virtual_table LIMIT 1`,
		truth: visitsUngrouped("", "department = 'oncology'")},
	{tool: "Metabase", name: "summarize by column",
		sql:   `SELECT "public"."patients"."region" AS "region", count(*) AS "count" FROM "public"."patients" GROUP BY "public"."patients"."region" ORDER BY "public"."patients"."region" ASC`,
		truth: `SELECT region, count(*) FROM patients GROUP BY 1`, keys: 1},
	{tool: "Metabase", name: "month with a timestamp filter",
		sql: `SELECT CAST(date_trunc('month', "public"."visits"."visit_date") AS date) AS "visit_date", count(*) AS "count" FROM "public"."visits"
			WHERE ("public"."visits"."visit_date" >= timestamp with time zone '2024-01-01 00:00:00.000Z') AND ("public"."visits"."visit_date" < timestamp with time zone '2024-04-01 00:00:00.000Z')
			GROUP BY CAST(date_trunc('month', "public"."visits"."visit_date") AS date) ORDER BY 1 ASC`, // Metabase orders by the expression itself: not yet planned (ORDER BY expressions, 0A000)
		truth: visitsBounded("date_trunc('month', visit_date)::date", "visit_date >= '2024-01-01' AND visit_date < '2024-04-01'"), keys: 1},
	{tool: "Metabase", name: "native query as source",
		sql:   `SELECT "source"."sex" AS "sex", "source"."n" AS "n" FROM (SELECT sex, COUNT(*) AS n FROM patients GROUP BY sex) AS "source" LIMIT 2000`,
		truth: `SELECT sex, count(*) FROM patients GROUP BY 1`, keys: 1},
	{tool: "Metabase", name: "filter drop-down values", free: true,
		sql:   `SELECT "public"."patients"."region" AS "region" FROM "public"."patients" GROUP BY "public"."patients"."region" ORDER BY "public"."patients"."region" ASC LIMIT 1000`,
		truth: `SELECT DISTINCT region FROM patients`, keys: 1},
	{tool: "Metabase", name: "fingerprint sample", refuse: "42501",
		sql: `SELECT "public"."patients"."birth_year" AS "birth_year" FROM "public"."patients" LIMIT 10000`},
	{tool: "Power BI", name: "folded filter and count",
		sql:   `select "_"."region", "_"."a0" from (select "rows"."region" as "region", count(1) as "a0" from (select "_"."region" from "public"."patients" "_" where "_"."birth_year" >= 1960) "rows" group by "region") "_" where not "_"."a0" is null limit 1000001`,
		truth: `SELECT region, count(*) FROM patients WHERE birth_year >= 1960 GROUP BY 1`, keys: 1},
	{tool: "Power BI", name: "sum of a cast column",
		sql:   `select sum(cast("_"."length_of_stay" as double precision)) as "a0" from (select "length_of_stay" from "public"."visits" "$Table" where "department" = 'surgery') "_"`,
		truth: visitsUngrouped("least(greatest(length_of_stay, 0), 60)", "department = 'surgery'")},
	{tool: "Grafana", name: "time series by month",
		sql: `SELECT date_trunc('month', visit_date) AS "time", count(*) AS "visits" FROM visits
			WHERE visit_date BETWEEN '2024-01-01T00:00:00Z' AND '2024-06-30T00:00:00Z' GROUP BY 1 ORDER BY 1`,
		truth: visitsBounded("date_trunc('month', visit_date)::date", "visit_date BETWEEN '2024-01-01' AND '2024-06-30'"), keys: 1},
	{tool: "Grafana", name: "$__timeGroupAlias epoch buckets with $__timeFilter",
		sql: `SELECT floor(extract(epoch from visit_date)/86400)*86400 AS "time", count(*) AS "value" FROM visits
			WHERE visit_date BETWEEN '2024-03-01T00:00:00Z' AND '2024-03-31T23:59:59.999Z' GROUP BY 1 ORDER BY 1`,
		truth: visitsBounded("floor(extract(epoch from visit_date)/86400)*86400", "visit_date BETWEEN '2024-03-01' AND '2024-03-31'"), keys: 1},
	{tool: "Grafana", name: "$__timeGroup weekly buckets",
		sql: `SELECT floor(extract(epoch from visit_date)/604800)*604800 AS "time", count(*) AS "visits" FROM visits
			WHERE visit_date BETWEEN '2024-01-01T00:00:00Z' AND '2024-06-30T23:59:59Z' GROUP BY floor(extract(epoch from visit_date)/604800)*604800 ORDER BY 1`,
		truth: visitsBounded("floor(extract(epoch from visit_date)/604800)*604800", "visit_date BETWEEN '2024-01-01' AND '2024-06-30'"), keys: 1},
	{tool: "Grafana", name: "$__unixEpochGroupAlias over an integer column",
		sql:   `SELECT floor((birth_year)/10)*10 AS "time", count(*) AS "patients" FROM patients GROUP BY 1 ORDER BY 1`,
		truth: `SELECT (g * 10)::text, count(p.patient_id) FROM generate_series(191, 202) g LEFT JOIN patients p ON p.birth_year / 10 = g GROUP BY 1`, keys: 1},
	{tool: "Grafana", name: "epoch bucket with two widths", refuse: "0A000",
		sql: `SELECT floor(extract(epoch from visit_date)/86400)*3600 AS "time", count(*) FROM visits GROUP BY 1`},
	{tool: "Metabase", name: "day of week",
		sql:   `SELECT (CAST(extract(isodow from "public"."visits"."visit_date") AS integer) % 7) + 1 AS "visit_date", count(*) AS "count" FROM "public"."visits" GROUP BY 1 ORDER BY 1 ASC`,
		truth: visitsBounded("(CAST(extract(isodow from visit_date) AS integer) % 7) + 1", ""), keys: 1},
	{tool: "Tableau", name: "weekday date part",
		sql:   `SELECT EXTRACT(DOW FROM "visits"."visit_date") AS "wd:visit_date:ok", COUNT(*) AS "cnt:visits:ok" FROM "public"."visits" "visits" GROUP BY 1`,
		truth: visitsBounded("extract(dow from visit_date)::int", ""), keys: 1},
	{tool: "Power BI", name: "timestamp filter with a time of day",
		sql:   `select "department", count(1) as "a0" from "public"."visits" where "visit_date" >= timestamp '2024-01-01 12:30:00' and "visit_date" < to_timestamp(1719792000) group by "department"`,
		truth: visitsBounded("department", "visit_date >= '2024-01-02' AND visit_date < '2024-07-01'"), keys: 1},
	{tool: "Looker", name: "derived table in a CTE",
		sql:   `WITH visits_f AS (SELECT * FROM visits WHERE department IN ('cardiology', 'oncology')) SELECT visits_f.department AS "visits.department", COUNT(*) AS "visits.count" FROM visits_f GROUP BY 1 ORDER BY 2 DESC LIMIT 500`,
		truth: visitsBounded("department", "department IN ('cardiology', 'oncology')"), keys: 1},
	{tool: "Looker", name: "percent of total",
		sql:   `SELECT region AS "patients.region", COUNT(*) AS "patients.count", SUM(COUNT(*)) OVER () AS "patients.total" FROM patients GROUP BY 1 ORDER BY 2 DESC`,
		truth: `SELECT region, count(*), (SELECT count(*) FROM patients) FROM patients GROUP BY 1`, keys: 1},
	{tool: "Looker", name: "totals row",
		sql:   `SELECT sex, n FROM (SELECT sex, COUNT(*) AS n FROM patients GROUP BY sex) a UNION ALL SELECT 'Total', n FROM (SELECT COUNT(*) AS n FROM patients) b`,
		truth: `SELECT sex, count(*) FROM patients GROUP BY 1 UNION ALL SELECT 'Total', count(*) FROM patients`, keys: 1},
	{tool: "Looker", name: "quarter of year",
		sql:   `SELECT EXTRACT(QUARTER FROM visits.visit_date) AS "visits.quarter_of_year", COUNT(*) AS "visits.count" FROM public.visits AS visits WHERE visits.visit_date >= DATE '2023-01-01' AND visits.visit_date < DATE '2024-01-01' GROUP BY 1 ORDER BY 1`,
		truth: visitsBounded("extract(quarter from visit_date)::int", "visit_date >= '2023-01-01' AND visit_date < '2024-01-01'"), keys: 1},
}

// noticeWidths reads "±X (name, …" half-widths from NOTICE texts.
var noticeWidthRE = regexp.MustCompile(`±([0-9.e+]+) \(([^,)]+)`)

func TestBICorpus(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfig(t)
	for i := range biCorpus {
		withAnalyst(t, cfgPath, fmt.Sprintf("bi%02d", i))
	}
	p := startProxy(t, cfgPath, addr)
	truthConn := connect(t, ctx, env.upstreamDSN)

	checked, misses := 0, 0
	var missLines, missWhere []string
	for i, bc := range biCorpus {
		analyst := fmt.Sprintf("bi%02d", i)
		label := bc.tool + ": " + bc.name
		conn, notices := connectWithNotices(t, ctx, p.dsn(analyst))
		// dp.contribution = fixed: the truths below bound by the policy's
		// rows per unit; TestAutoBounds_EndToEnd checks answers at the
		// bound auto chooses.
		if _, err := conn.Exec(ctx, "SET dp.epsilon = 0.5; SET dp.contribution = fixed"); err != nil {
			t.Fatal(err)
		}
		got, err := biRows(ctx, conn, bc.sql)
		charges := chargeCount(t, ctx, analyst)
		if bc.refuse != "" {
			if sqlState(err) != bc.refuse || !strings.Contains(err.Error(), "") {
				t.Errorf("%s: %v, want SQLSTATE %s", label, err, bc.refuse)
			}
			if charges != 0 {
				t.Errorf("%s: refused but charged %d times", label, charges)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v\n%s", label, err, bc.sql)
			continue
		}
		if bc.free && charges != 0 || !bc.free && charges == 0 {
			t.Errorf("%s: %d charges (free: %v)", label, charges, bc.free)
		}
		truth, err := biRows(ctx, truthConn, bc.truth)
		if err != nil {
			t.Fatalf("%s: truth: %v", label, err)
		}
		byKey := map[string][]string{}
		for _, r := range truth {
			byKey[strings.Join(r.vals[:bc.keys], "|")] = r.vals[bc.keys:]
		}
		widths := map[string]float64{}
		maxWidth := 0.0
		for _, n := range notices() {
			for _, m := range noticeWidthRE.FindAllStringSubmatch(n, -1) {
				w, err := strconv.ParseFloat(m[1], 64)
				if err == nil {
					widths[m[2]] = math.Max(widths[m[2]], w)
					maxWidth = math.Max(maxWidth, w)
				}
			}
		}
		if len(got) == 0 {
			t.Errorf("%s: no rows", label)
		}
		for _, r := range got {
			key := strings.Join(r.vals[:bc.keys], "|")
			want, ok := byKey[key]
			if !ok {
				t.Errorf("%s: released key %q is not a true key (%v)", label, key, keysOf(byKey))
				continue
			}
			for j, v := range r.vals[bc.keys:] {
				if j >= len(want) {
					t.Errorf("%s: more values than the truth", label)
					break
				}
				dp, err1 := strconv.ParseFloat(v, 64)
				tr, err2 := strconv.ParseFloat(want[j], 64)
				if err1 != nil || err2 != nil {
					t.Errorf("%s: values %q and %q", label, v, want[j])
					continue
				}
				w, ok := widths[r.names[bc.keys+j]]
				if !ok {
					w = maxWidth
				}
				if bc.name == "percent of total" && j == 1 {
					w *= 5 // the sum of five released counts
				}
				checked++
				if math.Abs(dp-tr) > w {
					misses++
					missLines = append(missLines, fmt.Sprintf("%s: %s %s = %s, truth %s, stated ±%g", label, key, r.names[bc.keys+j], v, want[j], w))
					missWhere = append(missWhere, fmt.Sprintf("%s: %s %s", label, key, r.names[bc.keys+j]))
				}
			}
		}
	}
	allowed := allowedMisses(checked, 0.05, 1e-3)
	t.Logf("BI corpus: %d statements, %d values checked against the truth, %d outside their stated 95%% bounds (allowed %d)", len(biCorpus), checked, misses, allowed)
	for _, l := range missWhere {
		t.Logf("outside its stated bounds: %s", l) // which cells, never their values
	}
	if misses > allowed {
		t.Errorf("%d values outside their stated bounds (allowed %d):\n%s", misses, allowed, strings.Join(missLines, "\n"))
	}
	if checked < 40 {
		t.Errorf("only %d values checked", checked)
	}
}

// allowedMisses is the smallest k with P(Binomial(n, p) > k) < alpha.
func allowedMisses(n int, p, alpha float64) int {
	cdf := 0.0
	for k := 0; k <= n; k++ {
		lg := lgammaInt(n+1) - lgammaInt(k+1) - lgammaInt(n-k+1)
		cdf += math.Exp(lg + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
		if 1-cdf < alpha {
			return k
		}
	}
	return n
}

func lgammaInt(n int) float64 {
	v, _ := math.Lgamma(float64(n))
	return v
}

type textRow struct {
	names []string
	vals  []string
}

// biRows runs sql and returns its rows as text (NULL as "NULL").
func biRows(ctx context.Context, conn *pgx.Conn, sql string) ([]textRow, error) {
	rows, err := conn.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for _, f := range rows.FieldDescriptions() {
		names = append(names, f.Name)
	}
	var out []textRow
	for rows.Next() {
		raw := rows.RawValues()
		r := textRow{names: names}
		for _, v := range raw {
			if v == nil {
				r.vals = append(r.vals, "NULL")
			} else {
				s := string(v)
				if len(s) >= 10 && s[4] == '-' && s[7] == '-' {
					s = s[:10] // dates and midnight timestamps: the day
				}
				r.vals = append(r.vals, s)
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func keysOf(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
