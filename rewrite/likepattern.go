// It builds SQL fragments of the plan that the emitter sends upstream
// (pgemit/doc.go).

package rewrite

import (
	"github.com/dpproxy/dpproxy/policy"
	"strings"
	"unicode/utf8"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
)

// LIKE and ILIKE patterns are read here, at plan time, exactly as
// PostgreSQL reads them (src/backend/utils/adt/like_match.c, MatchText):
//
//   - '%' matches any run of characters, '_' any one character;
//   - the escape character (by default '\'; ESCAPE 'c' sets another one,
//     ESCAPE ” none) makes the next character literal, whatever it is,
//     the escape character itself included;
//   - an escape character with nothing after it raises 22025 "LIKE pattern
//     must not end with escape character" — but only when the matcher
//     reaches it, that is, only for a row whose value matches the pattern
//     up to that point. That is a data-dependent error: one person's row
//     decides whether the query fails (issue 14's exact-row oracle).
//
// So a pattern with a dangling escape is refused here, before any budget
// is charged, with the same SQLSTATE; every other pattern is rewritten in a
// canonical form that uses the default escape '\' and escapes exactly the
// characters that must be literal. The emitted pattern therefore has no
// dangling escape by construction, whatever ESCAPE the analyst wrote, and
// matches the same strings as the analyst's pattern.

// likePattern is a parsed LIKE pattern: literal runs and wildcards.
type likePattern []likeElem

type likeElem struct {
	wild rune   // '%' or '_' for a wildcard, 0 for a literal
	lit  string // the literal character (wild == 0)
}

// parseLikePattern reads pattern with the escape character esc (0: none).
// It fails with 22025 when the pattern ends with an unescaped escape
// character and 22021 when the pattern is not valid UTF-8.
func parseLikePattern(pattern string, esc rune) (likePattern, error) {
	if !utf8.ValidString(pattern) {
		return nil, pgerr.New("22021", "invalid byte sequence in LIKE pattern").
			WithHint("write the pattern as valid UTF-8 text")
	}
	var out likePattern
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case esc != 0 && c == esc:
			if i+1 == len(rs) {
				return nil, pgerr.New("22025", "LIKE pattern must not end with escape character").
					WithHint(`to match a literal %c at the end, write it twice (%c%c); the query was not run and nothing was charged`, esc, esc, esc)
			}
			i++
			out = append(out, likeElem{lit: string(rs[i])})
		case c == '%' || c == '_':
			out = append(out, likeElem{wild: c})
		default:
			out = append(out, likeElem{lit: string(c)})
		}
	}
	return out, nil
}

// String returns the pattern in canonical form for the default escape
// character '\': every literal '%', '_' and '\' is escaped, nothing else
// is, and the result never ends with a lone '\'.
func (p likePattern) String() string {
	var b strings.Builder
	for _, e := range p {
		if e.wild != 0 {
			b.WriteRune(e.wild)
			continue
		}
		switch e.lit {
		case "%", "_", `\`:
			b.WriteByte('\\')
		}
		b.WriteString(e.lit)
	}
	return b.String()
}

// likeEscape returns the escape character of an explicit ESCAPE string,
// as PostgreSQL's like_escape does: ” means no escape character; more
// than one character is 22025 "invalid escape string".
func likeEscape(s string) (rune, error) {
	switch utf8.RuneCountInString(s) {
	case 0:
		return 0, nil
	case 1:
		r, _ := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError {
			break
		}
		return r, nil
	}
	return 0, pgerr.New("22025", "invalid escape string").
		WithHint("the ESCAPE string must be one character (or '' for none)")
}

// likeEscape folds "LIKE 'pattern' ESCAPE 'c'" (or ILIKE, NOT LIKE) into
// "LIKE 'canonical pattern'": the pattern literal just added is read with
// the escape character c and rewritten for the default escape, so the
// planner (pred.go) and the emitted SQL only ever see default-escape
// patterns. esc is the ESCAPE keyword, str its string token.
func (n *normalized) likeEscape(src string, esc, str pgsql.Token) error {
	k := len(n.pieces)
	if k < 2 || n.pieces[k-1].lit < 0 {
		return pgerr.New(pgerr.SyntaxError, "ESCAPE must follow a LIKE or ILIKE pattern").
			WithPosition(pgsql.CharPos(src, esc.Pos)).WithHint("write col LIKE 'pattern' ESCAPE '!'")
	}
	if w := strings.ToLower(n.pieces[k-2].text); w != "like" && w != "ilike" {
		return pgerr.New(pgerr.SyntaxError, "ESCAPE must follow a LIKE or ILIKE pattern").
			WithPosition(pgsql.CharPos(src, esc.Pos)).WithHint("write col LIKE 'pattern' ESCAPE '!'")
	}
	l := &n.lits[n.pieces[k-1].lit]
	if l.kind != litString || l.typ != "" && l.typ != policy.TypeText {
		return pgerr.New(pgerr.FeatureNotSupported, "the LIKE pattern must be a string literal").
			WithPosition(pgsql.CharPos(src, l.pos)).WithHint("write col LIKE 'prefix%%' ESCAPE '!'")
	}
	c, err := likeEscape(str.Val)
	if err == nil {
		var p likePattern
		if p, err = parseLikePattern(l.val, c); err == nil {
			l.val = p.String()
			return nil
		}
	}
	if pe, ok := pgerr.As(err); ok {
		return pe.WithPosition(pgsql.CharPos(src, str.Pos))
	}
	return err
}
