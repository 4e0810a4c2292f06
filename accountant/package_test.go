// Privacy-critical: needs DP review.

package accountant

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// notCritical are the files that need no DP review: the ledger's interface
// (store.go), reviewed with the ledger's reserve-before-read protocol, the
// composition order of earlier builds that only `dpproxy ledger verify`
// uses (pldlegacy.go: no charge reaches it), the pld memo's bounded
// store (pldmemo.go: its keys and values are pld.go's), and the figures of
// the planning command `dpproxy accountant` (planning.go: no charge
// reaches them).
var notCritical = map[string]bool{"store.go": true, "pldlegacy.go": true, "pldmemo.go": true, "planning.go": true}

// TestPackageInvariants checks the house rules of a privacy-critical
// package: every non-test file but those of notCritical starts with the
// review marker, and every one imports only the standard library and
// policy, and no logging or I/O package; the PostgreSQL ledger lives in
// package ledger.
func TestPackageInvariants(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatal("no Go files", err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(src), "// Privacy-critical: needs DP review.\n") && !notCritical[name] {
			t.Errorf("%s does not start with the privacy-critical marker", name)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") && path != "github.com/dpproxy/dpproxy/policy" {
				t.Errorf("%s imports %s: accountant may import only the standard library and policy", name, path)
			}
			switch first, _, _ := strings.Cut(path, "/"); {
			case first == "log", path == "os", first == "net", path == "syscall", path == "unsafe",
				path == "database/sql", path == "io/fs":
				t.Errorf("%s imports %s: no I/O or logging in accountant", name, path)
			case path == "context" && name != "store.go":
				// Only the Store interface (store.go), which the ledger
				// implements, takes a context; the composition takes none.
				t.Errorf("%s imports context: the composition is pure", name)
			}
		}
	}
}

// TestPackageDeps checks the whole import graph (`go list -deps`): no
// database driver, logger or network package reaches accountant through
// policy either.
func TestPackageDeps(t *testing.T) {
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
	out, err := exec.Command(goCmd, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(dep, "/")
		switch {
		case strings.HasPrefix(dep, "github.com/jackc/"), strings.HasPrefix(dep, "go.uber.org/"),
			first == "net", dep == "crypto/tls", dep == "database/sql", dep == "log/slog":
			t.Errorf("accountant depends on %s", dep)
		}
	}
}
