package dpplan

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArch_OnlyRewriteBuildsPlans: plans, their WHERE nodes and the
// emitter's inputs are built by the planner only (rewrite, and dpplan and
// pgemit themselves), never by release, the proxy or anything else that
// could put unvalidated SQL or bounds into a plan (the security invariant:
// only SQL our emitter wrote from a validated plan reaches the data).
// Other packages read plans; tests may build them. The exceptions emit,
// never build: the calibration (release/calibrate.go) emits a validated
// plan's SQL again for the quantile parameters it calibrated (method, β,
// proposed bound), and release/verify.go emits every query of a plan to
// check it is exactly the emitter's.
func TestArch_OnlyRewriteBuildsPlans(t *testing.T) {
	forbidden := regexp.MustCompile(`(^|[^*\w.])(dpplan|rewrite)\.(Plan|Pred|Cond|Join|SampleAgg|AutoClip|AutoBounds)\{|\bdpplan\.(SetSource|NewAutoClip|NewAutoBounds)\(|\bpgemit\.(SQL|ProfileSQL|ClipSQL)\(`)
	root := filepath.Join("..")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case ".git", "rewrite", "dpplan", "pgemit", "bench":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(src), "\n") {
			code, _, _ := strings.Cut(line, "//")
			if rel == filepath.Join("release", "calibrate.go") && strings.Contains(code, "pgemit.SQL(t, c, where)") ||
				rel == filepath.Join("release", "verify.go") && strings.Contains(code, "pgemit.") && !strings.Contains(code, "dpplan.") {
				continue
			}
			if m := forbidden.FindString(code); m != "" {
				t.Errorf("%s:%d: %s outside the planner: only rewrite builds plans", rel, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d files: the walk did not see the tree", checked)
	}
}
