package release

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestGuard_NoiseOnlyFromRelease checks two rules of the privacy design on
// every non-test Go file of the module: only package release imports noise
// (so every released number passes through this package), and the only
// randomness given to a mechanism is crypto/rand's default or this
// package's unexported test seam (so production code has no seed API).
func TestGuard_NoiseOnlyFromRelease(t *testing.T) {
	const noisePath = "github.com/dpproxy/dpproxy/noise"
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "../noise" {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		imports := false
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == noisePath {
				imports = true
			}
		}
		if imports && dir != "../release" {
			t.Errorf("%s imports noise; only package release may", path)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Rand" && imports {
				sel, ok := kv.Value.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "testOnlyRand" {
					t.Errorf("%s: a mechanism gets randomness other than the test seam", fset.Position(kv.Pos()))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files; the walk did not see the module", checked)
	}
}
