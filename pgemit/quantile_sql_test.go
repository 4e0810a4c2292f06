package pgemit

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestQuantileKeep_Postgres runs quantileKeepSQL on PostgreSQL, with the
// window columns the emitter gives it, for units of n = 1…40 values (and
// NULLs, which rank after them and are never kept), and checks that each
// unit keeps exactly the values of rank ⌈(j − ½)·n/R⌉, j = 1…R, when
// n > R (so its median when R = 1), else all of them, and never more than
// R: the rule PRIVACY.md states and the sensitivity of the quantile's
// utility rests on.
func TestQuantileKeep_Postgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, r := range []int{1, 2, 3, 5, 20} {
		// Values are 10·rank, so a kept value names its rank; each unit
		// also has two NULLs.
		q := fmt.Sprintf(`SELECT n, %s FROM (
			SELECT n, x AS dp_x0, ROW_NUMBER() OVER (PARTITION BY n ORDER BY x) AS dp_r0, COUNT(x) OVER (PARTITION BY n) AS dp_c0
			FROM (SELECT n, (10 * k)::numeric AS x FROM generate_series(1, 40) AS n, generate_series(1, n) AS k
			      UNION ALL SELECT n, NULL FROM generate_series(1, 40) AS n, generate_series(1, 2)) AS v) AS w
			GROUP BY n ORDER BY n`, quantileKeepSQL(0, r))
		rows, err := conn.Query(ctx, q)
		if err != nil {
			t.Fatalf("R = %d: %v\n%s", r, err, q)
		}
		got := map[int][]int{}
		for rows.Next() {
			var n int
			var kept []float64
			if err := rows.Scan(&n, &kept); err != nil {
				t.Fatal(err)
			}
			for _, v := range kept {
				got[n] = append(got[n], int(v)/10)
			}
			slices.Sort(got[n])
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 40; n++ {
			var want []int
			if n <= r {
				for k := 1; k <= n; k++ {
					want = append(want, k)
				}
			} else {
				for j := 1; j <= r; j++ {
					want = append(want, int(math.Ceil((float64(j)-0.5)*float64(n)/float64(r))))
				}
			}
			if !slices.Equal(got[n], want) {
				t.Errorf("R = %d, n = %d: kept ranks %v, want %v", r, n, got[n], want)
			}
		}
	}
}
