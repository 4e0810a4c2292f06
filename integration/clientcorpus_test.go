package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
)

// The client corpus (issue 31, item 3): the SQL that real clients generate
// for common charts, generated live by the clients themselves and bound
// as they bind it, through a real `dpproxy serve`:
//
//   - SQLAlchemy 1.4 (Debian's python3-sqlalchemy; ORM and Core) with its
//     psycopg2 dialect (parameters interpolated client-side, simple
//     protocol) and its asyncpg dialect (server-side $n::type parameters
//     through the extended protocol, binary results):
//     testdata/drivers/sqlalchemy_corpus.py.
//   - knex and kysely (from npm) over node-postgres, which binds their
//     values ($1, …; knex's LIMIT too) through the extended protocol:
//     testdata/drivers/knex_corpus.js.
//   - Cube (from npm): its schema compiler writes the SQL of dashboard
//     queries over a JavaScript data model and its PostgreSQL driver runs
//     it (node-postgres, $n through the extended protocol):
//     testdata/drivers/cube_corpus.js.
//
// Each client prints, per statement, the SQL exactly as it went to the
// driver (and the text the driver sent), the rows and the NOTICEs it
// received. Each released value is compared with the truth computed
// directly on PostgreSQL, bounded by the contribution bounds of
// PRIVACY.md (dp.contribution = fixed; see boundedCount), within the
// 95% half-width its NOTICE states (the group's own when the NOTICE lists
// them per group, else the column's).
//
// False rejections: each value falls outside its 95% interval with
// probability at most 5%, so the misses among N values are at most
// Binomial(N, 0.05); the test allows the smallest k with
// P(misses > k) < 1e-3 (allowedMisses), so it falsely rejects with
// probability below 0.1%. A statement refused on purpose must fail with
// its SQLSTATE. Under CI=true a missing client fails the test.

// farWidths: a released value this many of its stated 95% half-widths
// from the truth fails the test on its own, so that one wrong statement
// is caught even when its few values stay within the misses allowed.
// Laplace noise is beyond k times its 95% half-width with probability
// 0.05^k (3.1e-7 for k = 5; a Gaussian's is smaller), and an AVG's
// tails follow its sum's while its count is thousands of rows, as every
// AVG of the corpora's is: over the corpora's few hundred values, a
// false rejection below 1e-4.
const farWidths = 5

type corpusCase struct {
	truth  string // on the data database: keys first, then the values
	keys   int
	refuse string // the SQLSTATE, when the statement is refused
	why    string // why it is refused
	free   bool   // public values, answered at no cost: keys only
}

// clientOut is one line a corpus client prints.
type clientOut struct {
	Name    string      `json:"name"`
	SQL     string      `json:"sql"`
	Wire    string      `json:"wire"`
	Params  any         `json:"params"`
	Columns []string    `json:"columns"`
	Rows    [][]*string `json:"rows"`
	Notices []string    `json:"notices"`
	Error   string      `json:"error"`
	Message string      `json:"message"`
}

// The truths below bound as dpproxy bounds with dp.contribution = fixed
// under the demo policy: each patient counts with at most 20 rows
// (max_rows_per_unit) in one query, spread over any groups, so a patient
// with t > 20 matching rows is weighted 20/t in each of its groups (no
// demo patient has more than 20 visits: the weights are 1, and the truth
// is the plain aggregate); values are clamped to the column's bounds.

// boundedCount is COUNT(*) from visits (or a join of visits with
// patients) by key.
func boundedCount(from, key, where string) string {
	if where != "" {
		where = "WHERE " + where
	}
	return `WITH pg AS (SELECT patient_id, ` + key + ` AS k, count(*) AS n FROM ` + from + ` ` + where + ` GROUP BY 1, 2),
		g AS (SELECT patient_id, sum(n) AS t FROM pg GROUP BY 1)
		SELECT k::text, sum(n * least(1.0, 20.0 / t)) FROM pg JOIN g USING (patient_id) GROUP BY 1`
}

