package config

import (
	"strings"
	"testing"
)

// TestReview68_ConfigTypeErrorWords: yaml type errors in dpproxy.yaml
// name what the key needs. A struct of the config package (rate_limit,
// tls, admin, audit) needs keys with values, not "a text"; a list where
// datasets' mapping belongs names datasets.
func TestReview68_ConfigTypeErrorWords(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"rate_limit: 5\n", "rate_limit needs keys with values"},
		{"tls: yes\n", "tls needs keys with values"},
		{"admin: [a]\n", "admin needs keys with values"},
	} {
		_, err := Parse([]byte(c.yaml), "dpproxy.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want %q", c.yaml, err, c.want)
		}
	}
}
