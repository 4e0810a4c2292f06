package proxy

import (
	"strings"
	"testing"
)

// TestNotice_DuplicateOutputNames: two outputs of one name (two unaliased
// AVGs) are told apart in the NOTICE by their column number (new-user
// run: "±20000 (avg, …), ±60 (avg, …)" could not be read).
func TestNotice_DuplicateOutputNames(t *testing.T) {
	r := startRealDP(t, nil)
	pc, nc := r.connectNotices(t, "alice", "alice")
	if _, err := execAll(t, pc, "SELECT AVG(cost), AVG(age) FROM visits"); err != nil {
		t.Fatal(err)
	}
	notices := strings.Join(nc.take(), "\n")
	for _, want := range []string{"(avg, column 1, epsilon", "(avg, column 2, epsilon"} {
		if !strings.Contains(notices, want) {
			t.Errorf("NOTICE lacks %q: %s", want, notices)
		}
	}
}
