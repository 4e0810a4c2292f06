// Privacy-critical: needs DP review.

package noise

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageInvariants checks the house rules of a privacy-critical
// package: every file starts with the review marker and imports only the
// standard library, and non-test files no logging or I/O packages.
func TestPackageInvariants(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatal("no Go files", err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(src), "// Privacy-critical: needs DP review.\n") {
			t.Errorf("%s does not start with the privacy-critical marker", name)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s: noise may import only the standard library", name, path)
			}
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			switch path {
			case "log", "log/slog", "os", "net", "net/http", "syscall", "unsafe":
				t.Errorf("%s imports %s: no I/O or logging in noise", name, path)
			}
		}
	}
}
