package ledger

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ledgerCritical is the review marker of the files that carry the
// reserve-before-read protocol (doc.go).
const ledgerCritical = "// Ledger-critical: needs review of the reserve-before-read protocol (DESIGN: ledger).\n"

// writesLedger matches SQL that changes the ledger database.
var writesLedger = regexp.MustCompile(`(?i)\b(INSERT INTO|UPDATE|DELETE FROM|CREATE TABLE|ALTER TABLE) dpproxy_ledger\.`)

// TestPackageMarkers: every non-test file that writes the ledger database
// (and doc.go, which states the protocol) starts with the ledger review
// marker; none claims the DP review marker, which belongs to the pure
// composition in accountant.
func TestPackageMarkers(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatal("no Go files", err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(string(src), "// Privacy-critical") {
			t.Errorf("%s carries the DP review marker: the ledger's review is of the protocol (%q)", name, strings.TrimSpace(ledgerCritical))
		}
		if (name == "doc.go" || writesLedger.Match(src)) && !strings.HasPrefix(string(src), ledgerCritical) {
			t.Errorf("%s writes the ledger database but does not start with %q", name, strings.TrimSpace(ledgerCritical))
		}
	}
}
