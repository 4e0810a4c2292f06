package dpplan

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// u8len is the bytes of s's first character (NextChar for UTF-8), 1 for
// an invalid byte.
func u8len(s string) int {
	_, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return 1
	}
	return n
}

// matchSteps is PostgreSQL's MatchText (like_match.c, UTF-8 texts, the
// default escape; single-byte texts step alike) counting its steps: an
// iteration of any of its loops and a call. It returns the result (1
// true, 0 false, -1 abort). Review 103 generalised attack round 101's
// single-byte port to step a character after a '%' and for a '_'.
func matchSteps(t, p string, steps *int) int {
	*steps++
	if p == "%" {
		return 1
	}
	for len(t) > 0 && len(p) > 0 {
		*steps++
		switch {
		case p[0] == '\\':
			p = p[1:]
			if t[0] != p[0] {
				return 0
			}
		case p[0] == '%':
			p = p[1:]
			for len(p) > 0 {
				*steps++
				if p[0] == '%' {
					p = p[1:]
				} else if p[0] == '_' {
					if len(t) == 0 {
						return -1
					}
					t, p = t[u8len(t):], p[1:]
				} else {
					break
				}
			}
			if len(p) == 0 {
				return 1
			}
			first := p[0]
			if first == '\\' {
				first = p[1]
			}
			for len(t) > 0 {
				*steps++
				if t[0] == first {
					if m := matchSteps(t, p, steps); m != 0 {
						return m
					}
				}
				t = t[u8len(t):]
			}
			return -1
		case p[0] == '_':
			t, p = t[u8len(t):], p[1:]
			continue
		case p[0] != t[0]:
			return 0
		}
		t, p = t[1:], p[1:]
	}
	if len(t) > 0 {
		return 0
	}
	for len(p) > 0 && p[0] == '%' {
		p = p[1:]
	}
	if len(p) == 0 {
		return 1
	}
	return -1
}

// TestAttack101_LikeStepsBound checks the bound of like.go against
// PostgreSQL's matcher on random patterns and values of small alphabets
// (where partial matches abound) and on the attack's shapes: the steps
// MatchText takes on a value of n bytes are at most the pattern's length
// (its lockstep part) plus likeSteps(pattern, n), whatever the value.
func TestAttack101_LikeStepsBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 1))
	randString := func(alphabet string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	check := func(pattern, text string) {
		t.Helper()
		steps := 0
		matchSteps(text, pattern, &steps)
		bound := float64(len(pattern)) + likeSteps(pattern, len(text), false) + 2
		if float64(steps) > bound {
			t.Fatalf("pattern %q on %q (%d bytes): %d steps, bound %.1f", pattern, text, len(text), steps, bound)
		}
	}
	attack := "% " + strings.Repeat("_", 220) + "Q"
	check(attack, strings.Repeat(" ", 4096))
	check("%"+strings.Repeat("a", 63)+"Q%", strings.Repeat("a", 256))
	check("%aQ%", strings.Repeat("a", 256))
	for range 20000 {
		pat := randString("ab_%", 1+rng.IntN(12))
		if strings.HasSuffix(pat, `\`) {
			continue
		}
		check(pat, randString("ab", rng.IntN(200)))
		check(pat, strings.Repeat("a", rng.IntN(200)))
	}
	// The attack's pattern is refused now (over maxWhereWork's 1,024
	// units), and '%cancer%' weighs about 1 + 5.5·256/32 units.
	if w := PredWork(PredLike{Col: `"d"`, Pattern: "'" + attack + "'"}); w <= 1024 {
		t.Errorf("PredWork of the attack's LIKE = %d, want over 1024 (refused)", w)
	}
	if w := PredWork(PredLike{Col: `"d"`, Pattern: "'%cancer%'"}); w < 35 || w > 55 {
		t.Errorf("PredWork of LIKE '%%cancer%%' = %d, want about 45", w)
	}
	if w := PredWork(PredLike{Col: `"d"`, Pattern: "'J4%'"}); w != 1 {
		t.Errorf("PredWork of a prefix LIKE 'J4%%' = %d, want 1 (unchanged)", w)
	}
}
