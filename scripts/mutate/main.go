// Command mutate applies the classic privacy mutations (issue 19) one at a
// time to a scratch copy of the working tree, runs the tests of the
// package where each bug lives and the end-to-end power tests against it,
// and prints which tests caught it:
//
//	go run ./scripts/mutate            (make mutate)
//	go run ./scripts/mutate -only 'laplace'   mutations whose name matches
//	go run ./scripts/mutate -list      the mutations, without running them
//
// The working tree is never modified: the copy (tracked and untracked,
// not ignored files, so uncommitted changes are tested too) lives in a
// temporary directory removed at the end (-keep leaves it). A first,
// unmutated run must pass every selected test, or the table means nothing.
// The exit status is 1 when a mutation escapes the package's tests or the
// end-to-end tests, so the next change to a privacy-critical package can be
// checked with one command. End-to-end tests need PostgreSQL and psql, like
// `make test`; a run where they are skipped counts as not caught.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// edit replaces Old, which must occur exactly once in File, by New.
type edit struct{ File, Old, New string }

// mutation is one deliberate privacy bug.
type mutation struct {
	Name  string
	Pkg   string // the package where the bug lives, whose tests must catch it
	Edits []edit
}

// pkgOnly says, for the mutations no end-to-end test can see, why: the
// integration suite serves the demo (the pure accountant, an integer
// unit). Their package's tests alone must catch them.
var pkgOnly = map[string]string{
	"rdp composes discrete Laplace as continuous": "the demo's accountant is pure",
	"citext unit read by its rows' texts":         "the demo's unit is an integer",
}

// e2eTests are the end-to-end tests every mutation runs against.
const e2eTests = "^(TestPgx_CountsCloseToTruth|TestGaussian_EndToEnd|TestPower_ContributionBounds|TestPower_QuantileUtility|TestPower_IntegerModeCounts|TestPartitionSelection_EndToEnd)$"

const (
	lapIntOld  = "\tt := scale\n\tif !p.Integer {"
	lapRealOld = "\t\tt = new(big.Rat).Quo(charged, new(big.Rat).Mul(g.gran, eps))\n"
	gaussOld   = "\tif math.IsInf(sigma*sigma, 0) || sigma*sigma == 0 {"
)

var mutations = []mutation{
	{"halved sensitivity (L1 and L2)", "./sensitivity", []edit{
		{"sensitivity/sensitivity.go", "\td := mulUp(float64(b.L0), b.LInf)\n", "\td := mulUp(float64(b.L0), b.LInf) / 2\n"},
		{"sensitivity/sensitivity.go", "\td := mulUp(sqrtUp(float64(b.L0)), b.LInf)\n", "\td := mulUp(sqrtUp(float64(b.L0)), b.LInf) / 2\n"},
	}},
	// The emitter's own tests (./pgemit) are small; the planner's
	// goldens, corpus and audits in ./rewrite exercise its SQL.
	{"dropped bound over groups (emitted SQL)", "./rewrite", []edit{
		{"pgemit/bounds_sql.go", "\ttotalRows := p.MaxGroupsPerUnit * t.MaxRowsPerUnit\n",
			"\ttotalRows := 1 << 30\n"},
		{"pgemit/bounds_sql.go", `w(") AS dp_counted WHERE dp_group_rank <= ", l0)`, `w(") AS dp_counted WHERE dp_group_rank <= ", "1073741824")`},
	}},
	{"ε/2 charged (release's charge)", "./release", []edit{
		{"release/calibrate.go", "Epsilon: m.Epsilon(), Delta", "Epsilon: m.Epsilon() / 2, Delta"},
	}},
	{"ε/2 composed (accountant)", "./accountant", []edit{
		{"accountant/method.go", "\t\tbe.Add(be, dec(e.Epsilon))\n", "\t\tbe.Add(be, dec(e.Epsilon/2))\n"},
	}},
	{"unclamped SUM", "./rewrite", []edit{
		{"pgemit/bounds_sql.go", `	return "LEAST(GREATEST(" + columnNumeric(QuoteIdent(c), t.Columns[c].Type == policy.TypeInt) + ", " + NumericConst(t.Columns[c].Lower) + "), " +
		NumericConst(t.Columns[c].Upper) + ")"`, `	return columnNumeric(QuoteIdent(c), t.Columns[c].Type == policy.TypeInt)`},
	}},
	{"partition selection keeps every candidate", "./release", []edit{
		{"release/partition.go", "\tif noisy.Cmp(gs.sel.threshold) < 0 {\n", "\tif false && noisy.Cmp(gs.sel.threshold) < 0 {\n"},
	}},
	{"off-by-one quantile utility", "./release", []edit{
		{"release/quantile.go", "\t\td := max(0, below+1-b, a-atOrBelow)\n", "\t\td := max(0, below-b, a-atOrBelow)\n"},
	}},
	{"Laplace scale ×0.5, integer mode", "./noise", []edit{
		{"noise/laplace.go", lapIntOld, "\tt := new(big.Rat).Mul(scale, big.NewRat(1, 2))\n\tif !p.Integer {"},
	}},
	{"Laplace scale ×2, integer mode", "./noise", []edit{
		{"noise/laplace.go", lapIntOld, "\tt := new(big.Rat).Mul(scale, big.NewRat(2, 1))\n\tif !p.Integer {"},
	}},
	{"Laplace scale ×0.5, real mode", "./noise", []edit{
		{"noise/laplace.go", lapRealOld, lapRealOld + "\t\tt.Mul(t, big.NewRat(1, 2))\n"},
	}},
	{"Laplace scale ×2, real mode", "./noise", []edit{
		{"noise/laplace.go", lapRealOld, lapRealOld + "\t\tt.Mul(t, big.NewRat(2, 1))\n"},
	}},
	{"Gaussian σ ×0.5", "./noise", []edit{
		{"noise/gaussian.go", gaussOld, "\tsigma *= 0.5\n" + gaussOld},
	}},
	{"Gaussian σ ×2", "./noise", []edit{
		{"noise/gaussian.go", gaussOld, "\tsigma *= 2\n" + gaussOld},
	}},
	{"rdp composes discrete Laplace as continuous", "./accountant", []edit{
		{"accountant/rdp.go", "\t\t\tr[i] = rrRDP(a, p)\n", "\t\t\tr[i] = laplaceRDP(a, p)\n"},
	}},
	{"citext unit read by its rows' texts", "./rewrite", []edit{
		{"pgemit/key_sql.go", `return citextLower(u)`, `return u`},
	}},
}