// visitsSumBounded is the bounded SUM (avg false) or AVG (avg true) of a
// visits column clamped to [lo, hi] by key; the AVG is the bounded sum
// over the bounded count.
func visitsSumBounded(key, col string, lo, hi int, where string, avg bool) string {
	if where != "" {
		where = "WHERE " + where
	}
	val := "sum(s * least(1.0, 20.0 / t))"
	if avg {
		val += " / sum(n * least(1.0, 20.0 / t))"
	}
	return fmt.Sprintf(`WITH pg AS (SELECT patient_id, %s AS k, count(*) AS n, sum(least(greatest(%s, %d), %d)) AS s FROM visits %s GROUP BY 1, 2),
		g AS (SELECT patient_id, sum(n) AS t FROM pg GROUP BY 1)
		SELECT k::text, %s FROM pg JOIN g USING (patient_id) GROUP BY 1`, key, col, lo, hi, where, val)
}

// distinctUnitsBounded is COUNT(DISTINCT patient_id) by key as released:
// a patient in g groups counts min(1, L_u/g) in each, L_u = L0·R = 20
// under the demo policy (dpplan.UnitGroups; at most the number of groups,
// which does not change the weights), so whole in up to 20 groups.
func distinctUnitsBounded(key string) string {
	return `WITH pg AS (SELECT DISTINCT patient_id, ` + key + ` AS k FROM visits), g AS (SELECT patient_id, count(*) AS g FROM pg GROUP BY 1)
		SELECT k::text, sum(least(1.0, 20.0 / g)) FROM pg JOIN g USING (patient_id) GROUP BY 1`
}

// sqlalchemyCorpus: the truths of sqlalchemy_corpus.py's statements, by
// name.
func sqlalchemyCorpus(dialect string) map[string]corpusCase {
	month := corpusCase{truth: boundedCount("visits", "date_trunc('month', visit_date)::date", "visit_date BETWEEN '2024-01-01' AND '2024-06-30'"), keys: 1}
	monthByExpr := month
	if dialect == "asyncpg" {
		// Bound server-side, the select list's date_trunc($1, …) and the
		// GROUP BY's date_trunc($4, …) are different expressions to
		// PostgreSQL, which rejects the statement (42803); dpproxy
		// answers with PostgreSQL's own error.
		monthByExpr = corpusCase{refuse: "42803", why: "PostgreSQL itself rejects date_trunc($1, …) … GROUP BY date_trunc($4, …)"}
	}
	return map[string]corpusCase{
		"count by department":                          {truth: boundedCount("visits", "department", ""), keys: 1},
		"avg birth_year by region, filtered":           {truth: `SELECT region, avg(birth_year) FROM patients WHERE birth_year >= 1950 GROUP BY 1`, keys: 1},
		"sum length_of_stay by department, date range": {truth: visitsSumBounded("department", "length_of_stay", 0, 60, "visit_date >= '2023-01-01' AND visit_date < '2024-01-01'", false), keys: 1},
		"monthly visits, date_trunc":                   monthByExpr,
		"monthly visits, grouped by label":             month,
		"top 3 departments":                            {truth: boundedCount("visits", "department", ""), keys: 1},
		"IN filter, expanding parameters":              {truth: boundedCount("visits", "department", "department IN ('cardiology', 'oncology', 'neurology')"), keys: 1},
		"count(distinct patient_id) by department":     {truth: distinctUnitsBounded("department"), keys: 1},
		"visits by sex, join":                          {truth: boundedCount("visits JOIN patients USING (patient_id)", "sex", "age >= 18"), keys: 1},
		"ORM query: avg cost by department":            {truth: visitsSumBounded("department", "cost", 0, 20000, "department <> 'pediatrics'", true), keys: 1},
		"row-level select":                             {refuse: "42501", why: "rows of one patient are not an aggregate"},
	}
}

// knexCorpus: the truths of knex_corpus.js's statements, by name.
func knexCorpus(builder string) map[string]corpusCase {
	c := map[string]corpusCase{
		"count by department":                {truth: boundedCount("visits", "department", ""), keys: 1},
		"avg birth_year by region, filtered": {truth: `SELECT region, avg(birth_year) FROM patients WHERE birth_year >= 1950 GROUP BY 1`, keys: 1},
		"monthly visits, date_trunc":         {truth: boundedCount("visits", "date_trunc('month', visit_date)::date", "visit_date BETWEEN '2024-01-01' AND '2024-06-30'"), keys: 1},
		"top 3 departments":                  {truth: boundedCount("visits", "department", ""), keys: 1},
		"IN filter, expanding parameters":    {truth: boundedCount("visits", "department", "department IN ('cardiology', 'oncology', 'neurology')"), keys: 1},
		"visits by sex, join":                {truth: boundedCount("visits JOIN patients USING (patient_id)", "sex", "age >= 18"), keys: 1},
	}
	if builder == "knex" {
		c["sum length_of_stay by department, date range"] = corpusCase{truth: visitsSumBounded("department", "length_of_stay", 0, 60, "visit_date >= '2023-01-01' AND visit_date < '2024-01-01'", false), keys: 1}
		c["count(distinct patient_id) by department"] = corpusCase{truth: distinctUnitsBounded("department"), keys: 1}
		c["avg cost by department"] = corpusCase{truth: visitsSumBounded("department", "cost", 0, 20000, "department <> 'pediatrics'", true), keys: 1}
		c["distinct departments"] = corpusCase{truth: `SELECT DISTINCT department FROM visits`, keys: 1, free: true}
		c["row-level select"] = corpusCase{refuse: "42501", why: "rows of one patient are not an aggregate"}
	}
	return c
}

