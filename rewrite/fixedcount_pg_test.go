package rewrite

import (
	"context"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/dpproxy/dpproxy/internal/pgtest/demodb"
)

// TestFixedCount_Exact: a grouped count whose units are weighted
// (pgemit.fixedCount, int8 fixed point) returns, digit for digit, the sum
// over the group's units of ⌊min(n, R)·min(1, T/t)·10ᵏ⌋·10⁻ᵏ computed
// here in exact integers from the per-(unit, group) row counts read
// upstream: the weighting the bounding argument (dpplan/bounds.go) relies
// on, truncated towards zero, never above its exact value. R = 2 rows per
// unit on the demo's 200,000 visits, so most units with several visits
// are weighted.
func TestFixedCount_Exact(t *testing.T) {
	_, conn := demodb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ds, err := demo.HospitalPolicy()
	if err != nil {
		t.Fatal(err)
	}
	const r = 2
	p, err := RewriteWith(ds, "SELECT department, COUNT(*) FROM visits GROUP BY department", Options{MaxRowsPerUnit: r})
	if err != nil {
		t.Fatal(err)
	}
	res, err := queryText(ctx, conn, p.SQL)
	if err != nil {
		t.Fatalf("%v\n%s", err, p.SQL)
	}
	mi := p.Outputs[1].Measure
	got := map[string]*big.Rat{}
	for _, row := range res {
		got[*row[0]] = rat(row[1+mi])
	}

	// The oracle: per (unit, group) counts, from PostgreSQL's COUNT.
	total := int64(p.MaxGroupsPerUnit * r)
	// pgemit's truncDigits: 15 significant digits of the measure's L∞.
	k := 15 - int(math.Floor(math.Log10(p.Measures[mi].LInf)))
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil)
	rows, err := conn.Query(ctx, "SELECT patient_id, department, COUNT(*) FROM visits GROUP BY 1, 2 ORDER BY 1, 2")
	if err != nil {
		t.Fatal(err)
	}
	type cell struct {
		dept string
		n    int64
	}
	byUnit := map[int64][]cell{}
	for rows.Next() {
		var u, n int64
		var d string
		if err := rows.Scan(&u, &d, &n); err != nil {
			t.Fatal(err)
		}
		byUnit[u] = append(byUnit[u], cell{d, n})
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	want := map[string]*big.Int{}
	weightedUnits := 0
	for _, cells := range byUnit {
		var tu int64
		for _, c := range cells {
			tu += min(c.n, r)
		}
		for _, c := range cells {
			v := big.NewInt(min(c.n, r))
			v.Mul(v, scale)
			if tu > total {
				v.Mul(v, big.NewInt(total))
				v.Quo(v, big.NewInt(tu)) // non-negative: truncation is floor
			}
			if want[c.dept] == nil {
				want[c.dept] = new(big.Int)
			}
			want[c.dept].Add(want[c.dept], v)
		}
		if tu > total {
			weightedUnits++
		}
	}
	if weightedUnits < 1000 {
		t.Fatalf("only %d weighted units: the test would not exercise the weighting", weightedUnits)
	}
	for d, w := range want {
		exact := new(big.Rat).SetFrac(w, scale)
		if got[d] == nil || got[d].Cmp(exact) != 0 {
			t.Errorf("%s: COUNT(*) = %v, want exactly %s (%d weighted units in all)", d, got[d], exact.FloatString(k), weightedUnits)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d groups returned, %d in the data", len(got), len(want))
	}
}
