package pgsql

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// TestParenMatches: the one-pass matching of parentheses that replaced a
// scan to the end of the statement per WITH name (issue 34's attack:
// "with a(" repeated made Classify quadratic, 7.7 s for 256 KiB on every
// route before any limit; BenchmarkClassify_WithLists measures it now)
// finds the same ")" as counting depth from each "(".
func TestParenMatches(t *testing.T) {
	for _, q := range []string{
		"WITH a(x, y) AS (SELECT (1), ((2))) SELECT * FROM a",
		"SELECT ((1) + (2)) ) ( (",
		"with a( with a( with a( ) ) with a(",
	} {
		toks, err := Lex(q)
		if err != nil {
			t.Fatal(err)
		}
		m := parenMatches(toks)
		for i, tk := range toks {
			want := -1
			if tk.IsPunct("(") {
				d := 0
				for j := i; j < len(toks); j++ {
					if toks[j].IsPunct("(") {
						d++
					} else if toks[j].IsPunct(")") {
						if d--; d == 0 {
							want = j
							break
						}
					}
				}
			}
			if m[i] != want {
				t.Errorf("%q: token %d matches %d, want %d", q, i, m[i], want)
			}
		}
	}
}

// BenchmarkClassify_WithLists classifies 128 KiB of "with a(" (issue 34's
// attack, 2 s before the fix).
func BenchmarkClassify_WithLists(b *testing.B) {
	ds, err := policy.Load(hospitalPolicy)
	if err != nil {
		b.Fatal(err)
	}
	q := "SELECT 1 FROM pg_class WHERE " + strings.Repeat("with a(", (128<<10)/7)
	for b.Loop() {
		Classify(ds, q)
	}
}

// TestAttack34_ExplainUnclosedOptionsPanics: RefuseWrites skips EXPLAIN's
// "( options )" by looking for ")"; when there is none, j ends one past
// the tokens and toks[j:] panics (slice bounds out of range). Classify
// runs on every statement: "EXPLAIN (" from any analyst panics the
// session goroutine (Server.handle recovers it, logs a panic with its
// stack and closes the connection with XX000 instead of 42601).
func TestAttack34_ExplainUnclosedOptionsPanics(t *testing.T) {
	ds, err := policy.Load(hospitalPolicy)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"EXPLAIN (", "EXPLAIN (verbose", "EXPLAIN (costs off SELECT 1"} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("Classify(%q) panicked: %v", q, p)
				}
			}()
			Classify(ds, q)
		}()
	}
}
