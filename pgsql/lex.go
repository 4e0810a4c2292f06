package pgsql

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TokKind is the lexical class of a [Token].
type TokKind int

// Token kinds.
const (
	TokIdent     TokKind = iota // identifier or keyword; Val is folded (unquoted) or exact (quoted)
	TokNumber                   // numeric constant; Val is the source text
	TokString                   // string constant; Val is the decoded value
	TokBitString                // B'…' or X'…'; Val is the source text
	TokParam                    // $n placeholder; Val is the digits
	TokOp                       // operator; Val is the operator text ("!=" is reported as is)
	TokPunct                    // one of ( ) [ ] , ; . :: :
)

// Token is one lexeme of a PostgreSQL statement.
type Token struct {
	Kind   TokKind
	Val    string // see the TokKind constants for what Val holds
	Quoted bool   // TokIdent: written "quoted"; TokString: E'…' or $$…$$ form is irrelevant here
	Pos    int    // byte offset of the first byte in the source
	End    int    // byte offset just after the last byte
}

// Is reports whether t is the unquoted keyword kw (lower case).
func (t Token) Is(kw string) bool { return t.Kind == TokIdent && !t.Quoted && t.Val == kw }

// IsPunct reports whether t is the punctuation p.
func (t Token) IsPunct(p string) bool { return t.Kind == TokPunct && t.Val == p }

// IsOp reports whether t is the operator op.
func (t Token) IsOp(op string) bool { return t.Kind == TokOp && t.Val == op }

// CharPos converts a byte offset of src to a 1-based character position, as
// PostgreSQL reports error positions.
func CharPos(src string, off int) int {
	if off > len(src) {
		off = len(src)
	}
	if off < 0 {
		off = 0
	}
	return utf8.RuneCountInString(src[:off]) + 1
}

// SyntaxErr is a 42601 syntax error at byte offset off of src (reported
// as a character position, [CharPos]).
func SyntaxErr(src string, off int, format string, args ...any) *pgerr.Error {
	return pgerr.New(pgerr.SyntaxError, format, args...).WithPosition(CharPos(src, off))
}

// lexer is a PostgreSQL lexer following the rules of PostgreSQL's scan.l
// (https://www.postgresql.org/docs/15/sql-syntax-lexical.html). It is
// deliberately faithful to PostgreSQL rather than to MySQL: statements routed
// to the shadow catalog run on a real PostgreSQL, and Split/Classify must see
// the same statement boundaries and identifiers it will see.
type lexer struct {
	src  string
	i    int
	toks []Token
}

// Lex tokenizes src. Comments and whitespace are dropped.
func Lex(src string) ([]Token, error) {
	// About one token per 4 bytes of a typical query: one allocation
	// instead of a series of growths.
	return lexN(src, -1, len(src)/4+8)
}

// LexN is Lex of src's first n tokens (fewer where src ends first): the
// work is that of those tokens, not of the rest of src, which is not
// read and may hold anything (the planner reads a call's name and the
// words after it this way, once per call of a statement).
func LexN(src string, n int) ([]Token, error) {
	return lexN(src, n, n)
}

