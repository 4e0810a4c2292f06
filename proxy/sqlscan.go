package proxy

import (
	"strings"
)

// A small lexer for PostgreSQL statement text: enough to find literals,
// comments and $n placeholders outside quotes (for log fingerprints and for
// binding parameters of DP statements). It never fails: unterminated
// quotes or comments run to the end of the text.

type tokenKind int

const (
	tokOther   tokenKind = iota // identifiers, key words, operators, punctuation
	tokSpace                    // white space
	tokComment                  // -- … or /* … */ (nested)
	tokString                   // '…', E'…', $tag$…$tag$
	tokIdent                    // "quoted identifier"
	tokNumber                   // 42, 3.5, 1e-3
	tokParam                    // $1
)

type sqlToken struct {
	kind tokenKind
	text string
	pos  int // byte offset in the statement
}

func isIdentStart(ch byte) bool {
	return ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= 0x80
}

func isIdentChar(ch byte) bool {
	return isIdentStart(ch) || ch >= '0' && ch <= '9' || ch == '$'
}

func isDigit(ch byte) bool { return ch >= '0' && ch <= '9' }

// scanSQL calls emit for each token of s, in order; the tokens' texts
// concatenate to s.
func scanSQL(s string, emit func(sqlToken)) {
	i := 0
	for i < len(s) {
		start := i
		ch := s[i]
		kind := tokOther
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v':
			for i < len(s) && strings.IndexByte(" \t\n\r\f\v", s[i]) >= 0 {
				i++
			}
			kind = tokSpace
		case ch == '-' && i+1 < len(s) && s[i+1] == '-':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			kind = tokComment
		case ch == '/' && i+1 < len(s) && s[i+1] == '*':
			depth := 0
			for i < len(s) {
				if s[i] == '/' && i+1 < len(s) && s[i+1] == '*' {
					depth++
					i += 2
					continue
				}
				if s[i] == '*' && i+1 < len(s) && s[i+1] == '/' {
					depth--
					i += 2
					if depth == 0 {
						break
					}
					continue
				}
				i++
			}
			kind = tokComment
		case ch == '\'':
			i = scanQuoted(s, i, false)
			kind = tokString
		case ch == '"':
			i++
			for i < len(s) {
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						i += 2
						continue
					}
					i++
					break
				}
				i++
			}
			kind = tokIdent
		case ch == '$' && i+1 < len(s) && isDigit(s[i+1]):
			i++
			for i < len(s) && isDigit(s[i]) {
				i++
			}
			kind = tokParam
		case ch == '$':
			if end, ok := scanDollarQuoted(s, i); ok {
				i = end
				kind = tokString
			} else {
				i++
			}
		case isDigit(ch) || ch == '.' && i+1 < len(s) && isDigit(s[i+1]):
			i = scanNumber(s, i)
			kind = tokNumber
		case isIdentStart(ch):
			for i < len(s) && isIdentChar(s[i]) {
				i++
			}
			// E'…' escape strings: the prefix and the string are one token.
			if i-start == 1 && (ch == 'e' || ch == 'E') && i < len(s) && s[i] == '\'' {
				i = scanQuoted(s, i, true)
				kind = tokString
			}
		default:
			i++
		}
		emit(sqlToken{kind: kind, text: s[start:i], pos: start})
	}
}

// scanQuoted returns the end of a quoted literal starting at i (a doubled quote is a quote;
// with backslash escapes, \' is too).
func scanQuoted(s string, i int, backslash bool) int {
	i++
	for i < len(s) {
		switch {
		case backslash && s[i] == '\\' && i+1 < len(s):
			i += 2
			continue
		case s[i] == '\'':
			if i+1 < len(s) && s[i+1] == '\'' {
				i += 2
				continue
			}
			return i + 1
		}
		i++
	}
	return i
}

// scanDollarQuoted recognises $tag$…$tag$ at i.
func scanDollarQuoted(s string, i int) (int, bool) {
	j := i + 1
	for j < len(s) && s[j] != '$' {
		if !isIdentChar(s[j]) || s[j] == '$' {
			return 0, false
		}
		j++
	}
	if j >= len(s) {
		return 0, false
	}
	delim := s[i : j+1]
	if end := strings.Index(s[j+1:], delim); end >= 0 {
		return j + 1 + end + len(delim), true
	}
	return len(s), true
}

func scanNumber(s string, i int) int {
	for i < len(s) && (isDigit(s[i]) || s[i] == '.' || s[i] == '_') {
		i++
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			i = j
			for i < len(s) && isDigit(s[i]) {
				i++
			}
		}
	}
	return i
}
