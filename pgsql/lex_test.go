package pgsql

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// render prints tokens compactly: kind:value.
func render(toks []Token) string {
	var parts []string
	for _, t := range toks {
		k := map[TokKind]string{TokIdent: "id", TokNumber: "num", TokString: "str", TokBitString: "bits", TokParam: "param", TokOp: "op", TokPunct: "p"}[t.Kind]
		if t.Kind == TokIdent && t.Quoted {
			k = "qid"
		}
		parts = append(parts, k+":"+t.Val)
	}
	return strings.Join(parts, " ")
}

func TestLex(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"folding", `SELECT Department FROM "Visits"`, `id:select id:department id:from qid:Visits`},
		{"quoted ident escapes", `"a""b"`, `qid:a"b`},
		{"string escapes", `'it''s'`, `str:it's`},
		{"E string", `E'a\nb\\c\'d\x41\101\u00e9'`, "str:a\nb\\c'dAAé"},
		{"e string lower", `e'\t'`, "str:\t"},
		{"standard string keeps backslash", `'a\nb'`, `str:a\nb`},
		{"dollar", `$$it's $x$$`, `str:it's $x`},
		{"dollar tag", `$fn$a $$ b$fn$`, `str:a $$ b`},
		{"placeholder", `$1 + $12`, `param:1 op:+ param:12`},
		{"line comment", "SELECT 1 -- hi ; there\n, 2", `id:select num:1 p:, num:2`},
		{"nested comment", "SELECT /* a /* b */ c */ 1", `id:select num:1`},
		{"cast", `x::int`, `id:x p::: id:int`},
		{"operators", `a<>b != c >= d <= e || f ~ g ->> 'k' #>> '{a}'`, `id:a op:<> id:b op:!= id:c op:>= id:d op:<= id:e op:|| id:f op:~ id:g op:->> str:k op:#>> str:{a}`},
		{"minus number", `a*-5`, `id:a op:* op:- num:5`},
		{"op then comment", `a+--x` + "\n" + `b`, `id:a op:+ id:b`},
		{"numbers", `1 1.5 .5 1e10 2.5E-3 7.`, `num:1 num:1.5 num:.5 num:1e10 num:2.5E-3 num:7.`},
		{"semicolons", `a;b`, `id:a p:; id:b`},
		{"bit strings", `B'101' X'ff'`, `bits:B'101' bits:X'ff'`},
		{"national", `N'x'`, `str:x`},
		{"continued string", "'a'\n  'b'", `str:ab`},
		{"not continued on one line", "'a' 'b'", `str:a str:b`},
		{"identifier with dollar", `a$b`, `id:a$b`},
		{"brackets", `a[1]`, `id:a p:[ num:1 p:]`},
		{"unicode ident", `café`, `id:café`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			toks, err := Lex(tc.in)
			if err != nil {
				t.Fatalf("lex(%q) error %v", tc.in, err)
			}
			if got := render(toks); got != tc.want {
				t.Errorf("lex(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestLex_Errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, code string
		pos            int
	}{
		{"backtick", "SELECT `a`", pgerr.SyntaxError, 8},
		{"hash comment", "SELECT 1 # c", pgerr.SyntaxError, 10},
		{"mysql comment", "SELECT /*! STRAIGHT_JOIN */ 1", pgerr.SyntaxError, 8},
		{"unterminated comment", "SELECT /* /* */ 1", pgerr.SyntaxError, 8},
		{"unterminated string", "SELECT 'abc", pgerr.SyntaxError, 8},
		{"unterminated ident", `SELECT "abc`, pgerr.SyntaxError, 8},
		{"empty ident", `SELECT ""`, pgerr.SyntaxError, 8},
		{"unterminated dollar", `SELECT $a$ x`, pgerr.SyntaxError, 8},
		{"junk after number", `SELECT 123abc`, pgerr.SyntaxError, 8},
		{"position counts characters", `SELECT 'é', ` + "`x`", pgerr.SyntaxError, 13},
		{"bad unicode escape", `E'\u12'`, pgerr.SyntaxError, 3},
		{"nul escape", `E'\0'`, pgerr.SyntaxError, 3},
		{"unicode string", `U&'x'`, pgerr.FeatureNotSupported, 1},
		{"lone dollar", `SELECT $`, pgerr.SyntaxError, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Lex(tc.in)
			pe, ok := pgerr.As(err)
			if !ok {
				t.Fatalf("lex(%q) error = %v, want a *pgerr.Error", tc.in, err)
			}
			if pe.Code != tc.code || pe.Position != tc.pos {
				t.Errorf("lex(%q) = %s at %d, want %s at %d (%v)", tc.in, pe.Code, pe.Position, tc.code, tc.pos, pe)
			}
			if pe.Code == pgerr.SyntaxError && strings.Contains(tc.name, "mysql") && pe.Hint == "" {
				t.Errorf("lex(%q): no hint", tc.in)
			}
		})
	}
}

