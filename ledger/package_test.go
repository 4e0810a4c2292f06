package ledger

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ledgerCritical is the review marker of the files that carry the
// reserve-before-read protocol (doc.go).
const ledgerCritical = "// Ledger-critical: needs review of the reserve-before-read protocol (ledger/doc.go).\n"

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

// TestArch_OnlyCmdAndAdminImportLedger: the release path sees the ledger
// only through accountant.Store; only the CLI (cmd/dpproxy) and the
// steward's admin endpoint (internal/admin) import package ledger.
func TestArch_OnlyCmdAndAdminImportLedger(t *testing.T) {
	inCI := os.Getenv("CI") != ""
	if testing.Short() && !inCI {
		t.Skip("runs the go command (never skipped under CI)")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		if inCI {
			t.Fatal("no go command on PATH")
		}
		t.Skip("no go command on PATH")
	}
	const self = "github.com/dpproxy/dpproxy/ledger"
	out, err := exec.Command(goCmd, "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/dpproxy/dpproxy/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{"github.com/dpproxy/dpproxy/cmd/dpproxy": true, "github.com/dpproxy/dpproxy/internal/admin": true}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || allowed[fields[0]] {
			continue
		}
		for _, imp := range fields[1:] {
			if imp == self {
				t.Errorf("%s imports %s: use accountant.Store", fields[0], self)
			}
		}
	}
}