func main() { os.Exit(run()) }

// run returns the exit status; the scratch copy is removed on every path.
func run() (status int) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			fmt.Fprintln(os.Stderr, f.msg)
			status = 2
		}
	}()
	only := flag.String("only", "", "run only the mutations whose name matches this regular expression")
	list := flag.Bool("list", false, "list the mutations and exit")
	keep := flag.Bool("keep", false, "keep the scratch copy")
	goBin := flag.String("go", envOr("GO", "go"), "the go command")
	flag.Parse()
	if *list {
		for _, m := range mutations {
			fmt.Printf("%-40s %s\n", m.Name, m.Pkg)
		}
		return 0
	}
	sel := mutations
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fatalf("-only: %v", err)
		}
		sel = nil
		for _, m := range mutations {
			if re.MatchString(m.Name) {
				sel = append(sel, m)
			}
		}
	}
	root, err := gitRoot()
	if err != nil {
		fatalf("%v", err)
	}
	scratch, err := os.MkdirTemp("", "dpproxy-mutate-")
	if err != nil {
		fatalf("%v", err)
	}
	if *keep {
		fmt.Fprintf(os.Stderr, "mutate: scratch copy in %s\n", scratch)
	} else {
		defer os.RemoveAll(scratch)
	}
	if err := copyTree(root, scratch); err != nil {
		fatalf("copy the working tree: %v", err)
	}
	// Every edit must apply to the unmutated copy: a mutation whose code
	// moved is a failure to fix here, never silently skipped.
	for _, m := range sel {
		for _, e := range m.Edits {
			src, err := os.ReadFile(filepath.Join(scratch, e.File))
			if err != nil {
				fatalf("%s: %v", m.Name, err)
			}
			if n := strings.Count(string(src), e.Old); n != 1 {
				fatalf("%s: %s has %d copies of the code to mutate, want 1: update scripts/mutate", m.Name, e.File, n)
			}
		}
	}
	r := runner{dir: scratch, goBin: *goBin}
	pkgs := map[string]bool{}
	for _, m := range sel {
		pkgs[m.Pkg] = true
	}
	fmt.Fprintln(os.Stderr, "mutate: baseline (no mutation)")
	base := result{name: "none (baseline)", pkg: "all of the above"}
	for _, p := range sortedKeys(pkgs) {
		f := r.goTest(p, "")
		base.pkgFail = append(base.pkgFail, f.failed...)
		base.pkgSkip = base.pkgSkip || f.noTests
	}
	e := r.goTest("./integration", e2eTests)
	base.e2eFail, base.e2eSkip = e.failed, e.noTests || e.skipped
	results := []result{base}
	for _, m := range sel {
		fmt.Fprintf(os.Stderr, "mutate: %s\n", m.Name)
		restore, err := apply(scratch, m.Edits)
		if err != nil {
			fatalf("%s: %v", m.Name, err)
		}
		res := result{name: m.Name, pkg: m.Pkg, pkgOnly: pkgOnly[m.Name]}
		p := r.goTest(m.Pkg, "")
		res.pkgFail, res.pkgSkip = p.failed, p.noTests
		if res.pkgOnly == "" {
			e := r.goTest("./integration", e2eTests)
			res.e2eFail, res.e2eSkip = e.failed, e.noTests || e.skipped
		}
		if err := restore(); err != nil {
			fatalf("restore after %s: %v", m.Name, err)
		}
		results = append(results, res)
	}

	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "MUTATION\tPACKAGE\tPACKAGE TESTS THAT FAIL\tEND-TO-END TESTS THAT FAIL\tCAUGHT")
	ok := true
	for i, res := range results {
		caught := len(res.pkgFail) > 0 && (res.pkgOnly != "" || len(res.e2eFail) > 0 && !res.e2eSkip)
		verdict := map[bool]string{true: "yes", false: "NO"}[caught]
		if i == 0 {
			clean := len(res.pkgFail) == 0 && len(res.e2eFail) == 0 && !res.e2eSkip && !res.pkgSkip
			verdict = map[bool]string{true: "(all pass)", false: "BASELINE FAILS"}[clean]
			ok = ok && clean
		} else {
			ok = ok && caught
		}
		e2e := summary(res.e2eFail)
		if res.pkgOnly != "" {
			e2e = "(not run: " + res.pkgOnly + ")"
		}
		if res.e2eSkip {
			e2e += " (skipped: no PostgreSQL?)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", res.name, res.pkg, summary(res.pkgFail), e2e, verdict)
	}
	w.Flush()
	if !ok {
		return 1
	}
	return 0
}

