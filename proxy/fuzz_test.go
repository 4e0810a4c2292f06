package proxy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// FuzzScanSQL: the lexer never panics and its tokens concatenate to the
// input; binding literals never panics.
func FuzzScanSQL(f *testing.F) {
	for _, s := range []string{
		"SELECT $1", "SELECT '$1' -- $2\n$3", "$$a$$ $tag$x$tag$ $1", `E'\'' $1`, "/* /* */ $1 */ $2", "\"a\"\"$1\"", "$", "'", "e'", "1e", ".5e-",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b strings.Builder
		scanSQL(s, func(tok sqlToken) {
			if s[tok.pos:tok.pos+len(tok.text)] != tok.text {
				t.Fatalf("token %q at %d does not match the input", tok.text, tok.pos)
			}
			b.WriteString(tok.text)
		})
		if b.String() != s {
			t.Fatalf("tokens concatenate to %q, want %q", b.String(), s)
		}
		n := maxParam(s)
		if n > 100 {
			return
		}
		lits := make([]string, n)
		for i := range lits {
			lits[i] = "0"
		}
		if _, err := bindLiterals(s, lits); err != nil {
			// Only $0 (or a number too large) has no value.
			if pe, ok := pgerr.As(err); !ok || pe.Code != undefinedParameter {
				t.Fatalf("bindLiterals with maxParam literals: %v", err)
			}
		}
		_ = fingerprint(s)
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
		var toks []sqlToken
		scanSQL(lit, func(tok sqlToken) { toks = append(toks, tok) })
		switch {
		case len(toks) == 1 && (toks[0].kind == tokString || toks[0].kind == tokNumber):
		case len(toks) == 1 && (lit == "NULL" || lit == "TRUE" || lit == "FALSE"):
		case strings.HasPrefix(lit, "(-") && strings.HasSuffix(lit, ")") && len(toks) == 4 && toks[2].kind == tokNumber:
		default:
			t.Fatalf("literal %q scans as %d tokens", lit, len(toks))
		}
	})
}
