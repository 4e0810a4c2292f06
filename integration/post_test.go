package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Post-processing SQL over DP results (issue 17, item 2;
// rewrite/POSTPROCESSING.md): through a real `dpproxy serve`, pgx and psql,
// each DP aggregate of a statement is charged once and named in a NOTICE,
// the outer SQL runs over the released rows, refusals charge nothing, and
// an error of the outer SQL is the client's error with no incident.

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func TestPost_EndToEnd(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const analyst = "post_e2e"
	p := driverProxy(t, analyst)
	conn, notices := connectWithNotices(t, ctx, p.dsn(analyst))
	charges := func() int { return chargeCount(t, ctx, analyst) }

	// A wrapping SELECT as Tableau, Superset and Metabase send it.
	rows, err := conn.Query(ctx, `SELECT * FROM (SELECT sex, COUNT(*) AS n FROM patients GROUP BY sex) AS "source" ORDER BY sex LIMIT 10`)
	if err != nil {
		t.Fatal(err)
	}
	type kv struct {
		k string
		n int64
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (kv, error) {
		var x kv
		err := r.Scan(&x.k, &x.n)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].k != "F" || got[1].k != "M" || got[0].n < 20000 || got[1].n < 20000 {
		t.Fatalf("wrapping select = %v, want F and M with about 25000 each", got)
	}
	if n := charges(); n != 1 {
		t.Fatalf("charges after one wrapped DP query = %d, want 1", n)
	}
	if ns := strings.Join(notices(), "\n"); !strings.Contains(ns, "DP aggregate 1 of 1") || !strings.Contains(ns, "epsilon 0.1 spent") {
		t.Errorf("notices lack the leaf's cost: %s", ns)
	}

	// Window over an aggregate, written directly: the total is the sum of
	// the released counts (post-processing of the same noisy values).
	var n1, n2, t1, t2 int64
	seen := len(notices())
	rows, err = conn.Query(ctx, `SELECT sex, COUNT(*) AS n, SUM(COUNT(*)) OVER () AS total FROM patients GROUP BY sex ORDER BY sex`)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for rows.Next() {
		var k string
		if i == 0 {
			err = rows.Scan(&k, &n1, &t1)
		} else {
			err = rows.Scan(&k, &n2, &t2)
		}
		if err != nil {
			t.Fatal(err)
		}
		i++
	}
	if rows.Err() != nil || i != 2 || t1 != n1+n2 || t2 != t1 {
		t.Fatalf("SUM(COUNT(*)) OVER (): rows %d, n %d %d, totals %d %d (%v)", i, n1, n2, t1, t2, rows.Err())
	}
	// The leaf's error is named by the aggregate as the analyst wrote it.
	if ns := strings.Join(notices()[seen:], "\n"); !strings.Contains(ns, "(COUNT(*), epsilon") || strings.Contains(ns, "_a1") {
		t.Errorf("the window's leaf NOTICE does not name COUNT(*): %s", ns)
	}

	// A join of two DP results and a CTE with rank(): one charge for the
	// statement, holding both leaves' events (release.RunBatch).
	before := charges()
	var regions int
	if err := conn.QueryRow(ctx, `WITH a AS (SELECT region, COUNT(*) AS n FROM patients GROUP BY region),
		b AS (SELECT region, AVG(birth_year) AS y FROM patients GROUP BY region)
		SELECT count(*) FROM (SELECT a.region, a.n, b.y, rank() OVER (ORDER BY a.n DESC) AS r FROM a JOIN b USING (region)) j WHERE r <= 5`).Scan(&regions); err != nil {
		t.Fatal(err)
	}
	if regions != 5 {
		t.Errorf("join of two DP results: %d regions, want 5", regions)
	}
	if n := charges() - before; n != 1 {
		t.Errorf("charges of a statement with two DP aggregates = %d, want 1", n)
	}
	// SHOW dp.last_answer covers a post-processing statement's answers.
	var last []string
	lrows, err := conn.Query(ctx, "SHOW dp.last_answer", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	for lrows.Next() {
		var item, value string
		if err := lrows.Scan(&item, &value); err != nil {
			t.Fatal(err)
		}
		last = append(last, item+"="+value)
	}
	if got := strings.Join(last, "; "); !strings.Contains(got, "the last of 2 DP answers of a post-processing statement") || strings.Contains(got, "none yet") {
		t.Errorf("SHOW dp.last_answer after a statement with two DP aggregates: %s", got)
	}

	// Refused leaf: nothing charged.
	before = charges()
	_, err = conn.Exec(ctx, `SELECT * FROM (SELECT COUNT(*) FROM patients) a CROSS JOIN (SELECT birth_year FROM patients) b`)
	if c := sqlState(err); c != "42501" && c != "0A000" {
		t.Errorf("raw rows in a subquery: %v, want 42501 or 0A000", err)
	}
	// Budget: two aggregates at ε = 2 each need 4 > what is left.
	if _, err := conn.Exec(ctx, `SET dp.epsilon = 2`); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `SELECT * FROM (SELECT COUNT(*) AS a FROM patients) x CROSS JOIN (SELECT COUNT(*) AS b FROM visits) y`)
	if sqlState(err) != "53400" {
		t.Errorf("over budget in total: %v, want 53400", err)
	}
	if n := charges() - before; n != 0 {
		t.Errorf("refused statements charged %d times", n)
	}
	if _, err := conn.Exec(ctx, `SET dp.epsilon = 0.1`); err != nil {
		t.Fatal(err)
	}

	// An error of the outer SQL: the client's error, the leaf charged
	// once, no incident (the next DP query is answered).
	before = charges()
	_, err = conn.Exec(ctx, `SELECT n / 0 FROM (SELECT COUNT(*) AS n FROM patients) s`)
	if sqlState(err) != "22012" {
		t.Errorf("division by zero in the outer SQL: %v, want 22012", err)
	}
	if n := charges() - before; n != 1 {
		t.Errorf("charges of a statement whose outer SQL failed = %d, want 1", n)
	}
	var one int64
	if err := conn.QueryRow(ctx, `SELECT COUNT(*) FROM patients WHERE sex = 'F'`).Scan(&one); err != nil {
		t.Errorf("a DP query after an outer-SQL error: %v (suspended?)", err)
	}

	// Flattened projection subquery (query folding): one plain DP query.
	before = charges()
	var fold int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT s, COUNT(*) AS n FROM (SELECT sex AS s, birth_year FROM patients WHERE birth_year > 1950) x GROUP BY s) y`).Scan(&fold); err != nil || fold != 2 {
		t.Errorf("folded projection: %d groups, %v", fold, err)
	}
	if n := charges() - before; n != 1 {
		t.Errorf("charges of a folded query = %d, want 1", n)
	}

	// EXPLAIN: each leaf's plan and the outer SQL, no charge.
	before = charges()
	rows, err = conn.Query(ctx, `EXPLAIN SELECT a.sex, a.n, b.n FROM (SELECT sex, COUNT(*) AS n FROM patients GROUP BY sex) a JOIN (SELECT sex, COUNT(*) AS n FROM patients WHERE birth_year < 1960 GROUP BY sex) b USING (sex)`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	for _, want := range []string{"DP aggregate 1:", "DP aggregate 2:", "Outer SQL", "SQL: "} {
		if !strings.Contains(plan, want) {
			t.Errorf("EXPLAIN lacks %q:\n%s", want, plan)
		}
	}
	if n := charges() - before; n != 0 {
		t.Errorf("EXPLAIN charged %d times", n)
	}

	// The extended protocol with parameters (pgx's default mode: Parse,
	// Describe, Bind, Execute), inside the leaf.
	before = charges()
	rows, err = conn.Query(ctx, `SELECT sex, n FROM (SELECT sex, COUNT(*) AS n FROM patients WHERE birth_year >= $1 GROUP BY sex) AS "source" ORDER BY n DESC LIMIT 1`, 1950)
	if err != nil {
		t.Fatal(err)
	}
	var ext int
	for rows.Next() {
		ext++
	}
	if rows.Err() != nil || ext != 1 {
		t.Errorf("extended protocol with a parameter: %d rows, %v", ext, rows.Err())
	}
	if n := charges() - before; n != 1 {
		t.Errorf("charges of the extended-protocol statement = %d, want 1", n)
	}

	// psql, as an analyst types it.
	out, stderr, code := psql(t, p.dsn(analyst), "-At", "-c",
		`SELECT region, CASE WHEN n > 9000 THEN 'large' ELSE 'small' END FROM (SELECT region, COUNT(*) AS n FROM patients GROUP BY region) t ORDER BY region`)
	if code != 0 || len(strings.Split(strings.TrimSpace(out), "\n")) != 5 || !strings.Contains(stderr, "DP aggregate 1 of 1") {
		t.Errorf("psql: code %d\n%s\n%s", code, out, stderr)
	}
}