type result struct {
	name, pkg        string
	pkgOnly          string
	pkgFail, e2eFail []string
	pkgSkip, e2eSkip bool
}

// summary lists failing tests (top level), at most five and a count.
func summary(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" (+%d)", len(names)-5)
	}
	return strings.Join(names, ", ")
}

type runner struct{ dir, goBin string }

type testRun struct {
	failed  []string // top-level tests that failed, or a build/setup failure
	noTests bool     // no test ran
	skipped bool     // a selected test was skipped
}

// goTest runs go test -json (without -race, for speed) in the scratch copy.
func (r runner) goTest(pkg, run string) testRun {
	args := []string{"test", "-count=1", "-json", "-timeout", "12m"}
	if run != "" {
		args = append(args, "-run", run)
	}
	args = append(args, pkg)
	cmd := exec.Command(r.goBin, args...)
	cmd.Dir = r.dir
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	start := time.Now()
	err := cmd.Run()
	fmt.Fprintf(os.Stderr, "mutate:   go test %s %s: %v (%s)\n", pkg, run, errText(err), time.Since(start).Round(time.Second))
	failed := map[string]bool{}
	var res testRun
	ran, pkgFailed := 0, false
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var ev struct{ Action, Test string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		top, _, _ := strings.Cut(ev.Test, "/")
		switch {
		case ev.Test == "" && ev.Action == "fail":
			pkgFailed = true
		case ev.Test != "" && ev.Action == "fail":
			failed[top] = true
		case ev.Test != "" && ev.Action == "pass" && top == ev.Test:
			ran++
		case ev.Test != "" && ev.Action == "skip" && top == ev.Test:
			res.skipped = true
		}
	}
	res.failed = sortedKeys(failed)
	if (pkgFailed || err != nil) && len(res.failed) == 0 {
		res.failed = []string{"(build or setup failed: " + firstLine(stderr.String()+out.String()) + ")"}
	}
	res.noTests = ran == 0 && len(res.failed) == 0
	return res
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "{") {
			if len(l) > 80 {
				l = l[:80] + "…"
			}
			return l
		}
	}
	return "no output"
}

// apply makes the edits in dir and returns a function that restores the
// files.
func apply(dir string, edits []edit) (func() error, error) {
	orig := map[string][]byte{}
	for _, e := range edits {
		p := filepath.Join(dir, e.File)
		if _, ok := orig[p]; !ok {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			orig[p] = b
		}
	}
	restore := func() error {
		for p, b := range orig {
			if err := os.WriteFile(p, b, 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range edits {
		p := filepath.Join(dir, e.File)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if strings.Count(string(b), e.Old) != 1 {
			restore()
			return nil, fmt.Errorf("%s: the code to mutate is not there exactly once", e.File)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), e.Old, e.New, 1)), 0o644); err != nil {
			return nil, err
		}
	}
	return restore, nil
}

func gitRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse --show-toplevel: %v (run inside the repository)", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// copyTree copies the tracked and the untracked, not ignored files of the
// repository at root into dst.
func copyTree(root, dst string) error {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return err
	}
	for _, rel := range strings.Split(string(out), "\x00") {
		if rel == "" {
			continue
		}
		src := filepath.Join(root, rel)
		st, err := os.Lstat(src)
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the working tree
			}
			return err
		}
		if !st.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		p := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, st.Mode().Perm()|fs.FileMode(0o200)); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// fatal is raised by fatalf and turned into exit status 2 by run's
// deferred recover, after the scratch copy is removed.
type fatal struct{ msg string }

func fatalf(format string, args ...any) {
	panic(fatal{fmt.Sprintf("mutate: "+format, args...)})
}
