package rewrite

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/jackc/pgx/v5"
)

// TestLikePattern_MatchesPostgres checks parseLikePattern against
// PostgreSQL itself: for random patterns over an alphabet rich in wildcards
// and escape characters, with the default escape, a custom one and none,
// and random subject strings,
//   - PostgreSQL raises 22025 for some subject exactly when
//     parseLikePattern refuses the pattern (the refusal is total: it does
//     not depend on any subject), and
//   - otherwise `s LIKE analyst_pattern ESCAPE e` equals
//     `s LIKE canonical_pattern` for every subject, for LIKE and ILIKE.
//
// Deterministic (seeded); no false rejections.
func TestLikePattern_MatchesPostgres(t *testing.T) {
	ctx, conn := freshConn(t, 2*time.Minute)
	rng := rand.New(rand.NewPCG(14, 1))
	alphabet := []string{"a", "b", "A", "%", "_", `\`, "!", "é", "'"}
	escapes := []string{`\`, "!", "", "a"}
	word := func(n int) string {
		var b strings.Builder
		for range rng.IntN(n + 1) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	subjects := []string{""}
	for range 60 {
		subjects = append(subjects, word(6))
	}
	refused, accepted := 0, 0
	for range 250 {
		pattern := word(5)
		escStr := escapes[rng.IntN(len(escapes))]
		esc, err := likeEscape(escStr)
		if err != nil {
			t.Fatal(err)
		}
		p, perr := parseLikePattern(pattern, esc)
		canonical := ""
		if perr == nil {
			canonical = p.String()
			if strings.HasSuffix(strings.TrimSuffix(canonical, `\\`), `\`) && !strings.HasSuffix(canonical, `\\`) {
				t.Fatalf("canonical %q of %q ends with a lone escape", canonical, pattern)
			}
		}
		for _, op := range []string{"LIKE", "ILIKE"} {
			pgErrored := false
			for _, s := range subjects {
				var got, want bool
				err := conn.QueryRow(ctx, "SELECT $1::text "+op+" $2::text ESCAPE $3::text",
					pgx.QueryExecModeExec, s, pattern, escStr).Scan(&want)
				if err != nil {
					if !strings.Contains(err.Error(), "22025") {
						t.Fatalf("%q %s %q ESCAPE %q: unexpected error %v", s, op, pattern, escStr, err)
					}
					pgErrored = true
					continue
				}
				if perr != nil {
					continue
				}
				if err := conn.QueryRow(ctx, "SELECT $1::text "+op+" $2::text", pgx.QueryExecModeExec, s, canonical).Scan(&got); err != nil {
					t.Fatalf("canonical %q (of %q ESCAPE %q) raised %v for %q", canonical, pattern, escStr, err, s)
				}
				if got != want {
					t.Fatalf("%q %s %q ESCAPE %q = %v, canonical %q gives %v", s, op, pattern, escStr, want, canonical, got)
				}
			}
			if pgErrored && perr == nil {
				t.Fatalf("PostgreSQL raised 22025 for %q ESCAPE %q, which parseLikePattern accepted", pattern, escStr)
			}
		}
		if perr != nil {
			if pe, ok := pgerr.As(perr); !ok || pe.Code != "22025" {
				t.Fatalf("refusal of %q: %v, want 22025", pattern, perr)
			}
			refused++
		} else {
			accepted++
		}
	}
	if refused == 0 || accepted == 0 {
		t.Fatalf("the generator must produce both kinds: %d refused, %d accepted", refused, accepted)
	}
	t.Logf("%d patterns accepted, %d refused, each against %d subjects with LIKE and ILIKE", accepted, refused, len(subjects))
}

// TestLikePattern_Oracle is issue 14's exact-row oracle: a pattern that ends
// in an unescaped escape character is refused at plan time, in WHERE, in a
// FILTER, in a CASE key and inside any quoting the analyst can write, and
// an explicit ESCAPE is folded into a canonical pattern.
func TestLikePattern_Oracle(t *testing.T) {
	ds := loadHospital(t)
	refused := []string{
		`SELECT COUNT(*) FROM visits WHERE diagnosis LIKE 'A81\'`,
		`SELECT COUNT(*) FROM visits WHERE diagnosis ILIKE 'a81%\'`,
		`SELECT COUNT(*) FROM visits WHERE NOT diagnosis LIKE 'A81\'`,
		`SELECT COUNT(*) FROM visits WHERE diagnosis NOT LIKE E'A81\\'`,
		`SELECT COUNT(*) FROM visits WHERE diagnosis LIKE $$A81\$$`,
		`SELECT COUNT(*) FILTER (WHERE diagnosis LIKE 'A81%\') FROM visits`,
		`SELECT COUNT(*) FROM visits WHERE diagnosis LIKE 'A81!' ESCAPE '!'`,
		`SELECT COUNT(*) FROM visits WHERE diagnosis LIKE 'A81' ESCAPE '!!'`,
		`SELECT CASE WHEN diagnosis LIKE 'A\' THEN 'a' ELSE 'b' END AS k, COUNT(*) FROM visits GROUP BY 1`,
		`SELECT SUM(CASE WHEN diagnosis LIKE 'A\' THEN 1 ELSE 0 END) FROM visits`,
	}
	for _, q := range refused {
		_, err := Rewrite(ds, q)
		pe, ok := pgerr.As(err)
		if !ok || pe.Code != "22025" {
			t.Errorf("%s\n  got %v, want 22025 at plan time", q, err)
		}
	}
	accepted := map[string]string{
		`SELECT COUNT(*) FROM visits WHERE diagnosis LIKE 'A81\\'`:                  `E'A81\\\\'`,
		`SELECT COUNT(*) FROM visits WHERE diagnosis LIKE 'A81!%' ESCAPE '!'`:       `E'A81\\%'`,
		`SELECT COUNT(*) FROM visits WHERE diagnosis LIKE 'A\81' ESCAPE ''`:         `E'A\\\\81'`,
		`SELECT COUNT(*) FROM visits WHERE diagnosis ILIKE 'x!_y%' ESCAPE '!'`:      `E'x\\_y%'`,
		`SELECT COUNT(*) FROM visits WHERE diagnosis LIKE 'a\b'`:                    `'ab'`,
		`SELECT COUNT(*) FROM visits WHERE diagnosis NOT LIKE 'a%!!' ESCAPE '!'`:    `'a%!'`,
		`SELECT COUNT(*) FILTER (WHERE diagnosis LIKE '%\%%') AS c FROM visits`:     `E'%\\%%'`,
		`SELECT COUNT(*) FROM visits WHERE diagnosis LIKE '%' ESCAPE '%' OR true`:   ``,
		`SELECT COUNT(*) FROM visits WHERE diagnosis LIKE 'A%%' ESCAPE '%' OR true`: `E'A\\%'`,
	}
	for q, want := range accepted {
		p, err := Rewrite(ds, q)
		if strings.Contains(q, `LIKE '%' ESCAPE '%'`) {
			// '%' escaping nothing: a dangling escape.
			if pe, ok := pgerr.As(err); !ok || pe.Code != "22025" {
				t.Errorf("%s\n  got %v, want 22025", q, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s\n  refused: %v", q, err)
			continue
		}
		if !strings.Contains(p.SQL, "LIKE "+want+")") {
			t.Errorf("%s\n  emitted SQL lacks LIKE %s:\n%s", q, want, p.SQL)
		}
	}
}
