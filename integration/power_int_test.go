package integration

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"
)

// TestPower_IntegerModeCounts checks the integer-mode (exact discrete)
// Laplace noise end to end. Grouped counts whose groups outnumber
// max_groups_per_unit are noised on the fine real grid (a unit's counts
// may be weighted: dpplan.ScaledMeasures), so powerQuery's counts never
// reach integer mode; an ungrouped count does (dpplan.GroupBounding is
// GroupsAll, the measure stays Integer and its L1 = L0·L∞ = 1·1 on patients
// is whole: release.go passes Integer to noise.NewLaplace).
//
// Three ungrouped counts of the power policy's patients (COUNT(*),
// COUNT(birth_year), COUNT(DISTINCT patient_id); L1 = 1 each) at ε = 0.3
// split evenly (dp.bias = off): discrete Laplace of scale t = 1/0.1 = 10
// on the integers, 100 queries, 300 draws. Each released − true must be a
// whole number, and scaleTest's false rejection is ≤ 10⁻⁶ while it catches
// half and double the scale, and no noise, except with probability
// ≤ 10⁻⁶ each (its comment).
func TestPower_IntegerModeCounts(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const analyst = "power_integer"
	p := powerProxy(t, analyst)
	up := connect(t, ctx, env.upstreamDSN)
	truthRow := textRows(t, ctx, up, "SELECT count(*), count(birth_year), count(DISTINCT patient_id) FROM patients WHERE patient_id IS NOT NULL")[0]
	var truth [3]*big.Rat
	for j, s := range truthRow {
		x, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("upstream count %q", s)
		}
		truth[j] = x
	}
	c := connect(t, ctx, p.dsn(analyst))
	const eps, queries, batch = 0.3, 100, 50
	textRows(t, ctx, c, fmt.Sprintf("SET dp.epsilon = %g; SET dp.cache = off; SET dp.bias = off; SET dp.contribution = fixed", eps))
	const query = "SELECT COUNT(*), COUNT(birth_year), COUNT(DISTINCT patient_id) FROM patients"
	var z []float64
	for sent := 0; sent < queries; sent += batch {
		res, err := c.PgConn().Exec(ctx, strings.Repeat(query+";", batch)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if len(r.Rows) != 1 || len(r.Rows[0]) != 3 {
				t.Fatalf("%s: %d rows, want 1 of 3 columns", query, len(r.Rows))
			}
			for j, v := range r.Rows[0] {
				got, ok := new(big.Rat).SetString(string(v))
				if !ok {
					t.Fatalf("released %q is not a number", v)
				}
				d := got.Sub(got, truth[j])
				if !d.IsInt() {
					t.Fatalf("count %d: released − true = %s is not whole", j, d.FloatString(6))
				}
				f, _ := d.Float64()
				z = append(z, f)
			}
		}
	}
	scaleTest(t, "integer-mode laplace counts", laplaceFamily, 1/(eps/3), z)
	checkSpent(t, ctx, c, queries*eps, 0)
}