// corpusProxy starts a proxy whose analysts have a budget of 100 (the
// demo policy's 3 would not pay for a corpus at ε = 0.5 per statement).
func corpusProxy(t *testing.T, analysts ...string) *extraProxy {
	t.Helper()
	cfgPath, addr := extraConfigPolicy(t, "../examples/policies/hospital.yaml", [2]string{"  epsilon: 3.0 ", "  epsilon: 100 "})
	for _, a := range analysts {
		withAnalyst(t, cfgPath, a)
	}
	return startProxy(t, cfgPath, addr)
}

// perGroupRE reads "per group: k ±w, k ±w" lists of a NOTICE.
var perGroupRE = regexp.MustCompile(`\(([^,;)]+)[^;)]*; per group: ([^)]*)\)`)

// noticeHalfWidths returns the stated 95% half-widths by column, and by
// column and group when the NOTICE lists them per group.
func noticeHalfWidths(notices []string) (byCol map[string]float64, byGroup map[[2]string]float64) {
	byCol, byGroup = map[string]float64{}, map[[2]string]float64{}
	for _, n := range notices {
		for _, m := range noticeWidthRE.FindAllStringSubmatch(n, -1) {
			if w, err := strconv.ParseFloat(m[1], 64); err == nil {
				byCol[m[2]] = math.Max(byCol[m[2]], w)
			}
		}
		for _, m := range perGroupRE.FindAllStringSubmatch(n, -1) {
			for _, item := range strings.Split(m[2], ", ") {
				k, w, ok := strings.Cut(item, " ±")
				if v, err := strconv.ParseFloat(w, 64); ok && err == nil {
					byGroup[[2]string{m[1], k}] = v
				}
			}
		}
	}
	return byCol, byGroup
}

// dayText is a date or a midnight timestamp's text as its day.
func dayText(s string) string {
	if len(s) >= 10 && s[4] == '-' && s[7] == '-' {
		return s[:10]
	}
	return s
}

