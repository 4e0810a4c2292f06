package pgemit

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestHeld52_FixedCountFitsInt8 (attack round 52, held): fixedCount's
// float guard never admits a product that overflows int8. For every k a
// count can have (truncDigits of an L∞ ≥ R ≥ 1: 6…15, and 16…18 to be
// safe) and R over 1…1,000 plus R near every power of ten up to the
// policy's 1,000,000, the largest L0 the guard admits is found by
// bisection and R·(L0·R)·10ᵏ — the largest value of v·T·10ᵏ, evaluated
// left to right as the SQL does, every prefix smaller — is checked exactly
// against 2⁶³ − 1; and the literal 10ᵏ itself fits int8 (k ≤ 18), so
// the product and the division are int8 operations, never numeric.
func TestHeld52_FixedCountFitsInt8(t *testing.T) {
	maxInt8 := new(big.Int).SetInt64(math.MaxInt64)
	var rs []int
	for r := 1; r <= 1000; r++ {
		rs = append(rs, r)
	}
	for p := 1000; p <= 1_000_000; p *= 10 {
		for d := -3; d <= 3; d++ {
			if r := p + d; r > 0 && r <= 1_000_000 {
				rs = append(rs, r)
			}
		}
	}
	for k := 6; k <= 18; k++ {
		for _, r := range rs {
			ok := func(l0 int) bool { _, ok := fixedCount("v", "t", r, l0*r, k); return ok }
			if !ok(1) {
				continue
			}
			lo, hi := 1, 1_000_001 // ok(lo), and ok(hi) false or hi past the policy
			for hi-lo > 1 {
				mid := (lo + hi) / 2
				if ok(mid) {
					lo = mid
				} else {
					hi = mid
				}
			}
			p := big.NewInt(int64(r))
			p.Mul(p, big.NewInt(int64(lo*r)))
			p.Mul(p, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil))
			if p.Cmp(maxInt8) > 0 {
				t.Fatalf("R = %d, L0 = %d, k = %d: fixedCount admits R·T·10ᵏ = %s > 2⁶³ − 1", r, lo, k, p)
			}
			if k > 18 {
				t.Fatalf("k = %d admitted: 10ᵏ is a numeric literal", k)
			}
		}
	}
}

// TestHeld52_FixedCountMatchesNumeric (attack round 52, held): on
// PostgreSQL 15, fixedCount's int8 value times 10⁻ᵏ equals weighted's
// numeric value digit for digit, is of type bigint (so "/" is int8
// division, truncating), never exceeds v·min(1, T/t), and never errors,
// at the corners: the largest L0 the guard admits for several R (v·T·10ᵏ
// up to 97.6% of 2⁶³ − 1: R = 1, L0 = 8,999, k = 15; R ≥ about 3,000
// falls back to numeric), t = T + 1 (the product at its largest), t up to
// 2⁶² (the int8 window sum's range), n below, at and above R. The final
// stage's text for an unweighted group ("12.000000000000000" where the
// numeric form gave "12") parses as the same integer (release's
// big.Rat.SetString and IsInt).
func TestHeld52_FixedCountMatchesNumeric(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	type shape struct{ r, l0 int }
	shapes := []shape{{1, 1}, {5, 4}, {20, 4}, {2, 3}}
	for _, r := range []int{1, 2, 3, 7, 20, 99, 1000, 12345, 1_000_000} {
		k := truncDigits(float64(r))
		l0 := 0
		for lo, hi := 1, 1_000_001; ; {
			if hi-lo <= 1 {
				l0 = lo
				break
			}
			mid := (lo + hi) / 2
			if _, ok := fixedCount("v", "t", r, mid*r, k); ok {
				lo = mid
			} else {
				hi = mid
			}
		}
		if _, ok := fixedCount("v", "t", r, l0*r, k); ok {
			shapes = append(shapes, shape{r, l0})
		}
	}
	checked := 0
	for _, s := range shapes {
		k := truncDigits(float64(s.r))
		total := s.l0 * s.r
		fixed, ok := fixedCount("LEAST(dp_n0, "+strconv.Itoa(s.r)+")", "dp_t0", s.r, total, k)
		if !ok {
			t.Fatalf("R = %d, L0 = %d: not fixed point", s.r, s.l0)
		}
		v := "LEAST(dp_n0, " + strconv.Itoa(s.r) + ")"
		num := "CASE WHEN dp_t0 <= " + strconv.Itoa(total) + " THEN " + v + " ELSE " + weighted(v, strconv.Itoa(total), "dp_t0", k) + " END"
		var ns, ts []string
		for _, n := range []int64{1, int64(s.r) - 1, int64(s.r), int64(s.r) + 1, 3 * int64(s.r)} {
			if n >= 1 {
				ns = append(ns, strconv.FormatInt(n, 10))
			}
		}
		for _, tt := range []int64{1, int64(total), int64(total) + 1, int64(total) + 2, 2*int64(total) - 1, 3*int64(total) + 7, 1_000_003, 1 << 40, 1<<62 - 1} {
			ts = append(ts, strconv.FormatInt(tt, 10))
		}
		q := fmt.Sprintf(`SELECT dp_n0::text, dp_t0::text, pg_typeof(f)::text, f::text, (f * %[1]s)::text, w::text, (f * %[1]s) = w,
				(f * %[1]s) <= LEAST(dp_n0, %[2]d)::numeric * LEAST(1::numeric, %[3]d::numeric / dp_t0)
			FROM (SELECT dp_n0, dp_t0, %[4]s AS f, %[5]s AS w
				FROM unnest(ARRAY[%[6]s]::int8[]) AS n(dp_n0), unnest(ARRAY[%[7]s]::int8[]) AS tt(dp_t0)
				WHERE LEAST(dp_n0, %[2]d) <= dp_t0) AS x`,
			tenToMinus(k), s.r, total, fixed, num, strings.Join(ns, ","), strings.Join(ts, ","))
		rows, err := conn.Query(ctx, q)
		if err != nil {
			t.Fatalf("R = %d, L0 = %d, k = %d: %v\n%s", s.r, s.l0, k, err, q)
		}
		for rows.Next() {
			var n, tt, typ, f, fs, w string
			var eq, below bool
			if err := rows.Scan(&n, &tt, &typ, &f, &fs, &w, &eq, &below); err != nil {
				t.Fatal(err)
			}
			checked++
			if typ != "bigint" || !eq || !below {
				t.Errorf("R = %d, L0 = %d, k = %d, n = %s, t = %s: fixed %s (%s) → %s, numeric %s, equal %v, within v·min(1, T/t) %v", s.r, s.l0, k, n, tt, f, typ, fs, w, eq, below)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("R = %d, L0 = %d, k = %d: %v", s.r, s.l0, k, err)
		}
	}
	if checked < 300 {
		t.Fatalf("only %d cases checked", checked)
	}
	// The final stage of an unweighted group, as release parses it.
	var txt string
	if err := conn.QueryRow(ctx, "SELECT (SUM(x) * "+tenToMinus(14)+")::text FROM (VALUES (5::int8 * "+tenTo(14)+"), (7::int8 * "+tenTo(14)+")) AS v(x)").Scan(&txt); err != nil {
		t.Fatal(err)
	}
	r, ok := new(big.Rat).SetString(txt)
	if !ok || !r.IsInt() || r.Cmp(big.NewRat(12, 1)) != 0 {
		t.Errorf("final text %q does not parse as the integer 12", txt)
	}
	t.Logf("%d (R, L0, n, t) cases equal digit for digit; final text %q", checked, txt)
}
