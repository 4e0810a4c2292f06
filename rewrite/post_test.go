package rewrite

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestPost_Shapes splits the post-processing shapes BI tools send into DP
// leaves and outer SQL, and plans every leaf with the ordinary planner.
func TestPost_Shapes(t *testing.T) {
	ds := loadHospital(t)
	tests := []struct {
		name   string
		sql    string
		leaves int    // 0: flattened into one DP query (Flat)
		outer  string // a substring of the outer SQL
	}{
		{"wrapping select", `SELECT * FROM (SELECT department, COUNT(*) AS c FROM visits GROUP BY department) AS "source" LIMIT 10`, 1, `AS "source" LIMIT 10`},
		{"cte", `WITH a AS (SELECT department, AVG(cost) AS m FROM visits GROUP BY department) SELECT department, round(m, 2) FROM a ORDER BY m DESC`, 1, "round(m, 2)"},
		{"window over subquery", `SELECT department, c, rank() OVER (ORDER BY c DESC) FROM (SELECT department, COUNT(*) AS c FROM visits GROUP BY department) s`, 1, "rank() OVER"},
		{"window over aggregate", `SELECT department, COUNT(*) AS c, SUM(COUNT(*)) OVER () AS total FROM visits GROUP BY department ORDER BY c DESC LIMIT 3`, 1, `SUM( "COUNT(*)" ) OVER ()`},
		{"window share", `SELECT v.department, 100.0 * COUNT(*) / SUM(COUNT(*)) OVER () AS share FROM visits v WHERE age > 10 GROUP BY 1 HAVING COUNT(*) > 0`, 1, `WHERE "COUNT(*)"`},
		{"join of results", `SELECT a.department, a.c, b.m FROM (SELECT department, COUNT(*) AS c FROM visits GROUP BY department) a JOIN (SELECT department, AVG(age) AS m FROM visits GROUP BY department) b ON a.department = b.department`, 2, "JOIN"},
		{"union all", `SELECT COUNT(*) AS n FROM visits UNION ALL SELECT COUNT(*) FROM patients ORDER BY 1`, 2, "UNION ALL"},
		{"union parens", `(SELECT sex AS k, COUNT(*) FROM patients GROUP BY sex) UNION ALL (SELECT region, COUNT(*) FROM patients GROUP BY region)`, 2, "UNION ALL"},
		{"case over result", `SELECT department, CASE WHEN c > 30000 THEN 'big' ELSE 'small' END FROM (SELECT department, COUNT(*) c FROM visits GROUP BY department) t`, 1, "CASE WHEN"},
		{"fold subquery", `SELECT dept, COUNT(*) FROM (SELECT department AS dept, cost FROM visits WHERE cost > 0) s GROUP BY dept`, 0, ""},
		{"fold power bi", `select "_"."department", count(1) as "c" from (select "_"."department", "_"."age" from (select "department", "age", "cost" from "public"."visits" "$Table") "_" where "_"."age" >= 18) "_" group by "_"."department"`, 0, ""},
		{"fold cte", `WITH v AS (SELECT department, cost FROM visits WHERE cost > 0) SELECT department, SUM(cost) FROM v GROUP BY department`, 0, ""},
		{"fold cte then wrap", `WITH v AS (SELECT department, cost FROM visits WHERE cost > 0), agg AS (SELECT department, SUM(cost) AS s FROM v GROUP BY department) SELECT * FROM agg ORDER BY s DESC LIMIT 2`, 1, "LIMIT 2"},
		{"fold then wrap", `SELECT * FROM (SELECT d, COUNT(*) AS n FROM (SELECT department AS d FROM visits) x GROUP BY d) y WHERE n > 10`, 1, "WHERE n > 10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := Post(ds, tt.sql)
			if err != nil {
				t.Fatalf("Post(%q) = %v", tt.sql, err)
			}
			if len(q.Leaves) != tt.leaves {
				t.Fatalf("Post(%q): %d leaves %q, flat %q, want %d", tt.sql, len(q.Leaves), q.Leaves, q.Flat, tt.leaves)
			}
			if tt.leaves == 0 {
				if _, err := Rewrite(ds, q.Flat); err != nil {
					t.Fatalf("flattened %q: %v", q.Flat, err)
				}
				return
			}
			for _, l := range q.Leaves {
				if _, err := Rewrite(ds, l); err != nil {
					t.Errorf("leaf %q: %v", l, err)
				}
			}
			if !strings.Contains(q.Outer(), tt.outer) {
				t.Errorf("outer %q lacks %q", q.Outer(), tt.outer)
			}
			cols := make([][]PostColumn, len(q.Leaves))
			for i := range cols {
				cols[i] = []PostColumn{{"department", "text"}, {"c", "int8"}}
			}
			sql, err := q.OuterSQL(cols)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(strings.ToLower(sql), "visits") || strings.Contains(strings.ToLower(sql), "patients") {
				t.Errorf("outer SQL names a protected table: %s", sql)
			}
		})
	}
}

// TestPost_Refused checks that shapes which read protected rows outside a
// DP aggregate are refused with a SQLSTATE and a hint.
func TestPost_Refused(t *testing.T) {
	ds := loadHospital(t)
	for _, sql := range []string{
		`SELECT COUNT(*) FROM visits WHERE department IN (SELECT department FROM visits)`,
		`SELECT * FROM (SELECT department, COUNT(*) c FROM visits GROUP BY department) s JOIN visits v ON v.department = s.department`,
		`WITH RECURSIVE r AS (SELECT 1) SELECT COUNT(*) FROM visits`,
		`SELECT age, rank() OVER (ORDER BY age) FROM visits`,
	} {
		_, err := Post(ds, sql)
		pe, ok := pgerr.As(err)
		if !ok || pe.Code == "" || pe.Hint == "" {
			t.Errorf("Post(%q) = %v, want a refusal with a SQLSTATE and a hint", sql, err)
		}
	}
	// A semi-join on the unit is told how to write it as a join.
	_, err := Post(ds, `SELECT COUNT(*) FROM visits WHERE patient_id IN (SELECT patient_id FROM patients WHERE sex = 'F')`)
	if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.FeatureNotSupported || !strings.Contains(pe.Hint, "FROM visits JOIN other_table USING (patient_id)") {
		t.Errorf("IN (subquery over a protected table): %v, want 0A000 with the join's hint", err)
	}
}