// checkCorpus compares a client's printed answers with the truths; it
// returns the values checked and those outside their stated half-widths.
func checkCorpus(t *testing.T, ctx context.Context, client, out string, cases map[string]corpusCase) (checked int, missLines []string) {
	t.Helper()
	truthConn := connect(t, ctx, env.upstreamDSN)
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var o clientOut
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Errorf("%s printed %q: %v", client, line, err)
			continue
		}
		label := client + ": " + o.Name
		bc, ok := cases[o.Name]
		if !ok {
			t.Errorf("%s: no truth for this statement", label)
			continue
		}
		seen[o.Name] = true
		sent := o.Wire
		if sent == "" {
			sent = o.SQL
		}
		t.Logf("%s\n\t%s", label, strings.ReplaceAll(sent, "\n", "\n\t"))
		if bc.refuse != "" {
			if o.Error != bc.refuse {
				t.Errorf("%s: %s %q, want SQLSTATE %s (%s)", label, o.Error, o.Message, bc.refuse, bc.why)
			}
			continue
		}
		if o.Error != "" {
			t.Errorf("%s: refused, %s %s\n%s", label, o.Error, o.Message, sent)
			continue
		}
		truth, err := biRows(ctx, truthConn, bc.truth)
		if err != nil {
			t.Fatalf("%s: truth: %v", label, err)
		}
		byKey := map[string][]string{}
		for _, r := range truth {
			byKey[strings.Join(r.vals[:bc.keys], "|")] = r.vals[bc.keys:]
		}
		if bc.free {
			for _, r := range o.Rows {
				if len(r) != 1 || r[0] == nil || byKey[*r[0]] == nil {
					t.Errorf("%s: a released row is not a true value", label)
				}
			}
			if len(o.Rows) != len(truth) {
				t.Errorf("%s: %d values, the truth has %d", label, len(o.Rows), len(truth))
			}
			continue
		}
		byCol, byGroup := noticeHalfWidths(o.Notices)
		if len(o.Rows) == 0 || len(byCol) == 0 {
			t.Errorf("%s: %d rows, NOTICEs %q", label, len(o.Rows), o.Notices)
			continue
		}
		for _, r := range o.Rows {
			var keyParts []string
			for _, v := range r[:bc.keys] {
				if v == nil {
					keyParts = append(keyParts, "NULL")
				} else {
					keyParts = append(keyParts, dayText(*v))
				}
			}
			key := strings.Join(keyParts, "|")
			want, ok := byKey[key]
			for j, v := range r[bc.keys:] {
				col := o.Columns[bc.keys+j]
				tr := 0.0 // a declared group without rows: its COUNT or SUM is 0
				if ok {
					var err error
					if tr, err = strconv.ParseFloat(want[j], 64); err != nil {
						t.Errorf("%s: truth %q", label, want[j])
						continue
					}
				} else if strings.Contains(bc.truth, "/ sum(") {
					// the AVG of a declared group without rows has no
					// truth (its stated half-width is the column's range)
					continue
				}
				if v == nil {
					t.Errorf("%s: %s of %s is NULL", label, col, key)
					continue
				}
				dp, err := strconv.ParseFloat(*v, 64)
				if err != nil {
					t.Errorf("%s: %s of %s does not parse as a number", label, col, key)
					continue
				}
				w, ok := byGroup[[2]string{col, key}]
				if !ok {
					w, ok = byCol[col]
				}
				if !ok {
					t.Errorf("%s: no stated half-width for %s in %q", label, col, o.Notices)
					continue
				}
				checked++
				if math.Abs(dp-tr) > farWidths*w {
					t.Errorf("%s: %s of %s is %g, %.1f× its stated ±%g from the truth %g", label, col, key, dp, math.Abs(dp-tr)/w, w, tr)
				}
				if math.Abs(dp-tr) > w {
					missLines = append(missLines, fmt.Sprintf("%s: %s of %s outside its stated ±%g", label, col, key, w))
				}
			}
		}
	}
	for name := range cases {
		if !seen[name] {
			t.Errorf("%s printed nothing for %q", client, name)
		}
	}
	return checked, missLines
}

func TestClientCorpus_SQLAlchemy(t *testing.T) {
	requireDemo(t)
	needPython(t, "python3-sqlalchemy python3-psycopg2 python3-asyncpg python3-greenlet", "sqlalchemy", "psycopg2", "asyncpg", "greenlet")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := corpusProxy(t, "sa_pg2", "sa_apg")
	checked := 0
	var missLines []string
	for _, run := range []struct{ dialect, analyst string }{{"psycopg2", "sa_pg2"}, {"asyncpg", "sa_apg"}} {
		url := strings.Replace(p.dsn(run.analyst), "postgres://", "postgresql+"+run.dialect+"://", 1)
		if run.dialect == "asyncpg" {
			url = strings.Replace(url, "?sslmode=disable", "", 1)
		}
		out := runClient(t, ctx, nil, python3, "testdata/drivers/sqlalchemy_corpus.py", run.dialect, url)
		n, m := checkCorpus(t, ctx, "SQLAlchemy+"+run.dialect, out, sqlalchemyCorpus(run.dialect))
		checked += n
		missLines = append(missLines, m...)
	}
	judgeCorpus(t, "SQLAlchemy corpus", checked, missLines, 80)
}

// judgeCorpus fails when more values missed their stated 95% bounds than
// allowedMisses allows (false rejection below 0.1%), or fewer than
// minChecked values were checked.
func judgeCorpus(t *testing.T, what string, checked int, missLines []string, minChecked int) {
	t.Helper()
	allowed := allowedMisses(checked, 0.05, 1e-3)
	t.Logf("%s: %d values checked against the truth, %d outside their stated 95%% bounds (allowed %d)", what, checked, len(missLines), allowed)
	if len(missLines) > allowed {
		t.Errorf("%d values outside their stated bounds (allowed %d):\n%s", len(missLines), allowed, strings.Join(missLines, "\n"))
	}
	if checked < minChecked {
		t.Errorf("only %d values checked", checked)
	}
}