func FuzzLex(f *testing.F) {
	for _, s := range []string{
		"SELECT 1", `E'\x41\'\\'`, "$$a$$", "$t$ $ $t$", "/* /* */ */", "--x\n1", "'a'\n'b'",
		`"a""b"`, "a::int", "1e", "1.e5", ".5", "a->>'b'", "$1", "U&'x'", "`x`", "#", "/*!", "'",
		"\x00", "\xff\xfe", "é", "1..2", "a;;b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks, err := Lex(s)
		if err != nil {
			if _, ok := pgerr.As(err); !ok {
				t.Fatalf("lex(%q) error %v is not a *pgerr.Error", s, err)
			}
			return
		}
		last := 0
		for _, tk := range toks {
			if tk.Pos < last || tk.End <= tk.Pos || tk.End > len(s) {
				t.Fatalf("lex(%q): bad token span %d..%d after %d", s, tk.Pos, tk.End, last)
			}
			last = tk.End
		}
		// Split must agree with the lexer and never panic.
		stmts, err := Split(s)
		if err != nil {
			t.Fatalf("Split(%q) failed where lex succeeded: %v", s, err)
		}
		if len(stmts) == 0 {
			t.Fatalf("Split(%q) returned no statement", s)
		}
		_ = fmt.Sprint(stmts)
		for _, st := range stmts {
			r, err := Classify(nil, st)
			if r == RouteRefuse {
				if _, ok := pgerr.As(err); !ok {
					t.Fatalf("Classify(%q) refused without a *pgerr.Error: %v", st, err)
				}
			}
			if r == RouteSession {
				if _, err := ParseSession(st); err != nil {
					if _, ok := pgerr.As(err); !ok {
						t.Fatalf("ParseSession(%q) error %v is not a *pgerr.Error", st, err)
					}
				}
			}
		}
	})
}

// TestLexN: the first n tokens are Lex's, and what follows them is not
// read (an unterminated comment after them is no error).
func TestLexN(t *testing.T) {
	t.Parallel()
	src := `STDDEV (cost) , "x" /* never closed`
	for n, want := range []string{"", "id:stddev", "id:stddev p:(", "id:stddev p:( id:cost p:) p:, qid:x"} {
		k := n
		if n == 3 {
			k = 6
		}
		got, err := LexN(src, k)
		if err != nil || render(got) != want {
			t.Errorf("LexN(%q, %d) = %q, %v; want %q", src, k, render(got), err, want)
		}
	}
	if _, err := LexN(src, 7); err == nil {
		t.Errorf("LexN(%q, 7) read past the sixth token without the comment's error", src)
	}
	if _, err := Lex(src); err == nil {
		t.Errorf("Lex(%q): no error for the unterminated comment", src)
	}
	full, _ := Lex("a b c")
	if got, _ := LexN("a b c", 10); render(got) != render(full) {
		t.Errorf("LexN past the end = %q, want Lex's %q", render(got), render(full))
	}
}
