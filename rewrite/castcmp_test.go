package rewrite

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
)

func TestIntCastCmp(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	for _, tc := range []struct{ where, want string }{
		{"cost::int > 100", `"cost" >= (100.5)`},
		{"CAST(cost AS integer) >= 100", `"cost" >= (99.5)`},
		{"cost::int4 < 0", `"cost" <= (-0.5)`},
		{"cost::int = 0", `("cost" > (-0.5)) AND ("cost" < (0.5))`},
		{"cost::int <> 1", `("cost" < (0.5)) OR ("cost" >= (1.5))`},
		{"cost::bigint <= -2", `"cost" <= (-1.5)`}, // round(-1.5) = -2
		{"cost::int BETWEEN 1 AND 5", `("cost" >= (0.5)) AND ("cost" < (5.5))`},
		{"cost::int IS NULL", `"cost" IS NULL`},
		{"cost::int IN (1, 2)", `(("cost" >= (0.5)) AND ("cost" < (1.5))) OR (("cost" >= (1.5)) AND ("cost" < (2.5)))`},
		{"age::int > 17", `"age" > (17)`},
		{"100 < visits.cost::int", `"cost" >= (100.5)`},
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
		{"cost::int > 100.5", "integer constants only"},
		{"cost::int LIKE '1%'", "comparisons, BETWEEN, IN and IS NULL only"},
		{"department::int > 1", "text column"},
		{"visit_date::int > 1", "date column"},
		{"(cost + 1)::int > 1", "expressions"},
		{"cost::int::text = '1'", "integer constants only"},
	} {
		_, err := Rewrite(ds, "SELECT COUNT(*) FROM visits WHERE "+tc.where)
		pe, ok := pgerr.As(err)
		if !ok || !strings.Contains(pe.Message, tc.msg) || pe.Hint == "" {
			t.Errorf("%s: got %v, want %q with a hint", tc.where, err, tc.msg)
		}
	}
}

// TestIntCastCmp_MatchesPostgres checks every translation against
// PostgreSQL's own cast on values around the rounding points, of a
// numeric and a float8 column.
func TestIntCastCmp_MatchesPostgres(t *testing.T) {
	ctx, conn := freshConn(t, 3*time.Minute)
	ds, err := policy.Parse(strings.NewReader(`dataset: c
privacy_unit: u
budget: {epsilon: 1}
tables:
  t:
    unit_column: u
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      x: {type: numeric, lower: -10, upper: 10}
      f: {type: float, lower: -10, upper: 10}
`), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE t (u int, x numeric, f float8);
		INSERT INTO t SELECT k, k / 4.0, k / 4.0 FROM generate_series(-16, 16) k;
		INSERT INTO t SELECT 100 + k, k / 4.0 + 0.0001, k / 4.0 - 0.0001 FROM generate_series(-16, 16) k;
		INSERT INTO t VALUES (0, NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, col := range []string{"x", "f"} {
		for _, op := range []string{"=", "<>", "<", "<=", ">", ">=", "IN", "NOT IN"} {
			for n := -3; n <= 3; n++ {
				cond := fmt.Sprintf("%s::int %s %d", col, op, n)
				if strings.HasSuffix(op, "IN") {
					cond = fmt.Sprintf("%s::int %s (%d, %d)", col, op, n, n+2)
				}
				p, err := Rewrite(ds, "SELECT COUNT(*) FROM t WHERE "+cond)
				if err != nil {
					t.Fatalf("%s: %v", cond, err)
				}
				_, where := dpplan.SourceOf(p)
				pred := pgemit.PredSQL(where)
				var want, got int
				if err := conn.QueryRow(ctx, "SELECT count(*) FROM t WHERE "+cond).Scan(&want); err != nil {
					t.Fatal(err)
				}
				if err := conn.QueryRow(ctx, "SELECT count(*) FROM t WHERE "+pred).Scan(&got); err != nil {
					t.Fatalf("%s: %v", pred, err)
				}
				if got != want {
					t.Errorf("%s planned as %s: %d rows, PostgreSQL %d", cond, pred, got, want)
				}
				checked++
			}
		}
	}
	if checked != 112 {
		t.Errorf("checked %d", checked)
	}
}

func TestTextCastCmp(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	for _, where := range []string{"cost::text = '100'", "CAST(visits.age AS varchar) > '9'", "visit_date::text LIKE '2024%'"} {
		_, err := Rewrite(ds, "SELECT COUNT(*) FROM visits WHERE "+where)
		pe, ok := pgerr.As(err)
		if !ok || pe.Hint == "" {
			t.Errorf("%s: got %v, want a refusal with a hint", where, err)
		}
	}
	for _, q := range []string{
		"SELECT COUNT(*) FROM visits WHERE department::text = 'oncology'",
		"SELECT CAST(department AS TEXT), COUNT(*) FROM visits GROUP BY 1",
		"SELECT CAST(EXTRACT(YEAR FROM visit_date) AS INTEGER), COUNT(*) FROM visits GROUP BY 1",
	} {
		if _, err := Rewrite(ds, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}