// The npm releases of the query builders the corpus runs.
const (
	knexVersion   = "3.1.0"
	kyselyVersion = "0.27.6"
)

func TestClientCorpus_KnexKysely(t *testing.T) {
	requireDemo(t)
	node, _ := pgtest.NodePG(t)
	modules := pgtest.NodeInstall(t, "query-builders-"+knexVersion+"-"+kyselyVersion,
		"pg@"+pgtest.NodePGVersion, "knex@"+knexVersion, "kysely@"+kyselyVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := corpusProxy(t, "qb_knex", "qb_kysely")
	checked := 0
	var missLines []string
	for _, run := range []struct{ builder, analyst string }{{"knex", "qb_knex"}, {"kysely", "qb_kysely"}} {
		out := runClient(t, ctx, []string{"NODE_PATH=" + modules, "TZ=UTC"}, node, "testdata/drivers/knex_corpus.js", run.builder, p.dsn(run.analyst))
		n, m := checkCorpus(t, ctx, run.builder, out, knexCorpus(run.builder))
		checked += n
		missLines = append(missLines, m...)
	}
	judgeCorpus(t, "knex and kysely corpus", checked, missLines, 60)
}

// cubeCorpus: the truths of cube_corpus.js's queries, by name. Cube
// compares a date column with its date range's ends as timestamptz
// (2024-06-30T23:59:59.999Z), in the session's time zone, UTC.
func cubeCorpus() map[string]corpusCase {
	return map[string]corpusCase{
		// Cube's introspection lists every column the catalog shows: the
		// declared ones, never visits.visit_id (access: none).
		"tables schema": {truth: `SELECT table_name || '.' || column_name FROM information_schema.columns
			WHERE table_schema = 'public' AND table_name IN ('visits', 'patients') AND NOT (table_name = 'visits' AND column_name = 'visit_id')`, keys: 1, free: true},
		"count by department":               {truth: boundedCount("visits", "department", ""), keys: 1},
		"monthly visits, date range":        {truth: boundedCount("visits", "date_trunc('month', visit_date)::date", "visit_date BETWEEN '2024-01-01' AND '2024-06-30'"), keys: 1},
		"weekly visits in a month":          {truth: boundedCount("visits", "date_trunc('week', visit_date)::date", "visit_date BETWEEN '2024-03-04' AND '2024-03-31'"), keys: 1},
		"avg cost by department, notEquals": {truth: visitsSumBounded("department", "cost", 0, 20000, "department <> 'pediatrics'", true), keys: 1},
		"stay by department in 2023":        {truth: visitsSumBounded("department", "length_of_stay", 0, 60, "visit_date >= '2023-01-01' AND visit_date < '2024-01-01'", false), keys: 1},
		"contains filter":                   {truth: boundedCount("visits", "department", "department ILIKE '%ology%'"), keys: 1},
		"startsWith filter":                 {truth: boundedCount("visits", "department", "department ILIKE 'o%'"), keys: 1},
		"top 3 departments":                 {truth: boundedCount("visits", "department", ""), keys: 1},
		"patients by department":            {truth: distinctUnitsBounded("department"), keys: 1},
		"total visits":                      {truth: `SELECT count(*) FROM visits`},
		"patients by region":                {truth: `SELECT region, count(patient_id) FROM patients GROUP BY 1`, keys: 1},
		"department values":                 {truth: `SELECT DISTINCT department FROM visits`, keys: 1, free: true},
	}
}

// The npm release of Cube's schema compiler and PostgreSQL driver the
// corpus runs (testdata/drivers/cube_corpus.js says why the 0.35 line).
const cubeVersion = "0.35.81"

func TestClientCorpus_Cube(t *testing.T) {
	requireDemo(t)
	node, _ := pgtest.NodePG(t)
	modules := pgtest.NodeInstall(t, "cube-"+cubeVersion,
		"@cubejs-backend/schema-compiler@"+cubeVersion, "@cubejs-backend/postgres-driver@"+cubeVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := corpusProxy(t, "cube")
	out := runClient(t, ctx, []string{"NODE_PATH=" + modules, "TZ=UTC"}, node, "testdata/drivers/cube_corpus.js", p.dsn("cube"))
	checked, missLines := checkCorpus(t, ctx, "Cube", out, cubeCorpus())
	judgeCorpus(t, "Cube corpus", checked, missLines, 50)
}
