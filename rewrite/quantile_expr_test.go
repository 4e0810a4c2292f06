package rewrite

import (
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/policy"
)

// TestQuantile_TinyValues: a numeric value nearer to 0 than 1e-308 (here
// 1e-400, within x's bounds [0, 10]) must not make the quantile SQL fail
// (a conversion to float8 would raise 22003: an error that would depend
// on the data), for a column and for an expression.
func TestQuantile_TinyValues(t *testing.T) {
	ctx, conn := freshConn(t, time.Minute)
	ds, err := policy.Parse(strings.NewReader(saPolicy), "sa.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE obs (unit_id bigint, x numeric, y double precision);
INSERT INTO obs VALUES (1, 1e-400, 1), (2, 3, 2), (3, 1e-400, 3)`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SELECT MIN(x) FROM obs", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x * 2) FROM obs"} {
		p, err := Rewrite(ds, q)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := queryText(ctx, conn, p.SQL); err != nil {
			t.Errorf("%s on a value of 1e-400: %v", q, err)
		}
	}
}
