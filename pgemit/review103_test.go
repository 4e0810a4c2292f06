package pgemit

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// TestReview103_PrivateCitextKeyLowersBoundedValue: a private key's value
// longer than MaxPrivateKeyBytes is not grouped, so that a free-text
// column as a key does not make its notes be read whole (keyValueSQL).
// Of a citext column the key is lower(x), and the length test was
// octet_length(lower(x)): lower() read and copied the whole value of
// every row first (PostgreSQL 15, 20 values of 2 MB among 100,000 rows:
// 330 ms more for one such key, against 20 ms without lower), the same
// signal attack round 101 closed for conditions. Now the raw value's
// length, from its header, is tested first: a value over
// 4·MaxPrivateKeyBytes bytes is not lowered (a character has at most 4
// bytes and its lower case at least 1, so no value whose lower case fits
// is left out).
func TestReview103_PrivateCitextKeyLowersBoundedValue(t *testing.T) {
	tb := &policy.Table{Columns: map[string]*policy.Column{
		"ci": {Name: "ci", Type: policy.TypeText, PGType: "citext"},
	}}
	got := keyValueSQL(tb, dpplan.Key{Column: "ci", Type: policy.TypeText, Private: true})
	raw := `octet_length("ci") > 4096`
	i, j := strings.Index(got, raw), strings.Index(got, "lower(")
	if i < 0 || j < 0 || i > j || !strings.HasPrefix(got, "CASE WHEN "+raw+" THEN NULL WHEN ") {
		t.Errorf("private citext key = %s\nwant the raw value's length tested (%s) before lower() reads it", got, raw)
	}
	if !strings.Contains(got, `octet_length(lower("ci" COLLATE "default")) <= 1024 THEN lower("ci" COLLATE "default") END`) {
		t.Errorf("private citext key = %s: the lower case's own bound is gone", got)
	}
}
