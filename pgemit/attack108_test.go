package pgemit

import (
	"strings"
	"testing"
)

// TestAttack108_NumericUnitTextLength: a numeric unit's length test read
// its stored size, which does not bound its text: 9e131071 is 10 bytes
// stored and 131,072 characters, 1e-16383 16,385, and the emitted SQL
// writes the unit's text on every row (sample-and-aggregate's HMAC,
// the group ranks' hashes). A unit whose weight or scale (read from the
// header) makes its text longer than dpplan.MaxUnitBytes has no unit now
// (numericTextLongSQL); NaN and ordinary units keep theirs.
func TestAttack108_NumericUnitTextLength(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	cond := unitKeptSQL(`"u"`, "numeric")
	kept := unitsKept(t, cond, `(9e131071, 'big'), (1e-16383, 'small'), (-9e131071, 'negbig'), ('NaN', 'nan'),
		(12345, 'short'), (1.000000, 'trailing'), (1e1020, 'wide'), (NULL, 'null')`)
	if got := strings.Join(kept, ","); got != "nan,short,trailing,wide" {
		t.Errorf("rows kept by %s: %v, want nan, short, trailing and wide", cond, got)
	}
}
