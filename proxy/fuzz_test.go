package proxy

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
)

// FuzzBind: binding literals never panics, and with a literal for every
// $n the bound text lexes (pgsql.Lex) to the text's tokens with each $n
// replaced by literal tokens: apart from string and bit string constants
// (a literal next to one lexes as one constant with it, as in PostgreSQL), the
// tokens are the same, so a bound value cannot change the statement's
// structure.
func FuzzBind(f *testing.F) {
	for _, s := range []string{
		"SELECT $1", "SELECT '$1' -- $2\n$3", "$$a$$ $tag$x$tag$ $1", `E'\'' $1`, "/* /* */ $1 */ $2", "\"a\"\"$1\"", "$", "'", "e'", "1e", ".5e-", "x=$1::int", "$1$2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := maxParam(s)
		if n > 100 {
			return
		}
		lits := make([]string, n)
		for i := range lits {
			lits[i] = "'v'"
		}
		bound, err := bindLiterals(s, lits)
		if err != nil {
			// Only $0 (or a number too large) has no value.
			if pe, ok := pgerr.As(err); !ok || pe.Code != undefinedParameter {
				t.Fatalf("bindLiterals with maxParam literals: %v", err)
			}
			return
		}
		_ = fingerprint(s)
		before, err := pgsql.Lex(s)
		if err != nil {
			if bound != s {
				t.Fatalf("a text that does not lex was bound: %q", bound)
			}
			return
		}
		after, err := pgsql.Lex(bound)
		if err != nil {
			t.Fatalf("bound %q does not lex: %v", bound, err)
		}
		structure := func(toks []pgsql.Token) []pgsql.Token {
			var out []pgsql.Token
			for _, tok := range toks {
				// A literal next to a bit string constant (B''$1) lexes
				// as one constant with it, as in PostgreSQL, where ''
				// is a quote inside B'…' too: still one constant.
				if tok.Kind != pgsql.TokString && tok.Kind != pgsql.TokBitString && tok.Kind != pgsql.TokParam {
					out = append(out, pgsql.Token{Kind: tok.Kind, Val: tok.Val, Quoted: tok.Quoted})
				}
			}
			return out
		}
		if a, b := structure(before), structure(after); !slices.Equal(a, b) {
			t.Fatalf("bound %q: tokens other than strings %v, want %v", bound, b, a)
		}
	})
}

// FuzzStartupPacket: start-up packet parsing never panics and never
// accepts a packet over the limit.
func FuzzStartupPacket(f *testing.F) {
	f.Add([]byte{0, 0, 0, 8, 4, 210, 22, 47})
	f.Add(append([]byte{0, 0, 0, 23, 0, 3, 0, 0}, []byte("user\x00alice\x00\x00")...))
	f.Fuzz(func(t *testing.T, b []byte) {
		code, body, err := readStartupPacket(bytes.NewReader(b), 1000)
		if err != nil {
			return
		}
		if len(body)+8 > 1000 {
			t.Fatalf("accepted a packet of %d bytes over the limit", len(body)+8)
		}
		if code>>16 == 3 {
			_, _ = parseStartupParams(body)
		}
	})
}

// FuzzLiterals: decoding bound values never panics, and whatever is
// accepted as a literal scans as exactly one literal token (or a
// parenthesised number, or a key word), so it cannot change the
// statement's structure.
func FuzzLiterals(f *testing.F) {
	f.Add([]byte("x'; DROP"), int16(0), uint32(25))
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1}, int16(1), uint32(1700))
	f.Add([]byte("-5"), int16(0), uint32(20))
	f.Fuzz(func(t *testing.T, v []byte, format int16, oid uint32) {
		lit, err := literal(v, format, oid)
		if err != nil {
			return
		}
		toks, err := pgsql.Lex(lit)
		if err != nil {
			t.Fatalf("literal %q does not lex: %v", lit, err)
		}
		switch {
		case len(toks) == 1 && (toks[0].Kind == pgsql.TokString || toks[0].Kind == pgsql.TokNumber):
		case len(toks) == 1 && (lit == "NULL" || lit == "TRUE" || lit == "FALSE"):
		case strings.HasPrefix(lit, "(-") && strings.HasSuffix(lit, ")") && len(toks) == 4 && toks[2].Kind == pgsql.TokNumber:
		default:
			t.Fatalf("literal %q scans as %d tokens", lit, len(toks))
		}
	})
}