// lexN lexes at most n tokens (all when n < 0) into a slice of capacity
// size.
func lexN(src string, n, size int) ([]Token, error) {
	l := &lexer{src: src, toks: make([]Token, 0, size)}
	for n < 0 || len(l.toks) < n {
		if err := l.skipSpace(); err != nil {
			return nil, err
		}
		if l.i >= len(src) {
			break
		}
		if err := l.next(); err != nil {
			return nil, err
		}
	}
	return l.toks, nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func isIdentCont(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9' || c == '$'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// opChars are PostgreSQL's operator characters.
const opChars = "+-*/<>=~!@#%^&|`?"

func isOpChar(c byte) bool { return strings.IndexByte(opChars, c) >= 0 }

// skipSpace skips whitespace and comments (-- to end of line, nested /* */).
func (l *lexer) skipSpace() error {
	src := l.src
	for l.i < len(src) {
		c := src[l.i]
		switch {
		case isSpace(c):
			l.i++
		case c == '-' && l.i+1 < len(src) && src[l.i+1] == '-':
			for l.i < len(src) && src[l.i] != '\n' && src[l.i] != '\r' {
				l.i++
			}
		case c == '/' && l.i+1 < len(src) && src[l.i+1] == '*':
			if l.i+2 < len(src) && src[l.i+2] == '!' {
				return SyntaxErr(src, l.i, "MySQL executable comments (/*! … */) are not PostgreSQL syntax").
					WithHint("remove the comment; PostgreSQL comments are -- … or /* … */")
			}
			start := l.i
			depth := 0
			for {
				if l.i+1 >= len(src) {
					return SyntaxErr(src, start, "unterminated /* comment").
						WithHint("close the comment with */ (PostgreSQL comments nest)")
				}
				if src[l.i] == '/' && src[l.i+1] == '*' {
					depth++
					l.i += 2
					continue
				}
				if src[l.i] == '*' && src[l.i+1] == '/' {
					depth--
					l.i += 2
					if depth == 0 {
						break
					}
					continue
				}
				l.i++
			}
		default:
			return nil
		}
	}
	return nil
}

func (l *lexer) emit(kind TokKind, val string, start int, quoted bool) {
	l.toks = append(l.toks, Token{Kind: kind, Val: val, Quoted: quoted, Pos: start, End: l.i})
}

func (l *lexer) next() error {
	src := l.src
	start := l.i
	c := src[l.i]
	var peek byte
	if l.i+1 < len(src) {
		peek = src[l.i+1]
	}
	switch {
	case c == '\'':
		s, err := l.quoted(false)
		if err != nil {
			return err
		}
		l.emit(TokString, s, start, false)
		return nil
	case (c == 'e' || c == 'E') && peek == '\'':
		l.i++
		s, err := l.quoted(true)
		if err != nil {
			return err
		}
		l.emit(TokString, s, start, false)
		return nil
	case (c == 'n' || c == 'N') && peek == '\'':
		// National character string: the same as a plain string.
		l.i++
		s, err := l.quoted(false)
		if err != nil {
			return err
		}
		l.emit(TokString, s, start, false)
		return nil
	case (c == 'b' || c == 'B' || c == 'x' || c == 'X') && peek == '\'':
		l.i++
		if _, err := l.quoted(false); err != nil {
			return err
		}
		l.emit(TokBitString, src[start:l.i], start, false)
		return nil
	case (c == 'u' || c == 'U') && peek == '&' && l.i+2 < len(src) && (src[l.i+2] == '\'' || src[l.i+2] == '"'):
		return pgerr.New(pgerr.FeatureNotSupported, "Unicode escape strings (U&'…') are not supported").
			WithPosition(CharPos(src, start)).
			WithHint("write the characters directly in a plain '…' string")
	case c == '"':
		s, err := l.quotedIdent()
		if err != nil {
			return err
		}
		l.emit(TokIdent, s, start, true)
		return nil
	case c == '`':
		return SyntaxErr(src, start, "backquoted identifiers are MySQL syntax").
			WithHint("quote identifiers with double quotes: \"name\"")
	case c == '$':
		if isDigit(peek) {
			l.i++
			for l.i < len(src) && isDigit(src[l.i]) {
				l.i++
			}
			if l.i < len(src) && isIdentCont(src[l.i]) {
				return SyntaxErr(src, start, "trailing junk after parameter")
			}
			l.emit(TokParam, src[start+1:l.i], start, false)
			return nil
		}
		if tag, ok := l.dollarTag(l.i); ok {
			body := l.i + len(tag)
			j := strings.Index(src[body:], tag)
			if j < 0 {
				return SyntaxErr(src, start, "unterminated dollar-quoted string").
					WithHint("close the string with %s", tag)
			}
			val := src[body : body+j]
			if strings.IndexByte(val, 0) >= 0 || !utf8.ValidString(val) {
				return SyntaxErr(src, start, "invalid byte sequence for encoding \"UTF8\" in string")
			}
			l.i = body + j + len(tag)
			l.emit(TokString, val, start, false)
			return nil
		}
		return SyntaxErr(src, start, "syntax error at or near \"$\"")
	case isIdentStart(c):
		for l.i < len(src) && isIdentCont(src[l.i]) {
			l.i++
		}
		word := src[start:l.i]
		l.emit(TokIdent, foldIdent(word), start, false)
		return nil
	case isDigit(c) || c == '.' && isDigit(peek):
		return l.number()
	case c == ':' && peek == ':':
		l.i += 2
		l.emit(TokPunct, "::", start, false)
		return nil
	case c == ':' && peek == '=':
		l.i += 2
		l.emit(TokOp, ":=", start, false)
		return nil
	case strings.IndexByte("()[],;.:", c) >= 0:
		l.i++
		l.emit(TokPunct, string(c), start, false)
		return nil
	case isOpChar(c):
		return l.operator()
	}
	r, _ := utf8.DecodeRuneInString(src[l.i:])
	return SyntaxErr(src, start, "syntax error at or near %q", string(r))
}

// foldIdent folds an unquoted identifier to lower case, as PostgreSQL does
// for ASCII letters (non-ASCII bytes are kept: PostgreSQL's downcasing of
// them depends on the server encoding and locale).
func foldIdent(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// dollarTag returns the $tag$ starting at i, if any.
func (l *lexer) dollarTag(i int) (string, bool) {
	src := l.src
	j := i + 1
	if j < len(src) && src[j] == '$' {
		return "$$", true
	}
	if j >= len(src) || !isIdentStart(src[j]) {
		return "", false
	}
	for j < len(src) && isIdentCont(src[j]) && src[j] != '$' {
		j++
	}
	if j < len(src) && src[j] == '$' {
		return src[i : j+1], true
	}
	return "", false
}

// quoted reads a '…' string at l.i (” is a quote). With escapes, backslash
// escapes are decoded as in PostgreSQL's E'…' strings. Adjacent strings
// separated only by whitespace containing a newline are concatenated, as the
// SQL standard (and PostgreSQL) require.
func (l *lexer) quoted(escapes bool) (string, error) {
	src := l.src
	start := l.i
	var b strings.Builder
	for {
		l.i++ // opening quote
		for {
			if l.i >= len(src) {
				return "", SyntaxErr(src, start, "unterminated quoted string").
					WithHint("close the string with '; a quote inside a string is written ''")
			}
			c := src[l.i]
			if c == '\'' {
				if l.i+1 < len(src) && src[l.i+1] == '\'' {
					b.WriteByte('\'')
					l.i += 2
					continue
				}
				l.i++
				break
			}
			if c == '\\' && escapes {
				if err := l.escape(&b); err != nil {
					return "", err
				}
				continue
			}
			if c == 0 {
				return "", SyntaxErr(src, l.i, "invalid NUL byte in string")
			}
			b.WriteByte(c)
			l.i++
		}
		// Continuation: whitespace with at least one newline, then a quote.
		j, newline := l.i, false
		for j < len(src) && isSpace(src[j]) {
			if src[j] == '\n' || src[j] == '\r' {
				newline = true
			}
			j++
		}
		if newline && j < len(src) && src[j] == '\'' {
			l.i = j
			continue
		}
		s := b.String()
		if !utf8.ValidString(s) {
			return "", SyntaxErr(src, start, "invalid byte sequence for encoding \"UTF8\" in string")
		}
		return s, nil
	}
}

// escape decodes one backslash escape of an E'…' string at l.i.
func (l *lexer) escape(b *strings.Builder) error {
	src := l.src
	start := l.i
	l.i++
	if l.i >= len(src) {
		return SyntaxErr(src, start, "unterminated quoted string")
	}
	c := src[l.i]
	l.i++
	switch c {
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case '0', '1', '2', '3', '4', '5', '6', '7':
		v := int(c - '0')
		for k := 0; k < 2 && l.i < len(src) && src[l.i] >= '0' && src[l.i] <= '7'; k++ {
			v = v*8 + int(src[l.i]-'0')
			l.i++
		}
		if v == 0 || v > 0xff {
			return SyntaxErr(src, start, "invalid octal escape in string")
		}
		b.WriteByte(byte(v))
	case 'x':
		j := l.i
		for j < len(src) && j < l.i+2 && isHex(src[j]) {
			j++
		}
		if j == l.i {
			b.WriteByte('x')
			return nil
		}
		v, _ := strconv.ParseUint(src[l.i:j], 16, 8)
		if v == 0 {
			return SyntaxErr(src, start, "invalid hexadecimal escape in string")
		}
		b.WriteByte(byte(v))
		l.i = j
	case 'u', 'U':
		n := 4
		if c == 'U' {
			n = 8
		}
		if l.i+n > len(src) {
			return SyntaxErr(src, start, "invalid Unicode escape").WithHint("Unicode escapes must be \\uXXXX or \\UXXXXXXXX")
		}
		for k := 0; k < n; k++ {
			if !isHex(src[l.i+k]) {
				return SyntaxErr(src, start, "invalid Unicode escape").WithHint("Unicode escapes must be \\uXXXX or \\UXXXXXXXX")
			}
		}
		v, _ := strconv.ParseUint(src[l.i:l.i+n], 16, 32)
		if v == 0 || v > utf8.MaxRune || v >= 0xd800 && v <= 0xdfff {
			return SyntaxErr(src, start, "invalid Unicode escape value")
		}
		b.WriteRune(rune(v))
		l.i += n
	default:
		b.WriteByte(c)
	}
	return nil
}

func isHex(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// quotedIdent reads a "…" identifier ("" is a quote).
func (l *lexer) quotedIdent() (string, error) {
	src := l.src
	start := l.i
	l.i++
	var b strings.Builder
	for {
		if l.i >= len(src) {
			return "", SyntaxErr(src, start, "unterminated quoted identifier").
				WithHint("close the identifier with \"")
		}
		c := src[l.i]
		if c == '"' {
			if l.i+1 < len(src) && src[l.i+1] == '"' {
				b.WriteByte('"')
				l.i += 2
				continue
			}
			l.i++
			break
		}
		if c == 0 {
			return "", SyntaxErr(src, l.i, "invalid NUL byte in identifier")
		}
		b.WriteByte(c)
		l.i++
	}
	if b.Len() == 0 {
		return "", SyntaxErr(src, start, "zero-length delimited identifier")
	}
	return b.String(), nil
}

// number reads a numeric constant: digits [. digits] [e[+-]digits], or
// .digits…. Trailing identifier characters are an error (as in PostgreSQL
// 15+ for junk after numbers; older versions split them into an alias).
func (l *lexer) number() error {
	src := l.src
	start := l.i
	for l.i < len(src) && isDigit(src[l.i]) {
		l.i++
	}
	if l.i < len(src) && src[l.i] == '.' && !(l.i+1 < len(src) && src[l.i+1] == '.') {
		l.i++
		for l.i < len(src) && isDigit(src[l.i]) {
			l.i++
		}
	}
	if l.i < len(src) && (src[l.i] == 'e' || src[l.i] == 'E') {
		j := l.i + 1
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if j < len(src) && isDigit(src[j]) {
			for j < len(src) && isDigit(src[j]) {
				j++
			}
			l.i = j
		}
	}
	if l.i < len(src) && isIdentCont(src[l.i]) {
		return SyntaxErr(src, start, "trailing junk after numeric literal at or near %q", src[start:min(l.i+1, len(src))]).
			WithHint("separate the number from the following word with a space")
	}
	l.emit(TokNumber, src[start:l.i], start, false)
	return nil
}

// operator reads an operator following PostgreSQL's rules: a maximal run
// of operator characters, cut before -- or /*, and a trailing + or - is
// dropped unless the operator contains one of ~ ! @ # % ^ & | ` ?.
func (l *lexer) operator() error {
	src := l.src
	start := l.i
	j := l.i
	for j < len(src) && isOpChar(src[j]) {
		if j > start && (src[j] == '-' && j+1 < len(src) && src[j+1] == '-' ||
			src[j] == '/' && j+1 < len(src) && src[j+1] == '*') {
			break
		}
		j++
	}
	op := src[start:j]
	if len(op) > 1 && !strings.ContainsAny(op, "~!@#%^&|`?") {
		for len(op) > 1 && (op[len(op)-1] == '+' || op[len(op)-1] == '-') {
			op = op[:len(op)-1]
		}
	}
	if strings.IndexByte(op, '`') >= 0 {
		return SyntaxErr(src, start+strings.IndexByte(op, '`'), "backquoted identifiers are MySQL syntax").
			WithHint("quote identifiers with double quotes: \"name\"")
	}
	if op == "#" {
		return SyntaxErr(src, start, "# is not a comment in PostgreSQL").
			WithHint("PostgreSQL comments start with -- or are written /* … */")
	}
	l.i = start + len(op)
	l.emit(TokOp, op, start, false)
	return nil
}
