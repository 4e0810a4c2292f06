// Privacy-critical: needs DP review.
// Part of the emitter: what reaches the private database is built here
// (doc.go).

package pgemit

import (
	"strings"
)

// QuoteIdent writes an identifier in double quotes, doubling quotes.
func QuoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// QuoteString writes a PostgreSQL string constant whose meaning does not
// depend on standard_conforming_strings: plain '…' when there is no
// backslash, else E'…' with backslashes doubled.
func QuoteString(s string) string {
	q := strings.ReplaceAll(s, "'", "''")
	if strings.Contains(s, `\`) {
		return "E'" + strings.ReplaceAll(q, `\`, `\\`) + "'"
	}
	return "'" + q + "'"
}
