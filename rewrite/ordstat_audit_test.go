package rewrite

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// rowQuerier is a connection or a transaction.
type rowQuerier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// orderStatSummaries runs the SQL of a smooth or ptr quantile plan and
// returns, per group key (the key values joined by NUL), the summary "f;S"
// (smooth) or "f;D" (ptr) of each quantile measure, in measure order; other
// measures (and a private key's unit count after them) are left to the
// sensitivity audit.
func orderStatSummaries(ctx context.Context, q rowQuerier, p *Plan) (map[string][][2]float64, error) {
	rows, err := q.Query(ctx, p.SQL, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][][2]float64{}
	nk := len(p.Keys)
	for rows.Next() {
		raw := rows.RawValues()
		var key []string
		for _, v := range raw[:nk] {
			key = append(key, string(v))
		}
		var ms [][2]float64
		for i, v := range raw[nk : nk+len(p.Measures)] {
			if p.Measures[i].Kind != MeasureQuantile {
				continue
			}
			fs, ss, ok := strings.Cut(string(v), ";")
			f, err1 := strconv.ParseFloat(fs, 64)
			s, err2 := strconv.ParseFloat(ss, 64)
			if !ok || err1 != nil || err2 != nil {
				return nil, fmt.Errorf("summary %q", v)
			}
			ms = append(ms, [2]float64{f, s})
		}
		out[strings.Join(key, "\x00")] = ms
	}
	return out, rows.Err()
}

// checkOrderStatNeighbours compares the summaries of neighbouring databases
// D (d) and D′ (d2, one unit added) for the quantile measures qs: for the
// smooth method |f − f′| ≤ min(S, S′) and S′/S within e^{±β} (the smooth
// upper bound, Nissim–Raskhodnikova–Smith 2007, Def. 2.1); for ptr the
// distance D moves by at most 1 (Dwork–Lei 2009). At most l0 groups may
// change; a group new in D′ counts as changed.
func checkOrderStatNeighbours(t *testing.T, name, method string, qs []Measure, l0 int, d, d2 map[string][][2]float64) {
	t.Helper()
	changed := 0
	for k, x2 := range d2 {
		x, ok := d[k]
		if !ok {
			changed++
			continue
		}
		ch := false
		for j, m := range qs {
			f, s, f2, s2 := x[j][0], x[j][1], x2[j][0], x2[j][1]
			if f != f2 || s != s2 {
				ch = true
			}
			if method == QuantileSmooth {
				eb := math.Exp(m.Quantile.Beta) * (1 + 1e-12)
				if math.Abs(f-f2) > math.Min(s, s2)*(1+1e-12) || s2 > eb*s || s > eb*s2 {
					t.Errorf("%s smooth group %q: f %v→%v, S %v→%v (β=%v)", name, k, f, f2, s, s2, m.Quantile.Beta)
				}
			} else if math.Abs(s-s2) > 1 {
				t.Errorf("%s ptr group %q: D %v→%v", name, k, s, s2)
			}
		}
		if ch {
			changed++
		}
	}
	if changed > l0 {
		t.Errorf("%s %s: %d groups changed > L0 %d", name, method, changed, l0)
	}
}
